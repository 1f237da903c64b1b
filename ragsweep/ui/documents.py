"""The retrieved chunks of a result, with the gold spans inside them: the results database
holds each chunk's span (document, start, end); the text comes from the run's documents
(its ``docs`` setting, a folder or S3 prefix, and its ``more_docs``), when this machine can
still read them."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from ragsweep.documents.sources import EXTRACTORS, read_bytes

log = logging.getLogger("ragsweep")
S3_RECHECK_S = 60  # a document on S3 is read again at most this often


def document_text(docs: str, doc_id: str) -> str | None:
    """The extracted text of ``doc_id`` under ``docs``, as it is now; None when it cannot
    be read here (moved, no credentials, an id leaving the folder)."""
    parts = PurePosixPath(doc_id).parts
    suffix = PurePosixPath(doc_id).suffix.lower()
    if not docs or ".." in parts or doc_id.startswith("/") or suffix not in EXTRACTORS:
        return None
    if docs.startswith("s3://"):
        where = f"{docs.rstrip('/')}/{doc_id}"
        version: tuple = (int(time.time() // S3_RECHECK_S),)
    else:
        where = str(Path(docs, doc_id))
        try:
            info = os.stat(where)
        except OSError:
            return None
        version = (info.st_size, info.st_mtime_ns)
    return _text(where, suffix, version)


@lru_cache(maxsize=64)
def _text(where: str, suffix: str, version: tuple) -> str | None:
    """The text at ``where``, kept while its ``version`` (size and time, or the minute for
    S3) stays the same."""
    try:
        return EXTRACTORS[suffix](read_bytes(where))
    except Exception as exc:  # any reason the text is unavailable: the page says so
        log.info("ui: cannot read %s: %s", where, exc)
        return None


def _pieces(text: str, start: int, gold: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """``text`` (which starts at ``start`` in its document) cut into plain and gold pieces."""
    pieces, at = [], start
    for low, high in sorted(gold):
        low = max(low, at)
        if high <= low:
            continue
        pieces.append({"text": text[at - start : low - start], "gold": False})
        pieces.append({"text": text[low - start : high - start], "gold": True})
        at = high
    pieces.append({"text": text[at - start :], "gold": False})
    return [p for p in pieces if p["text"]]


def retrieved_chunks(result: dict, question: dict, docs: Sequence[str]) -> list[dict[str, Any]]:
    """Each retrieved chunk in rank order: document, span, the score its ranking gave it
    (None: results stored before scores were kept), whether it is a reference document,
    whether it overlaps a gold span, and its text in pieces (None: not readable); a document
    is looked for in each of the run's locations ``docs``."""
    references = set(question.get("reference_doc_ids") or [])
    gold_spans = question.get("gold_spans") or []
    spans = result.get("retrieved_spans") or []
    scores = result.get("retrieved_scores") or []
    chunks = []
    for rank, doc_id in enumerate(result.get("retrieved_doc_ids") or [], start=1):
        span = spans[rank - 1] if rank - 1 < len(spans) else None
        gold = [
            (g["start"], g["end"])
            for g in gold_spans
            if span
            and g["doc_id"] == doc_id
            and g["start"] < span["end"]
            and g["end"] > span["start"]
        ]
        pieces = None
        if span:
            text = next(filter(None, (document_text(d, doc_id) for d in docs)), None)
            if text is not None:
                pieces = _pieces(text[span["start"] : span["end"]], span["start"], gold)
        chunks.append(
            {
                "rank": rank,
                "doc_id": doc_id,
                "span": span,
                "score": scores[rank - 1] if rank - 1 < len(scores) else None,
                "reference": doc_id in references,
                "gold": bool(gold)
                or (span is None and doc_id in {g["doc_id"] for g in gold_spans}),
                "pieces": pieces,
            }
        )
    return chunks


def score_name(config: dict) -> str:
    """What a configuration's retrieved chunks' scores are: the reranker's, the fused
    reciprocal-rank score (hybrid search, several queries), MMR's marginal relevance, or
    the store's similarity."""
    if (config.get("reranker") or "none") != "none":
        return "reranker score"
    if config.get("search_type") == "hybrid" or str(config.get("query_transform")).startswith(
        "multi_query"
    ):
        return "fused score (reciprocal rank)"
    if config.get("search_type") == "mmr":
        return "marginal relevance (MMR)"
    return "similarity"
