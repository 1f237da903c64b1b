"""The pipeline: its committed YAML is current, and it runs end to end with kfp.local."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from kfp import compiler

from ragsweep.pipelines.sweep_pipeline import sweep_pipeline
from ragsweep.schemas import read_table

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


def test_pipeline_fans_out_over_chunk_configs_and_collects_scores():
    spec = next(yaml.safe_load_all((ROOT / "pipelines" / "sweep_pipeline.yaml").read_text()))
    tasks = spec["root"]["dag"]["tasks"]
    loop = next(t for name, t in tasks.items() if name.startswith("for-loop"))
    assert (
        "parameterExpressionSelector" in json.dumps(loop["parameterIterator"])
        or loop["parameterIterator"]["items"]["inputParameter"]
    )
    rank_inputs = tasks["rank"]["inputs"]["artifacts"]["scores"]
    assert rank_inputs["taskOutputArtifact"]["producerTask"] == loop["taskInfo"]["name"]
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


def test_ragsweep_run_executes_the_pipeline_locally_and_prints_the_leaderboard(tmp_path):
    docs, testset = example_subset(tmp_path)
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(docs), "--testset", str(testset)]
        + ["--chunk-sizes", "64,128", "--top-k", "1,3,5", "--output", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [run_dir] = (tmp_path / "runs").iterdir()
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    assert board.num_rows == 2 * 3 * 2  # chunk sizes x top k x search types
    assert board.column("questions").to_pylist() == [6] * 12
    assert pq.read_table(run_dir / "leaderboard.parquet").num_rows == 12
    assert (run_dir / "leaderboard.csv").read_text().count("\n") == 13
    assert read_table(run_dir / "scores.arrow", "scores").num_rows == 12 * 6
    best = board.to_pylist()[0]
    assert best["label"] in result.stdout
    assert "12 configurations" in result.stdout
    # `ragsweep leaderboard` reads the same run back
    again = subprocess.run(
        [RAGSWEEP, "leaderboard", str(run_dir), "--top", "3"], capture_output=True, text=True
    )
    assert again.returncode == 0
    assert best["label"] in again.stdout
    assert "... 9 more" in again.stdout
    # and so does the leaderboard artifact alone, as downloaded from a cluster run's page
    artifact = tmp_path / "leaderboard"
    shutil.copyfile(run_dir / "leaderboard.arrow", artifact)
    downloaded = subprocess.run(
        [RAGSWEEP, "leaderboard", str(artifact), "--top", "1"], capture_output=True, text=True
    )
    assert downloaded.returncode == 0, downloaded.stderr
    assert best["label"] in downloaded.stdout
