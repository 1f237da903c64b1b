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

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ragsweep.core import plugins
from ragsweep.core.text import Tokenize, bounded, placed

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
        try:
            spans = list(placed(text, split(text)))
        except ValueError as exc:
            raise ValueError(f"{doc_id}: {exc}") from None
        for start, end in spans:
            rows["doc_id"].append(doc_id)
            rows["start"].append(start)
            rows["end"].append(end)
            rows["text"].append(text[start:end])
    rows["chunk_id"] = list(range(len(rows["text"])))
    return pa.table(rows)
