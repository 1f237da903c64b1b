"""Where a document says what a passage says, when the passage does not quote it.

People write reference answers in their own words ("Items can be returned within 30 days"
for "You may return any item within thirty days of purchase"), so an answer that is not in
its document verbatim is located approximately: the best-matching run of one to a few
consecutive sentences, scored by the share of the passage's words it holds, each word
weighted by its rarity in the document (BM25's inverse document frequency over the
document's sentences). Words match loosely: case and accents folded (``core.text.words``),
English stop words dropped, number words read as digits ("thirty" is "30"), and common
endings trimmed before the first six letters are compared ("returned" and "return",
"configuration" and "configure"). No model is asked: locating runs before anything is
embedded, and loads nothing.

A passage is located when the best run holds at least ``THRESHOLD`` of its weight, and no
other run of the document(s) scores as well (then where it lies is unknown, as for a
verbatim answer found twice). An ``Index`` is built once per document: its sentences, the
sentences each word is in, and their weights; a passage is then scored against every run
at once (numpy), in time linear in the document's sentences.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ragsweep.core.text import placed, sentences, words

THRESHOLD = 0.4  # share of the passage's weight the best run must hold (benchmarks/bench_locate.py)
EXTRA_SENTENCE = 0.05  # what one more sentence in a run costs: the shortest run that says it wins
_MIN_WORDS = 2  # fewer distinct words than this locate nothing: too little to tell places apart

_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen".split()
_UNITS += "fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_NUMBERS = {w: n for n, w in enumerate(_UNITS)} | {w: 20 + 10 * n for n, w in enumerate(_TENS)}
_NUMBERS |= {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_ENDINGS = ("ing", "ed", "es", "e", "s", "ly")
_PARTS = re.compile(r"[._\-]")


def _key(word: str) -> str:
    if word.isdigit():
        return word
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 2:
            word = word[: -len(ending)]
            break
    return word[:6]


def keys(text: str) -> list[str]:
    """The loose forms of ``text``'s words, in order: ``v2.1`` and ``max-age`` split into
    their parts, number words as digits ("twenty-five" is "25"), endings trimmed."""
    out = []
    for word in words(text):
        parts = _PARTS.split(word)
        numbers = [_NUMBERS.get(p) for p in parts]
        if (
            len(parts) == 2
            and numbers[0] in range(20, 100, 10)
            and (numbers[1] or 0) in range(1, 10)
        ):
            out.append(str(numbers[0] + numbers[1]))
            continue
        out += [
            str(n) if n is not None else _key(p) for p, n in zip(parts, numbers, strict=True) if p
        ]
    return out


@dataclass(frozen=True)
class Found:
    """A run of sentences ``text[start:end]`` and its score (the share of the passage held)."""

    start: int
    end: int
    score: float


class Index:
    """One document's sentences (their character spans), which sentences each word is in,
    and each word's weight: built once, then any number of passages are scored against it."""

    def __init__(self, text: str) -> None:
        pieces = sentences(text)
        self.spans = np.array(list(placed(text, pieces)) or np.empty((0, 2)), dtype=np.int64)
        postings: dict[str, list[int]] = {}
        for number, piece in enumerate(pieces):
            for key in set(keys(piece)):
                postings.setdefault(key, []).append(number)
        self.postings = {k: np.array(v, dtype=np.int64) for k, v in postings.items()}
        self.size = len(pieces)

    def weight(self, key: str) -> float:
        """BM25's inverse document frequency of ``key`` over the sentences (highest when
        the document never says it, so a passage's words the document lacks count against it)."""
        found = len(self.postings.get(key, ()))
        return math.log(1 + (self.size - found + 0.5) / (found + 0.5))

    def candidates(self, passage_keys: list[str], longest: int) -> list[tuple[float, int, int]]:
        """(score, first sentence, sentences) of the best run of each length up to
        ``longest``, and of the runs that tie with it: the share of the passage's weight the
        run holds, less ``EXTRA_SENTENCE`` for each sentence after the first."""
        distinct = sorted(set(passage_keys))
        if len(distinct) < _MIN_WORDS or not self.size:
            return []
        weights = np.array([self.weight(k) for k in distinct])
        present = np.zeros((len(distinct), self.size + 1), dtype=np.int32)
        for row, key in enumerate(distinct):
            if key in self.postings:
                present[row, self.postings[key] + 1] = 1
        counts = np.cumsum(present, axis=1)  # counts[:, j]: sentences before j holding the key
        out = []
        for length in range(1, min(longest, self.size) + 1):
            held = (counts[:, length:] - counts[:, :-length]) > 0  # keys x runs of this length
            scores = weights @ held / weights.sum() - EXTRA_SENTENCE * (length - 1)
            best = scores.max()
            out += [(float(best), int(i), length) for i in np.flatnonzero(scores >= best - 1e-9)]
        return out


def best(indexes: Iterable[tuple[str, Index]], passage: str) -> tuple[str, Found] | None:
    """Where in the documents (``(doc_id, its Index)``) ``passage`` is said: the best run of
    sentences holding at least ``THRESHOLD`` of it, unless another run, not overlapping it,
    scores as well; None otherwise."""
    passage_keys = keys(passage)
    longest = max(3, len(sentences(passage)) + 1)
    scored = [
        (score, doc_id, index, first, length)
        for doc_id, index in indexes
        for score, first, length in index.candidates(passage_keys, longest)
    ]
    if not scored:
        return None
    top = max(s[0] for s in scored)
    if top < THRESHOLD - 1e-9:
        return None
    tied = [s for s in scored if s[0] >= top - 1e-9]
    _, doc_id, index, first, length = min(tied, key=lambda s: s[4])  # the shortest run
    for _, other_id, _, other_first, other_length in tied:
        apart = other_first >= first + length or other_first + other_length <= first
        if other_id != doc_id or apart:
            return None  # said as well in another place: where is unknown
    start, end = int(index.spans[first, 0]), int(index.spans[first + length - 1, 1])
    return doc_id, Found(start, end, round(top + EXTRA_SENTENCE * (length - 1), 3))
