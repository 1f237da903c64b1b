"""Word-level text helpers shared by the answerer and the metrics."""

from __future__ import annotations

import re

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
