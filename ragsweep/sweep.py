"""Evaluate a chunk set against its whole retrieval x answer grid in one pass.

Chunks and questions are embedded through the embedding cache (each distinct text once per
model, and not at all when stored); one ranking per search type and parameters, as deep as
the largest Top K, serves every K; identical (answerer, question, context) triples are
answered once.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np
import pyarrow as pa

from ragsweep import embedding
from ragsweep.answering import Answer, get_answerer
from ragsweep.chunking import chunk_documents
from ragsweep.embedcache import EmbeddingCache
from ragsweep.llm import LLMSettings
from ragsweep.retrieval import Index, rank_chunks
from ragsweep.space import SearchSpace, chunk_config_from

log = logging.getLogger("ragsweep")

SEARCH_PARAMS = ("mmr_lambda", "mmr_fetch_k")


def search_of(config: dict[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The search type and parameters of a configuration: configurations that differ only
    in Top K (or answerer) share one ranking."""
    return config["search_type"], tuple((k, config[k]) for k in SEARCH_PARAMS if k in config)


def build_chunks(
    documents: pa.Table, chunk_config: dict[str, Any], cache: EmbeddingCache
) -> pa.Table:
    """Chunk every document and embed every chunk with the config's model."""
    chunk_config = chunk_config_from(chunk_config)
    model = chunk_config["embedding_model"]
    chunks = chunk_documents(
        documents,
        chunk_config["chunker"],
        chunk_config["chunk_size"],
        chunk_config["chunk_overlap"],
        embedding.load_tokenizer(model),
    )
    log.info("%d chunks from %d documents", chunks.num_rows, documents.num_rows)
    vectors = cache.embed(model, chunks.column("text").to_pylist())
    return chunks.append_column("embedding", pa.array(list(vectors), type=pa.list_(pa.float32())))


def evaluate(
    chunks: pa.Table,
    testset: pa.Table,
    space: SearchSpace,
    chunk_config: dict[str, Any],
    cache: EmbeddingCache,
    settings: LLMSettings | None = None,
) -> pa.Table:
    """Answers of every configuration sharing ``chunk_config``, one row per config x question.

    Model answerers use ``settings`` (defaults when None); they are recorded in the table's
    metadata (``ragsweep.answer_settings``).
    """
    settings = settings or LLMSettings()
    chunk_config = chunk_config_from(chunk_config)
    if chunks.num_rows == 0:
        raise ValueError("the chunk set is empty")
    texts = chunks.column("text").to_pylist()
    doc_ids = chunks.column("doc_id").to_pylist()
    questions = testset.column("question").to_pylist()
    question_ids = testset.column("question_id").to_pylist()
    index = Index(
        question_vectors=cache.embed(chunk_config["embedding_model"], questions),
        chunk_vectors=np.stack(chunks.column("embedding").to_numpy(zero_copy_only=False)),
        questions=questions,
        chunk_texts=texts,
    )
    configs = space.configs(chunk_config)
    depth = max(c["top_k"] for c in configs)
    rankings: dict[tuple, np.ndarray] = {}
    for config in configs:
        search_type, params = search = search_of(config)
        if search not in rankings:
            rankings[search] = rank_chunks(index, search_type, depth, **dict(params))

    retrieval = ["config_id", "question_id", "retrieved_chunk_ids", "retrieved_doc_ids", "context"]
    rows: dict[str, list] = {name: [] for name in retrieval}
    keys = []  # per row: (answerer, question index, retrieved chunk ids)
    for config in configs:
        ranking = rankings[search_of(config)][:, : config["top_k"]]
        for q, question_id in enumerate(question_ids):
            picked = ranking[q].tolist()
            rows["config_id"].append(config["config_id"])
            rows["question_id"].append(question_id)
            rows["retrieved_chunk_ids"].append(picked)
            rows["retrieved_doc_ids"].append([doc_ids[i] for i in picked])
            rows["context"].append("\n\n".join(texts[i] for i in picked))
            keys.append((config["answerer"], q, tuple(picked)))
    answers = answer_distinct(set(keys), questions, texts, settings)
    for name, column in ANSWER_COLUMNS.items():
        rows[name] = [getattr(answers[key], column) for key in keys]
    log.info(
        "evaluated %d configurations x %d questions (%d rankings, %d distinct answers)",
        len(configs),
        len(questions),
        len(rankings),
        len(answers),
    )
    table = pa.table(rows)
    if any(":" in name for name in space.answerers):
        record = {"answerers": list(space.answerers), **settings.answer_settings()}
        table = table.replace_schema_metadata({"ragsweep.answer_settings": json.dumps(record)})
    return table


# an ANSWERS column for each field of an Answer
ANSWER_COLUMNS = {
    "answer": "text",
    "latency_s": "latency_s",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "llm_calls": "llm_calls",
    "cached": "cached",
    "answer_error": "error",
}


def answer_distinct(
    keys: set[tuple[str, int, tuple[int, ...]]],
    questions: list[str],
    texts: list[str],
    settings: LLMSettings,
) -> dict[tuple[str, int, tuple[int, ...]], Answer]:
    """Answer each distinct (answerer, question, retrieved chunks) once, one batch per
    answerer, so configurations that retrieve the same context share one answer."""
    answers = {}
    for name in sorted({key[0] for key in keys}):
        batch = sorted(key for key in keys if key[0] == name)
        items = [(questions[q], [texts[i] for i in picked]) for _, q, picked in batch]
        answers.update(zip(batch, get_answerer(name, settings)(items), strict=True))
    return answers
