"""Split documents into chunks with llama-index's node parsers, sized in model tokens.

Every chunk keeps its character span in its document, so ``text == document[start:end]``
and span-based metrics hold for any chunk size (should a splitter ever normalise white
space, the span still points at the document's own text).

Chunkers are plugins: a factory ``(chunk_size, chunk_overlap, tokenize) -> split``, where
``split(text)`` returns the text's chunks in order, each a piece of the text; registered under
its name in the entry point group ``ragsweep.chunkers`` (``sentence`` and ``token`` here,
``headings`` and ``semantic`` in ``ragsweep.documents.structured``, in ragsweep's setup.cfg).
A factory with a true ``embeds`` attribute also takes ``embed`` (texts -> one vector per text:
the configuration's embedding model).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ragsweep.core import plugins
from ragsweep.core.text import locate

Tokenize = Callable[[str], Sequence[int]]  # only the number of ids is used
WORD = re.compile(r"\S*\w\S*")  # a run without white space holding a letter or digit: 1+ tokens
Splitter = Callable[[str], list[str]]


# llama-index is imported when a document is split, not with this module: the steps that
# only read chunks (plan, evaluate, rank) start without it
def sentence(size: int, overlap: int, tokenize: Tokenize) -> Splitter:
    from llama_index.core.node_parser import SentenceSplitter

    return SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=tokenize).split_text


def token(size: int, overlap: int, tokenize: Tokenize) -> Splitter:
    from llama_index.core.node_parser import TokenTextSplitter

    return TokenTextSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=tokenize).split_text


Chunker = Callable[..., Splitter]
Embed = Callable[[list[str]], Any]


def chunker_names() -> list[str]:
    """The registered chunkers, sorted."""
    return plugins.names(plugins.CHUNKERS)


def get_chunker(name: str) -> Chunker:
    """The chunker registered as ``name``."""
    return plugins.load(plugins.CHUNKERS, name)


def chunk_documents(
    documents: pa.Table,
    chunker: str,
    chunk_size: int,
    chunk_overlap: int,
    tokenize: Tokenize,
    embed: Embed | None = None,
) -> pa.Table:
    """One row per chunk: chunk_id, doc_id, start, end, text (no embeddings yet); ``embed``
    serves a chunker that embeds (``semantic``)."""
    factory = get_chunker(chunker)
    options = {}
    if getattr(factory, "embeds", False):
        if embed is None:
            raise ValueError(f"chunker {chunker} embeds sentences: give it an embedding model")
        options["embed"] = embed
    split = factory(chunk_size, chunk_overlap, bounded(tokenize, chunk_size), **options)
    rows: dict[str, list] = {"doc_id": [], "start": [], "end": [], "text": []}
    for doc_id, text in zip(
        documents.column("doc_id").to_pylist(), documents.column("text").to_pylist(), strict=True
    ):
        cursor = 0
        for piece in split(text):
            span = locate(text, piece, after=cursor) or locate(text, piece)
            if span is None:
                raise ValueError(f"{doc_id}: chunk not found in its document: {piece[:60]!r}")
            start, end = span
            rows["doc_id"].append(doc_id)
            rows["start"].append(start)
            rows["end"].append(end)
            rows["text"].append(text[start:end])
            cursor = start + 1
    rows["chunk_id"] = list(range(len(rows["text"])))
    return pa.table(rows)


def bounded(tokenize: Tokenize, chunk_size: int) -> Tokenize:
    """``tokenize``, except for a text with more words than ``chunk_size``: it has more
    tokens than that (each word is one token or more), which is all a splitter asks of a
    text it must split further, so it is not tokenized. The splitters tokenize a document,
    then each piece of it, recursively: on long documents most of the time went there.
    """

    def count(text: str) -> Sequence[int]:
        if len(text) > chunk_size:
            for words, _ in enumerate(WORD.finditer(text), start=1):
                if words > chunk_size:
                    return range(words)  # a stand-in: longer than a chunk
        return tokenize(text)

    return count
