"""Answerers: turn questions and their retrieved passages into answers, a batch at a time
(a model-backed answerer keeps many requests in flight).

``extractive`` is the offline default: no model, it returns the retrieved sentences that
share the most informative words with the question.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from ragsweep.text import sentences, words

Question = tuple[str, list[str]]  # a question and its retrieved passages, best first
Answerer = Callable[[list[Question]], list[str]]  # answers a batch, in order


def extractive(question: str, passages: list[str], max_sentences: int = 2) -> str:
    """The ``max_sentences`` sentences of the passages that best match the question.

    A sentence scores the summed rarity (IDF over the retrieved sentences) of the question
    words it contains; the picked sentences keep their retrieval order.
    """
    candidates = [s for passage in passages for s in sentences(passage)]
    if not candidates:
        return ""
    bags = [set(words(s)) for s in candidates]
    frequency = Counter(w for bag in bags for w in bag)
    asked = set(words(question))
    idf = {w: math.log(1 + len(bags) / frequency[w]) for w in asked if frequency[w]}
    scores = [sum(idf.get(w, 0.0) for w in bag) for bag in bags]
    best = sorted(range(len(candidates)), key=lambda i: -scores[i])[:max_sentences]
    chosen = sorted(i for i in best if scores[i] > 0) or [0]
    return " ".join(candidates[i] for i in chosen)


ANSWERERS: dict[str, Answerer] = {
    "extractive": lambda batch: [extractive(question, passages) for question, passages in batch],
}
