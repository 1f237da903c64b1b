"""Small tables of every artifact kind, built in memory for the tests."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pyarrow as pa
from kfp import dsl

from ragsweep.core.schemas import ANSWERS, SCORES, SPAN
from ragsweep.evaluation.clusters import SECTION_CHARS
from ragsweep.evaluation.leaderboard import Board, build_board
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table

SPACE = SearchSpace(chunk_sizes=(64, 128), top_ks=(1, 3), search_types=("similarity",))
TOPICS = ["Install", "Backup", "API"]


def make_testset(question_ids: list[str], documents: int = 10) -> pa.Table:
    """Questions spread over ``documents`` reference documents; every tenth has none."""
    n = len(question_ids)
    return pa.table(
        {
            "question_id": question_ids,
            "question": [f"What about {q}?" for q in question_ids],
            "reference_answers": [[f"the answer to {q}"] for q in question_ids],
            "reference_doc_ids": [
                [f"doc{i % documents}.md"] if i % 10 != 9 else [] for i in range(n)
            ],
            "reference_context": [None] * n,
            "gold_spans": [[]] * n,
            "question_type": ["simple" if i % 2 else "complex" for i in range(n)],
            "topic": [TOPICS[i % 3] for i in range(n)],
            "conversation_history": ["[]"] * n,
            "question_version": [f"{q}-v1" for q in question_ids],
        }
    )


def make_answers(config_ids: list[str], question_ids: list[str], **extra: list) -> pa.Table:
    """One answer per configuration x question; ``extra`` columns (costs) appended."""
    rows = [(c, q) for c in config_ids for q in question_ids]
    table = pa.table(
        {
            "config_id": [c for c, _ in rows],
            "question_id": [q for _, q in rows],
            "retrieved_chunk_ids": [[0, 1]] * len(rows),
            "retrieved_doc_ids": [["doc0.md", "doc1.md"]] * len(rows),
            "context": ["context " * (1 + i % 5) for i in range(len(rows))],
            "round": [0] * len(rows),
            "answer": [f"answer of {c} to {q}" for c, q in rows],
        }
    )
    for name, values in extra.items():
        table = table.append_column(name, pa.array(values))
    return complete(table, ANSWERS)


def make_scores(config_ids: list[str], question_ids: list[str], values: np.ndarray) -> pa.Table:
    """``values`` (configs x questions) as every metric: answer correctness as given, the
    retrieval metrics equal to it, faithfulness 1."""
    flat = np.asarray(values, dtype=float).ravel()
    table = pa.table(
        {
            "config_id": [c for c in config_ids for _ in question_ids],
            "question_id": [q for _ in config_ids for q in question_ids],
            "context_correctness": flat,
            "document_recall": flat,
            "answer_correctness": flat,
            "faithfulness": np.ones_like(flat),
        }
    )
    return complete(table, SCORES)


def complete(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns of ``schema`` it lacks, all null (not measured)."""
    for field in schema:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table


def make_board(
    values: np.ndarray, space: SearchSpace = SPACE, metric: str = "answer_correctness", **extra
) -> Board:
    """A whole board from a configs x questions matrix of scores."""
    configs = space.all_configs()[: len(values)]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(np.shape(values)[1])]
    testset = make_testset(questions)
    return build_board(
        make_scores(ids, questions, values),
        make_answers(ids, questions, **extra),
        testset,
        configs_table(configs),
        metric,
        settings=RunSettings("docs", "testset.json", space, metric).record(),
    )


def one_pdf_board(values: np.ndarray, sections: int = 12) -> Board:
    """``make_board`` over one PDF: every question's reference is manual.pdf, its gold span
    in one of ``sections`` sections (question i in section i % sections)."""
    configs = SPACE.all_configs()[: len(values)]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(np.shape(values)[1])]
    spans = [
        [{"doc_id": "manual.pdf", "start": (i % sections) * SECTION_CHARS + 10, "end": 500}]
        for i in range(len(questions))
    ]
    testset = make_testset(questions)
    for name, column in (
        ("reference_doc_ids", pa.array([["manual.pdf"]] * len(questions))),
        ("gold_spans", pa.array(spans, pa.list_(SPAN))),
    ):
        testset = testset.set_column(testset.schema.get_field_index(name), name, column)
    return build_board(
        make_scores(ids, questions, values),
        make_answers(ids, questions),
        testset,
        configs_table(configs),
    )


def halved_board(leader: np.ndarray, dropped: np.ndarray, asked: int) -> Board:
    """Two configurations after successive halving: the leader answered every question
    (round 0, then round 1), the other only the first ``asked`` (round 0) and was dropped;
    questions spread over 40 documents."""
    values = np.vstack([leader, np.where(np.arange(len(leader)) < asked, dropped, np.nan)])
    configs = SPACE.all_configs()[:2]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(len(leader))]
    answers = make_answers(ids, questions)
    rounds = [0 if i < asked else 1 for i in range(len(leader))]
    rounds += [0 if i < asked else None for i in range(len(leader))]
    answers = answers.set_column(
        answers.schema.get_field_index("round"), "round", pa.array(rounds, pa.int64())
    )
    scores = make_scores(ids, questions, values)
    return build_board(
        scores, answers, make_testset(questions, documents=40), configs_table(configs)
    )


RERANK_SPACE = SearchSpace(
    chunk_sizes=(64,),
    top_ks=(1, 3),
    search_types=("similarity",),
    rerankers=("none", "rerank:m"),
    rerank_fetch_k=5,
)


def rerank_latencies(values: np.ndarray) -> dict[str, list[float] | None]:
    """Per configuration of ``RERANK_SPACE``: each question's reranking latency (ms), known
    in advance (config i, question j: 10 (i + 1) + j); None for those without a reranker."""
    configs = RERANK_SPACE.all_configs()[: len(values)]
    questions = range(np.shape(values)[1])
    return {
        c["config_id"]: [10.0 * (i + 1) + j for j in questions] if "reranker" in c else None
        for i, c in enumerate(configs)
    }


def make_reranked_board(values: np.ndarray) -> Board:
    """A board of ``RERANK_SPACE``: half its configurations rerank (``rerank:m``), with the
    latencies of ``rerank_latencies``; the others measured none."""
    n = np.shape(values)[1]
    latency = [x for ms in rerank_latencies(values).values() for x in (ms if ms else [None] * n)]
    return make_board(values, RERANK_SPACE, rerank_latency_ms=latency)


def tiny_cross_encoder(folder: Path, texts: list[str]) -> Path:
    """A sentence-transformers cross-encoder folder: a one-layer BERT with random weights
    (seeded) and a word-piece vocabulary of the words of ``texts`` (nothing downloaded).
    Its weights are drawn wider than BERT's (0.5, not 0.02) so that its scores spread and
    reorder a search's candidates; BERT's own would score them all about the same."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = sorted({w.strip(".,:;!?()[]\"'`").lower() for t in texts for w in t.split()} - {""})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def configured(path: Path, **parameters) -> dsl.Dataset:
    """The settings artifact the pipeline's ``configure`` step writes at ``path`` for the
    pipeline's default parameters and ``parameters``."""
    from ragsweep.components.configure import configure
    from ragsweep.pipelines.sweep_pipeline import sweep

    names = set(configure.component_spec.inputs)
    signature = inspect.signature(sweep).parameters
    defaults = {name: signature[name].default for name in names}
    settings = dsl.Dataset(uri=str(path))
    configure.python_func(**{**defaults, **parameters}, settings=settings)
    return settings


def units_testset(n: int) -> pa.Table:
    """``n`` questions "What is the code of unit i?", each answered by ``unit<i>.md``."""
    return pa.table(
        {
            "question_id": [f"q{i:02}" for i in range(n)],
            "question": [f"What is the code of unit {i}?" for i in range(n)],
            "reference_answers": [[f"The code of unit {i} is zeta{i}."] for i in range(n)],
            "reference_doc_ids": [[f"unit{i}.md"] for i in range(n)],
            "topic": ["units"] * n,
            "question_type": ["simple"] * n,
        }
    )


def unit_retrieval(config_id: str, i: int, doc: str, passage: str) -> dict:
    """A retrievals row: configuration ``config_id`` retrieved ``passage`` of ``doc`` (one
    chunk) for units_testset's question ``i``."""
    return {
        "config_id": config_id,
        "question_id": f"q{i:02}",
        "retrieved_chunk_ids": [0],
        "retrieved_doc_ids": [doc],
        "passages": [passage],
    }
