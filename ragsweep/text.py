"""Word-level text helpers shared by the answerer and the metrics."""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its my of on or "
    "that the their there this to was what when where which who why will with you your".split()
)

_WORD = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*[-*#|\d])")


def words(text: str) -> list[str]:
    """Lower-cased content words: letters and digits, keeping ``v2.1``, ``max-age``, ``a_b``."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def sentences(text: str) -> list[str]:
    """Sentences and list items, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def locate(text: str, passage: str, unique: bool = False, after: int = 0) -> tuple[int, int] | None:
    """(start, end) of ``passage`` in ``text`` at or after ``after``: verbatim, else ignoring
    differences in white space, so the span always points at the text's own characters.

    With ``unique``, a passage that occurs more than once is not located.
    """
    passage = passage.strip()
    if not passage:
        return None
    start = text.find(passage, after)
    if start >= 0:
        repeated = unique and text.find(passage, start + 1) >= 0
        return None if repeated else (start, start + len(passage))
    words = list(re.compile(r"\S+").finditer(text, after))
    flat, target = " ".join(w.group() for w in words), " ".join(passage.split())
    start = flat.find(target)
    if start < 0 or (unique and flat.find(target, start + 1) >= 0):
        return None
    flat_starts = list(accumulate((len(w.group()) + 1 for w in words), initial=0))

    def original(position: int) -> int:
        k = bisect_right(flat_starts, position) - 1
        return words[k].start() + position - flat_starts[k]

    return original(start), original(start + len(target) - 1) + 1
