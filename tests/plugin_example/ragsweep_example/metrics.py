"""A metric: the answer's length in words, lower is better (a cost, ranked as one)."""

from __future__ import annotations

from ragsweep.evaluation.metrics import Answered, Metric


def answer_words(item: Answered) -> float:
    return float(len(item.answer.split()))


ANSWER_WORDS = Metric("answer", answer_words, higher_is_better=False, low=0.0, high=None)
