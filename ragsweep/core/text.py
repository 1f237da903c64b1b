"""Text helpers shared by the answerers, BM25, the lexical metrics and the chunkers: one
tokenizer for text in any language, sentence splitting, locating a passage (or a chunk) in a
document, and the chunkers' bounded token count.

``words`` is the one tokenizer. It reads Unicode letters, marks and digits in any script,
case-folds (``str.casefold``: "Straße" and "STRASSE" match), folds compatibility forms
(NFKC: full-width "３０" is "30") and drops the accents of Latin, Greek and Cyrillic
letters ("uber" matches "über", "resume" matches "résumé"). Chinese, Japanese and Korean
text, written without spaces between words, becomes overlapping character pairs (bigrams:
"文件大小" gives 文件, 件大, 大小; a lone character stays one token), so no segmenter or
dictionary is needed; other scripts written without spaces (Thai, Lao, Khmer, Burmese) are
not segmented. English stop words are dropped; other languages keep every word,
since no maintained stop-word list ships with ragsweep's dependencies.

Standalone (the standard library and ``regex``): this file is also copied beside a
pattern's scripts as ``text.py``, so a pattern chunks and tokenizes as the sweep did.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate

import regex

STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its my of on or "
    "that the their there this to was what when where which who why will with you your".split()
)

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc"  # ー: the katakana long vowel
_LETTER = rf"[[\p{{L}}\p{{M}}\p{{N}}]--[{_CJK}]]"
_WORD = regex.compile(rf"(?P<cjk>[{_CJK}]+)|{_LETTER}+(?:[._\-]{_LETTER}+)*", regex.VERSION1)
_ASCII_WORD = re.compile(r"[a-z0-9]+(?:[._\-][a-z0-9]+)*")  # the same, on ASCII text: faster
_ACCENTED = regex.compile(r"([\p{Latin}\p{Greek}\p{Cyrillic}])\p{Mn}+")
_CHUNK_WORD = re.compile(r"\S*\w\S*")  # a run without white space holding a letter or digit
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n\s*\n|\n(?=\s*[-*#|\d])")


def fold(text: str) -> str:
    """``text`` case-folded, in compatibility form, without Latin, Greek or Cyrillic accents."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return unicodedata.normalize("NFC", _ACCENTED.sub(r"\1", decomposed))


def words(text: str) -> list[str]:
    """The content tokens of ``text`` in any language, in order (see the module docstring):
    folded words, keeping ``v2.1``, ``max-age``, ``a_b``; CJK runs as character bigrams."""
    if text.isascii():
        return [w for w in _ASCII_WORD.findall(text.lower()) if w not in STOPWORDS]
    tokens: list[str] = []
    for match in _WORD.finditer(fold(text)):
        run = match.group()
        if match.group("cjk") is None:
            if run not in STOPWORDS:
                tokens.append(run)
        elif len(run) == 1:
            tokens.append(run)
        else:
            tokens += [run[i : i + 2] for i in range(len(run) - 1)]
    return tokens


def sentences(text: str) -> list[str]:
    """Sentences and list items, stripped, empty ones dropped; a sentence ends at ``.!?``
    followed by white space, or at a CJK full stop ``。！？``."""
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
    return Spaced(text, after).find(passage, unique)


class Spaced:
    """``text`` from ``after`` on with its white space collapsed, and the way back to the
    text's own offsets: built once, it finds any number of passages up to white space."""

    def __init__(self, text: str, after: int = 0) -> None:
        self.words = list(re.compile(r"\S+").finditer(text, after))
        self.flat = " ".join(w.group() for w in self.words)
        self.starts = list(accumulate((len(w.group()) + 1 for w in self.words), initial=0))

    def find(self, passage: str, unique: bool = False) -> tuple[int, int] | None:
        """(start, end) in the text of ``passage`` up to white space (None: not there, or
        with ``unique`` there more than once)."""
        target = " ".join(passage.split())
        start = self.flat.find(target) if target else -1
        if start < 0 or (unique and self.flat.find(target, start + 1) >= 0):
            return None
        return self._original(start), self._original(start + len(target) - 1) + 1

    def _original(self, position: int) -> int:
        k = bisect_right(self.starts, position) - 1
        return self.words[k].start() + position - self.starts[k]


def placed(text: str, pieces: Iterable[str]) -> Iterator[tuple[int, int]]:
    """(start, end) in ``text`` of each of a splitter's ``pieces``, in order: each found
    after the one before it if it can be (pieces may overlap), else anywhere; a ValueError
    for a piece that is not in the text."""
    cursor = 0
    for piece in pieces:
        span = locate(text, piece, after=cursor) or locate(text, piece)
        if span is None:
            raise ValueError(f"chunk not found in its document: {piece[:60]!r}")
        yield span
        cursor = span[0] + 1


Tokenize = Callable[[str], Sequence[int]]  # only the number of ids is used


def bounded(tokenize: Tokenize, chunk_size: int) -> Tokenize:
    """``tokenize``, except for a text with more words than ``chunk_size``: it has more
    tokens than that (each word is one token or more), which is all a splitter asks of a
    text it must split further, so it is not tokenized. The splitters tokenize a document,
    then each piece of it, recursively: on long documents most of the time went there.
    """

    def count(text: str) -> Sequence[int]:
        if len(text) > chunk_size:
            for words, _ in enumerate(_CHUNK_WORD.finditer(text), start=1):
                if words > chunk_size:
                    return range(words)  # a stand-in: longer than a chunk
        return tokenize(text)

    return count
