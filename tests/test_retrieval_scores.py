"""Each retrieved chunk's score, as its ranking scored it (the store's similarity, MMR's
marginal relevance, the reciprocal-rank fusion score, the reranker's), kept from the
retrieve step to the results database; results stored before it read no score."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from test_sweep import DOCS, QUESTIONS  # two documents, a question on each

from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.retrieval.reranking import Reranking
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

SPACE = SearchSpace(
    chunk_sizes=(16,),
    chunk_overlaps=(0,),
    top_ks=(3,),
    search_types=("similarity", "mmr", "hybrid"),
    mmr_lambdas=(0.5,),
)


@pytest.fixture(scope="module")
def retrieved():
    [chunk_config] = SPACE.chunk_configs()
    cache = EmbeddingCache()
    chunks = build_chunks(DOCS, chunk_config, cache)
    table = retrieve(chunks, QUESTIONS, SPACE, chunk_config, cache)
    vectors = np.stack(chunks["embedding"].to_numpy(zero_copy_only=False))
    questions = cache.embed(chunk_config["embedding_model"], QUESTIONS["question"].to_pylist())
    return table, questions @ vectors.T  # questions x chunks cosine (unit vectors)


def rows_of(table: pa.Table, search_type: str) -> list[dict]:
    [config] = [c for c in SPACE.all_configs() if c["search_type"] == search_type]
    return table.filter(pc.equal(table["config_id"], config["config_id"])).to_pylist()


def test_similarity_search_records_each_chunks_cosine_similarity_best_first(retrieved):
    table, cosine = retrieved
    for q, row in enumerate(rows_of(table, "similarity")):
        ids, scores = row["retrieved_chunk_ids"], row["retrieved_scores"]
        assert len(scores) == len(ids) == 3
        assert scores == pytest.approx([cosine[q, i] for i in ids], abs=1e-5)
        assert scores == sorted(scores, reverse=True)


def test_mmr_records_each_chunks_marginal_relevance_when_picked(retrieved):
    table, cosine = retrieved
    for q, row in enumerate(rows_of(table, "mmr")):
        ids, scores = row["retrieved_chunk_ids"], row["retrieved_scores"]
        assert len(scores) == len(ids)
        # the first pick has no redundancy yet: half its similarity (lambda 0.5)
        assert scores[0] == pytest.approx(0.5 * cosine[q, ids[0]], abs=1e-5)
        assert all(s < 0.5 * cosine[q, i] + 1e-6 for s, i in zip(scores, ids, strict=True))


def test_hybrid_records_the_reciprocal_rank_fusion_score(retrieved):
    table, _ = retrieved
    for row in rows_of(table, "hybrid"):
        scores = row["retrieved_scores"]
        assert len(scores) == len(row["retrieved_chunk_ids"])
        assert scores == sorted(scores, reverse=True)
        # in both rankings at best (1/61 + 1/61), in one at least (1/(60 + depth))
        assert all(1 / 160 <= s <= 2 / 61 + 1e-9 for s in scores)


class ByLength:
    """A reranker that scores a text by its length."""

    name, whole_lists = "by-length", False

    def score(self, items):
        return [(np.array([float(len(t)) for t in texts]), 1.0) for _, texts in items]


def test_a_reranked_ranking_carries_the_rerankers_scores():
    texts = ["short", "a longer text", "mid text"]
    hits, _ = Reranking(get=lambda name: ByLength()).rerank(
        "r", ["q?"], texts, np.array([[0, 1, 2, -1]])
    )
    assert hits.ids.tolist() == [[1, 2, 0, -1]]
    assert hits.scores.tolist()[0][:3] == [13.0, 8.0, 5.0]


def test_the_scores_travel_with_the_answers_to_the_results(retrieved):
    table, _ = retrieved
    answers, _ = evaluate(table, QUESTIONS, SPACE.all_configs(), "auto")
    by_key = {(r["config_id"], r["question_id"]): r["retrieved_scores"] for r in table.to_pylist()}
    for row in answers.to_pylist():
        assert row["retrieved_scores"] == by_key[row["config_id"], row["question_id"]]
