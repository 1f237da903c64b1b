"""Metrics that need no LLM, each a function of one answered question.

Registered by name in ``METRICS``: retrieval metrics (``RETRIEVAL_METRICS``) read only what
was retrieved, answer metrics (``ANSWER_METRICS``) need an answer. Every score is in [0, 1],
higher is better.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ragsweep.text import words


@dataclass(frozen=True)
class Answered:
    """What the metrics see of one question answered by one configuration."""

    reference_answers: list[str]
    reference_doc_ids: list[str]
    retrieved_doc_ids: list[str]  # one per retrieved chunk, best first
    context: str
    answer: str


def context_correctness(item: Answered) -> float:
    """Reciprocal rank of the first retrieved chunk from a reference document (0 if none)."""
    wanted = set(item.reference_doc_ids)
    for rank, doc_id in enumerate(item.retrieved_doc_ids, start=1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def document_recall(item: Answered) -> float:
    """Share of the reference documents among the retrieved chunks' documents."""
    wanted = set(item.reference_doc_ids)
    if not wanted:
        return 0.0
    return len(wanted & set(item.retrieved_doc_ids)) / len(wanted)


def token_recall(reference: str, candidate: str) -> float:
    """Share of the reference's content words (with multiplicity) found in the candidate."""
    ref = Counter(words(reference))
    if not ref:
        return 0.0
    found = Counter(words(candidate))
    return sum((ref & found).values()) / sum(ref.values())


def answer_correctness(item: Answered) -> float:
    """Token recall of the answer against the best-matching reference answer."""
    return max((token_recall(ref, item.answer) for ref in item.reference_answers), default=0.0)


def faithfulness(item: Answered) -> float:
    """Token precision of the answer against the retrieved context: how much of what it
    says comes from what was retrieved."""
    return token_recall(item.answer, item.context) if words(item.answer) else 0.0


Metric = Callable[[Answered], float]
RETRIEVAL_METRICS: dict[str, Metric] = {
    "context_correctness": context_correctness,
    "document_recall": document_recall,
}
ANSWER_METRICS: dict[str, Metric] = {
    "answer_correctness": answer_correctness,
    "faithfulness": faithfulness,
}
METRICS: dict[str, Metric] = {**RETRIEVAL_METRICS, **ANSWER_METRICS}
