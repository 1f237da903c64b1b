"""Two nights of one named sweep through `ragsweep run` (kfp.local): between them the corpus
gains 5 documents and a question of the stored test set is edited, which changes the
sweep key; the second night still finds the first as its baseline (by the sweep's name),
says what changed, and gives a verdict. One pair of runs serves every test here."""

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import ragsweep_here, without_settings
from scripted_llm import ScriptedLLM

from ragsweep.core.schemas import read_table, settings_of
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.store import database

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
ADDED = [f"added/new-{i}.md" for i in range(1, 6)]


def ragsweep(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def scripted_embedder() -> Iterator[dict[str, str]]:
    """The environment of the nights: their embeddings come from a scripted
    OpenAI-compatible endpoint (``openai:embedder``), so that no step loads a model (the
    5 added documents and the edited question are new to any cache)."""
    env = without_settings("RAGSWEEP_", "MLFLOW_")
    with ScriptedLLM() as server:
        server.models.append("embedder")
        yield env | {"RAGSWEEP_EMBEDDING_BASE_URL": server.url}


@pytest.fixture(scope="module")
def nights(tmp_path_factory, scripted_embedder):
    """Night 1 and night 2 of sweep ``kb-nightly`` over a copy of examples/docs and a
    stored test set of its first 6 questions; before night 2, 5 documents are added and
    one question is edited in the store."""
    tmp = tmp_path_factory.mktemp("nightly")
    docs = tmp / "docs"
    shutil.copytree(EXAMPLES / "docs", docs)
    testset = tmp / "testset.json"
    testset.write_text(json.dumps(json.loads((EXAMPLES / "testset.json").read_text())[:6]))
    url = f"sqlite:///{tmp / 'results.db'}"
    added = ragsweep_here("testset", "add", "faq", str(testset), "--store", url)
    assert added.returncode == 0, added.stderr
    night = ["run", "--docs", str(docs), "--testset-name", "faq", "--sweep", "kb-nightly"]
    night += ["--baseline", "latest", "--store", url, "--output", str(tmp / "runs")]
    night += ["--chunk-sizes", "64", "--top-k", "1,3", "--search-types", "similarity"]
    night += ["--embedding-models", "openai:embedder", "--cache", str(tmp / "embeddings")]

    first = ragsweep(*night, env=scripted_embedder)
    assert first.returncode == 0, first.stderr[-3000:]
    for i, name in enumerate(ADDED, start=1):
        (docs / name).parent.mkdir(exist_ok=True)
        (docs / name).write_text(f"# Note {i}\n\nStaging cluster {i} restarts at 0{i}:00 UTC.\n")
    edited = DatabaseStore(database.connect(url)).load("faq")["question_id"][0].as_py()
    edit = ragsweep_here("testset", "edit", "faq", edited, "--question", "How?", "--store", url)
    assert edit.returncode == 0, edit.stderr
    second = ragsweep(*night, env=scripted_embedder)
    runs = sorted(p for p in (tmp / "runs").iterdir() if p.name != "testsets")
    return {"first": first, "second": second, "runs": runs, "url": url, "edited": edited}


def test_the_first_night_of_a_named_sweep_says_it_has_no_baseline_yet(nights):
    assert "No earlier successful run of this sweep ('kb-nightly')" in nights["first"].stdout
    report = (nights["runs"][0] / "report.html").read_text()
    assert 'id="comparison">No earlier successful run of this sweep' in report


def test_the_second_night_finds_the_first_by_name_though_its_documents_and_test_set_changed(
    nights,
):
    first, second = nights["runs"]
    assert nights["second"].returncode == 0, nights["second"].stderr[-3000:]
    assert f"compared with run {first.name} of sweep kb-nightly:" in nights["second"].stdout
    boards = [read_table(run / "leaderboard.arrow", "leaderboard") for run in (first, second)]
    keys = {settings_of(b)["sweep_key"] for b in boards}
    assert len(keys) == 2  # unnamed, the second night would have started a new sweep
    assert {settings_of(b)["sweep_name"] for b in boards} == {"kb-nightly"}
    engine = database.connect(nights["url"])
    with engine.connect() as conn:
        stored = conn.execute(sa.select(database.runs.c.run_id, database.runs.c.sweep_name))
        assert dict(stored.all()) == {first.name: "kb-nightly", second.name: "kb-nightly"}
    listed = ragsweep_here("runs", "--store", nights["url"]).stdout
    assert listed.count("(sweep kb-nightly)") == 2


def test_the_second_night_reports_the_5_added_documents_and_the_edited_question(nights):
    out = nights["second"].stdout
    documents = len([p for p in (EXAMPLES / "docs").rglob("*") if p.is_file()])
    assert f"documents: {documents} -> {documents + 5} (5 added, 0 removed, 0 edited)" in out
    assert f"documents added (5): {', '.join(ADDED)}" in out
    assert "test set: changed" in out
    edited = f"edited (same id, new version; not compared): 1 question: {nights['edited']}"
    assert edited in out
    assert "compared on what both runs share: 2 configurations, 5 questions" in out


def test_the_second_night_gives_a_verdict_in_the_terminal_comparison_and_report(nights):
    second = nights["runs"][1]
    verdict = "alarm, best of sweep (the best shared configuration of each run): not regressed"
    assert verdict in nights["second"].stdout
    summary = (second / "comparison.md").read_text()
    assert verdict in summary and f"- documents added (5): {', '.join(ADDED)}" in summary
    report = (second / "report.html").read_text()
    assert report.index('id="comparison"') < report.index("<h2>Leaderboard</h2>")
    assert verdict in report and "documents added (5)" in report
    # compared after its folder was complete (by the run, not a step of the pipeline), the
    # comparison written beside its results: one verdict for each shared configuration
    assert "Executing task 'compare'" not in (second / "pipeline.log").read_text()
    assert read_table(second / "comparison.arrow", "comparison")["verdict"].length() == 2
    # and its figures, as the cluster's compare step logs them as metrics
    figures = json.loads((second / "verdict.json").read_text())
    assert figures["documents_added"] == 5.0
    assert figures["baseline_found"] == figures["testset_changed"] == 1.0
    assert figures["questions_edited"] == 1.0


def test_each_night_records_its_embedding_models_runtime_and_identity(nights, scripted_embedder):
    """The first step fixed them; the run records them with its results (leaderboard,
    report, the results database), and an unchanged model adds no line to the comparison."""
    served = scripted_embedder["RAGSWEEP_EMBEDDING_BASE_URL"].rstrip("/")
    expected = {
        "embedding_runtimes": [["openai:embedder", "endpoint"]],
        "embedding_identities": [["openai:embedder", f"endpoint:{served}#embedder"]],
    }
    engine = database.connect(nights["url"])
    for run in nights["runs"]:
        recorded = settings_of(read_table(run / "leaderboard.arrow", "leaderboard"))
        stored = database.run_info(engine, run.name)["settings"]
        for key, value in expected.items():
            assert recorded[key] == stored[key] == value
        assert "embedding_runtimes" in (run / "report.html").read_text()
    assert "embedding model" not in nights["second"].stdout


def test_a_sweep_name_that_cannot_name_a_sweep_is_refused_in_one_line(tmp_path):
    result = ragsweep_here(
        "run", "--docs", str(EXAMPLES / "docs"), "--testset", str(EXAMPLES / "testset.json"),
        "--sweep", "kb nightly", "--no-store", "--output", str(tmp_path / "runs"),
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: sweep_name (--sweep-name) 'kb nightly': a sweep name is 1 to 100 letters, digits, "
        "'.', '_' or '-', the first a letter or digit"
    ]
    assert not (tmp_path / "runs").exists()
