"""Answerers: turn questions and their retrieved passages into answers, a batch at a time
(a model-backed answerer keeps many requests in flight).

``extractive`` is the offline default: no model, it returns the retrieved sentences that
share the most informative words with the question (and the user's earlier turns of a
conversational question). It never refuses, so it scores 0 on out-of-scope questions.
``llm:<model>`` answers with a model at the configured OpenAI-compatible endpoint
(``ragsweep.answering.generation``), which sees a conversation's history as chat messages.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from ragsweep.answering.answers import Answer, Answerer, parts, with_history
from ragsweep.core.errors import RagsweepError
from ragsweep.core.text import sentences, words

if TYPE_CHECKING:
    from ragsweep.models.llm import LLMSettings


def extractive(question: str, passages: list[str], max_sentences: int = 2) -> str:
    """The ``max_sentences`` sentences of the passages that best match the question.

    A sentence scores the summed rarity (IDF over the retrieved sentences) of the question
    words it contains; the picked sentences keep their retrieval order.
    """
    read = [pair for passage in passages for pair in _sentence_words(passage)]
    if not read:
        return ""
    candidates, bags = [s for s, _ in read], [bag for _, bag in read]
    frequency = Counter(w for bag in bags for w in bag)
    asked = set(words(question))
    idf = {w: math.log(1 + len(bags) / frequency[w]) for w in asked if frequency[w]}
    # fsum: exact, so equal scores tie exactly whatever order a set's words come in
    scores = [math.fsum(idf.get(w, 0.0) for w in bag) for bag in bags]
    best = sorted(range(len(candidates)), key=lambda i: -scores[i])[:max_sentences]
    chosen = sorted(i for i in best if scores[i] > 0) or [0]
    return " ".join(candidates[i] for i in chosen)


@lru_cache(maxsize=16384)
def _sentence_words(passage: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """``passage``'s sentences, each with its words: a passage retrieved for many questions
    or by many configurations is read once."""
    return tuple((s, frozenset(words(s))) for s in sentences(passage))


ANSWERERS: dict[str, Answerer] = {
    "extractive": lambda batch: [
        Answer(extractive(with_history(q, history), passages))
        for q, passages, history in map(parts, batch)
    ],
}


def _llm(model: str, settings: LLMSettings) -> Answerer:
    from ragsweep.answering.generation import llm_answerer

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
