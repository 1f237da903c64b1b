"""The sweep: chunk, embed and retrieve once per chunk set, then answer and score what the
configurations retrieved.

Chunks and questions are embedded through the embedding cache (each distinct text once per
model, and not at all when stored); the chunk set is loaded into each vector store and index
of the space (``ragsweep.retrieval.store_search``), where one ranking per search type and
parameters,
as deep as the largest Top K, serves every K. Answering sees every chunk set's retrievals at once:
identical (answerer, question, passages) are answered once across the whole grid, and when
the grid would take more LLM calls than allowed, successive halving
(``ragsweep.evaluation.halving``)
decides which configurations answer which questions.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.answering import agents as deployed
from ragsweep.answering.answerers import get_answerer, uses_model
from ragsweep.answering.answers import Answer, History, parse_history, with_history
from ragsweep.answering.contexts import SEPARATOR, Contexts, codes, group_rows
from ragsweep.core import progress
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import ANSWERS, DEFAULT_STORE, METRICS, SCORES, read_table
from ragsweep.documents.chunking import chunk_documents
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.evaluation import halving, statistics, surrogate
from ragsweep.evaluation.leaderboard import matrix, resolve_metric
from ragsweep.evaluation.metrics import metric as declared
from ragsweep.evaluation.scoring import AUTORAG_METRICS, OVERALL_PARTS, score_answers
from ragsweep.models import embedding
from ragsweep.models.llm import Endpoint, LLMSettings, check_reachable
from ragsweep.retrieval import queries
from ragsweep.retrieval.chunk_sets import BATCH_ROWS, ChunkFile, TableChunks, texts_of
from ragsweep.retrieval.reranking import Reranking
from ragsweep.retrieval.search import Index
from ragsweep.retrieval.store_search import chunk_scores, collection_name, overlap, search_store
from ragsweep.retrieval.vector_stores import Hits, IndexSpec
from ragsweep.sweep import fanout, sizing
from ragsweep.sweep.settings import GRID, HALVING, MODEL, RunSettings, check_strategy
from ragsweep.sweep.space import SearchSpace, chunk_config_from

log = logging.getLogger("ragsweep")

SEARCH_PARAMS = ("mmr_lambda", "mmr_fetch_k")
EXACT = (DEFAULT_STORE, IndexSpec().label())  # the reference every store is measured against
# warm-started configurations that could win (an earlier run scored them at least as high as
# this run's best), answered again in this run, out of its budget
RECHECKED = 3
# text chunked and embedded at a time while a chunk set is built: some 16,000 chunks of 64
# tokens, whose 384-dimension vectors take 25 MB
RUN_BYTES = 4 << 20


def search_of(config: dict[str, Any]) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """The search type and parameters of a configuration: configurations that differ only
    in Top K (or answerer) share one ranking."""
    return config["search_type"], tuple((k, config[k]) for k in SEARCH_PARAMS if k in config)


def target_of(config: dict[str, Any]) -> tuple[str, str]:
    """The (vector store, index label) a configuration searches."""
    return config.get("vector_store", DEFAULT_STORE), config.get("index", EXACT[1])


def build_chunks(
    documents: pa.Table, chunk_config: dict[str, Any], cache: EmbeddingCache
) -> pa.Table:
    """Chunk every document and embed every chunk with the config's model (after the
    config's passage prefix): ``chunk_batches`` held whole."""
    return pa.Table.from_batches(list(chunk_batches(documents, chunk_config, cache)))


def chunk_batches(
    documents: pa.Table, chunk_config: dict[str, Any], cache: EmbeddingCache
) -> Iterator[pa.RecordBatch]:
    """The chunk set of ``chunk_config``, a record batch of at most ``BATCH_ROWS`` chunks
    at a time (at least one): the documents chunked a run of about ``RUN_BYTES`` of text at
    a time, each run's chunks embedded through ``cache``, chunk ids counted across. When the
    cache is a store, the vectors it holds in memory are let go after each run (a later run
    reads back those it needs), so memory follows a run, not the corpus."""
    chunk_config = chunk_config_from(chunk_config)
    model, prefix = chunk_config["embedding_model"], chunk_config.get("passage_prefix", "")
    sizes = pc.binary_length(documents.column("text")).to_pylist() if documents.num_rows else []
    counted = 0
    for first, stop in fanout.document_ranges([size or 0 for size in sizes], RUN_BYTES):
        chunks = _chunked(documents.slice(first, stop - first), chunk_config, cache)
        vectors = cache.embed(model, chunks.column("text").to_pylist(), prefix)
        if cache.files:
            cache.known.clear()
        offsets = np.arange(0, vectors.size + 1, max(vectors.shape[1], 1), dtype=np.int32)
        embedding = pa.ListArray.from_arrays(offsets, pa.array(vectors.ravel(), pa.float32()))
        chunks = chunks.set_column(
            chunks.schema.get_field_index("chunk_id"),
            "chunk_id",
            pa.array(np.arange(counted, counted + chunks.num_rows, dtype=np.int64)),
        ).append_column("embedding", embedding)
        counted += chunks.num_rows
        yield from chunks.combine_chunks().to_batches(BATCH_ROWS) or [
            pa.RecordBatch.from_pylist([], chunks.schema)
        ]


def _chunked(documents: pa.Table, chunk_config: dict[str, Any], cache: EmbeddingCache) -> pa.Table:
    """Chunk the documents; a chunker that embeds (``semantic``) embeds through ``cache``,
    with the config's model and passage prefix, so each sentence is embedded once."""
    model, prefix = chunk_config["embedding_model"], chunk_config.get("passage_prefix", "")
    chunks = chunk_documents(
        documents,
        chunk_config["chunker"],
        chunk_config["chunk_size"],
        chunk_config["chunk_overlap"],
        embedding.load_tokenizer(model),
        lambda texts: cache.embed(model, texts, prefix),
    )
    log.info("%d chunks from %d documents", chunks.num_rows, documents.num_rows)
    return chunks


def build_chunk_sets(
    documents: pa.Table,
    chunk_configs: list[dict[str, Any]],
    cache: EmbeddingCache,
    folder: str | Path,
    testset: pa.Table | None = None,
) -> list[str]:
    """Build the chunk set of each of ``chunk_configs`` in turn (``build_chunks``) into
    ``folder``, one file each (``ragsweep.sweep.fanout``); the ids written. Only the vectors of the
    set being built are held: those of earlier sets are read back from ``cache`` (a store)
    when a later set shares their texts. With a ``testset``, its questions are embedded too
    (with each config's query prefix, while the model is loaded) and saved in the folder
    (``fanout.question_vectors``), so that retrieval needs no model. Each set is written a
    record batch at a time as it is made (``chunk_batches``), never held whole."""
    written = []
    questions = [with_history(q, h) for q, h in asked(testset)] if testset is not None else []
    saved, done = EmbeddingCache(fanout.question_vectors(folder)), set()
    for chunk_config in chunk_configs:
        chunk_config = chunk_config_from(chunk_config)
        batches = chunk_batches(documents, chunk_config, cache)
        fanout.write_chunk_set(batches, folder, chunk_config["chunk_config_id"])
        written.append(chunk_config["chunk_config_id"])
        model, prefix = chunk_config["embedding_model"], chunk_config.get("query_prefix", "")
        if questions and (model, prefix) not in done:
            saved.save(model, questions, cache.embed(model, questions, prefix), prefix)
            done.add((model, prefix))
        if cache.files:
            cache.known.clear()
    return written


def embed_shard(
    documents: pa.Table, item: dict[str, Any], cache: EmbeddingCache, out: EmbeddingCache
) -> int:
    """Chunk one shard of the documents (a ``fanout.shard_items`` item) as its chunk
    configuration does, embed the chunks through ``cache`` and save their vectors in
    ``out``; the number of chunks."""
    config = chunk_config_from(item["chunk_config"])
    model, prefix = config["embedding_model"], config.get("passage_prefix", "")
    log.info(
        "shard %d/%d of chunk set %s: documents %d:%d",
        int(item["shard"]) + 1,
        int(item["shards"]),
        config["chunk_config_id"],
        int(item["first"]),
        int(item["stop"]),
    )
    shard = fanout.shard_documents(documents, item)
    texts = _chunked(shard, config, cache).column("text").to_pylist()
    out.save(model, texts, cache.embed(model, texts, prefix), prefix)
    return len(texts)


def retrieve_group(
    folder: str | Path,
    testset: pa.Table,
    space: SearchSpace,
    chunk_configs: list[dict[str, Any]],
    cache: EmbeddingCache,
    keep_collections: bool = False,
    llm: LLMSettings | None = None,
) -> pa.Table:
    """``retrieve`` for each chunk set of a group's chunks ``folder``, one at a time; the
    questions are transformed once for the group (``transform_questions``, with the run's
    ``llm`` concurrency and deadlines)."""
    tables, transformed, charged = [], transform_questions(space, testset, llm), set()
    for chunk_config in chunk_configs:
        chunk_config = chunk_config_from(chunk_config)
        chunks = ChunkFile(fanout.chunk_set_path(folder, chunk_config["chunk_config_id"]))
        tables.append(
            retrieve(
                chunks, testset, space, chunk_config, cache, keep_collections, transformed, charged
            )
        )
    # one chunk of each column: an IPC file holds one dictionary of passages per column
    return pa.concat_tables(tables).combine_chunks()


def retrieve(
    chunks: pa.Table | ChunkFile,
    testset: pa.Table,
    space: SearchSpace,
    chunk_config: dict[str, Any],
    cache: EmbeddingCache,
    keep_collections: bool = False,
    transformed: dict[str, list[queries.Transformed]] | None = None,
    charged: set[str] | None = None,
) -> pa.Table:
    """What every configuration sharing ``chunk_config`` retrieves for every question, one
    row per config x question (kind ``retrievals``).

    A configuration with a query transformation searches what ``transformed`` holds for it
    (``transform_questions``, asked here when not given): the passage, or the question and
    its paraphrases, each ranked and fused by reciprocal rank; a reranker reorders the fused
    candidates by the question as asked. Its rows hold what was searched
    (``searched_query``) and, on its first configuration's rows, the requests the
    transformation sent (``query_llm_calls``; once per step: ``charged`` names the
    transformations counted already).

    The chunk set is loaded into each (vector store, index) of the space, in a collection
    named for the run, the chunk set and the index (``collection_name``), dropped once
    searched unless ``keep_collections``. Each row carries its store's ``recall_vs_exact``
    (the share of exact search's top k it found, for the same search setting), the time
    its index took to build, and the question's similarity-search latency (timed alone for
    the first ``store_search.LATENCY_SAMPLE`` questions; null for the rest). A configuration
    with a reranker reads its search's first ``rerank_fetch_k`` candidates reordered by it
    (scored once per step: each (question, chunk text) by an endpoint, each (question,
    candidate list) by a cross-encoder; its time per question in ``rerank_latency_ms``).
    A store's or a reranker's failure raises ``RagsweepError`` naming it.

    A chunk set given as its file (``chunk_sets.ChunkFile``) is read a record batch at a
    time, never whole: exact search scans its vectors by blocks, BM25 its texts, and the
    rows carry the texts, documents and spans of the chunks retrieved alone (``passages``
    holds each retrieved chunk's text once)."""
    chunk_config = chunk_config_from(chunk_config)
    chunks = TableChunks(chunks) if isinstance(chunks, pa.Table) else chunks
    if len(chunks) == 0:
        raise ValueError("the chunk set is empty")
    questions = [with_history(q, h) for q, h in asked(testset)]
    question_ids = testset.column("question_id").to_pylist()
    if transformed is None:
        transformed = transform_questions(space, testset)
    charged = set() if charged is None else charged
    query_sets, plans = queries.plan_queries(questions, transformed)
    model, prefix = chunk_config["embedding_model"], chunk_config.get("query_prefix", "")
    inputs = {
        name: Index(
            store=None,  # set per store
            question_vectors=cache.embed(model, asked_texts, prefix),
            chunk_vectors=chunks.vectors,
            questions=asked_texts,
            chunk_texts=chunks.texts,
        )
        for name, asked_texts in query_sets.items()
    }
    configs = space.configs(chunk_config)
    depth = max(c["top_k"] for c in configs)
    searches = list(dict.fromkeys(search_of(c) for c in configs))
    reranked = tuple(dict.fromkeys(search_of(c) for c in configs if "reranker" in c))
    searched = {}  # (store, index label) -> Searched; exact search in memory first
    for store, spec in [(DEFAULT_STORE, IndexSpec()), *space.targets()]:
        key = (store, spec.label())
        if key not in searched:
            searched[key] = search_store(
                store,
                spec,
                collection_name(chunk_config["chunk_config_id"], store, spec, space.distance),
                space.distance,
                inputs,
                searches,
                depth,
                keep_collections and key != EXACT,
                reranked,
                space.rerank_fetch_k,
            )
    reranking, reordered = Reranking(), {}

    fused: dict[tuple, Hits] = {}

    def searched_by(key: tuple[str, str], config: dict[str, Any], kind: str) -> Hits:
        """The ranking (or the reranker's candidates: ``kind``) of ``config``'s search and
        query transformation in (store, index) ``key``; fused once per step."""
        search, plan = search_of(config), plans[config.get("query_transform", queries.NONE)]
        at = (key, search, plan.sets, kind)
        if at not in fused:
            found = getattr(searched[key], kind)
            deep = depth if kind == "rankings" else space.rerank_fetch_k
            fused[at] = plan.ranking(lambda name: found[name, search], deep)
        return fused[at]

    def ranked(key: tuple[str, str], config: dict[str, Any]) -> tuple[Hits, list]:
        """The ranking ``config`` reads in (store, index) ``key``, with its scores, and each
        question's reranking time (None: no reranker); one reranking per target, search,
        query transformation and reranker."""
        if "reranker" not in config:
            return searched_by(key, config, "rankings"), [None] * len(questions)
        at = (key, search_of(config), config.get("query_transform"), config["reranker"])
        if at not in reordered:
            candidates = searched_by(key, config, "candidates")
            texts = texts_of(chunks.texts, candidates.ids)  # the candidates' alone
            ranking, ms = reranking.rerank(config["reranker"], questions, texts, candidates.ids)
            reordered[at] = ranking, ms.tolist()
        return reordered[at]

    rows: dict[str, list] = {"config_id": [], "question_id": [], "retrieved_chunk_ids": []}
    for name in ("recall_vs_exact", "query_latency_ms", "index_build_s", "rerank_latency_ms"):
        rows[name] = []
    rows["searched_query"], rows["query_llm_calls"], rows["retrieved_scores"] = [], [], []
    for config in configs:
        found = searched[target_of(config)]
        hits, rerank_ms = ranked(target_of(config), config)
        ranking = hits.ids[:, : config["top_k"]]
        reference = ranked(EXACT, config)[0].ids[:, : config["top_k"]]
        rows["config_id"] += [config["config_id"]] * len(question_ids)
        rows["question_id"] += question_ids
        rows["retrieved_chunk_ids"] += [[i for i in row if i >= 0] for row in ranking.tolist()]
        rows["retrieved_scores"] += chunk_scores(ranking, hits.scores[:, : config["top_k"]])
        rows["recall_vs_exact"] += overlap(ranking, reference)
        rows["query_latency_ms"] += found.latency_ms.tolist()
        rows["index_build_s"] += [found.build_s] * len(question_ids)
        rows["rerank_latency_ms"] += rerank_ms
        transform = config.get("query_transform", queries.NONE)
        rows["searched_query"] += plans[transform].shown
        first = transform not in charged
        charged.add(transform)
        rows["query_llm_calls"] += plans[transform].calls if first else [0] * len(question_ids)
    picked = rows["retrieved_chunk_ids"]
    offsets = np.r_[0, np.cumsum([len(ids) for ids in picked])].astype(np.int32)
    flat = np.concatenate(picked).astype(np.int64) if picked else np.zeros(0, np.int64)
    held, at = np.unique(flat, return_inverse=True)  # the chunks retrieved, each once
    found = chunks.take(held, ["doc_id", "start", "end", "text"])
    found = {name: found[name].combine_chunks() for name in found.column_names}
    at = pa.array(at.astype(np.int32))
    rows["retrieved_doc_ids"] = pa.ListArray.from_arrays(offsets, found["doc_id"].take(at))
    rows["passages"] = pa.ListArray.from_arrays(
        offsets, pa.DictionaryArray.from_arrays(at, found["text"])
    )
    spans = pa.StructArray.from_arrays(
        [found[n] for n in ("doc_id", "start", "end")], names=["doc_id", "start", "end"]
    )
    rows["retrieved_spans"] = pa.ListArray.from_arrays(offsets, spans.take(at))
    rows["query_latency_ms"] = pa.array(rows["query_latency_ms"], pa.float64(), from_pandas=True)
    rows["rerank_latency_ms"] = pa.array(rows["rerank_latency_ms"], pa.float64())
    rows["searched_query"] = pa.array(rows["searched_query"], pa.string())
    log.info(
        "retrieved for %d configurations x %d questions (%d rankings in each of %d indexes)",
        len(configs),
        len(questions),
        len(searches),
        len(space.targets()),
    )
    return pa.table(rows)


def transform_questions(
    space: SearchSpace, testset: pa.Table, llm: LLMSettings | None = None
) -> dict[str, list[queries.Transformed]]:
    """Each query transformation of the space (``none`` aside) of every question of
    ``testset`` (with its history), by the space's transforming model
    (``ragsweep.retrieval.queries``)."""
    chosen = [t for t in space.query_transforms if t != queries.NONE]
    if not chosen:
        return {}
    questions = [with_history(q, h) for q, h in asked(testset)]
    model = space.transforming_model()
    return {t: queries.transform(t, model, questions, llm or LLMSettings()) for t in chosen}


def check_transforms(space: SearchSpace, questions: int) -> int:
    """The LLM calls the space's query transformations take at most (one per question and
    transformation); with any, the endpoint must be set and answer (``RagsweepError``)."""
    chosen = [t for t in space.query_transforms if t != queries.NONE]
    if chosen:
        model = space.transforming_model()
        try:
            check_reachable(Endpoint.from_env(model))
        except RagsweepError as exc:
            raise RagsweepError(f"query_transforms {', '.join(chosen)}: {exc}") from None
    return questions * len(chosen)


def evaluate(
    retrievals: pa.Table,
    testset: pa.Table,
    configs: list[dict[str, Any]],
    metric: str,
    settings: LLMSettings | None = None,
    max_llm_calls: int = 0,
    seed: int = 42,
    strategy: str = GRID,
    max_configs: int = 0,
    known: surrogate.WarmStart | None = None,
    trials_at_once: int = 1,
    agents: list[deployed.Agent] | None = None,
    documents: pa.Table | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Answer and score what the configurations retrieved: the answers and the scores, one
    row per config x question.

    Retrieval metrics cover every row. Answers, and the metrics and verdicts that need one,
    cover the whole grid; or, when that would take more than ``max_llm_calls`` (0: no
    limit), the rounds of successive halving over the questions in a ``seed``-ed order,
    promoting by ``metric``: a configuration dropped early has null answers for the rest
    (``strategy`` halving: even when the budget would afford the grid). With ``strategy``
    model, at most ``max_configs`` configurations answer (and no more than
    ``max_llm_calls`` allow), each on every question, chosen ``trials_at_once`` at a time
    (their questions answered together) by a surrogate of ``metric`` fitted on every
    configuration's retrieval metrics
    (``ragsweep.evaluation.surrogate``), starting from the ``known`` scores of earlier runs
    of the sweep (``ragsweep.store.warmstart``).
    Each deployed assistant of ``agents`` answers every question once, whatever the
    strategy (``ragsweep.answering.agents``; its contexts located in ``documents``), in the
    last round; its calls and its verdicts' come out of ``max_llm_calls`` first, and it is
    no configuration of ``max_configs``.
    The plan and the calls it made are recorded in the scores' metadata
    (``ragsweep.evaluation``), beside the judge (``ragsweep.evaluation.judge``); model answer
    settings
    in the answers' (``ragsweep.answer_settings``).

    The retrievals stay Arrow columns: each round takes its rows by index, and a context is
    a number (``ragsweep.answering.contexts``) until the answers artifact needs its text.
    """
    settings = settings or LLMSettings()
    metric = resolve_metric(metric, judged=bool(settings.judge))
    by_id = {c["config_id"]: c for c in configs}
    config_ids = pc.unique(retrievals["config_id"]).to_pylist()
    unknown = sorted(set(config_ids) - set(by_id))
    if unknown:
        raise ValueError(f"retrievals of configurations not in the search space: {unknown}")
    answerers = sorted({by_id[c]["answerer"] for c in config_ids})
    questions = dict(zip(testset["question_id"].to_pylist(), asked(testset), strict=True))
    order = list(questions)
    random.Random(seed).shuffle(order)
    configured = [by_id[c] for c in config_ids]
    # the query transformations' requests, made while retrieving, come out of the budget
    queried = 0
    if "query_llm_calls" in retrievals.column_names:
        queried = pc.sum(retrievals["query_llm_calls"]).as_py() or 0
    # the plan step reserved one call per question and transformation (a cluster's branches,
    # each with its own reply cache, may have made more: counted, not held against answers)
    transforms = {c.get("query_transform", queries.NONE) for c in configured} - {queries.NONE}
    reserved = min(queried, len(order) * len(transforms))
    autorag = metric in AUTORAG_METRICS
    agents = agents or []
    rounds, planned = plan_evaluation(
        configured,
        len(order),
        settings,
        max_llm_calls,
        reserved,
        strategy,
        max_configs,
        autorag,
        len(agents),
    )
    planned += queried - reserved
    progress.plan(progress.LLM_CALLS, planned)
    where = _positions(retrievals, config_ids, order)
    contexts = Contexts.of_passages(retrievals["passages"])
    left = np.ones(retrievals.num_rows, dtype=bool)  # not answered yet
    answered: list[pa.Table] = []
    scored: list[pa.Table] = []
    made, judge = queried, None

    def play(alive: list[int], first: int, last: int) -> np.ndarray:
        """Answer and score one round; its configs x questions matrix of ``metric``."""
        nonlocal made, judge
        alive_ids, asked = [config_ids[i] for i in alive], order[first:last]
        rows = where[np.ix_(alive, range(first, last))].reshape(-1)
        if (rows < 0).any():
            c, q = np.argwhere(where[np.ix_(alive, range(first, last))] < 0)[0]
            raise ValueError(f"no retrieval of question {asked[q]} by {alive_ids[c]}")
        left[rows] = False
        number = 0 if strategy == MODEL else len(answered)  # a model's trials: one round
        answers, calls = _answered(retrievals, rows, contexts, by_id, questions, settings, number)
        scores = score_answers(answers, testset, settings, contexts.take(rows), autorag)
        judge = judge or (scores.schema.metadata or {}).get(b"ragsweep.judge")
        made += calls
        answered.append(answers)
        scored.append(scores.select(SCORES.names).cast(SCORES))
        if len(rounds) > 1:
            log.info(
                "round %d: %d configurations answered %d questions",
                len(answered),
                len(alive_ids),
                last,
            )
        # halving promotes the highest: a lower-is-better metric is negated
        return declared(metric).sign() * matrix(scored[-1], metric, alive_ids, asked)

    trials: list[dict[str, Any]] = []
    warm: dict[str, Any] = {}
    if strategy == MODEL:
        trials, warm = _model_search(
            retrievals,
            testset,
            contexts,
            [by_id[c] for c in config_ids],
            (metric, rounds[0].configs, seed),
            known,
            lambda batch: play(batch, 0, len(order)),
            trials_at_once,
        )
    else:
        halving.run(rounds, len(config_ids), play, seed)
    if agents:
        last = 0 if strategy == MODEL else len(rounds) - 1
        asked_by = _agent_answers(agents, questions, documents, settings, last)
        scores = score_answers(asked_by.answers, testset, settings, None, autorag)
        judge = judge or (scores.schema.metadata or {}).get(b"ragsweep.judge")
        made += asked_by.calls
        answered.append(asked_by.answers)
        scored.append(asked_by.measured(scores.select(SCORES.names).cast(SCORES)))
    rest = np.flatnonzero(left)
    answers, _ = _answered(retrievals, rest, contexts, by_id, questions, settings, None)
    answered.append(answers)
    scores = score_answers(answers, testset, None, contexts.take(rest), autorag)
    scored.append(scores.select(SCORES.names).cast(SCORES))
    answers = pa.concat_tables(answered)
    scores = pa.concat_tables(scored)
    made += pc.sum(scores["judge_llm_calls"]).as_py() or 0
    named = "model-based search" if strategy == MODEL else "full grid"
    record = {
        "strategy": "successive halving" if len(rounds) > 1 else named,
        "max_llm_calls": max_llm_calls,
        "rounds": [{"configs": r.configs, "questions": r.questions} for r in rounds],
        **(
            {"max_configs": max_configs, "trials": trials, "warm_start": warm}
            if strategy == MODEL
            else {}
        ),
        "planned_llm_calls": planned,  # at most, before shared answers and the reply cache
        "llm_calls": made,  # requests sent, retries included
        "promoted_by": metric,
        "seed": seed,
    }
    if queried:
        record["query_llm_calls"] = queried  # of llm_calls, the query transformations'
    meta = {"ragsweep.evaluation": json.dumps(record)}
    if judge:
        meta["ragsweep.judge"] = judge
    scores = scores.replace_schema_metadata(meta)
    if any(uses_model(name) for name in answerers):
        answer_settings = {"answerers": answerers, **settings.answer_settings()}
        meta = {"ragsweep.answer_settings": json.dumps(answer_settings)}
        answers = answers.replace_schema_metadata(meta)
    return answers, scores


class _AgentAnswers:
    """The deployed assistants' answers (kind ``answers``), the calls they made, and which
    rows carried contexts and located spans."""

    def __init__(self, answers: pa.Table, calls: int, given: list[bool], located: list[bool]):
        self.answers, self.calls = answers, calls
        self.given, self.located = np.array(given, bool), np.array(located, bool)

    def measured(self, scores: pa.Table) -> pa.Table:
        """``scores`` with what was not measured null: the retrieval metrics and
        faithfulness where the reply carried no context, the span metrics where its texts
        were not all found in their documents; AutoRAG's ``overall_score``, where scored,
        the mean of the parts that remain."""
        unmeasured = {name: ~self.given for name in _of_kind("retrieval")}
        unmeasured["faithfulness"] = ~self.given
        for name in ("span_recall", "span_precision"):
            unmeasured[name] = ~(self.given & self.located)
        for name, mask in unmeasured.items():
            if name in scores.column_names and mask.any():
                at = scores.schema.get_field_index(name)
                kept = pc.if_else(pa.array(mask), pa.scalar(None, pa.float64()), scores[name])
                scores = scores.set_column(at, scores.field(name), kept)
        if scores["overall_score"].null_count < scores.num_rows:
            parts = np.column_stack(
                [scores[p].to_numpy(zero_copy_only=False) for p in OVERALL_PARTS]
            ).astype(float)
            with np.errstate(invalid="ignore"):
                mean = np.nansum(parts, axis=1) / (~np.isnan(parts)).sum(axis=1)
            at = scores.schema.get_field_index("overall_score")
            kept = pc.if_else(
                pc.is_null(scores["overall_score"]),
                scores["overall_score"],
                pa.array(mean, pa.float64(), from_pandas=True),
            )
            scores = scores.set_column(at, scores.field("overall_score"), kept)
        return scores


def _of_kind(kind: str) -> list[str]:
    """The registered metrics of ``kind`` (retrieval, answer or recorded)."""
    return [name for name in METRICS if declared(name).kind == kind]


def _agent_answers(
    agents: list[deployed.Agent],
    questions: dict[str, tuple[str, History]],
    documents: pa.Table | None,
    settings: LLMSettings,
    number: int,
) -> _AgentAnswers:
    """Every question asked of every assistant once, as rows of the answers artifact in
    round ``number``: what the assistant said it retrieved stands for the retrieval (no
    chunk ids, no scores)."""
    texts = (
        dict(zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True))
        if documents is not None
        else {}
    )
    rows: list[dict[str, Any]] = []
    given, located, calls = [], [], 0
    for agent in agents:
        replies = deployed.ask_agent(agent, list(questions.values()), texts, settings)
        config = agent.config()["config_id"]
        for question_id, reply in zip(questions, replies, strict=True):
            got, answer = reply.retrieved, reply.answer
            spans = got.spans
            rows.append(
                {
                    "config_id": config,
                    "question_id": question_id,
                    "retrieved_chunk_ids": [],
                    "retrieved_doc_ids": list(got.doc_ids),
                    "context": SEPARATOR.join(got.texts),
                    "round": number,
                    **{name: getattr(answer, f) for name, f in ANSWER_COLUMNS.items()},
                    "retrieved_spans": (
                        [dict(zip(("doc_id", "start", "end"), s, strict=True)) for s in spans]
                        if spans is not None
                        else None
                    ),
                }
            )
            given.append(got.given)
            located.append(spans is not None)
            calls += 0 if answer.cached else answer.llm_calls
    return _AgentAnswers(pa.Table.from_pylist(rows, schema=ANSWERS), calls, given, located)


def _positions(retrievals: pa.Table, config_ids: list[str], order: list[str]) -> np.ndarray:
    """The row of ``retrievals`` holding each configuration x question (questions in
    ``order``); -1 where there is none. A question not in the test set, or a configuration
    x question retrieved twice, is an error."""
    config = codes(retrievals["config_id"], config_ids)
    question = codes(retrievals["question_id"], order)
    if (question < 0).any():
        strays = pc.unique(retrievals["question_id"].filter(pa.array(question < 0)))
        raise ValueError(f"retrievals of questions not in the test set: {strays.to_pylist()[:5]}")
    where = np.full((len(config_ids), len(order)), -1, dtype=np.int64)
    where[config, question] = np.arange(retrievals.num_rows)
    if (where >= 0).sum() < retrievals.num_rows:
        raise ValueError("the retrievals hold some configuration x question more than once")
    return where


def check_memory(
    run: RunSettings, documents_path: str, items: list[dict[str, Any]], questions: int
) -> None:
    """When there is a memory limit (the run's ``memory_limit``, else on a cluster the heavy
    steps' pod limits, ``sizing.MEMORY_LIMITS_ENV``), check each heavy step's estimated
    peak against it for the fan-out ``items``; one over raises ``RagsweepError`` naming the
    step and the fix. The documents are read only then, to be sized."""
    compiled = os.environ.get(sizing.MEMORY_LIMITS_ENV, "")
    limits, source = sizing.memory_limits(run.memory_limit, compiled)
    if not limits:
        return
    table = read_table(documents_path, "documents")
    chunk_configs = run.space.chunk_configs()
    whole = run.retrieval_question_blocks > 1
    shards = fanout.shard_items(chunk_configs, table, run.embedding_shard_bytes, whole)
    texts = table.column("text")
    per_token = {
        model: sizing.bytes_per_token(texts, embedding.load_tokenizer(model))
        for model in {c["embedding_model"] for c in chunk_configs}
    }
    peaks = sizing.estimate_peaks(
        fanout.document_sizes(table), items, shards, questions, run.space, per_token
    )
    cluster = bool(compiled)  # the options to change are then submit's -p
    sizing.check_memory(peaks, limits, source, questions, cluster)


def plan_evaluation(
    configs: list[dict[str, Any]],
    questions: int,
    settings: LLMSettings,
    max_llm_calls: int,
    reserved: int = 0,
    strategy: str = GRID,
    max_configs: int = 0,
    autorag: bool = False,
    agents: int = 0,
) -> tuple[list[halving.Round], int]:
    """Which configurations answer which questions and the LLM calls that takes at most,
    ``reserved`` included (the query transformations'; with ``autorag``, a relevance
    rating besides each verdict) and the ``agents`` deployed assistants' (an answer and
    its verdicts per question, taken from the budget first); a budget too small raises
    ``RagsweepError``. ``grid``: every configuration, or successive halving when
    ``max_llm_calls`` would not afford it (``ragsweep.evaluation.halving.plan``);
    ``halving``: successive halving even when it would; ``model``: one round of the
    configurations the model-based search may answer (``plan_model``)."""
    check_strategy(strategy, "strategy")
    asked = agents * questions * (1 + calls_per_answer_of([], settings, autorag))
    if max_llm_calls and asked and asked >= max_llm_calls:
        raise RagsweepError(
            f"max_llm_calls={max_llm_calls} is too few: the deployed assistants (--agent) take "
            f"{asked} LLM calls (an answer and its verdicts per question) before any "
            "configuration answers; raise the budget"
        )
    if asked:
        planned, max_llm_calls = asked, max_llm_calls - asked if max_llm_calls else 0
        rounds, more = plan_evaluation(
            configs, questions, settings, max_llm_calls, reserved, strategy, max_configs, autorag
        )
        return rounds, planned + more
    if max_llm_calls and reserved >= max_llm_calls:
        raise RagsweepError(
            f"max_llm_calls={max_llm_calls} is too few: the query transformations take "
            f"{reserved} LLM calls (one per question and transformation) before any answer; "
            "raise the budget or drop query_transforms"
        )
    budget = max_llm_calls - reserved if max_llm_calls else 0
    calls_per_answer = calls_per_answer_of(configs, settings, autorag)
    try:
        if strategy == MODEL:
            answered, planned = plan_model(
                configs, questions, settings, budget, max_configs, autorag
            )
            return [halving.Round(answered, questions)], planned + reserved
        halve = strategy == HALVING
        rounds = halving.plan(len(configs), questions, calls_per_answer, budget, halve)
    except RagsweepError as exc:
        if not reserved:
            raise
        raise RagsweepError(
            f"{exc} (what is left of max_llm_calls={max_llm_calls} after the query "
            f"transformations' {reserved} calls)"
        ) from None
    planned = halving.cost(rounds, calls_per_answer) + reserved
    if len(rounds) > 1:
        log.info(
            "successive halving (max_llm_calls=%d): %s configurations x questions, "
            "at most %d LLM calls",
            max_llm_calls,
            halving.describe(rounds),
            planned,
        )
    return rounds, planned


def calls_per_answer_of(
    configs: list[dict[str, Any]], settings: LLMSettings, autorag: bool = False
) -> int:
    """LLM calls one configuration makes on one question at most: its answer from a model,
    the judge's verdict (with ``autorag``, and its relevance rating)."""
    judged = bool(settings.judge) * (2 if autorag else 1)
    return any(uses_model(c["answerer"]) for c in configs) + judged


def plan_model(
    configs: list[dict[str, Any]],
    questions: int,
    settings: LLMSettings,
    max_llm_calls: int,
    max_configs: int,
    autorag: bool = False,
) -> tuple[int, int]:
    """How many configurations the model-based search answers (at most ``max_configs``,
    and as many as ``max_llm_calls`` afford on every question; 0: no limit) and the LLM
    calls that takes at most; a budget too small for one raises ``RagsweepError``."""
    per_config = questions * calls_per_answer_of(configs, settings, autorag)
    budget = min(len(configs), max_configs or len(configs))
    if max_llm_calls and per_config:
        if max_llm_calls < per_config:
            raise RagsweepError(
                f"max_llm_calls={max_llm_calls} is too few for the model-based search: one "
                f"configuration answering {questions} questions needs {per_config} LLM calls"
            )
        budget = min(budget, max_llm_calls // per_config)
    log.info(
        "model-based search: at most %d of %d configurations answer, at most %d LLM calls",
        budget,
        len(configs),
        budget * per_config,
    )
    return budget, budget * per_config


def _model_search(
    retrievals: pa.Table,
    testset: pa.Table,
    contexts: Contexts,
    configs: list[dict[str, Any]],
    search: tuple[str, int, int],
    known: surrogate.WarmStart | None,
    answer: Callable[[list[int]], np.ndarray],
    at_once: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run ``surrogate.search`` (``search``: the metric, the most configurations answered,
    the seed) on the ``configs``' retrieval metrics (free: no answer needed), starting from
    the ``known`` scores of the configurations in the space; ``answer(batch)`` answers the
    configurations of ``batch`` (``at_once`` at most) together on every question and
    returns their metric, a row each (higher is better). A warm-started configuration that
    could win (``_could_win``) is answered again, ``RECHECKED`` at most, out of the budget
    (what the re-checks do not use goes back to the search), so that this run's best, its
    patterns and the nightly comparison are this run's measurements of the sweep's best. The
    trials, in order, and the warm start (how many configurations, from which runs, which
    were answered again, which that could win were not; or why none), for the record."""
    metric, budget, seed = search
    config_ids = [c["config_id"] for c in configs]
    rows = np.arange(retrievals.num_rows)
    unanswered, _ = _answered(retrievals, rows, contexts, {}, {}, LLMSettings(), None)
    free = score_answers(unanswered, testset, None, contexts)
    log.info("model-based search of %s over %d configurations", metric, len(configs))
    question_ids = testset["question_id"].to_pylist()
    means = np.column_stack(
        [
            statistics.means(matrix(free, name, config_ids, question_ids))
            for name in surrogate.FREE_METRICS
        ]
    )
    x, names = surrogate.features(means, surrogate.FREE_METRICS)
    index = {c: i for i, c in enumerate(config_ids)}
    known = known or surrogate.WarmStart()
    sign = declared(metric).sign()  # the search maximises, as answer(i) returns
    warm = {index[c]: sign * v for c, v in known.scores.items() if c in index}
    scores: dict[int, float] = {}

    def evaluate(batch: list[int]) -> list[float]:
        scores.update(zip(batch, map(float, statistics.means(answer(batch))), strict=True))
        return [scores[i] for i in batch]

    reserve = min(RECHECKED, len(warm), budget)
    trials, _ = surrogate.search(x, names, budget - reserve, evaluate, seed, warm, at_once)
    again = _could_win(warm, scores)[:reserve]
    for start in range(0, len(again), at_once):
        evaluate(again[start : start + at_once])
    trials += [
        surrogate.Trial(i, None, None, f"scored {sign * warm[i]:.3f} by an earlier run, at "
                        "least this run's best: answered again")
        for i in again
    ]  # fmt: skip
    if reserve > len(again):  # the re-checks not needed go back to the search
        more, _ = surrogate.search(
            x, names, reserve - len(again), evaluate, seed + 1, {**warm, **scores}, at_once
        )
        trials += more
    started = {"configurations": len(warm), "runs": list(known.runs) if warm else []}
    if warm:
        started["answered_again"] = [config_ids[i] for i in again]
        started["not_answered_again"] = [
            {"config_id": config_ids[i], "label": configs[i].get("label"), "score": sign * warm[i]}
            for i in _could_win(warm, scores)
        ]
    if known.note:
        started["note"] = known.note
    if warm:
        log.info(
            "model-based search: warm start from %d configurations of %s",
            len(warm),
            ", ".join(known.runs),
        )
    elif known.note:
        log.info("model-based search: %s", known.note)
    return [
        {
            "config_id": config_ids[t.config],
            "label": configs[t.config].get("label", config_ids[t.config]),
            "predicted": t.predicted,
            "upper": t.upper,
            "reason": t.reason,
            "score": scores[t.config] if math.isfinite(scores[t.config]) else None,
        }
        for t in trials
    ], started


def _could_win(warm: dict[int, float], scores: dict[int, float]) -> list[int]:
    """The warm-started configurations not answered in this run whose earlier score (higher
    is better) is at least this run's best: the sweep's best may be among them. Highest
    first."""
    answered = [v for v in scores.values() if math.isfinite(v)]
    best = max(answered, default=-math.inf)
    found = [i for i, v in warm.items() if i not in scores and v >= best]
    return sorted(found, key=lambda i: -warm[i])


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


def asked(testset: pa.Table) -> list[tuple[str, History]]:
    """Each question of ``testset`` with its conversation history (empty when it has none)."""
    histories = (
        testset["conversation_history"].to_pylist()
        if "conversation_history" in testset.column_names
        else [None] * testset.num_rows
    )
    return [
        (question, parse_history(history))
        for question, history in zip(testset["question"].to_pylist(), histories, strict=True)
    ]


def _answered(
    retrievals: pa.Table,
    rows: np.ndarray,
    contexts: Contexts,
    by_id: dict[str, dict[str, Any]],
    questions: dict[str, tuple[str, History]],
    settings: LLMSettings,
    number: int | None,
) -> tuple[pa.Table, int]:
    """The retrievals of ``rows`` with their answers from round ``number`` (None: left
    unanswered, null answer columns), and the LLM calls answering made. Rows of the same
    answerer, question and passages share one answer."""
    names = ["config_id", "question_id", "retrieved_chunk_ids", "retrieved_doc_ids"]
    carried = (
        "retrieved_spans",
        "retrieved_scores",
        "recall_vs_exact",
        "query_latency_ms",
        "index_build_s",
        "rerank_latency_ms",
        "searched_query",
    )
    names += [n for n in carried if n in retrievals.column_names]
    batch = retrievals.select(names).take(pa.array(rows, pa.int64()))
    table: dict[str, Any] = {name: batch[name] for name in names}
    for name in carried:  # absent from older retrievals: null (no spans: span recall 0)
        if name not in table:
            table[name] = pa.nulls(len(rows), ANSWERS.field(name).type)
    mine = contexts.take(rows)
    table["context"] = mine.column()
    table["round"] = (
        pa.nulls(len(rows), pa.int64())
        if number is None
        else pa.array(np.full(len(rows), number, dtype=np.int64))
    )
    calls = 0
    if number is None or not len(rows):
        for name in ANSWER_COLUMNS:
            table[name] = pa.nulls(len(rows), ANSWERS.field(name).type)
    else:
        answerers = sorted({c["answerer"] for c in by_id.values()})
        answerer = np.array([answerers.index(c["answerer"]) for c in by_id.values()])
        answerer = answerer[codes(batch["config_id"], list(by_id))]
        question = codes(batch["question_id"], list(questions))
        groups, first = group_rows(np.stack([answerer, question, mine.of_row], axis=1))
        ids = list(questions)
        keys = [
            (answerers[answerer[r]], ids[question[r]], contexts.passages(int(mine.of_row[r])))
            for r in first
        ]
        answers = answer_distinct(set(keys), questions, settings)
        index = pa.array(groups)
        for name, field in ANSWER_COLUMNS.items():
            values = [getattr(answers[key], field) for key in keys]
            table[name] = pa.array(values, ANSWERS.field(name).type).take(index)
        calls = sum(a.llm_calls for a in answers.values() if not a.cached)
    return pa.table([table[f.name] for f in ANSWERS], schema=ANSWERS), calls


def answer_distinct(
    keys: set[tuple[str, str, tuple[str, ...]]],
    questions: dict[str, tuple[str, History]],
    settings: LLMSettings,
) -> dict[tuple[str, str, tuple[str, ...]], Answer]:
    """Answer each distinct (answerer, question id, passages) once, one batch per answerer,
    so configurations that retrieve the same passages share one answer; a conversational
    question goes with its history (``questions``: id -> (question, history))."""
    answers = {}
    for name in sorted({key[0] for key in keys}):
        batch = sorted(key for key in keys if key[0] == name)
        items = [(questions[q][0], list(passages), questions[q][1]) for _, q, passages in batch]
        answers.update(zip(batch, get_answerer(name, settings)(items), strict=True))
    return answers
