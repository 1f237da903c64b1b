#!/usr/bin/env python3
"""The full grid the search benchmark replays (``bench_search.py``): the configurations
(at least 500) of the example knowledge base (``examples/docs``, its 64-question test set
``examples/testset.json``), each scored on every question, written once to
``benchmarks/search_grid.arrow`` (one row per configuration x question).

The grid is LLM-free, so that it costs minutes, not thousands of model calls: the
extractive answerer answers, and its ``answer_correctness`` (token recall against the
reference answers) stands for the score an LLM-answered configuration would earn. The
retrieval metrics of the same rows are what ragsweep knows for free before any LLM call.

Usage: PYTHONPATH=. python benchmarks/search_grid.py [OUT]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GRID = HERE / "search_grid.arrow"
SPACE = {  # 30 chunk sets (less those that repeat another) x 5 Top K x 5 searches
    "chunkers": ["sentence", "token"],
    "chunk_sizes": [64, 96, 128, 192, 256],
    "chunk_overlaps": [0, 0.125, 0.25],
    "top_ks": [1, 3, 5, 8, 10],
    "search_types": ["similarity", "mmr", "hybrid"],
    "mmr_lambdas": [0.3, 0.5, 0.8],
    "answerers": ["extractive"],
}
FREE = ("context_correctness", "document_recall", "span_recall", "span_precision")  # as
# ragsweep.evaluation.surrogate.FREE_METRICS: the retrieval metrics the search reads
TARGET = "answer_correctness"
CONFIG = ("chunker", "chunk_size", "chunk_overlap", "top_k", "search_type", "mmr_lambda")


def build(out: Path) -> None:
    from ragsweep.curation.stored_sets import load_test_data
    from ragsweep.documents.sources import read_locations
    from ragsweep.documents.testsets import resolve_testset
    from ragsweep.embeddings.cache import EmbeddingCache
    from ragsweep.evaluation import clusters
    from ragsweep.sweep import steps
    from ragsweep.sweep.space import SearchSpace

    start = time.perf_counter()
    space = SearchSpace.from_dict(SPACE)
    configs = space.all_configs()
    read = read_locations([str(ROOT / "examples" / "docs")])
    testset = resolve_testset(
        load_test_data("", str(ROOT / "examples" / "testset.json")), read.table, False, []
    )
    cache = EmbeddingCache()
    tables = []
    for chunk_config in space.chunk_configs():
        chunks = steps.build_chunks(read.table, chunk_config, cache)
        tables.append(steps.retrieve(chunks, testset, space, chunk_config, cache))
    retrievals = pa.concat_tables(tables).combine_chunks()
    _, scores = steps.evaluate(retrievals, testset, configs, TARGET)
    by_id = {c["config_id"]: c for c in configs}
    ids = scores["config_id"].to_pylist()
    chosen = clusters.of_testset(testset)
    cluster = dict(zip(testset["question_id"].to_pylist(), chosen.ids.tolist(), strict=True))
    columns = {
        "config_id": scores["config_id"],
        "question_id": scores["question_id"],
        "cluster": pa.array([cluster[q] for q in scores["question_id"].to_pylist()], pa.int64()),
        **{name: scores[name] for name in (*FREE, TARGET)},
    }
    for name in CONFIG:
        columns[name] = pa.array([by_id[c].get(name) for c in ids])
    table = pa.table(columns)
    with pa.OSFile(str(out), "wb") as sink:
        options = pa.ipc.IpcWriteOptions(compression="zstd")
        with pa.ipc.new_file(sink, table.schema, options=options) as writer:
            writer.write_table(table)
    print(
        f"{len(configs)} configurations x {testset.num_rows} questions -> {out} "
        f"in {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else GRID)
