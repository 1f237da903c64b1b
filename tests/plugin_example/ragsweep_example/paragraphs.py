"""A chunker: whole paragraphs (text between blank lines), as many consecutive ones per chunk
as fit in ``chunk_size`` tokens; a longer paragraph is a chunk of its own. No overlap.

Standalone (no ragsweep import), so this file is also the chunker's pattern code.
"""

from __future__ import annotations

import re

PARAGRAPH = re.compile(r"\S(?:.*?\S)??(?=\n\s*\n|\s*\Z)", re.DOTALL)


def paragraphs(chunk_size: int, chunk_overlap: int, tokenize):
    """The split function: a text's chunks, each a slice of it, in order."""

    def split(text: str) -> list[str]:
        chunks, start, end, size = [], None, None, 0
        for match in PARAGRAPH.finditer(text):
            tokens = len(tokenize(match.group()))
            if start is not None and size + tokens > chunk_size:
                chunks.append(text[start:end])
                start, size = None, 0
            start = match.start() if start is None else start
            end, size = match.end(), size + tokens
        if start is not None:
            chunks.append(text[start:end])
        return chunks

    return split


paragraphs.PATTERN_CODE = __file__
