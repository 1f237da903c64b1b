"""Every vector store against the exact reference (``memory``): the same contract.

A store joins the contract tests by adding its name to the ``store_name`` fixture's params,
skipping there when its server cannot run here (and setting up its connection).
"""

import numpy as np
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.retrieval.search import BM25, Index, rank_chunks
from ragsweep.retrieval.vector_stores import IndexSpec, open_store, store_class
from ragsweep.retrieval.vector_stores import memory as memory_store


def unit(rng, rows, dim=16):
    m = rng.normal(size=(rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def exact(queries, vectors, k):
    return np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :k]


def test_memory_search_is_exact_whatever_the_block_size(monkeypatch):
    rng = np.random.default_rng(0)
    vectors, queries = unit(rng, 500), unit(rng, 37)
    store = open_store("memory", "c")
    store.create(vectors, [""] * 500, IndexSpec())
    whole = store.search(queries, 10)
    monkeypatch.setattr(memory_store, "BLOCK_BYTES", 4 * 500 * 3)  # 3 questions per block
    blocked = store.search(queries, 10)
    assert (whole.ids == exact(queries, vectors, 10)).all()
    assert (blocked.ids == whole.ids).all()
    assert np.allclose(blocked.scores, np.take_along_axis(queries @ vectors.T, whole.ids, 1))


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean"])
def test_every_distance_ranks_unit_vectors_alike(distance):
    rng = np.random.default_rng(1)
    vectors, queries = unit(rng, 200), unit(rng, 9)
    store = open_store("memory", "c", distance)
    store.create(vectors, [""] * 200, IndexSpec())
    assert (store.search(queries, 5).ids == exact(queries, vectors, 5)).all()


def test_bm25_top_by_blocks_is_the_dense_ranking_of_positive_scores(monkeypatch):
    rng = np.random.default_rng(2)
    vocabulary = [f"word{i}" for i in range(60)]
    texts = [" ".join(rng.choice(vocabulary, size=12)) for _ in range(300)]
    queries = [" ".join(rng.choice(vocabulary, size=3)) for _ in range(25)]
    bm25 = BM25(texts)
    dense = bm25.scores(queries).toarray()
    monkeypatch.setattr(memory_store, "BLOCK_BYTES", 4 * 300 * 4)
    monkeypatch.setattr("ragsweep.retrieval.search.BLOCK_BYTES", 4 * 300 * 4)
    hits = bm25.top(queries, 8)
    for q in range(len(queries)):
        ids = hits.ids[q][hits.ids[q] >= 0]
        assert np.allclose(dense[q, ids], np.sort(dense[q][dense[q] > 0])[::-1][: len(ids)])
        assert len(ids) == min(8, int((dense[q] > 0).sum()))


def test_hybrid_over_candidate_pools_is_full_fusion_when_the_pools_hold_every_chunk():
    rng = np.random.default_rng(3)
    vocabulary = [f"w{i}" for i in range(40)]
    texts = [" ".join(rng.choice(vocabulary, size=8)) for _ in range(80)]
    questions = [" ".join(rng.choice(vocabulary, size=3)) for _ in range(10)]
    vectors, queries = unit(rng, 80), unit(rng, 10)
    store = open_store("memory", "c")
    store.create(vectors, texts, IndexSpec())
    index = Index(store, queries, vectors, questions, texts)
    # full reciprocal rank fusion over every chunk (the definition before the store seam)
    keyword = BM25(texts).scores(questions).toarray()

    def ranks(scores):
        order = np.argsort(-scores, axis=1, kind="stable")
        out = np.empty_like(order)
        np.put_along_axis(out, order, np.arange(1, scores.shape[1] + 1)[None, :], axis=1)
        return out

    fused = 1 / (60 + ranks(queries @ vectors.T)) + np.where(
        keyword > 0, 1 / (60 + ranks(keyword)), 0
    )
    expected = np.argsort(-fused, axis=1, kind="stable")[:, :10]
    assert (rank_chunks(index, "hybrid", 10) == expected).all()


def test_an_unknown_store_or_distance_is_refused_with_the_choices():
    with pytest.raises(RagsweepError, match="unknown vector store 'faiss'.*memory"):
        store_class("faiss")
    with pytest.raises(RagsweepError, match="unknown distance 'manhattan'"):
        open_store("memory", "c", "manhattan")


@pytest.fixture(params=["memory", "milvus", "pgvector", "oracle"])
def store_name(request, tmp_path, monkeypatch):
    """Each store, its connection set up: Milvus Lite embedded in the test's folder, pgvector
    on a pgserver-started PostgreSQL, Oracle when RAGSWEEP_TEST_ORACLE_DSN names a server
    (else skipped)."""
    if request.param == "milvus":
        monkeypatch.delenv("RAGSWEEP_MILVUS_URI", raising=False)
        monkeypatch.setenv("RAGSWEEP_MILVUS_LITE_DIR", str(tmp_path))
    elif request.param == "pgvector":
        request.getfixturevalue("pgvector_url")
    elif request.param == "oracle":
        request.getfixturevalue("oracle_env")
    return request.param


def test_every_index_of_a_store_finds_what_exact_search_finds(store_name):
    rng = np.random.default_rng(4)
    vectors, queries = unit(rng, 1000, 32), unit(rng, 40, 32)
    truth = exact(queries, vectors, 10)
    for kind, params in store_class(store_name).INDEXES.items():
        store = open_store(store_name, f"contract_{kind}")
        store.create(vectors, [f"chunk {i}" for i in range(1000)], IndexSpec(kind, params))
        try:
            hits = store.search(queries, 10)
        finally:
            store.drop()
        assert hits.ids.shape == (40, 10) and hits.ids.dtype == np.int64
        assert ((hits.ids >= -1) & (hits.ids < 1000)).all()
        found = hits.scores[hits.ids >= 0]
        assert np.isfinite(found).all()
        assert (np.diff(hits.scores, axis=1) <= 1e-5).all(), "best first"
        recall = np.mean([len(set(h) & set(t)) / 10 for h, t in zip(hits.ids, truth, strict=True)])
        if kind == "exact":
            assert recall == 1.0, (store_name, kind)
        else:
            assert recall >= 0.8, (store_name, kind, recall)


def test_stores_without_full_text_search_share_one_bm25_ranking():
    from dataclasses import replace

    rng = np.random.default_rng(5)
    texts = [f"chunk about w{i % 7} and w{i % 5}" for i in range(40)]
    vectors = unit(rng, 40)
    first, second = open_store("memory", "a"), open_store("memory", "b")
    for store in (first, second):
        store.create(vectors, texts, IndexSpec())
    index = Index(first, unit(rng, 3), vectors, ["w3", "w4 w1", "w6"], texts)
    other = replace(index, store=second)  # as retrieve makes one per store and index
    assert other.keywords(20) is index.keywords(20)  # BM25 built and ranked once
    assert other.nearest(5) is not index.nearest(5)  # each store searched on its own
    assert (rank_chunks(other, "hybrid", 5) == rank_chunks(index, "hybrid", 5)).all()
