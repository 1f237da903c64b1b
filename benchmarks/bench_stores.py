"""Vector stores side by side: load time, query time and recall against exact search, per
store and index, on the Click 8.1.8 docs' chunk sets; and the in-memory search against the
implementation before the store seam.

    python benchmarks/bench_stores.py --stores memory,milvus,pgvector

Chunk sets: the Click docs (fetched as ``bench_sweep.py`` does) in sentence chunks of 64, 128
and 256 tokens, embedded with all-MiniLM-L6-v2 (through an embedding cache in ``.data``).
Queries: the 25 Click questions, and 1,000 synthetic ones (embeddings of random chunks,
perturbed and renormalized) so that recall is measured on enough queries to mean something.
Every store's index kinds run with their default parameters. A store whose connection is
not available is skipped and said so. The results replace the section between the markers
in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_sweep import CLICK_TESTSET, DATA, click_corpus  # noqa: E402
from readme import write_section  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
CHUNK_SIZES = [64, 128, 256]
SYNTHETIC = 1000
NOISE = 0.03  # per dimension, before renormalizing: a query near its chunk, not on it
KS = (5, 10)
TIMING_ROUNDS = 4  # the 25 questions searched one at a time, this many times


# ---- chunk sets and queries ------------------------------------------------------------------


def chunk_sets(sizes: list[int]) -> dict[int, tuple[list[str], np.ndarray]]:
    """Each chunk size's texts and unit vectors."""
    from ragsweep.documents.chunking import chunk_documents
    from ragsweep.documents.sources import read_documents
    from ragsweep.embeddings.cache import EmbeddingCache
    from ragsweep.models import embedding

    docs, _ = click_corpus()
    documents = read_documents(str(docs)).table
    tokenize = embedding.load_tokenizer(MODEL)
    cache = EmbeddingCache(DATA / "embeddings")
    out = {}
    for size in sizes:
        texts = chunk_documents(documents, "sentence", size, 0, tokenize)["text"].to_pylist()
        out[size] = texts, cache.embed(MODEL, texts)
    return out


def queries(
    vectors: np.ndarray, testset: Path, seed: int = 0
) -> tuple[list, np.ndarray, np.ndarray]:
    """The 25 Click questions and their vectors, and ``SYNTHETIC`` perturbed chunk vectors."""
    from ragsweep.embeddings.cache import EmbeddingCache

    asked = [q["question"] for q in json.loads(testset.read_text())]
    questions = EmbeddingCache(DATA / "embeddings").embed(MODEL, asked)
    rng = np.random.default_rng(seed)
    picked = vectors[rng.integers(0, len(vectors), SYNTHETIC)]
    noisy = picked + rng.normal(scale=NOISE, size=picked.shape).astype(np.float32)
    return asked, questions, noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


# ---- stores ----------------------------------------------------------------------------------


def start_pgvector() -> str | None:
    """``RAGSWEEP_PGVECTOR_URL``, else a PostgreSQL with pgvector started here with pgserver
    (stopped at exit); None when neither is possible. The URL is the one pgserver gives."""
    if os.environ.get("RAGSWEEP_PGVECTOR_URL"):
        return os.environ["RAGSWEEP_PGVECTOR_URL"]
    try:
        import pgserver
    except ImportError:
        return None
    server = pgserver.get_server(str(DATA / "pgdata"), cleanup_mode="stop")
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    os.environ["RAGSWEEP_PGVECTOR_URL"] = server.get_uri()
    return server.get_uri()


def available(names: list[str], scratch: Path) -> list[str]:
    """The stores that can run here; the others are named and skipped."""
    from ragsweep.retrieval.vector_stores import STORES

    usable = []
    for name in names:
        reason = None
        if name not in STORES:
            reason = "not in ragsweep.retrieval.vector_stores.STORES"
        elif name == "milvus" and not os.environ.get("RAGSWEEP_MILVUS_URI"):
            os.environ.setdefault("RAGSWEEP_MILVUS_LITE_DIR", str(scratch))
        elif name == "pgvector" and start_pgvector() is None:
            reason = "no RAGSWEEP_PGVECTOR_URL and pgserver is not installed"
        elif name == "oracle" and not os.environ.get("RAGSWEEP_ORACLE_DSN"):
            reason = "no RAGSWEEP_ORACLE_DSN"
        if reason:
            print(f"skipping {name}: {reason}", flush=True)
        else:
            usable.append(name)
    return usable


def recall_vs_exact(found: np.ndarray, queries: np.ndarray, vectors: np.ndarray, k: int) -> float:
    """Mean share of exact search's top ``k`` that the store's top ``k`` holds, a chunk
    scoring as high as exact search's k-th counting as found (duplicate chunks tie)."""
    kth = -np.sort(-(queries @ vectors.T), axis=1)[:, k - 1]
    ids = found[:, :k]
    scores = np.einsum("qd,qkd->qk", queries, vectors[np.maximum(ids, 0)])
    hits = (ids >= 0) & (scores >= kth[:, None] - 1e-5)
    return float(np.mean(hits.sum(axis=1) / k))


def overlap(found: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Mean share of exact search's top ``k`` that the store's top ``k`` holds."""
    return float(
        np.mean([len(set(f[:k]) & set(t[:k])) / k for f, t in zip(found, truth, strict=True)])
    )


def measure_store(name: str, kind: str, params: dict, texts, vectors, asked, synthetic) -> dict:
    """Load, time one-at-a-time searches, and measure recall against exact search."""
    from ragsweep.retrieval.vector_stores import IndexSpec, open_store

    store = open_store(name, f"bench_{len(texts)}_{kind}", "cosine")
    try:
        start = time.perf_counter()
        store.create(vectors, texts, IndexSpec(kind, params))
        load = time.perf_counter() - start
        store.search(asked[:1], max(KS))  # warm up
        times = []
        for _ in range(TIMING_ROUNDS):
            for q in asked:
                start = time.perf_counter()
                store.search(q[None], max(KS))
                times.append(time.perf_counter() - start)
        found = {"questions": store.search(asked, max(KS)).ids}
        found["synthetic"] = store.search(synthetic, max(KS)).ids
    finally:
        store.drop()
    sets = {"questions": asked, "synthetic": synthetic}
    ms = np.array(times) * 1000
    result = {
        "store": name,
        "index": IndexSpec(kind, params).label(),
        "chunks": len(texts),
        "load_s": load,
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
    }
    for which in ("questions", "synthetic"):
        for k in KS:
            result[f"recall@{k}_{which}"] = recall_vs_exact(found[which], sets[which], vectors, k)
    print(
        f"  {name:8s} {result['index']:45s} {len(texts):5d} chunks  load {load:6.2f} s  "
        f"p50 {result['p50_ms']:7.2f} ms  p95 {result['p95_ms']:7.2f} ms  "
        f"recall@10 {result['recall@10_questions']:.3f} / {result['recall@10_synthetic']:.3f}",
        flush=True,
    )
    return result


def keyword_agreement(name: str, texts, vectors, questions, asked) -> dict | None:
    """Where the store has its own full-text search: how its keyword top 10 overlaps the
    library's BM25, and its hybrid top 10 the memory store's hybrid (exact index)."""
    from ragsweep.retrieval.search import BM25, Index, rank_chunks
    from ragsweep.retrieval.vector_stores import IndexSpec, open_store

    store, memory = open_store(name, "bench_keywords"), open_store("memory", "exact")
    memory.create(vectors, texts, IndexSpec())
    try:
        store.create(vectors, texts, IndexSpec())
        theirs = store.keyword_search(questions, 10)
        hybrid = rank_chunks(Index(store, asked, vectors, questions, texts), "hybrid", 10)
    finally:
        store.drop()
    if theirs is None:
        return None
    ours = BM25(texts).top(questions, 10)
    exact = rank_chunks(Index(memory, asked, vectors, questions, texts), "hybrid", 10)
    result = {
        "store": name,
        "chunks": len(texts),
        "keyword_overlap@10": overlap(theirs.ids, ours.ids, 10),
        "keyword_top1_same": float(np.mean(theirs.ids[:, 0] == ours.ids[:, 0])),
        "hybrid_overlap@10": overlap(hybrid, exact, 10),
    }
    print(f"  {name:8s} keywords vs BM25 here / hybrid vs memory: {result}", flush=True)
    return result


# ---- the in-memory path against the one before the store seam --------------------------------


def previous_top(scores: np.ndarray, depth: int) -> np.ndarray:
    """``top`` as it was before the store seam (git show 4028de6:ragsweep/retrieval/search.py)."""
    depth = min(depth, scores.shape[1])
    best = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    order = np.argsort(-np.take_along_axis(scores, best, axis=1), axis=1, kind="stable")
    return np.take_along_axis(best, order, axis=1)


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def memory_against_previous(texts, vectors, asked, synthetic, repeats: int = 50) -> list[dict]:
    """Batched search of all queries, as ``retrieval`` does it: the memory store against
    ``question_vectors @ chunk_vectors.T`` and the previous top-k (fastest of ``repeats``,
    the two alternated)."""
    from ragsweep.retrieval.vector_stores import IndexSpec
    from ragsweep.retrieval.vector_stores.memory import MemoryStore

    store = MemoryStore("memory", "cosine")
    store.create(vectors, texts, IndexSpec())
    rows = []
    for which, q in (("25 questions", asked), (f"{SYNTHETIC} queries", synthetic)):
        for depth in (10, 100):
            scores = q @ vectors.T  # the same ranking, but for the order of equal scores
            now_ids, before_ids = store.search(q, depth).ids, previous_top(scores, depth)
            assert np.allclose(
                np.take_along_axis(scores, now_ids, 1), np.take_along_axis(scores, before_ids, 1)
            )
            now, before = [], []
            for _ in range(repeats):
                now.append(seconds(lambda q=q, d=depth: store.search(q, d)))
                before.append(seconds(lambda q=q, d=depth: previous_top(q @ vectors.T, d)))
            rows.append(
                {
                    "chunks": len(texts),
                    "queries": which,
                    "depth": depth,
                    "store_ms": min(now) * 1000,
                    "previous_ms": min(before) * 1000,
                }
            )
    return rows


# ---- the benchmark ---------------------------------------------------------------------------


def benchmark(names: list[str], sizes: list[int], testset: Path) -> dict:
    from ragsweep.retrieval.vector_stores import store_class

    results: dict = {"stores": [], "memory": [], "keywords": []}
    with tempfile.TemporaryDirectory(dir=DATA) as scratch:
        names = available(names, Path(scratch))
        for size, (texts, vectors) in chunk_sets(sizes).items():
            questions, asked, synthetic = queries(vectors, testset)
            print(f"chunk size {size}: {len(texts)} chunks", flush=True)
            results["memory"] += memory_against_previous(texts, vectors, asked, synthetic)
            for name in names:
                for kind, params in store_class(name).INDEXES.items():
                    results["stores"].append(
                        measure_store(name, kind, params, texts, vectors, asked, synthetic)
                    )
                keywords = keyword_agreement(name, texts, vectors, questions, asked)
                if keywords:
                    results["keywords"].append(keywords)
    results["stores_run"] = names
    return results


def report(results: dict) -> str:
    lines = [
        "| store | index | chunks | load s | query p50 ms | query p95 ms | "
        "recall@5 / @10, 25 questions | recall@5 / @10, 1,000 queries |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["stores"]:
        lines.append(
            f"| {r['store']} | `{r['index']}` | {r['chunks']} | {r['load_s']:.2f} | "
            f"{r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
            f"{r['recall@5_questions']:.3f} / {r['recall@10_questions']:.3f} | "
            f"{r['recall@5_synthetic']:.3f} / {r['recall@10_synthetic']:.3f} |"
        )
    if results["keywords"]:
        lines += [
            "",
            "Stores with their own full-text search, against the library's BM25 (exact "
            "index, the 25 questions): overlap of the keyword top 10, share of questions "
            "with the same best keyword hit, and overlap of hybrid's top 10 with the memory "
            "store's hybrid:",
            "",
            "| store | chunks | keyword top-10 overlap | same best keyword hit | "
            "hybrid top-10 overlap |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in results["keywords"]:
            lines.append(
                f"| {r['store']} | {r['chunks']} | {r['keyword_overlap@10']:.3f} | "
                f"{r['keyword_top1_same']:.2f} | {r['hybrid_overlap@10']:.3f} |"
            )
    lines += [
        "",
        "In-memory search of a batch of queries (what `ragsweep.retrieval.search` asks for), the "
        "memory store against the implementation before the store seam "
        "(`question_vectors @ chunk_vectors.T` and an argpartition top-k), fastest of 50 "
        "each, the two alternated:",
        "",
        "| chunks | queries | depth | memory store ms | before ms | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["memory"]:
        lines.append(
            f"| {r['chunks']} | {r['queries']} | {r['depth']} | {r['store_ms']:.2f} | "
            f"{r['previous_ms']:.2f} | {r['store_ms'] / r['previous_ms']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="memory,milvus,pgvector", help="stores to measure")
    parser.add_argument("--chunk-sizes", default=",".join(map(str, CHUNK_SIZES)))
    parser.add_argument("--testset", type=Path, default=CLICK_TESTSET, help="Click questions")
    parser.add_argument("--no-readme", action="store_true", help="print; leave the README")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    DATA.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.chunk_sizes.split(",")]
    results = benchmark(args.stores.split(","), sizes, args.testset)
    (DATA / "stores.json").write_text(json.dumps(results, indent=2))
    text = report(results)
    print(text)
    if not args.no_readme:
        write_section("stores", text)


if __name__ == "__main__":
    main()
