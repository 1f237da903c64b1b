"""Answerers: turn questions and their retrieved passages into answers, a batch at a time
(a model-backed answerer keeps many requests in flight).

``extractive`` is the offline default: no model, it returns the retrieved sentences that
share the most informative words with the question. ``llm:<model>`` answers with a model
at the configured OpenAI-compatible endpoint (``ragsweep.generation``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragsweep.errors import RagsweepError
from ragsweep.text import sentences, words

if TYPE_CHECKING:
    from ragsweep.llm import LLMSettings


@dataclass(frozen=True)
class Answer:
    """An answer and what it cost; a model's request that failed after its retries leaves
    ``text`` empty and says why in ``error``."""

    text: str
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    llm_calls: int = 0
    cached: bool = False  # taken from the reply cache, no call made now
    error: str | None = None


Question = tuple[str, list[str]]  # a question and its retrieved passages, best first
Answerer = Callable[[list[Question]], list[Answer]]  # answers a batch, in order


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
    "extractive": lambda batch: [Answer(extractive(q, passages)) for q, passages in batch],
}


def _llm(model: str, settings: LLMSettings) -> Answerer:
    from ragsweep.generation import llm_answerer

    return llm_answerer(model, settings)


FAMILIES: dict[str, Callable[[str, LLMSettings], Answerer]] = {"llm": _llm}
"""Answerers named ``<family>:<argument>``, e.g. ``llm:granite-3.3-8b-instruct``."""


def uses_model(name: str) -> bool:
    """Whether answerer ``name`` calls a model (``<family>:<model>``); registered ones do not."""
    return name not in ANSWERERS


def check_answerer(name: str) -> None:
    """Raise ``RagsweepError`` unless ``name`` is a registered answerer or ``<family>:<arg>``."""
    family, _, argument = name.partition(":")
    if name in ANSWERERS or (family in FAMILIES and argument.strip()):
        return
    choices = sorted(ANSWERERS) + [f"{f}:<model>" for f in sorted(FAMILIES)]
    raise RagsweepError(f"unknown answerer {name!r}; choose from {choices}")


def get_answerer(name: str, settings: LLMSettings) -> Answerer:
    """The answerer called ``name``, built with ``settings`` when it uses a model."""
    check_answerer(name)
    if name in ANSWERERS:
        return ANSWERERS[name]
    family, _, argument = name.partition(":")
    return FAMILIES[family](argument, settings)
