"""A small but complete evaluation case, built in memory: two chunk sets, 16 configurations
(Top K 1 and 3, similarity and MMR, the extractive answerer and a model), ten questions
(a conversational one, an out-of-scope one, one with no reference document, two in other
languages, one with two reference documents), gold spans and retrieved spans.

The retrievals are made here, not by ``sweep.retrieve``, so the evaluation is tested on the
same input whatever retrieval becomes: a question's ranking is its chunks ordered by the
words they share with it; MMR agrees with similarity on even questions and swaps the second
and third chunk on odd ones, and Top K 1 is a prefix of Top K 3. Chunk set "sentences" holds
one sentence per chunk, "pairs" two (a document's odd last sentence stays alone: the same
text as in "sentences", so both chunk sets can share an answer).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ragsweep.core.text import words
from ragsweep.sweep.space import SearchSpace

DOCUMENTS = {
    "ports.md": [
        "Tidewater listens on port 8443 by default.",
        "The admin console uses port 9000.",
        "Metrics are served on port 9100.",
        "Change the ports in tidewater.toml.",
    ],
    "plans.md": [
        "The Basic plan keeps backups for 30 days.",
        "The Pro plan keeps backups for 90 days.",
        "Enterprise keeps backups for a year.",
        "Backups run every night at 02:00 UTC.",
        "Restores are free on every plan.",
    ],
    "install.md": [
        "Install Tidewater with pip install tidewater.",
        "Python 3.10 or newer is required.",
        "The installer creates a tidewater user.",
    ],
    "limits.md": [
        "Uploads are limited to 2 GB per file.",
        "The API allows 600 requests per minute.",
        "Larger uploads use the multipart API.",
    ],
    "i18n.md": [
        "Die Konfigurationsdatei heißt tidewater.toml.",
        "Le résumé quotidien part à 8 heures.",
        "文件大小上限为两GB。",
    ],
    "security.md": [
        "Tokens expire after 12 hours.",
        "Rotate the signing key every 90 days.",
        "Failed logins lock an account after 5 attempts.",
    ],
}
TEXTS = {doc: " ".join(sentences) for doc, sentences in DOCUMENTS.items()}
OUT_OF_SCOPE_ANSWER = "This question can not be answered by the context."

# question id -> (question, reference answers, reference documents, gold sentences
# (doc, index), question type, history)
QUESTIONS = {
    "q01": ("Which port does the admin console use?", ["port 9000"], ["ports.md"],
            [("ports.md", 1)], "simple", None),
    "q02": ("How long does the Pro plan keep backups?", ["90 days"], ["plans.md"],
            [("plans.md", 1)], "simple", None),
    "q03": ("And how long are backups kept there?", ["90 days"], ["plans.md"],
            [("plans.md", 1)], "conversational",
            [{"role": "user", "content": "We pay for the Pro plan."},
             {"role": "assistant", "content": "How can I help you with that?"}]),
    "q04": ("Which Python version is required?", ["Python 3.10 or newer"], ["install.md"],
            [("install.md", 1)], "simple", None),
    "q05": ("Is there a discount for students?", [OUT_OF_SCOPE_ANSWER], ["plans.md"],
            [("plans.md", 0)], "out of scope", None),
    "q06": ("How many requests per minute does the API allow?", ["600 requests per minute"],
            [], [], "simple", None),
    "q07": ("Wie heißt die Konfigurationsdatei?", ["tidewater.toml"], ["i18n.md"],
            [("i18n.md", 0)], "simple", None),
    "q08": ("文件大小上限是多少？", ["两GB"], ["i18n.md"], [("i18n.md", 2)], "simple", None),
    "q09": ("How often is the signing key rotated, and when do tokens expire?",
            ["every 90 days", "after 12 hours"], ["security.md", "plans.md"],
            [("security.md", 1), ("security.md", 0)], "complex", None),
    "q10": ("When do backups run?", ["every night at 02:00 UTC", "02:00 UTC"], ["plans.md"],
            [("plans.md", 3)], "simple", None),
}  # fmt: skip

SPACE = SearchSpace(
    chunk_sizes=(32, 64),
    chunk_overlaps=(0,),
    top_ks=(1, 3),
    search_types=("similarity", "mmr"),
    answerers=("extractive", "llm:answerer"),
)
CHUNK_SETS = {32: "sentences", 64: "pairs"}


def sentence_spans(doc: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``doc`` in its text."""
    spans, start = [], 0
    for sentence in DOCUMENTS[doc]:
        spans.append((start, start + len(sentence)))
        start += len(sentence) + 1
    return spans


def chunk_set(name: str) -> list[tuple[str, int, int]]:
    """The (doc_id, start, end) chunks of chunk set ``name``."""
    size = 1 if name == "sentences" else 2
    chunks = []
    for doc in DOCUMENTS:
        spans = sentence_spans(doc)
        for i in range(0, len(spans), size):
            group = spans[i : i + size]
            chunks.append((doc, group[0][0], group[-1][1]))
    return chunks


def testset() -> pa.Table:
    """The questions as a test set artifact."""
    rows = []
    for qid, (question, answers, docs, gold, kind, history) in QUESTIONS.items():
        spans = [
            {"doc_id": d, "start": sentence_spans(d)[i][0], "end": sentence_spans(d)[i][1]}
            for d, i in gold
        ]
        rows.append(
            {
                "question_id": qid,
                "question": question,
                "reference_answers": answers,
                "reference_doc_ids": docs,
                "reference_context": None,
                "gold_spans": spans,
                "question_type": kind,
                "topic": None,
                "conversation_history": json.dumps(history) if history else None,
                "question_version": f"{qid}-v1",
            }
        )
    return pa.Table.from_pylist(rows)


def ranking(name: str, qid: str, search_type: str, depth: int = 3) -> list[int]:
    """Chunk ids of chunk set ``name`` for question ``qid``, best first."""
    question, *_, history = QUESTIONS[qid]
    said = " ".join(m["content"] for m in history or [] if m["role"] == "user")
    asked = set(words(f"{said} {question}"))
    chunks = chunk_set(name)
    shared = [len(asked & set(words(TEXTS[d][s:e]))) for d, s, e in chunks]
    order = sorted(range(len(chunks)), key=lambda i: (-shared[i], i))[:depth]
    if search_type == "mmr" and int(qid[1:]) % 2:
        order[1], order[2] = order[2], order[1]
    return order


def retrievals(dictionary_encoded: bool = True) -> pa.Table:
    """Every configuration's retrievals, one table per chunk set concatenated as the
    evaluate step reads them; ``dictionary_encoded=False``: passages as plain strings and no
    spans, as older or hand-made retrievals have them."""
    tables = []
    for size, name in CHUNK_SETS.items():
        chunks = chunk_set(name)
        texts = pa.array([TEXTS[d][s:e] for d, s, e in chunks])
        rows: dict[str, list] = {"config_id": [], "question_id": [], "retrieved_chunk_ids": []}
        for config in SPACE.all_configs():
            if config["chunk_size"] != size:
                continue
            for qid in QUESTIONS:
                ids = ranking(name, qid, config["search_type"])[: config["top_k"]]
                rows["config_id"].append(config["config_id"])
                rows["question_id"].append(qid)
                rows["retrieved_chunk_ids"].append(ids)
        picked = rows["retrieved_chunk_ids"]
        rows["retrieved_doc_ids"] = [[chunks[i][0] for i in ids] for ids in picked]
        offsets = np.r_[0, np.cumsum([len(ids) for ids in picked])].astype(np.int32)
        flat = pa.array(np.concatenate(picked).astype(np.int32))
        if dictionary_encoded:
            passages = pa.DictionaryArray.from_arrays(flat, texts)
            rows["passages"] = pa.ListArray.from_arrays(pa.array(offsets), passages)
            spans = [{"doc_id": d, "start": s, "end": e} for d, s, e in chunks]
            rows["retrieved_spans"] = [[spans[i] for i in ids] for ids in picked]
        else:
            rows["passages"] = [[texts[i].as_py() for i in ids] for ids in picked]
        tables.append(pa.table(rows))
    return pa.concat_tables(tables, promote_options="default")
