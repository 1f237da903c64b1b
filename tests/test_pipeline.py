"""The pipeline: its committed YAML is current, and it runs end to end with kfp.local."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from conftest import ragsweep_here
from kfp import compiler

from ragsweep.core.schemas import read_table
from ragsweep.pipelines.sweep_pipeline import sweep_pipeline

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")


def test_committed_pipeline_yaml_is_current(tmp_path, monkeypatch):
    fresh = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(sweep_pipeline, str(fresh))
    committed = ROOT / "pipelines" / "sweep_pipeline.yaml"
    fresh_docs = list(yaml.safe_load_all(fresh.read_text()))  # the pipeline, its platform config
    assert fresh_docs == list(yaml.safe_load_all(committed.read_text())), (
        "pipelines/sweep_pipeline.yaml is stale: run `make compile` and commit it"
    )


def test_pipeline_fans_out_over_chunk_configs_and_collects_retrievals():
    spec = next(yaml.safe_load_all((ROOT / "pipelines" / "sweep_pipeline.yaml").read_text()))
    tasks = spec["root"]["dag"]["tasks"]
    collected = tasks["evaluate"]["inputs"]["artifacts"]["retrievals"]
    loop = tasks[collected["taskOutputArtifact"]["producerTask"]]
    assert loop["componentRef"]["name"].startswith("comp-for-loop")
    assert (
        "parameterExpressionSelector" in json.dumps(loop["parameterIterator"])
        or loop["parameterIterator"]["items"]["inputParameter"]
    )
    assert "plan" in loop["dependentTasks"]  # over plan's groups of chunk configurations
    # the shard loop's vectors, collected by one merge, reach the fan-out's chunk_embed
    shards = tasks["merge-shards"]["inputs"]["artifacts"]["shards"]["taskOutputArtifact"]
    assert tasks[shards["producerTask"]]["componentRef"]["name"].startswith("comp-for-loop")
    assert "plan-shards" in tasks[shards["producerTask"]]["dependentTasks"]
    assert "merge-shards" in loop["dependentTasks"]
    scores = tasks["rank"]["inputs"]["artifacts"]["scores"]
    assert scores["taskOutputArtifact"]["producerTask"] == "evaluate"
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {"localhost/ragsweep:latest"}


def example_subset(tmp_path: Path, questions: int = 6) -> tuple[Path, Path]:
    """The first questions of the example test set and the documents they cite."""
    records = json.loads((EXAMPLES / "testset.json").read_text())[:questions]
    all_docs = [p for p in (EXAMPLES / "docs").rglob("*") if p.is_file()]
    docs = tmp_path / "docs"
    for record in records:
        for doc_id in record["correct_answer_document_ids"]:
            matches = [p for p in all_docs if p.relative_to(EXAMPLES / "docs").as_posix() == doc_id]
            matches = matches or [p for p in all_docs if p.name == doc_id]
            for source in matches:
                target = docs / source.relative_to(EXAMPLES / "docs")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    testset = tmp_path / "testset.json"
    testset.write_text(json.dumps(records))
    return docs, testset


def ragsweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, timeout=900)


def test_ragsweep_run_executes_the_pipeline_locally_and_stores_the_run(tmp_path):
    docs, testset = example_subset(tmp_path)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    sweep = ["--docs", str(docs), "--testset", str(testset), "--chunk-sizes", "64,128"]
    sweep += ["--top-k", "1,3,5", "--output", str(tmp_path / "runs"), "--store", url]
    sweep += ["--cache", str(tmp_path / "cache"), "--vector-stores", "memory"]
    # the first night of a schedule comparing with the latest run: none yet, and no failure
    result = ragsweep("run", *sweep, "--baseline", "latest")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "No earlier successful run of this sweep (unnamed, key " in result.stdout
    [run_dir] = (tmp_path / "runs").iterdir()
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    assert board.num_rows == 2 * 3 * 2  # chunk sizes x top k x search types
    assert board.column("questions").to_pylist() == [6] * 12
    assert board["tied_with_best"][0].as_py() is True
    low, high = (
        board["answer_correctness_low"][0].as_py(),
        board["answer_correctness_high"][0].as_py(),
    )
    assert low <= board["answer_correctness"][0].as_py() <= high
    # exact search in memory: recall 1 against itself, its searches timed, its ids as before
    assert set(board["vector_store"].to_pylist()) == {"memory"}
    assert set(board["index"].to_pylist()) == {"exact"}
    assert set(board["recall_vs_exact"].to_pylist()) == {1.0}
    assert all(ms >= 0 for ms in board["query_latency_p50_ms"].to_pylist())
    assert board["index_build_s"].null_count == 0
    assert "memory:" not in "".join(board["label"].to_pylist())
    for name in ("leaderboard", "results", "breakdown", "failures"):
        for suffix in (".arrow", ".parquet", ".csv", ".json"):
            assert (run_dir / name).with_suffix(suffix).is_file(), name + suffix
    assert pq.read_table(run_dir / "leaderboard.parquet").num_rows == 12
    assert (run_dir / "leaderboard.csv").read_text().count("\n") == 13
    assert read_table(run_dir / "results.arrow", "results").num_rows == 12 * 6
    assert 'id="leaderboard"' in (run_dir / "report.html").read_text()
    best = board.to_pylist()[0]
    assert best["label"] in result.stdout
    assert "12 configurations" in result.stdout and "[95% CI]" in result.stdout
    settings = json.loads((run_dir / "settings.json").read_text())
    assert settings["search_space"]["chunk_sizes"] == [64, 128]
    assert settings["embedding_cache"] == str(tmp_path / "cache")
    assert any((tmp_path / "cache").rglob("*.arrow"))
    # every step's process said what it cost, in the log and on the terminal
    log = (run_dir / "pipeline.log").read_text()
    costs = re.findall(r"ragsweep: step (\w+): peak memory \d+ MB, [\d.]+ s", log)
    # one group holds both chunk configurations: one process embeds them, one retrieves
    assert costs.count("chunk_embed") == costs.count("retrieve") == 1
    assert costs.count("embed_shard") == 1  # the placeholder: nothing to shard
    assert {"ingest", "plan", "evaluate", "rank", "publish"} <= set(costs)
    assert re.search(r"^\[\d+/\d+\] rank: peak memory \d+ MB", result.stdout, re.M)
    # the branches ran one at a time: no task started while another ran
    events = re.findall(r"Executing task|Task '[\w-]+' finished", log)
    assert [e.startswith("Executing") for e in events] == [True, False] * (len(events) // 2)

    # the publish step stored it under the run folder's name
    listed = ragsweep_here("runs", "--store", url)  # the commands that read it, in process
    assert listed.returncode == 0 and run_dir.name in listed.stdout
    stored = ragsweep_here(
        "leaderboard", run_dir.name, "--store", url, "--format", "json", "--top", "3"
    )
    assert stored.returncode == 0, stored.stderr
    assert [r["config_id"] for r in json.loads(stored.stdout)] == board["config_id"].to_pylist()[:3]
    again = ragsweep_here("leaderboard", str(run_dir), "--top", "3")
    assert again.returncode == 0 and best["label"] in again.stdout and "... 9 more" in again.stdout
    assert f"- {best['chunk_size']}" in ragsweep_here("best", str(run_dir)).stdout
    # and so does the leaderboard artifact alone, as downloaded from a cluster run's page
    artifact = tmp_path / "leaderboard"
    shutil.copyfile(run_dir / "leaderboard.arrow", artifact)
    downloaded = ragsweep_here("leaderboard", str(artifact), "--top", "1")
    assert downloaded.returncode == 0 and best["label"] in downloaded.stdout, downloaded.stderr
