"""Test set curation: a test set stored in the results database (SQLite and a real
PostgreSQL server), questions added, deleted and edited while their reference context and
metadata stay, every change a version; exports in both formats; through the library and the
CLI."""

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from builders import make_testset
from conftest import emptied, ragsweep_here

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import TESTSET
from ragsweep.curation import set_versions
from ragsweep.curation.stored_sets import (
    DatabaseStore,
    add_question,
    delete_question,
    edit_question,
)
from ragsweep.documents.testsets import content_id, load_testset, resolve_testset
from ragsweep.store import database

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def documents():
    from ragsweep.documents.sources import read_documents

    return read_documents(str(EXAMPLES / "docs")).table


@pytest.fixture(scope="module")
def giskard_set(documents):
    return resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), documents)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """An empty results database on each backend."""
    if request.param == "sqlite":
        return DatabaseStore(database.connect(f"sqlite:///{tmp_path / 'results.db'}"))
    return DatabaseStore(database.connect(emptied(request.getfixturevalue("postgres_server"))))


def test_deleting_a_question_keeps_the_others_in_order(giskard_set):
    table = delete_question(giskard_set, "q002")
    ids = table["question_id"].to_pylist()
    assert "q002" not in ids and len(ids) == giskard_set.num_rows - 1
    assert ids[:2] == ["q001", "q003"]


def test_editing_changes_only_the_question_and_its_answers(giskard_set):
    table = edit_question(giskard_set, "q003", question="Which port?", answers=["7420", "TCP 7420"])
    before, after = giskard_set.to_pylist()[2], table.to_pylist()[2]
    assert after["question"] == "Which port?" and after["reference_answers"] == ["7420", "TCP 7420"]
    edited = ("question", "reference_answers", "question_version")
    unchanged = {k: v for k, v in before.items() if k not in edited}
    assert {k: after[k] for k in unchanged} == unchanged
    assert table.to_pylist()[3] == giskard_set.to_pylist()[3]
    only_answer = edit_question(giskard_set, "q003", answers=["7420"]).to_pylist()[2]
    assert only_answer["question"] == before["question"]


def test_an_edited_question_keeps_its_id_and_gets_a_new_version(giskard_set):
    before = giskard_set.to_pylist()[2]
    versions = {before["question_version"]}
    for question, answers in [("Which port?", None), (None, ["7420"]), ("Which port?", ["7420"])]:
        after = edit_question(giskard_set, "q003", question=question, answers=answers)
        row = after.to_pylist()[2]
        assert row["question_id"] == "q003"
        versions.add(row["question_version"])
    assert len(versions) == 4
    same = edit_question(giskard_set, "q003", question=before["question"]).to_pylist()[2]
    assert same["question_version"] == before["question_version"]


def test_curation_mistakes_are_clear(giskard_set):
    with pytest.raises(RagsweepError, match="no question 'q999' in the test set \\(ids: q001"):
        delete_question(giskard_set, "q999")
    with pytest.raises(RagsweepError, match="new question is empty"):
        edit_question(giskard_set, "q001", question="  ")


def with_history(table: pa.Table, row: int, history: list) -> pa.Table:
    rows = table.to_pylist()
    rows[row]["conversation_history"] = json.dumps(history)
    return pa.Table.from_pylist(rows, schema=table.schema)


def test_a_stored_test_set_keeps_every_field(db, giskard_set, documents):
    talk = [{"role": "user", "content": "I run Tidewater."}, {"role": "assistant", "content": "OK"}]
    giskard = with_history(giskard_set, 1, talk)
    autorag = resolve_testset(load_testset(str(EXAMPLES / "testset.json")), documents)
    assert any(r["gold_spans"] for r in giskard.to_pylist())
    assert any(r["reference_context"] is None for r in autorag.to_pylist())
    db.save("giskard", giskard)
    db.save("autorag", autorag)
    assert db.names() == ["autorag", "giskard"]
    assert db.load("giskard").to_pylist() == giskard.to_pylist()
    assert db.load("autorag").to_pylist() == autorag.to_pylist()
    assert db.load("giskard").schema == giskard.schema


def test_a_runs_test_set_reads_back_as_stored_like_the_named_set(db):
    """database.load_run_testset (the web UI's runs) and DatabaseStore.load (curation) build
    their rows alike: what was saved (a missing conversation history stays missing, not
    '[]'), and a question version computed where a store made before versions holds none."""
    import numpy as np
    from builders import make_board

    b = make_board(np.ones((2, 4)))
    rows = make_testset(b.results["question_id"].unique().to_pylist()).to_pylist()
    rows[0]["conversation_history"] = None  # as an AutoRAG file loads
    rows[1]["conversation_history"] = json.dumps([{"role": "user", "content": "I run it."}])
    rows[2]["reference_context"] = "Tidewater listens on port 8443."
    rows[2]["gold_spans"] = [
        {"doc_id": "doc2.md", "start": 0, "end": 31, "found": "exact", "score": None}
    ]
    testset = pa.Table.from_pylist(rows, schema=TESTSET)
    database.publish(db.engine, "run-1", b.leaderboard, b.results, testset)

    assert database.load_run_testset(db.engine, "run-1").to_pylist() == rows
    assert db.load("testset.json").to_pylist() == rows

    with db.engine.begin() as conn:  # as a store made before question versions holds them
        conn.execute(sa.update(database.testset_items).values(question_version=None))
    computed = database.load_run_testset(db.engine, "run-1").to_pylist()
    assert computed == db.load("testset.json").to_pylist()
    assert all(len(r["question_version"]) == 16 for r in computed)
    assert [{**r, "question_version": None} for r in computed] == [
        {**r, "question_version": None} for r in rows
    ]


def test_every_change_is_a_version_and_load_gives_the_latest(db, giskard_set):
    db.save("tw", giskard_set)
    db.save("tw", giskard_set)  # nothing changed: no version
    first = db.summaries()
    assert [(s["name"], s["questions"], s["versions"]) for s in first] == [("tw", 64, 1)]

    db.save("tw", delete_question(db.load("tw"), "q002"))
    db.save("tw", edit_question(db.load("tw"), "q003", question="Sync port?", answers=["7420"]))
    added = add_question(db.load("tw"), "Who makes Tidewater?", ["Brackwater Labs"], ["a.md"])
    db.save("tw", added)

    latest = db.load("tw")
    assert latest.to_pylist() == added.to_pylist()
    ids = latest["question_id"].to_pylist()
    assert ids[:2] == ["q001", "q003"] and ids[-1] == content_id(
        "Who makes Tidewater?", ["Brackwater Labs"]
    )
    assert latest.num_rows == 64 and "q002" not in ids
    (summary,) = db.summaries()
    assert (summary["questions"], summary["versions"]) == (64, 4)
    assert summary["changed_at"] > first[0]["changed_at"]

    edits = db.history("tw", "q003")
    assert [(h["version"], h["deleted"], h["question"]) for h in edits] == [
        (2, False, "Sync port?"),
        (1, False, "Which TCP port does the Tidewater sync protocol use?"),
    ]
    assert edits[0]["reference_context"] == edits[1]["reference_context"] is not None
    assert edits[0]["question_version"] != edits[1]["question_version"]
    assert edits[0]["created_at"] > edits[1]["created_at"]
    deleted = db.history("tw", "q002")
    assert [(h["version"], h["deleted"]) for h in deleted] == [(2, True), (1, False)]
    assert deleted[0]["question"] is None and deleted[1]["question"].startswith("Above how")


def test_a_deleted_question_added_again_comes_back_last(db, giskard_set):
    db.save("tw", giskard_set)
    db.save("tw", delete_question(giskard_set, "q001"))
    db.save("tw", giskard_set)  # imported again
    ids = db.load("tw")["question_id"].to_pylist()
    assert ids[0] == "q002" and ids[-1] == "q001" and len(ids) == 64
    assert [h["version"] for h in db.history("tw", "q001")] == [3, 2, 1]


def test_unknown_test_sets_and_questions_are_clear(db, giskard_set):
    with pytest.raises(
        RagsweepError, match=r"no test set 'nope' in (sqlite|postgresql).*stored: none"
    ):
        db.load("nope")
    db.save("tw", giskard_set)
    with pytest.raises(RagsweepError, match="no test set 'nope' .*stored: tw"):
        db.history("nope", "q001")
    with pytest.raises(RagsweepError, match="no question 'q999' was ever in test set 'tw'"):
        db.history("tw", "q999")
    with pytest.raises(RagsweepError, match="a test set needs a name"):
        db.save(" ", giskard_set)


def test_adding_a_question_derives_its_id_and_refuses_duplicates_and_blanks(giskard_set):
    table = add_question(giskard_set, "Who?", ["Brackwater"], ["a.md"], "Company", "simple")
    row = table.to_pylist()[-1]
    assert table.num_rows == giskard_set.num_rows + 1
    assert row["question_id"] == content_id("Who?", ["Brackwater"])
    assert (row["topic"], row["question_type"], row["gold_spans"]) == ("Company", "simple", [])
    assert row["question_version"] and row["reference_context"] is None
    with pytest.raises(RagsweepError, match="already has this question .* as q-"):
        add_question(table, "Who?", ["Brackwater"], [])
    with pytest.raises(RagsweepError, match="new question is empty"):
        add_question(table, " ", ["x"], [])
    with pytest.raises(RagsweepError, match="needs reference answers"):
        add_question(table, "Why?", ["x", " "], [])


@pytest.fixture
def ragsweep():
    """``ragsweep ARGS`` through its entry point in this process, on the store ``url``."""

    def run(*args: str, url: str) -> subprocess.CompletedProcess:
        return ragsweep_here(*args, env={**os.environ, "RAGSWEEP_STORE_URL": url})

    return run


def user_error(result, fragment: str) -> bool:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert f"error: {fragment}" in result.stderr, result.stderr
    return True


def test_testset_commands_curate_a_test_set_in_the_results_database(ragsweep, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"

    def run(*args):
        result = ragsweep(*args, url=url)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "no test sets stored" in run("testset", "list")
    source = str(EXAMPLES / "testset.jsonl")
    assert "stored 64 questions as 'tw'" in run("testset", "add", "tw", source)
    assert run("testset", "list").startswith("tw  64 questions  1 version  20")
    listing = run("testset", "list", "tw").splitlines()
    assert len(listing) == 64 and listing[0].startswith("q001  simple")
    shown = run("testset", "show", "tw", "q003")
    assert "question: Which TCP port does the Tidewater sync protocol use?" in shown
    assert "reference documents: guides/installation.md" in shown

    assert "63 questions left" in run("testset", "delete", "tw", "q002")
    run("testset", "edit", "tw", "q003", "--question", "Sync port?", "--answer", "TCP 7420")
    added = run("testset", "add-question", "tw", "--question", "Vendor?", "--answer", "Brackwater")
    assert f"added {content_id('Vendor?', ['Brackwater'])}; 64 questions in 'tw'" in added
    assert run("testset", "list").startswith("tw  64 questions  4 versions  20")
    history = run("testset", "show", "tw", "q003", "--history")
    assert history.index("# version 2") < history.index("question: Sync port?")
    assert history.index("# version 1") < history.index("question: Which TCP port")
    assert "# version 2" in run("testset", "show", "tw", "q002", "--history").split(": deleted")[0]

    run("testset", "export", "tw", str(tmp_path / "tw.jsonl"))
    to_autorag = ragsweep("testset", "export", "tw", str(tmp_path / "tw.json"), url=url)
    assert to_autorag.returncode == 0, to_autorag.stderr
    assert f"warning: {tmp_path / 'tw.json'}: AutoRAG JSON has no field for id (63 of 64), " in (
        to_autorag.stderr
    )
    exported = load_testset(str(tmp_path / "tw.jsonl"))
    assert exported.num_rows == 64 and "q002" not in exported["question_id"].to_pylist()
    edited = exported.to_pylist()[1]
    assert (edited["question"], edited["reference_answers"]) == ("Sync port?", ["TCP 7420"])
    original = load_testset(source).to_pylist()[2]
    assert edited["reference_context"] == original["reference_context"]
    assert edited["topic"] == original["topic"]
    autorag = load_testset(str(tmp_path / "tw.json")).to_pylist()
    assert len(autorag) == 64 and autorag[1]["question"] == "Sync port?"


def test_testset_add_over_a_stored_name_is_refused_unless_replace_and_revert_goes_back(
    ragsweep, tmp_path
):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    full, small = str(EXAMPLES / "testset.jsonl"), tmp_path / "one.json"
    one = {"question": "Port?", "correct_answers": ["8443"], "correct_answer_document_ids": []}
    small.write_text(json.dumps([one]))
    assert ragsweep("testset", "add", "tw", full, url=url).returncode == 0

    refused = ragsweep("testset", "add", "tw", str(small), url=url)
    assert user_error(refused, "test set 'tw' is stored already (64 questions); give --replace")
    stored = DatabaseStore(database.connect(url))
    assert len(stored.load("tw")) == 64  # nothing replaced

    replaced = ragsweep("testset", "add", "tw", str(small), "--replace", url=url)
    assert replaced.returncode == 0 and "stored 1 questions as 'tw'" in replaced.stdout
    assert len(stored.load("tw")) == 1
    versions = ragsweep("testset", "versions", "tw", url=url).stdout.splitlines()
    assert versions[0].split()[0] == "2" and "1 question  imported from one.json" in versions[0]
    assert (
        versions[1].split()[0] == "1"
        and "64 questions  imported from testset.jsonl" in (versions[1])
    )

    reverted = ragsweep("testset", "revert", "tw", url=url)
    assert reverted.returncode == 0, reverted.stderr
    assert reverted.stdout.strip() == "reverted 'tw' to version 1: 64 questions"
    assert stored.load("tw").to_pylist() == set_versions.as_of(stored, "tw", 1).to_pylist()
    again = ragsweep("testset", "revert", "tw", "--to", "2", url=url)  # the revert undone
    assert again.returncode == 0 and len(stored.load("tw")) == 1
    assert user_error(
        ragsweep("testset", "revert", "tw", "--to", "9", url=url),
        "test set 'tw' has no version 9 (1 to 4)",
    )


def test_every_command_refuses_a_test_set_name_that_could_be_a_path(ragsweep, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    testset = str(EXAMPLES / "testset.json")
    rule = "a test set needs a name of 1 to 100 letters, digits"
    added = ragsweep("testset", "add", "../../../../somewhere/x", testset, url=url)
    assert user_error(added, f"results store: {rule}")
    run = ragsweep("run", "--docs", str(EXAMPLES / "docs"), "--testset-name", "/tmp/x", url=url)
    assert user_error(run, f"--testset-name: {rule}")
    generated = ragsweep("generate", "--docs", "d", "--name", "../x", "--llm", "m", url=url)
    assert user_error(generated, f"--name: {rule}")
    assert not list(tmp_path.rglob("x*")) and not (tmp_path.parent / "somewhere").exists()


def test_testset_mistakes_exit_2_with_a_clear_message(ragsweep, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    ragsweep("testset", "add", "tw", str(EXAMPLES / "testset.jsonl"), url=url)
    assert user_error(ragsweep("testset", "show", "nope", "q001", url=url), "no test set 'nope'")
    assert user_error(ragsweep("testset", "delete", "tw", "q999", url=url), "no question 'q999'")
    assert user_error(
        ragsweep("testset", "edit", "tw", "q001", "--question", " ", url=url),
        "the new question is empty",
    )
    assert user_error(
        ragsweep("testset", "add-question", "tw", "--question", "Q?", "--answer", "", url=url),
        "the new question needs reference answers",
    )
    assert user_error(
        ragsweep("testset", "show", "tw", "q999", "--history", url=url),
        "no question 'q999' was ever in test set 'tw'",
    )
    assert user_error(ragsweep("testset", "list", "nope", url=url), "no test set 'nope'")
    assert user_error(
        ragsweep("testset", "add", " ", str(EXAMPLES / "testset.json"), url=url),
        "results store: a test set needs a name",
    )
    dead = "postgresql+psycopg://u:secret@127.0.0.1:9/db"
    result = ragsweep("testset", "list", url=dead)
    assert user_error(result, "results store postgresql+psycopg://u:***@127.0.0.1:9/db")
    assert "secret" not in result.stderr


def test_a_folder_test_set_imports_losslessly_through_its_arrow_file(
    ragsweep, giskard_set, tmp_path
):
    from ragsweep.core.schemas import write_table

    old = tmp_path / "testsets" / "tw.arrow"  # as the folder store of earlier ragsweep kept it
    write_table(giskard_set, old, "testset")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    result = ragsweep("testset", "add", "tw", str(old), url=url)
    assert result.returncode == 0, result.stderr
    assert DatabaseStore(database.connect(url)).load("tw").to_pylist() == giskard_set.to_pylist()
    exported = ragsweep("testset", "export", "tw", str(tmp_path / "again.arrow"), url=url)
    assert exported.returncode == 0, exported.stderr
    assert load_testset(str(tmp_path / "again.arrow")).to_pylist() == giskard_set.to_pylist()


def test_a_run_names_a_stored_test_set_or_a_file_and_an_unknown_name_is_clear(ragsweep, tmp_path):
    """Refused before the pipeline starts. A run of a stored set (joined, none of it deleted)
    is tests/test_ui.py's run started from the page: the same ``ragsweep run
    --testset-name``."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Tidewater listens on port 8443.\n")
    (docs / "b.md").write_text("Brackwater Labs makes Tidewater.\n")
    (tmp_path / "set.json").write_text(
        json.dumps(
            [
                {
                    "question": "Port?",
                    "correct_answers": ["8443"],
                    "correct_answer_document_ids": ["a.md"],
                },
                {
                    "question": "Maker?",
                    "correct_answers": ["Brackwater Labs"],
                    "correct_answer_document_ids": ["b.md"],
                },
            ]
        )
    )
    url = f"sqlite:///{tmp_path / 'results.db'}"
    added = ragsweep(
        "testset", "add", "tw", str(tmp_path / "set.json"), "--docs", str(docs), url=url
    )
    assert added.returncode == 0, added.stderr
    assert [
        r["gold_spans"] != [] for r in DatabaseStore(database.connect(url)).load("tw").to_pylist()
    ] == [True, True]
    args = ["run", "--docs", str(docs), "--testset-name", "tw", "--max-questions", "1"]
    both = ragsweep(*args, "--testset", str(tmp_path / "set.json"), url=url)
    assert user_error(both, "--testset and --testset-name: give one of them")
    unknown = ragsweep("run", "--docs", str(docs), "--testset-name", "nope", url=url)
    assert user_error(unknown, "no test set 'nope'")
    assert not (tmp_path / "runs").exists() and database.find_runs(database.connect(url)) == []


def test_an_arrow_test_set_must_be_a_testset_artifact_with_its_columns(giskard_set, tmp_path):
    from ragsweep.core.schemas import write_table

    (tmp_path / "junk.arrow").write_bytes(b"not arrow")
    with pytest.raises(RagsweepError, match="junk.arrow: not a readable Arrow file"):
        load_testset(str(tmp_path / "junk.arrow"))
    documents = pa.table({"doc_id": ["a"], "source": ["a"], "format": ["md"], "text": ["x"]})
    write_table(documents, tmp_path / "docs.arrow", "documents")
    with pytest.raises(
        RagsweepError, match="expected a ragsweep testset artifact, found documents"
    ):
        load_testset(str(tmp_path / "docs.arrow"))
    rows = giskard_set.to_pylist()
    rows[1]["question_id"] = "q001"
    twice = pa.Table.from_pylist(rows, schema=giskard_set.schema)
    write_table(twice, tmp_path / "twice.arrow", "testset")
    with pytest.raises(RagsweepError, match="twice.arrow: row 2: duplicate id 'q001'"):
        load_testset(str(tmp_path / "twice.arrow"))


def test_two_edits_of_one_question_stored_at_once_keep_the_first_and_refuse_the_second(
    postgres_server,
):
    import threading

    db = DatabaseStore(database.connect(emptied(postgres_server)))
    first = make_testset(["q1", "q2"])
    db.save("tw", first)
    mine = edit_question(first, "q1", question="Mine?")
    theirs = edit_question(first, "q1", question="Theirs?")
    refused = []

    def save_theirs():
        try:
            db.save("tw", theirs)
        except RagsweepError as exc:
            refused.append(str(exc))

    with db.engine.begin() as conn:
        database.save_testset(conn, "tw", mine)  # q1's version 2, not committed yet
        with db.engine.connect() as watch:
            second = threading.Thread(target=save_theirs)
            second.start()
            waiting = sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
            # until theirs waits for q1's version 2 (or has ended, and the test fails below)
            while second.is_alive() and not watch.execute(waiting).scalar():
                watch.rollback()
    second.join()
    assert refused and "was changed by someone else" in refused[0]
    assert db.load("tw")["question"].to_pylist() == ["Mine?", "What about q2?"]


def test_generate_needs_a_file_or_a_name_to_keep_what_it_makes(ragsweep, tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    result = ragsweep("generate", "--docs", str(EXAMPLES / "docs"), "--llm", "writer", url=url)
    assert user_error(result, "generate: give --out FILE and/or --name NAME")
