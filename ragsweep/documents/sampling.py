"""Sampling for large inputs: a document budget and a question sample, both reproducible.

The document budget follows Red Hat AutoRAG's rule: every document the test set cites is
kept first, then others, in an order fixed by the seed, while they fit the budget.
"""

from __future__ import annotations

import logging
import random

import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger("ragsweep")


def sample_documents(documents: pa.Table, testset: pa.Table, max_bytes: int, seed: int) -> pa.Table:
    """Documents within ``max_bytes`` of text (UTF-8), cited ones first; 0 keeps all."""
    if max_bytes <= 0:
        return documents
    doc_ids = documents.column("doc_id").to_pylist()
    sizes = [len(text.encode("utf-8")) for text in documents.column("text").to_pylist()]
    cited = cited_documents(testset)
    others = [i for i, d in enumerate(doc_ids) if d not in cited]
    random.Random(seed).shuffle(others)
    keep = [i for i, d in enumerate(doc_ids) if d in cited]
    used = sum(sizes[i] for i in keep)
    if used > max_bytes:
        log.warning(
            "the %d cited documents alone hold %d bytes, over the budget of %d: all kept",
            len(keep),
            used,
            max_bytes,
        )
    for i in others:
        if used + sizes[i] <= max_bytes:
            keep.append(i)
            used += sizes[i]
    log.info("document budget %d bytes: kept %d of %d documents", max_bytes, len(keep), len(sizes))
    return documents.take(sorted(keep))


def sample_questions(testset: pa.Table, max_questions: int, seed: int) -> pa.Table:
    """A random sample of ``max_questions`` questions in their original order; 0 keeps all."""
    if max_questions <= 0 or max_questions >= testset.num_rows:
        return testset
    picked = sorted(random.Random(seed).sample(range(testset.num_rows), max_questions))
    log.info("question sample: %d of %d questions (seed %d)", max_questions, testset.num_rows, seed)
    return testset.take(picked)


def cited_documents(testset: pa.Table) -> set[str]:
    """Every document a question of ``testset`` cites."""
    return set(pc.list_flatten(testset.column("reference_doc_ids")).to_pylist())
