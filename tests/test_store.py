"""The results database on SQLite, a real PostgreSQL server, and Oracle (DDL always; a
server when RAGSWEEP_TEST_ORACLE_DSN is set)."""

import os
import re
from datetime import UTC, datetime

import numpy as np
import pytest
import sqlalchemy as sa
from builders import make_board, make_testset
from conftest import emptied
from sqlalchemy.dialects import oracle
from sqlalchemy.schema import CreateTable

from ragsweep.core.errors import RagsweepError
from ragsweep.reporting import publishing
from ragsweep.store import database

ORACLE_DSN = os.environ.get("RAGSWEEP_TEST_ORACLE_DSN")
NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql", "oracle"])
def url(request, tmp_path):
    """An empty store on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    if request.param == "postgresql":
        found = request.getfixturevalue("postgres_server")
    elif not ORACLE_DSN:
        pytest.skip("set RAGSWEEP_TEST_ORACLE_DSN to test against an Oracle server")
    else:
        found = ORACLE_DSN
    return emptied(found)


def board(seed=0, questions=12):
    rng = np.random.default_rng(seed)
    return make_board((rng.random((3, questions)) < 0.6).astype(float))


def same_rows(got, want):
    """Equal rows; floats to 12 digits (Oracle's FLOAT is a decimal NUMBER)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for key, value in w.items():
            if isinstance(value, float):
                assert g[key] == pytest.approx(value, rel=1e-12), key
            else:
                assert g[key] == value, key
    return True


def counts(engine):
    tables = [
        database.runs,
        database.results,
        database.leaderboards,
        database.testsets,
        database.testset_items,
    ]
    with engine.connect() as conn:
        return {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar() for t in tables
        }


def publish(engine, b, run_id="run-1", testset=None):
    testset = (
        testset
        if testset is not None
        else make_testset(b.results["question_id"].unique().to_pylist())
    )
    started = datetime(2026, 11, 30, 2, 0, 0, 123456, tzinfo=UTC)
    return database.publish(engine, run_id, b.leaderboard, b.results, testset, "kfp-123", started)


def test_a_published_run_reads_back_as_it_was_written(url):
    b = board()
    results = b.results.to_pylist()
    results[0]["answer"] = ""  # Oracle stores '' as NULL: it must come back as ''
    b = type(b)(
        b.leaderboard,
        type(b.results).from_pylist(results, schema=b.results.schema),
        b.breakdown,
        b.failures,
    )
    engine = database.connect(url)
    publish(engine, b)

    leaderboard = database.load_leaderboard(engine, "run-1")
    assert same_rows(leaderboard.to_pylist(), b.leaderboard.to_pylist())
    assert same_rows(database.load_results(engine, "run-1").to_pylist(), b.results.to_pylist())
    assert leaderboard.schema.metadata  # the settings came back with it
    [run] = database.list_runs(engine)
    assert run["run_id"] == "run-1" and run["status"] == "succeeded"
    assert run["pipeline_run_id"] == "kfp-123"
    assert run["started_at"].replace(tzinfo=run["started_at"].tzinfo or UTC).microsecond == 123456
    assert run["best_label"] == b.leaderboard["label"][0].as_py()


def test_a_crash_mid_publish_leaves_no_partial_run(url, monkeypatch):
    engine = database.connect(url)

    def crash(*args):
        raise RuntimeError("disk full, say")

    monkeypatch.setattr(database, "_insert_leaderboard", crash)  # after the results went in
    with pytest.raises(RuntimeError, match="disk full"):
        publish(engine, board())
    assert set(counts(engine).values()) == {0}


def test_test_set_edits_and_deletions_are_kept_as_versions(url):
    engine = database.connect(url)
    first = make_testset(["q1", "q2", "q3"])
    with engine.begin() as conn:
        testset_id, versions = database.save_testset(conn, "tests.json", first)
    assert versions == {"q1": 1, "q2": 1, "q3": 1}
    rows = first.to_pylist()
    rows[0]["question"] = "What about q1, edited?"
    edited = type(first).from_pylist(rows[:2], schema=first.schema)  # q3 deleted
    with engine.begin() as conn:
        again, versions = database.save_testset(conn, "tests.json", edited)
        assert database.save_testset(conn, "tests.json", edited)[1] == versions  # no change
    assert again == testset_id and versions == {"q1": 2, "q2": 1}
    items = database.testset_items
    with engine.connect() as conn:
        stored = conn.execute(
            sa.select(
                items.c.question_id, items.c.version, items.c.deleted, items.c.question
            ).order_by(items.c.question_id, items.c.version)
        ).all()
    assert [tuple(r) for r in stored] == [
        ("q1", 1, False, "What about q1?"),
        ("q1", 2, False, "What about q1, edited?"),
        ("q2", 1, False, "What about q2?"),
        ("q3", 1, False, "What about q3?"),
        ("q3", 2, True, None),
    ]


def test_republishing_a_run_id_replaces_it(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    publish(engine, board(seed=1))
    second = board(seed=2)
    publish(engine, second)
    assert counts(engine)["ragsweep_runs"] == 1
    assert database.load_results(engine, "run-1").to_pylist() == second.results.to_pylist()


def test_latest_successful_run_skips_failures_other_sweeps_and_the_current_run(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    b = board()
    key = database.settings_of(b.leaderboard)["sweep_key"]
    publish(engine, b, "night-1")
    database.record_unfinished(engine, "night-2", {"sweep_key": key}, datetime.now(UTC))
    database.record_unfinished(engine, "other", {"sweep_key": "elsewhere"}, datetime.now(UTC))
    publish(engine, b, "night-3")
    assert database.latest_successful(engine, key) == "night-3"
    assert database.latest_successful(engine, key, exclude="night-3") == "night-1"
    assert database.latest_successful(engine, "elsewhere") is None
    with pytest.raises(RagsweepError, match="run 'night-2' failed"):
        database.load_leaderboard(engine, "night-2")
    with pytest.raises(RagsweepError, match="no run 'nope'"):
        database.load_results(engine, "nope")


def named(b, sweep_name, sweep_key):
    """``b`` recorded as a run of sweep ``sweep_name`` whose content hashes to ``sweep_key``."""
    settings = {**database.settings_of(b.leaderboard), "sweep_name": sweep_name}
    settings["sweep_key"] = sweep_key
    board = b.leaderboard.replace_schema_metadata(
        {database.SETTINGS_KEY: database.json.dumps(settings)}
    )
    return type(b)(board, b.results, b.breakdown, b.failures)


def test_latest_follows_a_sweeps_name_across_changed_documents_and_test_sets(url):
    engine = database.connect(url)
    b = board()
    publish(engine, named(b, "nightly", "k1"), "night-1")
    publish(engine, named(b, "nightly", "k2"), "night-2")  # the corpus grew: another key
    publish(engine, named(b, "k2", "k2"), "unnamed")  # unnamed: its key names it
    database.record_unfinished(engine, "night-3", {"sweep_name": "nightly", "sweep_key": "k3"}, NOW)
    assert database.latest_successful(engine, "nightly") == "night-2"
    assert database.latest_successful(engine, "nightly", exclude="night-2") == "night-1"
    assert database.latest_successful(engine, "k2") == "unnamed"  # not the named sweep's
    found = database.find_runs(engine, sweep="nightly")
    assert [(r["run_id"], r["sweep"]) for r in found] == [
        ("night-3", "nightly"), ("night-2", "nightly"), ("night-1", "nightly")
    ]  # fmt: skip
    assert [p["run_id"] for p in database.sweep_trend(engine, "nightly")] == ["night-1", "night-2"]


def test_publish_step_skips_cleanly_without_a_store_url(caplog):
    b = board()
    with caplog.at_level("INFO", logger="ragsweep"):
        assert (
            publishing.publish_from_step(b.leaderboard, b.results, make_testset(["q000"]), "k")
            == ""
        )
    assert "RAGSWEEP_STORE_URL is unset" in caplog.text


def test_publish_step_stores_under_the_local_run_id_and_never_logs_the_password(
    postgres_server, monkeypatch, caplog
):
    monkeypatch.setenv("RAGSWEEP_STORE_URL", postgres_server)
    monkeypatch.setenv("RAGSWEEP_RUN_ID", "20261130-020000-000000")
    b = board()
    with caplog.at_level("INFO", logger="ragsweep"):
        run_id = publishing.publish_from_step(
            b.leaderboard,
            b.results,
            make_testset(b.results["question_id"].unique().to_pylist()),
            "kfp-9",
        )
    assert run_id == "20261130-020000-000000"
    assert "pw-not-checked" not in caplog.text and "***" in caplog.text
    engine = database.connect(postgres_server)
    assert database.load_leaderboard(engine, run_id).num_rows == b.leaderboard.num_rows


@pytest.mark.parametrize(
    "dead",
    [
        "postgresql+psycopg://user:s3cret-pw@127.0.0.1:{port}/results",
        "oracle+oracledb://user:s3cret-pw@127.0.0.1:{port}/?service_name=FREEPDB1",
    ],
)
def test_a_dead_server_fails_fast_with_a_clear_message_and_no_password(dead):
    from conftest import free_port

    url = dead.format(port=free_port())  # nothing listens there
    with pytest.raises(RagsweepError) as info:
        database.connect(url)
    message = str(info.value)
    assert "cannot connect" in message and "127.0.0.1" in message
    assert "s3cret-pw" not in message and "***" in message


def test_a_malformed_url_or_unknown_driver_is_a_clear_error():
    with pytest.raises(RagsweepError, match="not a database URL"):
        database.connect("results.db")
    with pytest.raises(RagsweepError, match="no driver"):
        database.connect("nosuchdb://u:p@h/x")


def test_a_store_written_by_a_newer_ragsweep_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = database.connect(url)
    with engine.begin() as conn:
        conn.execute(sa.update(database.meta_table).values(setting="99"))
    with pytest.raises(RagsweepError, match="newer ragsweep"):
        database.connect(url)


def test_default_store_is_a_sqlite_file_in_the_user_data_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert database.resolve_url() == f"sqlite:///{tmp_path / 'ragsweep' / 'results.db'}"
    monkeypatch.setenv("RAGSWEEP_STORE_URL", "sqlite:///elsewhere.db")
    assert database.resolve_url() == "sqlite:///elsewhere.db"
    assert database.resolve_url("sqlite:///given.db") == "sqlite:///given.db"


def test_oracle_ddl_compiles_with_native_json_zoned_timestamps_and_sized_strings():
    ddl = "\n".join(
        str(CreateTable(t).compile(dialect=oracle.dialect()))
        for t in database.metadata.sorted_tables
    )
    assert "GENERATED BY DEFAULT AS IDENTITY" in ddl
    assert "NUMBER(19)" in ddl
    assert "TIMESTAMP WITH TIME ZONE" in ddl and " DATE" not in ddl
    assert re.search(r"\bJSON\b", ddl) and "CLOB" in ddl
    assert not re.search(r"VARCHAR2(?!\(\d+ CHAR\))", ddl)  # every string has a length
    query = sa.select(database.runs.c.run_id).order_by(database.runs.c.id.desc()).limit(1)
    assert "FETCH FIRST" in str(query.compile(dialect=oracle.dialect()))


def test_sqlite_keys_are_integer_primary_keys():
    ddl = str(CreateTable(database.runs).compile(dialect=sa.create_engine("sqlite://").dialect))
    assert "id INTEGER NOT NULL" in ddl


# ---- question identity and test set names ----------------------------------------------------


def test_question_versions_are_stored_with_the_results(url):
    b = board()
    engine = database.connect(url)
    publish(engine, b)

    results = database.load_results(engine, "run-1")

    versions = results["question_version"].to_pylist()
    assert None not in versions and versions == b.results["question_version"].to_pylist()
    with engine.connect() as conn:
        items = conn.execute(
            sa.select(
                database.testset_items.c.question_id, database.testset_items.c.question_version
            )
        ).all()
    assert {q: v for q, v in items} == dict(
        zip(b.results["question_id"].to_pylist(), versions, strict=True)
    )


def old_ddl(dialect) -> list[str]:
    """The CREATE TABLE statements of the store as ragsweep wrote it before question_version
    (and before test-set curation moved into it)."""
    newer = ("question_version", "gold_spans", "conversation_history", "item_position")
    newer += ("sweep_name",)
    statements = []
    for table in database.metadata.sorted_tables:
        if table is database.labels:  # came later: a store opened makes it
            continue
        ddl = str(CreateTable(table).compile(dialect=dialect))
        statements.append("\n".join(x for x in ddl.splitlines() if not x.strip().startswith(newer)))
    return statements


def make_old_store(url, b) -> None:
    """A store with one run ("old-run") as the old code wrote it, through its own columns."""
    engine = sa.create_engine(url)
    now = datetime(2026, 11, 29, tzinfo=UTC)
    with engine.begin() as conn:
        for statement in old_ddl(engine.dialect):
            conn.execute(sa.text(statement))
        conn.execute(database.meta_table.insert().values(name="store_version", setting="1"))
        testset_id = conn.execute(
            database.testsets.insert().values(name="/data/tests.json", created_at=now)
        ).inserted_primary_key[0]
        settings = database.settings_of(b.leaderboard)
        run_pk = conn.execute(
            database.runs.insert().values(
                run_id="old-run",
                sweep_key=settings["sweep_key"],
                testset_id=testset_id,
                status="succeeded",
                finished_at=now,
                settings=settings,
            )
        ).inserted_primary_key[0]
        database._insert_leaderboard(conn, run_pk, b.leaderboard)
        old_rows = [
            {
                "run_pk": run_pk,
                "config_id": row["config_id"],
                "question_id": row["question_id"],
                "cluster_doc": row["cluster"],
                "answer": row["answer"],
                "retrieved_doc_ids": row["retrieved_doc_ids"],
                "scores": {"answer_correctness": row["answer_correctness"]},
            }
            for row in b.results.to_pylist()
        ]
        conn.execute(database.results.insert(), old_rows)
        old_items = [
            {
                "testset_id": testset_id,
                "question_id": row["question_id"],
                "version": 1,
                "content_hash": database._item_hash(row),
                "deleted": False,
                **{k: row[k] for k in ("question", "reference_answers", "reference_doc_ids")},
                **{k: row[k] for k in ("topic", "question_type")},
                "created_at": now,
            }
            for row in make_testset(["q2", "q1"]).to_pylist()
        ]
        conn.execute(database.testset_items.insert(), old_items)
    engine.dispose()


def test_a_store_made_before_question_versions_still_reads_and_takes_new_runs(url):
    b = board()
    make_old_store(url, b)

    engine = database.connect(url)

    old = database.load_results(engine, "old-run")
    assert old["question_version"].null_count == old.num_rows == b.results.num_rows
    assert old["answer_correctness"].to_pylist() == b.results["answer_correctness"].to_pylist()
    assert database.load_leaderboard(engine, "old-run").num_rows == b.leaderboard.num_rows
    publish(engine, b, "new-run")
    assert database.load_results(engine, "new-run")["question_version"].null_count == 0
    assert [r["run_id"] for r in database.list_runs(engine)] == ["new-run", "old-run"]


def test_a_store_made_before_sweep_names_gains_the_column_and_finds_old_runs_by_key(url):
    b = board()
    make_old_store(url, b)

    engine = database.connect(url)

    key = database.settings_of(b.leaderboard)["sweep_key"]
    assert database.latest_successful(engine, key) == "old-run"  # an unnamed sweep: its key
    publish(engine, b, "new-run")  # unnamed, the same content
    assert database.latest_successful(engine, key, exclude="new-run") == "old-run"
    assert {r["run_id"]: r["sweep"] for r in database.find_runs(engine)} == {
        "new-run": key, "old-run": key
    }  # fmt: skip
    with engine.connect() as conn:
        names = conn.execute(sa.select(database.runs.c.run_id, database.runs.c.sweep_name))
        assert dict(names.all()) == {"old-run": None, "new-run": key}


def test_a_test_set_stored_before_curation_moved_here_loads_and_takes_edits(url):
    from ragsweep.curation.stored_sets import DatabaseStore, edit_question

    make_old_store(url, board())
    testsets = DatabaseStore(database.connect(url))
    old = testsets.load("/data/tests.json")
    assert old["question_id"].to_pylist() == ["q1", "q2"]  # no stored order: by id
    assert old["gold_spans"].to_pylist() == [[], []]
    assert all(len(v) == 16 for v in old["question_version"].to_pylist())  # computed
    testsets.save("/data/tests.json", old)  # the same content: no new version
    assert [h["version"] for h in testsets.history("/data/tests.json", "q1")] == [1]
    testsets.save("/data/tests.json", edit_question(old, "q2", question="Q2?"))
    assert testsets.load("/data/tests.json")["question"].to_pylist() == ["What about q1?", "Q2?"]
    assert [h["version"] for h in testsets.history("/data/tests.json", "q2")] == [2, 1]


def test_the_cli_reads_a_store_made_before_question_versions(tmp_path):
    from test_cli import ragsweep

    url = f"sqlite:///{tmp_path / 'old.db'}"
    b = board()
    make_old_store(url, b)

    listed = ragsweep("runs", "--store", url)
    shown = ragsweep("leaderboard", "old-run", "--store", url)
    compared = ragsweep("compare", "old-run", "old-run", "--store", url)

    assert listed.returncode == 0 and "old-run" in listed.stdout, listed.stderr
    assert f"(sweep {database.settings_of(b.leaderboard)['sweep_key']})" in listed.stdout
    assert shown.returncode == 0 and f"{b.leaderboard.num_rows} configurations" in shown.stdout
    assert compared.returncode == 0 and "Traceback" not in compared.stderr, compared.stderr


@pytest.mark.parametrize("name", ["", "   ", None])
def test_a_test_set_without_a_name_is_refused_on_every_backend(url, name):
    engine = database.connect(url)
    with engine.begin() as conn, pytest.raises(RagsweepError, match="a test set needs a name"):
        database.save_testset(conn, name, make_testset(["q1"]))
    assert counts(engine)["ragsweep_testsets"] == 0


def test_stored_test_sets_are_named_by_file_name_or_as_generated(url):
    b = board()
    given = b.leaderboard
    settings = {**database.settings_of(given), "testset": ""}
    generated = given.replace_schema_metadata(
        {database.SETTINGS_KEY: database.json.dumps(settings)}
    )
    engine = database.connect(url)

    publish(engine, b, "from-file")
    publish(engine, type(b)(generated, b.results, b.breakdown, b.failures), "generated")

    with engine.connect() as conn:
        names = conn.execute(sa.select(database.testsets.c.name).order_by(database.testsets.c.id))
        names = names.scalars().all()
    assert names[0] == "testset.json"
    assert re.fullmatch(r"generated-20261130-[0-9a-f]{8}", names[1])


# ---- the sweep key ---------------------------------------------------------------------------


def documents_table(texts: dict[str, str]):
    import pyarrow as pa

    from ragsweep.core.schemas import DOCUMENTS

    rows = [{"doc_id": k, "source": k, "format": "md", "text": v} for k, v in texts.items()]
    return pa.Table.from_pylist(rows, schema=DOCUMENTS)


def test_the_sweep_key_follows_the_content_not_the_locations():
    from ragsweep.sweep.settings import RunSettings

    questions = make_testset(["q1", "q2", "q3"])
    docs = documents_table({"a.md": "Alpha.", "b.md": "Beta."})

    def key(docs_at="/data/docs", testset_at="/data/t.json", testset=questions, documents=docs):
        return RunSettings(docs_at, testset_at).record(testset, documents)["sweep_key"]

    moved_docs = documents_table({"old/b.md": "Beta.", "new/a.md": "Alpha."})
    assert key() == key("/elsewhere/docs", "s3://bucket/t.json") == key(documents=moved_docs)
    assert key() == key(testset=questions.take([2, 0, 1]))
    edited_doc = documents_table({"a.md": "Alpha, edited.", "b.md": "Beta."})
    assert key(documents=edited_doc) != key()
    rows = questions.to_pylist()
    rows[1]["question_version"] = "q2-v2"
    assert key(testset=type(questions).from_pylist(rows, schema=questions.schema)) != key()
    assert key(testset=questions.slice(0, 2)) != key()
