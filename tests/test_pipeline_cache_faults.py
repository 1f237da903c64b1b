"""A run over a damaged embedding cache, through kfp.local: before the checks, random
float32 over a shard's vectors gave answer_correctness 0.087 instead of 0.661 (exit 0), and
a truncated shard or index a raw ``ArrowInvalid`` naming no file on every later run."""

from pathlib import Path

import numpy as np
import pytest
from test_pipeline import example_subset, ragsweep

from ragsweep.core.schemas import read_table
from ragsweep.embeddings.shards import decode_index

METRICS = ("context_correctness", "answer_correctness", "document_recall")


def sweep(tmp_path: Path, name: str, cache: Path) -> tuple[Path, str]:
    docs, testset = example_subset(tmp_path)
    output = tmp_path / name
    result = ragsweep(
        *("run", "--docs", str(docs), "--testset", str(testset), "--chunk-sizes", "64,128"),
        *("--top-k", "1,3", "--vector-stores", "memory", "--cache", str(cache), "--no-store"),
        *("--output", str(output)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    [run_dir] = output.iterdir()
    return run_dir, result.stderr + (run_dir / "pipeline.log").read_text()


def test_a_rerun_over_damaged_shards_ranks_as_the_cold_run_and_names_each_file_once(tmp_path):
    cache = tmp_path / "cache"
    cold, _ = sweep(tmp_path, "cold", cache)
    shards = sorted(cache.glob("*/*.arrow"))
    assert len(shards) >= 3, shards  # chunks of 64 and 128 tokens, questions
    [vectors_overwritten, truncated, indexed] = shards[:3]
    index = decode_index(vectors_overwritten.with_suffix(".idx").read_bytes())
    data = bytearray(vectors_overwritten.read_bytes())
    matrix = len(index.keys) * index.row_bytes
    noise = np.random.default_rng(0).standard_normal(matrix // 4).astype(np.float32)
    data[index.offset : index.offset + matrix] = noise.tobytes()  # the same size
    vectors_overwritten.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:1000])
    index_truncated = indexed.with_suffix(".idx")
    index_truncated.write_bytes(index_truncated.read_bytes()[:100])
    damaged = [vectors_overwritten, truncated, index_truncated]

    rerun, log = sweep(tmp_path, "rerun", cache)
    for path in damaged:
        assert log.count(f"{path} is damaged") == 1, log[-3000:]
    aside = {p.name for p in cache.glob("*/quarantine/*")}
    assert {p.with_suffix(".arrow").name for p in damaged} <= aside

    boards = [read_table(run / "leaderboard.arrow", "leaderboard") for run in (cold, rerun)]
    assert boards[0]["config_id"].to_pylist() == boards[1]["config_id"].to_pylist()
    for metric in METRICS:
        assert boards[1][metric].to_pylist() == pytest.approx(boards[0][metric].to_pylist())
