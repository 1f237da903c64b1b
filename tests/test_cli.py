"""User mistakes on the command line: one clear line, a non-zero exit, no traceback.

The mistakes found before a pipeline starts are run through the CLI's entry point in this
process (conftest's ``ragsweep_here``); the runs that fail or succeed in the pipeline are
``ragsweep`` processes, and one run failing in ingest serves the module."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ragsweep_here, without_settings

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.testsets import load_testset

RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")


def ragsweep(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, env=env, timeout=300)


def assert_user_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors, result.stderr
    for fragment in fragments:
        assert fragment in errors[-1]


def test_missing_docs_folder(kb):
    tmp, _, good = kb
    result = ragsweep_here("run", "--docs", str(tmp / "nope"), "--testset", str(good))
    assert_user_error(result, "--docs", "no such file or folder")


def test_bad_list_option(kb):
    tmp, docs, good = kb
    result = ragsweep_here("run", "--docs", str(docs), "--testset", str(good), "--top-k", "1,x")
    assert_user_error(result, "field 'top_ks'", "'x'")


def test_unknown_search_type(kb):
    tmp, docs, good = kb
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(good), "--search-types", "x"
    )
    assert_user_error(result, "search_types", "'x'")


def test_unknown_vector_store(kb):
    tmp, docs, good = kb
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(good), "--vector-stores", "memory,faiss"
    )
    assert_user_error(result, "field 'vector_stores'", "unknown value 'faiss'", "memory")


def test_unknown_metric(kb):
    tmp, docs, good = kb
    result = ragsweep_here("run", "--docs", str(docs), "--testset", str(good), "--metric", "speed")
    assert_user_error(result, "unknown metric 'speed'")


def test_a_grid_larger_than_max_configs_is_refused(kb):
    tmp, docs, good = kb
    result = ragsweep_here("run", "--docs", str(docs), "--testset", str(good), "--max-configs", "5")
    assert_user_error(result, "holds 18 configurations, more than the budget of 5 (--max-configs)")
    assert "optimization_max_rag_patterns" not in result.stderr  # a name the user did not type


def test_leaderboard_of_a_folder_that_is_no_run(tmp_path):
    assert_user_error(ragsweep_here("leaderboard", str(tmp_path)), "no leaderboard.arrow")


def test_a_malformed_test_set_stops_the_run_before_the_pipeline_with_the_loaders_message(kb):
    tmp, docs, _ = kb
    bad = tmp / "bad.json"
    bad.write_text('[{"question": "Q?",\n "correct_answers": ["A"], }]')
    with pytest.raises(RagsweepError) as loader:
        load_testset(str(bad))

    started = time.perf_counter()
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(bad), "--output", str(tmp / "r")
    )
    print(f"malformed test set refused in {time.perf_counter() - started:.2f} s")

    assert_user_error(result, str(loader.value))
    assert not (tmp / "r").exists()


def test_an_unknown_document_id_stops_the_run_before_the_pipeline(kb):
    tmp, docs, _ = kb
    bad = tmp / "bad.json"
    bad.write_text(
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": ["b.md"]}]'
    )
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(bad), "--output", str(tmp / "r")
    )
    assert_user_error(result, "(item 1, 'Q?'): reference document 'b.md' matches no document")
    assert not (tmp / "r").exists()


def test_a_docs_folder_without_documents_stops_the_run_before_the_pipeline(kb):
    tmp, _, good = kb
    (tmp / "empty").mkdir()
    (tmp / "empty" / "notes.xyz").write_text("not a document type")
    result = ragsweep_here("run", "--docs", str(tmp / "empty"), "--testset", str(good))
    assert_user_error(result, "no documents found among 1 files", "supported types")


def giskard_testset(path: Path, contexts: dict[str, str]) -> Path:
    """A Giskard JSONL test set at ``path``: one question per id, with its reference context;
    the seed document ids name no document, so the contexts alone resolve them (in ingest)."""
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": id,
                    "question": "Which port?",
                    "reference_answer": "8443",
                    "reference_context": context,
                    "conversation_history": [],
                    "metadata": {"question_type": "simple", "seed_document_id": n, "topic": "T"},
                }
            )
            + "\n"
            for n, (id, context) in enumerate(contexts.items())
        )
    )
    return path


CONTEXTS = {
    "found": "Document 0: Tidewater listens on port 8443.",
    "lost": "Document 1: Nothing like this is in the documents.",
}


@pytest.fixture(scope="module")
def lost_context(tmp_path_factory):
    """A run whose Giskard test set holds a context found in no document: it fails in ingest.
    Its data folder (and so the default results store) is the module's: (the test's
    environment, the run's arguments but --output, its result, its run folder)."""
    tmp = tmp_path_factory.mktemp("lost-context")
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Tidewater listens on port 8443.\n")
    native = giskard_testset(tmp / "native.jsonl", CONTEXTS)
    env = without_settings("RAGSWEEP_", "MLFLOW_")
    env["XDG_DATA_HOME"] = str(tmp / "data-home")
    args = ["run", "--docs", str(docs), "--testset", str(native), "--top-k", "1"]
    args += ["--chunk-sizes", "64", "--search-types", "similarity"]
    failed = ragsweep(*args, "--output", str(tmp / "r"), env=env)
    [run_dir] = (tmp / "r").iterdir()
    return env, args, failed, run_dir


def test_a_context_found_in_no_document_fails_in_ingest_unless_skipped(
    lost_context, endpoint, tmp_path
):
    """The run that skips the question embeds through the scripted endpoint: no model."""
    env, args, failed, run_dir = lost_context
    assert_user_error(failed, "the pipeline failed")
    assert "question lost (item 2, 'Which port?'): reference document '1' matches no" in (
        failed.stdout
    )
    listed = ragsweep_here("runs", env=env).stdout  # the default store, in the run's data folder
    assert f"{run_dir.name:<28} failed" in listed

    args += ["--embedding-models", "openai:embedder", "--skip-unresolved"]
    skipped = ragsweep(*args, "--output", str(tmp_path / "r"))
    assert skipped.returncode == 0, skipped.stderr
    assert "skipped 1 of 2 questions whose references match no document" in skipped.stdout
    [run_dir] = (tmp_path / "r").iterdir()
    assert (run_dir / "testset.jsonl").read_text().count("\n") == 1


def pipeline_arguments(*args: str) -> dict:
    """The pipeline's arguments ``ragsweep run ARGS`` writes to its run folder's
    settings.json, from the options as the CLI parses and composes them (no run)."""
    import typer.main

    from ragsweep.cli import app, local_settings
    from ragsweep.sweep.options import pipeline_arguments

    command = typer.main.get_command(app).get_command(None, "run")
    with command.make_context("run", list(args)) as context:
        return pipeline_arguments(local_settings(context.params))


def test_a_local_run_never_shards_unless_asked(lost_context, kb):
    """`ragsweep run` passes the pipeline embedding_shard_bytes 0 unless the option is given;
    the pipeline's own default, for the cluster, stays DEFAULT_SHARD_BYTES. A run folder's
    settings.json holds the pipeline's arguments, written before the pipeline starts (the
    module's run failed in ingest, after it)."""
    from ragsweep.sweep.fanout import DEFAULT_SHARD_BYTES

    run_dir = lost_context[3]
    assert json.loads((run_dir / "settings.json").read_text())["embedding_shard_bytes"] == 0
    _, docs, good = kb
    args = ["--docs", str(docs), "--testset", str(good), "--no-store", "--cache", "none"]
    assert pipeline_arguments(*args)["embedding_shard_bytes"] == 0
    given = pipeline_arguments(*args, "--embedding-shard-bytes", "5000")
    assert given["embedding_shard_bytes"] == 5000
    # submit and schedule run the compiled pipeline with its own default: shards on a cluster
    root = Path(__file__).resolve().parent.parent
    spec, *_ = yaml.safe_load_all((root / "pipelines/sweep_pipeline.yaml").read_text())
    parameter = spec["root"]["inputDefinitions"]["parameters"]["embedding_shard_bytes"]
    assert parameter["defaultValue"] == DEFAULT_SHARD_BYTES


def test_convert_reports_malformed_json_with_its_position(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('[{"question": "Q?",\n "correct_answers": [}]')
    assert_user_error(
        ragsweep_here("testset", "convert", str(bad), str(tmp_path / "o.jsonl")), "t.json"
    )


def test_convert_writes_the_other_format(kb):
    tmp, docs, good = kb
    out = tmp / "out.jsonl"
    result = ragsweep_here("testset", "convert", str(good), str(out), "--docs", str(docs))
    assert result.returncode == 0, result.stderr
    assert '"seed_document_id": "a.md"' in out.read_text()


def test_convert_to_autorag_warns_once_of_the_fields_it_leaves_out(tmp_path):
    source = tmp_path / "in.jsonl"
    item = {
        "id": "q1",
        "question": "Port?",
        "reference_answer": "8443",
        "reference_context": "Tidewater listens on port 8443.",
        "conversation_history": [{"role": "user", "content": "Hi"}],
        "metadata": {"question_type": "simple", "seed_document_id": "a.md", "topic": "Ops"},
    }
    source.write_text(json.dumps(item) + "\n")

    result = ragsweep_here("testset", "convert", str(source), str(tmp_path / "out.json"))

    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {tmp_path / 'out.json'}: AutoRAG JSON has no field for id (1 of 1), "
        "reference_context (1 of 1), question_type (1 of 1), topic (1 of 1), "
        "conversation_history (1 of 1): left out"
    ]
    back = ragsweep_here(
        "testset", "convert", str(tmp_path / "out.json"), str(tmp_path / "b.jsonl")
    )
    assert back.returncode == 0 and "warning" not in back.stderr


def test_leaderboard_of_an_unknown_run_id_names_it(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert_user_error(ragsweep_here("leaderboard", "nope", "--store", url), "no run 'nope'")
    assert_user_error(ragsweep_here("best", "nope", "--store", url), "no run 'nope'")


def test_runs_of_an_empty_store_says_so(tmp_path):
    result = ragsweep_here("runs", "--store", f"sqlite:///{tmp_path / 'r.db'}")
    assert result.returncode == 0 and "no runs in sqlite:///" in result.stdout


def test_a_dead_store_stops_the_run_before_the_sweep(kb):
    tmp, docs, good = kb
    url = "postgresql+psycopg://u:hunter2@127.0.0.1:9/x"  # the discard port: nothing listens
    args = ["--docs", str(docs), "--testset", str(good), "--output", str(tmp / "runs")]
    result = ragsweep_here("run", *args, "--store", url)
    assert_user_error(result, "cannot connect")
    assert "hunter2" not in result.stderr + result.stdout
    assert not (tmp / "runs").exists()


def test_baseline_without_a_store_is_refused(kb):
    tmp, docs, good = kb
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(good), "--no-store", "--baseline", "latest"
    )
    assert_user_error(result, "--baseline reads the results database")


def test_preflight_lists_an_s3_prefix_and_checks_the_ids_without_reading_documents(s3, bucket):
    from ragsweep.runner.local import preflight

    s3.put_object(Bucket=bucket, Key="kb/guides/a.md", Body=b"Port 8443.")
    s3.put_object(Bucket=bucket, Key="kb/logo.png", Body=b"\x89PNG")
    item = {"question": "Port?", "correct_answers": ["8443"], "correct_answer_document_ids": []}
    for name, doc_ids in [("good.json", ["a.md"]), ("bad.json", ["b.md"])]:
        body = json.dumps([{**item, "correct_answer_document_ids": doc_ids}]).encode()
        s3.put_object(Bucket=bucket, Key=f"sets/{name}", Body=body)

    preflight(f"s3://{bucket}/kb", f"s3://{bucket}/sets/good.json")
    preflight(f"s3://{bucket}/kb", f"s3://{bucket}/sets/bad.json", skip_unresolved=True)
    with pytest.raises(RagsweepError, match="reference document 'b.md' matches no document"):
        preflight(f"s3://{bucket}/kb", f"s3://{bucket}/sets/bad.json")
    with pytest.raises(RagsweepError, match="no documents found: it holds no files"):
        preflight(f"s3://{bucket}/elsewhere", "")
    with pytest.raises(RagsweepError, match="sets/missing.json"):
        preflight(f"s3://{bucket}/kb", f"s3://{bucket}/sets/missing.json")
