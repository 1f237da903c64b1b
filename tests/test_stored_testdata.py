"""Test data ``store:<name>``: the pipeline's load_testset step reads a stored test set from
the results database (SQLite and a real PostgreSQL server) as it is when the step runs,
losslessly; its mistakes are one-line errors; and a kfp.local run of the pipeline on it is
published against the set and the versions it ran on."""

import json
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from builders import configured
from conftest import emptied, ragsweep_here
from kfp import dsl, local

from ragsweep.components.load_testset import load_testset
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import TESTSET, read_table
from ragsweep.curation.stored_sets import (
    DatabaseStore,
    delete_question,
    edit_question,
    load_test_data,
)
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset as read_testset
from ragsweep.documents.testsets import resolve_testset, stored_name
from ragsweep.kubeflow.tasks import for_local_run
from ragsweep.pipelines.sweep_pipeline import sweep
from ragsweep.store import database
from ragsweep.sweep.options import pipeline_arguments
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def giskard_set() -> pa.Table:
    """The example Giskard set, resolved (gold spans), one question with a history."""
    documents = read_documents(str(EXAMPLES / "docs")).table
    rows = resolve_testset(read_testset(str(EXAMPLES / "testset.jsonl")), documents).to_pylist()
    rows[1]["conversation_history"] = json.dumps([{"role": "user", "content": "I run it."}])
    return pa.Table.from_pylist(rows, schema=TESTSET)


@pytest.fixture(params=["sqlite", "postgresql"])
def stored(request, tmp_path, monkeypatch) -> DatabaseStore:
    """An empty results database on each backend, named by the step's RAGSWEEP_STORE_URL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'results.db'}"
    else:
        url = emptied(request.getfixturevalue("postgres_server"))
    monkeypatch.setenv(database.ENV, url)
    return DatabaseStore(database.connect(url))


def step_output(tmp_path: Path, key: str, bucket: str = "") -> pa.Table:
    """What the load_testset step writes for this test data."""
    out = dsl.Dataset(uri=str(tmp_path / "loaded"))
    settings = configured(
        tmp_path / "settings",
        input_data_key="docs",
        test_data_bucket_name=bucket,
        test_data_key=key,
    )
    load_testset.python_func(settings=settings, testset=out)
    return read_table(out.path, "testset")


def test_the_step_reads_the_stored_set_as_it_is_now_with_every_field(stored, giskard_set, tmp_path):
    assert any(r["gold_spans"] for r in giskard_set.to_pylist())
    stored.save("faq", giskard_set)
    loaded = step_output(tmp_path, "store:faq")
    assert loaded.to_pylist() == giskard_set.to_pylist()
    assert loaded.schema.equals(giskard_set.schema)
    # curated after the run was set up (as a schedule is): the next read has the change
    curated = edit_question(giskard_set, "q003", question="Which port does it use?")
    stored.save("faq", delete_question(curated, "q001"))
    now = step_output(tmp_path, "store:faq")
    assert "q001" not in now["question_id"].to_pylist()
    assert now.num_rows == giskard_set.num_rows - 1
    [q003] = [r for r in now.to_pylist() if r["question_id"] == "q003"]
    assert q003["question"] == "Which port does it use?"
    assert q003["gold_spans"] == giskard_set.to_pylist()[2]["gold_spans"]


def test_a_file_and_no_key_load_as_before(tmp_path):
    assert step_output(tmp_path, "").num_rows == 0  # generate_qa fills it
    from_file = step_output(tmp_path, str(EXAMPLES / "testset.json"))
    assert from_file.equals(read_testset(str(EXAMPLES / "testset.json")))


def user_error(capsys, tmp_path, key: str, bucket: str = "") -> str:
    with pytest.raises(SystemExit) as exit_info:
        step_output(tmp_path, key, bucket)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    return line


def test_stored_test_data_mistakes_are_one_line_errors(tmp_path, monkeypatch, capsys):
    message = user_error(capsys, tmp_path, "store:faq")  # no RAGSWEEP_STORE_URL
    assert "test_data_key 'store:faq' is read from the results database" in message
    assert "put the key RAGSWEEP_STORE_URL in the results-store Secret" in message
    assert "results_store_secret_name, default 'ragsweep-results-store'" in message

    url = f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv(database.ENV, url)
    testsets = DatabaseStore(database.connect(url))
    testsets.save("faq", read_testset(str(EXAMPLES / "testset.json")))
    testsets.save("empty", read_testset(str(EXAMPLES / "testset.json")).slice(0, 0))
    unknown = user_error(capsys, tmp_path, "store:nope")
    assert "no test set 'nope' in sqlite:///" in unknown and "stored: empty, faq" in unknown
    assert "test set 'empty' in sqlite:///" in user_error(capsys, tmp_path, "store:empty")
    assert "has no questions" in user_error(capsys, tmp_path, "store:empty")
    assert "name the stored test set, store:<name>" in user_error(capsys, tmp_path, "store:")
    traversal = user_error(capsys, tmp_path, "store:../../x")
    assert "test_data_key 'store:../../x': a test set needs a name of" in traversal
    in_bucket = user_error(capsys, tmp_path, "store:faq", bucket="team-eval")
    assert "leave test_data_bucket_name empty (it is 'team-eval')" in in_bucket
    with pytest.raises(RagsweepError, match="no test set 'nope'"):
        load_test_data("store:nope")


def test_a_stored_set_is_published_under_its_own_name():
    table = read_testset(str(EXAMPLES / "testset.json"))
    assert stored_name("store:faq", table, date(2026, 1, 2)) == "faq"
    with pytest.raises(RagsweepError, match="test data 'store:team/faq.arrow': a test set needs"):
        stored_name("store:team/faq.arrow", table, date(2026, 1, 2))  # a name, never a path


@pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning")
def test_a_pipeline_run_on_store_name_reads_the_live_set_and_records_its_versions(
    tmp_path, monkeypatch, llm_server
):
    """Two nights on a stored set curated between them. The texts are embedded by the
    scripted endpoint (``openai:embedder``, into this test's own cache): no step loads a
    model."""
    llm_server.models.append("embedder")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Tidewater listens on port 8443.\n")
    (docs / "b.md").write_text("Brackwater Labs makes Tidewater.\n")
    records = [
        {"question": "Port?", "correct_answers": ["8443"], "correct_answer_document_ids": ["a.md"]},
        {
            "question": "Maker?",
            "correct_answers": ["Brackwater Labs"],
            "correct_answer_document_ids": ["b.md"],
        },
    ]
    (tmp_path / "tw.json").write_text(json.dumps(records))
    url = f"sqlite:///{tmp_path / 'results.db'}"
    engine = database.connect(url)
    testsets = DatabaseStore(engine)
    documents = read_documents(str(docs)).table
    testsets.save("tw", resolve_testset(read_testset(str(tmp_path / "tw.json")), documents))
    space = SearchSpace(
        chunk_sizes=(64,),
        top_ks=(1,),
        search_types=("similarity",),
        embedding_models=("openai:embedder",),
    )
    arguments = pipeline_arguments(
        RunSettings(
            docs=str(docs),
            testset="store:tw",
            space=space,
            embedding_cache=str(tmp_path / "vectors"),
        )
    )  # the second night reads the first's vectors
    monkeypatch.setenv(database.ENV, url)  # the results-store Secret, on a cluster
    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "pipeline")
    )

    def night(run_id: str) -> dict:
        monkeypatch.setenv(database.RUN_ID_ENV, run_id)
        task = for_local_run(sweep)(**arguments)
        assert task.outputs["run_id"] == run_id
        return database.run_info(engine, run_id)

    first = night("night-1")
    assert first["testset_name"] == "tw" and first["settings"]["testset"] == "store:tw"
    assert testsets.names() == ["tw"]  # the run joined the set, added none
    port = testsets.load("tw")["question_id"][0].as_py()
    # the set is curated between the nights; the second reads it as it is then
    testsets.save("tw", edit_question(testsets.load("tw"), port, question="Which port?"))
    second = night("night-2")
    assert second["testset_name"] == "tw"
    with engine.connect() as conn:
        versions = conn.execute(
            sa.select(
                database.runs.c.run_id,
                database.results.c.question_id,
                database.results.c.item_version,
            )
            .join(database.runs, database.runs.c.id == database.results.c.run_pk)
            .order_by(database.runs.c.run_id, database.results.c.question_id)
        ).all()
    maker = next(q for q in testsets.load("tw")["question_id"].to_pylist() if q != port)
    assert sorted(versions) == sorted(
        [("night-1", port, 1), ("night-1", maker, 1), ("night-2", port, 2), ("night-2", maker, 1)]
    )
    ran = database.load_run_testset(engine, "night-2")
    assert dict(zip(ran["question_id"].to_pylist(), ran["question"].to_pylist(), strict=True)) == {
        port: "Which port?",
        maker: "Maker?",
    }
    assert [h["version"] for h in testsets.history("tw", port)] == [2, 1]  # no run's version


def test_a_local_run_names_a_stored_set_with_testset_name():
    result = ragsweep_here("run", "--docs", str(EXAMPLES / "docs"), "--testset", "store:faq")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: --testset 'store:faq': run a stored test set with --testset-name 'faq'" in (
        result.stderr
    )
