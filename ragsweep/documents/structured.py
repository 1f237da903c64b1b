"""Chunkers that follow a document's structure: ``headings`` (sections) and ``semantic``
(where the topic changes).

``headings``: a section (a heading and the text up to the next heading) is a boundary no
chunk crosses; a section longer than the chunk size is split by sentences, sized in tokens
(llama-index's ``SentenceSplitter``, with the chunk overlap); a heading with no text of its
own goes with the section that follows it. Headings are Markdown's (``# Title``, and a line
underlined with ``===`` or ``---``), and reStructuredText's (a line underlined, and maybe
overlined, with a repeated punctuation character). An HTML document's extracted text keeps
no heading markup, so it is split as a text with no headings (by sentences).

The heading path is *not* prepended to the embedded text: a chunk stays a slice of its
document (``text == document[start:end]``), so gold spans, span metrics and the embedding
cache hold as for any chunker. A chunk's heading path is the headings that enclose its
start (``heading_path``), which no chunk crosses.

``semantic``: the text's sentences are embedded by the configuration's own embedding model
(through the embedding cache, so a sentence is embedded once per model and store); a chunk
ends where consecutive sentences' cosine distance is above the document's
``BREAKPOINT_PERCENTILE``-th percentile (llama-index's ``SemanticSplitterNodeParser`` rule,
without its window of neighbouring sentences, which moved the break a sentence late); a
piece longer than the chunk size is split by sentences as above.

Standalone (no ragsweep import): this file is also the chunkers' pattern code, copied beside
a pattern's scripts as ``chunker.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

BREAKPOINT_PERCENTILE = 95  # llama-index's SemanticSplitterNodeParser default
ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
UNDERLINE = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}[ \t]*$")  # 3+ of one punctuation mark
FENCE = re.compile(r"^ {0,3}(```|~~~)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n\s*\n")


def headings(chunk_size: int, chunk_overlap: int, tokenize: Callable[[str], Sequence[int]]):
    """The split function of the heading-aware chunker: a text's chunks, each a slice of it,
    in order, none crossing a section boundary."""
    split_long = _sentences(chunk_size, chunk_overlap, tokenize)

    def split(text: str) -> list[str]:
        return [piece for start, end in sections(text) for piece in split_long(text[start:end])]

    return split


def semantic(
    chunk_size: int,
    chunk_overlap: int,
    tokenize: Callable[[str], Sequence[int]],
    embed: Callable[[list[str]], np.ndarray],
):
    """The split function of the semantic chunker: breaks where consecutive sentences'
    embeddings (``embed``: texts -> one vector per text) diverge most."""
    split_long = _sentences(chunk_size, chunk_overlap, tokenize)

    def split(text: str) -> list[str]:
        return [
            piece for start, end in topics(text, embed) for piece in split_long(text[start:end])
        ]

    return split


semantic.embeds = True  # ragsweep (and indexing.py) hand it the configuration's model
headings.PATTERN_CODE = semantic.PATTERN_CODE = __file__


def _sentences(chunk_size: int, chunk_overlap: int, tokenize) -> Callable[[str], list[str]]:
    """Split a piece longer than ``chunk_size`` tokens by sentences; keep a shorter one."""
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenize
    )

    def split(piece: str) -> list[str]:
        piece = piece.strip()
        if not piece:
            return []
        if len(tokenize(piece)) <= chunk_size:
            return [piece]
        return splitter.split_text(piece)

    return split


def find_headings(text: str) -> list[tuple[int, int, int, str]]:
    """Every heading of ``text``: (offset of its first line, offset after its last line,
    level, title), in order. Levels of underlined headings follow the order their styles
    first appear (reStructuredText's rule; Markdown's ``===`` before ``---`` gives 1 and 2),
    below the deepest ``#`` level used."""
    lines, offsets, at = text.split("\n"), [], 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    offsets.append(at)
    found, styles, fenced, skip = [], [], False, set()
    for i, line in enumerate(lines):
        if i in skip:  # an underline: ``~~~`` under a title opens no code block
            continue
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        match = ATX.match(line)
        if match:
            found.append((offsets[i], offsets[i + 1], len(match.group(1)), match.group(2)))
            continue
        title = line.strip()
        below = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
        if not title or UNDERLINE.match(line) or not UNDERLINE.match(below):
            continue
        if len(below.strip()) < len(title) and below.strip()[0] not in "=-":
            continue  # reStructuredText underlines are as long as their title
        above = lines[i - 1].rstrip() if i > 0 else ""
        overlined = bool(UNDERLINE.match(above)) and above.strip() == below.strip()
        if above.strip() and not overlined:
            continue  # a line under text is a paragraph's, not a title's
        style = (below.strip()[0], overlined)
        if style not in styles:
            styles.append(style)
        first = i - 1 if overlined else i
        found.append((offsets[first], offsets[i + 2], style, title))
        skip.add(i + 1)
    deepest = max((level for *_, level, _ in found if isinstance(level, int)), default=0)
    return [
        (start, end, level if isinstance(level, int) else deepest + 1 + styles.index(level), title)
        for start, end, level, title in found
    ]


def sections(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each section of ``text``: from a heading to the next; the text
    before the first heading is one too. A heading followed at once by another goes with
    the section that follows."""
    found = find_headings(text)
    starts = [0, *(start for start, *_ in found), len(text)]
    bodies = [0, *(end for _, end, *_ in found)]  # where each section's own text begins
    bounds: list[tuple[int, int]] = []
    merge = False
    for start, end, body in zip(starts, starts[1:], bodies, strict=False):
        if merge:
            bounds[-1] = (bounds[-1][0], end)
        elif end > start:
            bounds.append((start, end))
        merge = start < body and not text[body:end].strip()
    return bounds


def heading_path(text: str, offset: int) -> list[str]:
    """The titles of the sections enclosing ``offset`` of ``text``, outermost first."""
    path: list[tuple[int, str]] = []
    for start, _, level, title in find_headings(text):
        if start > offset:
            break
        path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
    return [title for _, title in path]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``: ends at ``.!?`` and white space, or a
    blank line; white space between sentences belongs to none."""
    spans, start = [], 0
    for match in SENTENCE_END.finditer(text):
        if text[start : match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def topics(text: str, embed: Callable[[list[str]], np.ndarray]) -> list[tuple[int, int]]:
    """(start, end) of each run of sentences of ``text`` between semantic breakpoints."""
    spans = sentence_spans(text)
    if len(spans) < 3:
        return [(0, len(text))]
    vectors = np.asarray(embed([text[s:e] for s, e in spans]), dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    distances = 1 - np.sum(vectors[:-1] * vectors[1:], axis=1)
    threshold = np.percentile(distances, BREAKPOINT_PERCENTILE)
    cuts = [spans[i + 1][0] for i, d in enumerate(distances) if d > threshold]
    starts = [0, *cuts]
    return list(zip(starts, [*cuts, len(text)], strict=True))
