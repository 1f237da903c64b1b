"""Metrics that need no LLM, each a function of one answered question.

Registered by name in ``METRICS``: retrieval metrics (``RETRIEVAL_METRICS``) read only what
was retrieved, answer metrics (``ANSWER_METRICS``) need an answer. Every score is in [0, 1],
higher is better, or None where it does not apply: retrieval metrics are None for a
question with no reference document (span metrics: with no gold span) and for an
out-of-scope question, whose seed document is no reference. An out-of-scope question's
``answer_correctness`` is whether the answer refuses (``refuses``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from ragsweep.refusal import refuses
from ragsweep.text import words

OUT_OF_SCOPE = "out of scope"  # Giskard's question_type for a question the documents cannot answer

Span = tuple[str, int, int]  # (doc_id, start, end): characters [start, end) of a document


def is_out_of_scope(question_type: str | None) -> bool:
    """Whether ``question_type`` is Giskard's "out of scope" (any case, ``_`` or ``-``)."""
    kind = (question_type or "").strip().lower().replace("_", " ").replace("-", " ")
    return " ".join(kind.split()) == OUT_OF_SCOPE


@dataclass(frozen=True)
class Answered:
    """What the metrics see of one question answered by one configuration."""

    reference_answers: list[str]
    reference_doc_ids: list[str]
    retrieved_doc_ids: list[str]  # one per retrieved chunk, best first
    context: str
    answer: str
    gold_spans: list[Span] = field(default_factory=list)
    retrieved_spans: list[Span] = field(default_factory=list)  # one per retrieved chunk
    question_type: str | None = None

    @property
    def out_of_scope(self) -> bool:
        return is_out_of_scope(self.question_type)


def context_correctness(item: Answered) -> float | None:
    """Reciprocal rank of the first retrieved chunk from a reference document (0 if none)."""
    if item.out_of_scope or not item.reference_doc_ids:
        return None
    wanted = set(item.reference_doc_ids)
    for rank, doc_id in enumerate(item.retrieved_doc_ids, start=1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def document_recall(item: Answered) -> float | None:
    """Share of the reference documents among the retrieved chunks' documents."""
    if item.out_of_scope or not item.reference_doc_ids:
        return None
    wanted = set(item.reference_doc_ids)
    return len(wanted & set(item.retrieved_doc_ids)) / len(wanted)


def merged(spans: Iterable[Span]) -> dict[str, list[tuple[int, int]]]:
    """Each document's character intervals, sorted, with overlapping or touching ones merged."""
    by_doc: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for doc_id, start, end in sorted(spans):
        if end <= start:
            continue
        runs = by_doc[doc_id]
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((start, end))
    return dict(by_doc)


def _length(intervals: dict[str, list[tuple[int, int]]]) -> int:
    return sum(end - start for runs in intervals.values() for start, end in runs)


def _overlap(a: dict[str, list[tuple[int, int]]], b: dict[str, list[tuple[int, int]]]) -> int:
    """Characters in both merged interval sets: one linear sweep per shared document."""
    total = 0
    for doc_id in a.keys() & b.keys():
        x, y, i, j = a[doc_id], b[doc_id], 0, 0
        while i < len(x) and j < len(y):
            total += max(0, min(x[i][1], y[j][1]) - max(x[i][0], y[j][0]))
            if x[i][1] < y[j][1]:
                i += 1
            else:
                j += 1
    return total


def _span_shares(item: Answered) -> tuple[float, float] | None:
    """(recall, precision) of the retrieved characters against the gold spans."""
    if item.out_of_scope or not item.gold_spans:
        return None
    gold, retrieved = merged(item.gold_spans), merged(item.retrieved_spans)
    gold_chars, retrieved_chars = _length(gold), _length(retrieved)
    if not gold_chars:
        return None
    shared = _overlap(gold, retrieved)
    return shared / gold_chars, shared / retrieved_chars if retrieved_chars else 0.0


def span_recall(item: Answered) -> float | None:
    """Share of the gold spans' characters that lie in a retrieved chunk."""
    shares = _span_shares(item)
    return None if shares is None else shares[0]


def span_precision(item: Answered) -> float | None:
    """Share of the retrieved characters (each counted once where chunks overlap) that lie
    inside a gold span."""
    shares = _span_shares(item)
    return None if shares is None else shares[1]


@lru_cache(maxsize=4096)
def _bag(text: str) -> Counter:
    """``text``'s tokens with their counts; configurations that share a context or an
    answer tokenize it once. Read only."""
    return Counter(words(text))


def token_recall(reference: str, candidate: str) -> float:
    """Share of the reference's content tokens (with multiplicity) found in the candidate."""
    ref = _bag(reference)
    if not ref:
        return 0.0
    return sum((ref & _bag(candidate)).values()) / sum(ref.values())


def answer_correctness(item: Answered) -> float:
    """Token recall of the answer against the best-matching reference answer; for an
    out-of-scope question, 1 when the answer refuses and 0 otherwise."""
    if item.out_of_scope:
        return float(refuses(item.answer))
    return max((token_recall(ref, item.answer) for ref in item.reference_answers), default=0.0)


def faithfulness(item: Answered) -> float:
    """Token precision of the answer against the retrieved context: how much of what it
    says comes from what was retrieved."""
    return token_recall(item.answer, item.context) if _bag(item.answer) else 0.0


Metric = Callable[[Answered], "float | None"]
RETRIEVAL_METRICS: dict[str, Metric] = {
    "context_correctness": context_correctness,
    "document_recall": document_recall,
    "span_recall": span_recall,
    "span_precision": span_precision,
}
ANSWER_METRICS: dict[str, Metric] = {
    "answer_correctness": answer_correctness,
    "faithfulness": faithfulness,
}
METRICS: dict[str, Metric] = {**RETRIEVAL_METRICS, **ANSWER_METRICS}
