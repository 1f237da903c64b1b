#!/usr/bin/env python3
"""Time ``resolve_testset`` on Giskard-native test sets: every question's reference context
searched across every document (seed ids are Giskard's knowledge-base indexes, which name no
document). Synthetic documents of ~20 KB of random words; each context is a 500-character
passage of one document, half of them with white space changed so that the verbatim search
fails and the white-space-insensitive one finds them.

Usage: PYTHONPATH=. python benchmarks/bench_contexts.py [DOCS,QUESTIONS ...]
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from ragsweep.core.schemas import DOCUMENTS
from ragsweep.documents.testsets import load_testset, resolve_testset

RNG = random.Random(1)
WORDS = [
    "".join(RNG.choices("abcdefghijklmnopqrstuvwxyz", k=RNG.randint(2, 9))) for _ in range(5000)
]


def text(size: int) -> str:
    paragraphs, length = [], 0
    while length < size:
        paragraphs.append(" ".join(RNG.choices(WORDS, k=60)) + ".")
        length += len(paragraphs[-1]) + 2
    return "\n\n".join(paragraphs)


def measure(n_docs: int, n_questions: int, folder: Path) -> str:
    texts = [text(20_000) for _ in range(n_docs)]
    rows = [
        {"doc_id": f"d{i}.md", "source": "", "format": "md", "text": t} for i, t in enumerate(texts)
    ]
    documents = pa.Table.from_pylist(rows, schema=DOCUMENTS)
    items, expected = [], []
    for q in range(n_questions):
        d = RNG.randrange(n_docs)
        start = RNG.randrange(len(texts[d]) - 600)
        block = texts[d][start : start + 500]
        if q % 2:
            block = block.replace(" ", "  \n", 3)
        expected.append([f"d{d}.md"])
        items.append(
            {
                "id": f"x{q}",
                "question": f"Question {q}?",
                "reference_answer": "A.",
                "reference_context": f"Document {d + 7}: {block}",
                "conversation_history": [],
                "metadata": {"question_type": "simple", "seed_document_id": d + 7},
            }
        )
    path = folder / f"native-{n_docs}-{n_questions}.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    testset = load_testset(str(path))
    started = time.perf_counter()
    resolved = resolve_testset(testset, documents)
    seconds = time.perf_counter() - started
    right = sum(
        got == want
        for got, want in zip(resolved["reference_doc_ids"].to_pylist(), expected, strict=True)
    )
    return (
        f"{n_docs} documents x 20 KB, {n_questions} questions: {seconds:.2f} s, "
        f"{right}/{n_questions} resolved to the right document"
    )


if __name__ == "__main__":
    sizes = sys.argv[1:] or ["100,100", "300,300", "1000,1000"]
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            docs, questions = (int(x) for x in size.split(","))
            print(measure(docs, questions, Path(tmp)))
