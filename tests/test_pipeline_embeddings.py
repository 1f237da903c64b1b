"""The whole pipeline with an embedding model behind an OpenAI-compatible endpoint, through
kfp.local, against the scripted server."""

import subprocess
import sys
from pathlib import Path

import yaml

from ragsweep.core.schemas import read_table

ROOT = Path(__file__).resolve().parent.parent
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")


def ragsweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, timeout=1200)


def test_an_endpoint_e5_model_sweeps_chunks_above_the_bundled_models_limit_with_its_prefixes(
    llm_server, tmp_path
):
    # 256 and 512 exceed all-MiniLM-L6-v2's 254 tokens but not the endpoint model's (no
    # limit known): every step after configure must evaluate the space it validated
    llm_server.models.append("e5-small-v2")
    runs = tmp_path / "runs"
    result = ragsweep(
        "run", "--docs", str(ROOT / "examples" / "docs"),
        "--testset", str(ROOT / "examples" / "testset.jsonl"),
        "--embedding-models", "openai:e5-small-v2", "--chunk-sizes", "256,512",
        "--top-k", "1", "--search-types", "similarity", "--output", str(runs), "--no-store",
        "--cache", str(tmp_path / "embeddings"),  # the scripted vectors: this test's own
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run_dir] = runs.iterdir()
    shown = (run_dir / "pipeline.log").read_text()  # the steps' own lines
    assert "embedding model openai:e5-small-v2: query prefix 'query: '" in shown
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    assert sorted(board["chunk_size"].to_pylist()) == [256, 512]
    assert set(board["embedding_model"].to_pylist()) == {"openai:e5-small-v2"}
    assert set(board["query_prefix"].to_pylist()) == {"query: "}
    assert set(board["passage_prefix"].to_pylist()) == {"passage: "}
    assert board["context_correctness"].null_count == 0

    # the server read every question after "query: ", and every chunk after "passage: "
    # (the two chunk sets retrieve in parallel, so each may embed the questions)
    questions = read_table(run_dir / "testset.arrow", "testset")["question"].to_pylist()
    asked = {t for t in llm_server.embedded if t.startswith("query: ")}
    assert asked == {f"query: {q}" for q in questions}
    chunks = [t for t in llm_server.embedded if not t.startswith("query: ")]
    assert chunks and all(t.startswith("passage: ") for t in chunks)

    best = yaml.safe_load(ragsweep("best", str(run_dir)).stdout)
    assert best["embedding_models"] == ["openai:e5-small-v2"]
    assert (best["query_prefix"], best["passage_prefix"]) == ("query: ", "passage: ")
