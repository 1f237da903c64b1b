#!/usr/bin/env python3
"""Write ``examples/testset-giskard-native.jsonl``: the example questions as a Giskard RAGET
test set exported by another tool (e.g. the Oracle AI Optimizer Testbed), written by
giskard's own ``QATestset.save``.

Usage (giskard installed):
    python examples/make_giskard_native.py

Such a tool builds Giskard's knowledge base from its own chunks, a DataFrame whose index
becomes each document's id, so ``metadata.seed_document_id`` is an integer and each
reference context reads ``Document <index>: <the whole chunk>``. Here the chunks are the
paragraphs of the example documents; the HTML and PDF ones are extracted with white space
collapsed, as another text extractor would. Question ids are Giskard-style uuids (uuid5 of
the ragsweep id, so the file is deterministic). Two questions are Giskard "double"
questions whose context spans two documents.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ["GSK_DISABLE_ANALYTICS"] = "True"

from ragsweep.core.text import locate  # noqa: E402
from ragsweep.documents.sources import read_documents  # noqa: E402

OUTPUT = HERE / "testset-giskard-native.jsonl"
NAMESPACE = uuid.UUID("5f1c0a3e-2b1d-4c55-9a7e-6b1f3d2e9c10")
DOUBLES = [("q001", "q028"), ("q035", "q045")]  # pairs from two documents each


def chunks(documents) -> list[tuple[str, int, int, str]]:
    """(doc_id, start, end, chunk text) for every paragraph of every document."""
    out = []
    ids, texts = documents["doc_id"].to_pylist(), documents["text"].to_pylist()
    for doc_id, text in zip(ids, texts, strict=True):
        collapse = doc_id.endswith((".html", ".pdf"))
        for m in re.finditer(r"\S(?:.*?\S)?(?=\n\s*\n|\s*\Z)", text, re.S):
            body = " ".join(m.group().split()) if collapse else m.group()
            out.append((doc_id, m.start(), m.end(), body))
    return out


def covering(kb, doc_id: str, text: str, context: str) -> list[int]:
    """The indexes of the chunks of ``doc_id`` that hold the reference context."""
    start, end = locate(text, context)
    return [i for i, (d, s, e, _) in enumerate(kb) if d == doc_id and s < end and e > start]


def main() -> None:
    import pandas as pd
    from giskard.rag.testset import QATestset, QuestionSample

    documents = read_documents(str(HERE / "docs")).table
    texts = dict(zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True))
    kb = chunks(documents)
    frame = pd.DataFrame({"text": [c[3] for c in kb]})  # index 0..n-1: Giskard's doc ids
    items = [json.loads(line) for line in (HERE / "testset.jsonl").open(encoding="utf-8")]
    by_id = {item["id"]: item for item in items}
    samples = []

    def sample(qid: str, question: str, answer: str, indexes: list[int], kind: str, topic):
        context = "\n\n".join(f"Document {i}: {frame.loc[i, 'text']}" for i in indexes)
        metadata = {"question_type": kind, "seed_document_id": indexes[0], "topic": topic}
        samples.append(
            QuestionSample(
                id=str(uuid.uuid5(NAMESPACE, qid)),
                question=question,
                reference_answer=answer,
                reference_context=context,
                conversation_history=[],
                metadata=metadata,
            )
        )

    for item in items:
        doc_id = item["metadata"]["seed_document_id"]
        indexes = covering(kb, doc_id, texts[doc_id], item["reference_context"])
        meta = item["metadata"]
        sample(
            item["id"],
            item["question"],
            item["reference_answer"],
            indexes,
            meta["question_type"],
            meta["topic"],
        )
    for first, second in DOUBLES:
        a, b = by_id[first], by_id[second]
        indexes = [
            covering(
                kb,
                x["metadata"]["seed_document_id"],
                texts[x["metadata"]["seed_document_id"]],
                x["reference_context"],
            )[0]
            for x in (a, b)
        ]
        sample(
            f"{first}+{second}",
            f"{a['question']} And {b['question'][0].lower()}{b['question'][1:]}",
            f"{a['reference_answer']} {b['reference_answer']}",
            indexes,
            "double",
            a["metadata"]["topic"],
        )
    QATestset(samples).save(str(OUTPUT))
    print(f"wrote {len(samples)} questions over {len(kb)} knowledge-base chunks to {OUTPUT}")


if __name__ == "__main__":
    main()
