"""Issue 37's two cases as a user meets them, through `ragsweep run` on one example
document: vectors copied from the int8 runtime's folder into the default's are set aside
and the leaderboard is a clean cache's; a model retrained in place (same path, same sizes)
is embedded again and retrieves otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from test_cache_identity import negate_tensor

from ragsweep.core.schemas import read_table
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models import embedding

REPO = Path(__file__).resolve().parents[1]
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
MODEL = "all-MiniLM-L6-v2"
DOC = "guides/installation.md"  # the document the example set's first questions cite
SMALL = ["--chunk-sizes", "64", "--top-k", "1,3", "--search-types", "similarity,mmr"]
BOARD = ["config_id", "rank", "answer_correctness", "answer_correctness_low",
         "answer_correctness_high", "context_correctness", "span_recall",
         "tied_with_best"]  # fmt: skip


def one_document(work: Path) -> tuple[Path, Path]:
    """The example document ``DOC`` in a folder of its own, and the example questions that
    cite it."""
    docs = work / "docs"
    (docs / "guides").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "docs" / DOC, docs / DOC)
    lines = (REPO / "examples" / "testset.jsonl").read_text().splitlines()
    testset = work / "testset.jsonl"
    testset.write_text("\n".join(line for line in lines if f'"{DOC}"' in line) + "\n")
    return docs, testset


def run(work: Path, name: str, model: str, cache: Path) -> tuple[Path, str]:
    """A sweep of ``model`` with embedding cache ``cache``: its run folder and what it
    printed (the steps' lines and warnings)."""
    docs, testset = one_document(work) if not (work / "docs").exists() else (
        work / "docs", work / "testset.jsonl")  # fmt: skip
    out = work / name
    done = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(docs), "--testset", str(testset), "--no-store",
         "--patterns", "0", "--output", str(out), "--cache", str(cache),
         "--embedding-models", model, *SMALL],
        capture_output=True, text=True, env=dict(os.environ), timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    [folder] = [p for p in out.iterdir() if p.is_dir() and p.name != "testsets"]
    return folder, done.stdout + done.stderr


def board(folder: Path) -> list[dict]:
    return read_table(folder / "leaderboard.arrow", "leaderboard").select(BOARD).to_pylist()


def by_question(folder: Path, column: str) -> list:
    table: pa.Table = read_table(folder / "results.arrow", "results")
    table = table.sort_by([("config_id", "ascending"), ("question_id", "ascending")])
    return table[column].to_pylist()


def test_int8_vectors_copied_into_the_default_runtimes_cache_leave_the_leaderboard_clean(
    tmp_path: Path,
) -> None:
    int8_cache, copied_cache = tmp_path / "int8-cache", tmp_path / "copied-cache"
    int8_run, _ = run(tmp_path, "int8", f"{MODEL}@onnx-int8", int8_cache)
    [int8_folder] = [p for p in int8_cache.iterdir() if p.is_dir()]
    default_folder = copied_cache / EmbeddingCache(copied_cache).folder(MODEL)
    default_folder.mkdir(parents=True)
    copied = [p for p in int8_folder.iterdir() if p.suffix in (".arrow", ".idx")]
    for shard in copied:
        shutil.copy(shard, default_folder / shard.name)

    copied_run, said = run(tmp_path, "copied", MODEL, copied_cache)
    clean_run, _ = run(tmp_path, "clean", MODEL, tmp_path / "clean-cache")
    assert board(copied_run) == board(clean_run)
    assert board(int8_run) != board(clean_run)  # the copied vectors would have shown
    assert "another model's" in said and len(copied) >= 2
    assert not [p for p in default_folder.iterdir() if p.name in {c.name for c in copied}]


def test_a_model_retrained_in_place_is_embedded_again_and_retrieves_otherwise(
    tmp_path: Path,
) -> None:
    model = tmp_path / "minilm"
    shutil.copytree(embedding.model_path(MODEL), model)
    name, cache = f"{model}@torch", tmp_path / "cache"  # @torch: no ONNX export to make
    first, _ = run(tmp_path, "first", name, cache)
    weights = model / "model.safetensors"
    size = weights.stat().st_size
    negate_tensor(weights, "layer.0.attention.self.query.weight")
    assert weights.stat().st_size == size

    again, _ = run(tmp_path, "again", name, cache)
    before, after = by_question(first, "retrieved_scores"), by_question(again, "retrieved_scores")
    assert len(before) == len(after) > 0
    assert all(b != a for b, a in zip(before, after, strict=True))  # no vector was reused
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 2  # one folder per identity
