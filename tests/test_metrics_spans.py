"""Span metrics: how much of the gold spans the retrieved chunks cover, and how much of what
was retrieved is gold; on the example documents, small chunks are precise, large ones cover."""

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ragsweep.core.schemas import METRICS
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.evaluation.leaderboard import check_metric
from ragsweep.evaluation.metrics import Answered, merged, span_precision, span_recall
from ragsweep.sweep.space import LEADERBOARD, SearchSpace
from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def item(gold, retrieved, **kw) -> Answered:
    return Answered(
        reference_answers=["x"],
        reference_doc_ids=sorted({d for d, _, _ in gold}) or ["a.md"],
        retrieved_doc_ids=[d for d, _, _ in retrieved],
        context="",
        answer="x",
        gold_spans=gold,
        retrieved_spans=retrieved,
        **kw,
    )


def test_merged_joins_overlapping_and_touching_intervals_per_document():
    spans = [("a", 10, 20), ("b", 0, 5), ("a", 15, 30), ("a", 30, 35), ("a", 50, 60), ("a", 5, 5)]
    assert merged(spans) == {"a": [(10, 35), (50, 60)], "b": [(0, 5)]}


def test_span_recall_and_precision_count_characters():
    gold = [("a.md", 100, 200)]
    # a chunk holding the first half of the gold span and 50 characters before it
    half = item(gold, [("a.md", 50, 150)])
    assert span_recall(half) == pytest.approx(0.5)
    assert span_precision(half) == pytest.approx(0.5)
    whole = item(gold, [("a.md", 0, 400)])
    assert span_recall(whole) == 1.0 and span_precision(whole) == pytest.approx(0.25)
    elsewhere = item(gold, [("b.md", 100, 200)])  # same offsets, another document
    assert span_recall(elsewhere) == 0.0 and span_precision(elsewhere) == 0.0


def test_overlapping_chunks_count_their_shared_characters_once():
    gold = [("a.md", 0, 100), ("a.md", 50, 150)]  # two gold spans that overlap: 150 chars
    overlapping = item(gold, [("a.md", 0, 80), ("a.md", 60, 120), ("a.md", 300, 330)])
    # retrieved: [0, 120) and [300, 330) = 150 distinct characters, 120 of them gold
    assert span_recall(overlapping) == pytest.approx(120 / 150)
    assert span_precision(overlapping) == pytest.approx(120 / 150)


def test_gold_spans_in_several_documents_each_count():
    gold = [("a.md", 0, 100), ("b.md", 0, 300)]
    found_a = item(gold, [("a.md", 0, 100)])
    assert span_recall(found_a) == pytest.approx(100 / 400)
    assert span_precision(found_a) == 1.0


def test_span_metrics_are_null_without_gold_spans_or_out_of_scope():
    assert span_recall(item([], [("a.md", 0, 10)])) is None
    assert span_precision(item([], [("a.md", 0, 10)])) is None
    oos = item([("a.md", 0, 10)], [("a.md", 0, 10)], question_type="out of scope")
    assert span_recall(oos) is None and span_precision(oos) is None


@pytest.fixture(scope="module")
def example_scores(embedding_cache: Path) -> pa.Table:
    """Chunks of 64 and of 192 tokens of the example docs, Top 1 by similarity, scored (the
    vectors through the session's embedding cache)."""
    documents = read_documents(str(EXAMPLES / "docs")).table
    testset = resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), documents)
    space = SearchSpace(
        chunk_sizes=(64, 192), chunk_overlaps=(0,), top_ks=(1,), search_types=("similarity",)
    )
    cache = EmbeddingCache(embedding_cache)
    retrievals = pa.concat_tables(
        retrieve(build_chunks(documents, c, cache), testset, space, c, cache)
        for c in space.chunk_configs()
    )
    _, scores = evaluate(retrievals, testset, space.all_configs(), "span_recall")
    size = {c["config_id"]: c["chunk_size"] for c in space.all_configs()}
    sizes = pa.array([size[c] for c in scores["config_id"].to_pylist()])
    return scores.append_column("chunk_size", sizes)


def test_on_the_example_docs_small_chunks_are_precise_and_large_ones_cover_more(example_scores):
    def mean(metric, chunk_size):
        rows = example_scores.filter(pc.equal(example_scores["chunk_size"], chunk_size))
        assert rows[metric].null_count == 0  # every example question has a gold span
        return pc.mean(rows[metric]).as_py()

    assert mean("span_precision", 64) > 2 * mean("span_precision", 192)
    assert mean("span_recall", 192) > mean("span_recall", 64)


def test_span_metrics_are_leaderboard_metrics_with_intervals_and_ranking_choices():
    for name in ("span_recall", "span_precision"):
        assert name in METRICS
        assert {name, f"{name}_low", f"{name}_high"} <= set(LEADERBOARD.names)
        check_metric(name)  # a --metric choice: raises for an unknown name
