"""Arrow schemas of every artifact passed between steps, and their checked read/write.

Every artifact is an Arrow IPC file whose schema metadata names the artifact kind and the
schema version, so a step fails with a clear message when handed the wrong file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from ragsweep.core import plugins
from ragsweep.core.errors import RagsweepError

# a configuration's search where it names none: exact search in memory, cosine distance
DEFAULT_STORE = "memory"
DEFAULT_INDEX = "exact"
DEFAULT_DISTANCE = "cosine"
SETTINGS_KEY = "ragsweep.settings"
SCHEMA_VERSION = "11"  # 11: how each gold span was found; 10: judge_error_rate on the
# leaderboard; 9: retrieved chunks' scores; 8: query transformations; 7: eliminated and
# judge_errors on the leaderboard; 6: rerankers, spans

SPAN = pa.struct([("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64())])
# a gold span, and how it was found: "exact" (verbatim, or up to white space) or
# "approximate" with its score (documents.locating); null in test sets made before: exact
GOLD_SPAN = pa.struct([*SPAN, pa.field("found", pa.string()), pa.field("score", pa.float64())])

DOCUMENTS = pa.schema(
    [
        ("doc_id", pa.string()),  # key relative to the docs folder or S3 prefix, '/'-separated
        ("source", pa.string()),  # where it was read: a local path or s3://bucket/key
        ("format", pa.string()),  # file suffix without the dot: md, txt, html, pdf, ...
        ("text", pa.string()),
    ]
)

TESTSET = pa.schema(
    [
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("reference_answers", pa.list_(pa.string())),
        ("reference_doc_ids", pa.list_(pa.string())),  # as given, or resolved to doc_ids
        ("reference_context", pa.string()),  # Giskard's; null when the source has none
        ("gold_spans", pa.list_(GOLD_SPAN)),  # where the reference lies in the documents
        ("question_type", pa.string()),
        ("topic", pa.string()),
        ("conversation_history", pa.string()),  # JSON text, as Giskard gives it
        ("question_version", pa.string()),  # hash of the content it is scored against
    ]
)

CHUNKS = pa.schema(
    [
        ("chunk_id", pa.int64()),  # position in this chunk set
        ("doc_id", pa.string()),
        ("start", pa.int64()),  # text == document text[start:end]
        ("end", pa.int64()),
        ("text", pa.string()),
        ("embedding", pa.list_(pa.float32())),
    ]
)

# What each configuration retrieved for each question, before any answer.
RETRIEVALS = pa.schema(
    [
        ("config_id", pa.string()),
        ("question_id", pa.string()),
        ("retrieved_chunk_ids", pa.list_(pa.int64())),  # best first, within the chunk set
        ("retrieved_doc_ids", pa.list_(pa.string())),
        # the retrieved chunks' texts, each stored once: a dictionary of the chunk set's texts
        ("passages", pa.list_(pa.dictionary(pa.int32(), pa.string()))),
        ("retrieved_spans", pa.list_(SPAN)),  # where each retrieved chunk lies, best first
        # the score each retrieved chunk was ranked by, best first (higher is better): the
        # store's similarity, MMR's marginal relevance, the reciprocal-rank fusion score
        # (hybrid, query transformations) or the reranker's; null where none was given
        ("retrieved_scores", pa.list_(pa.float64())),
        # the share of exact search's top k (same search setting) the store found
        ("recall_vs_exact", pa.float64()),
        ("query_latency_ms", pa.float64()),  # the similarity search alone; null: not timed
        ("index_build_s", pa.float64()),  # the store's index of this chunk set
        ("rerank_latency_ms", pa.float64()),  # the reranker's time for the question; null: none
        # what was searched in place of the question (hyde: the passage; multi_query: the
        # paraphrases, one a line); null: the question as asked
        ("searched_query", pa.string()),
        # requests the transformation sent (on one row per question and transformation)
        ("query_llm_calls", pa.int64()),
    ]
)

ANSWERS = pa.schema(
    [
        ("config_id", pa.string()),
        ("question_id", pa.string()),
        ("retrieved_chunk_ids", pa.list_(pa.int64())),  # best first
        ("retrieved_doc_ids", pa.list_(pa.string())),
        ("context", pa.string()),
        ("round", pa.int64()),  # the evaluation round that answered it; null: not answered
        ("answer", pa.string()),  # null when not answered (a configuration eliminated early)
        ("latency_s", pa.float64()),  # of the model request that answered; null: no model
        ("prompt_tokens", pa.int64()),  # as the server's usage reports them
        ("completion_tokens", pa.int64()),
        ("llm_calls", pa.int64()),  # requests sent for this answer, retries included
        ("cached", pa.bool_()),  # taken from the reply cache: no call made in this run
        ("answer_error", pa.string()),  # why the model gave no answer; null when it did
        ("retrieved_spans", pa.list_(SPAN)),  # best first
        ("retrieved_scores", pa.list_(pa.float64())),  # as retrieved (RETRIEVALS)
        ("recall_vs_exact", pa.float64()),  # as retrieved (RETRIEVALS)
        ("query_latency_ms", pa.float64()),
        ("index_build_s", pa.float64()),
        ("rerank_latency_ms", pa.float64()),
        ("searched_query", pa.string()),  # as retrieved (RETRIEVALS)
    ]
)

SCORED = [
    ("config_id", pa.string()),
    ("question_id", pa.string()),
    ("context_correctness", pa.float64()),
    ("document_recall", pa.float64()),
    ("span_recall", pa.float64()),  # null: no gold span
    ("span_precision", pa.float64()),
    ("recall_vs_exact", pa.float64()),  # 1.0: the store found exact search's top k
    ("answer_correctness", pa.float64()),
    ("faithfulness", pa.float64()),
    # the LLM judge's verdict, 1 or 0 (0 when the answer failed); null: no verdict
    ("correctness", pa.float64()),
    ("correctness_reason", pa.string()),
    ("judge_error", pa.string()),  # why there is no verdict; null when there is one
    ("judge_llm_calls", pa.int64()),  # requests sent for the verdict; 0: cached or none
    # Red Hat AutoRAG's, when a run ranks by one (ragsweep.evaluation.scoring.AUTORAG_METRICS)
    ("answer_relevance", pa.float64()),
    ("overall_score", pa.float64()),
]
# The metrics: the float columns registered in the entry point group ``ragsweep.metrics``
# (their kind, direction and range are declared there: ``ragsweep.evaluation.metrics``), the
# built-ins' columns above and one after them for each metric another package registers. A
# float column nobody registered (a cost, a count) is not a metric and is never ranked.
_REGISTERED = plugins.names(plugins.METRICS)
SCORES = pa.schema(
    SCORED + [(name, pa.float64()) for name in _REGISTERED if name not in dict(SCORED)]
)
METRICS = [f.name for f in SCORES if f.type == pa.float64() and f.name in _REGISTERED]

# A configuration's identity. Its other columns (chunker, chunk_size, ..., each with its
# type) are declared by the search space (``ragsweep.sweep.space.CONFIG_FIELDS``), beside the
# options they come from: the artifacts holding configurations ("settings", "leaderboard")
# keep them as their writer typed them (``OPEN_KINDS``).
CONFIG_KEY = [("config_id", pa.string()), ("label", pa.string())]
# A configuration holds these only when not the default, which keeps its id as it was.
CONFIG_DEFAULTS = {
    "vector_store": DEFAULT_STORE,
    "index": DEFAULT_INDEX,
    "distance": DEFAULT_DISTANCE,
    "reranker": "none",
    "query_transform": "none",
}

# What answering one question cost; null when not measured (the offline answerer calls no LLM).
# Taken from the answers (or scores) when a step records them; context_chars always exists.
COSTS = [
    ("latency_s", pa.float64()),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("llm_calls", pa.int64()),
    ("context_chars", pa.int64()),
    ("query_latency_ms", pa.float64()),  # the store's similarity search, timed alone
    ("index_build_s", pa.float64()),  # the same for every question of a configuration
    ("rerank_latency_ms", pa.float64()),  # the reranker's time for the question's candidates
]


def _with_intervals(metrics: list[str]) -> list[tuple[str, pa.DataType]]:
    fields = []
    for m in metrics:
        fields += [(m, pa.float64()), (f"{m}_low", pa.float64()), (f"{m}_high", pa.float64())]
    return fields


# The leaderboard's figures: after its rank and each configuration's columns
# (``leaderboard_schema``).
FIGURES = (
    [
        ("questions", pa.int64()),  # scored on the ranking metric
        ("round", pa.int64()),  # the last evaluation round it reached (successive halving)
        ("eliminated", pa.bool_()),  # dropped by successive halving before the last round
    ]
    + _with_intervals(METRICS)
    + [
        # adjusted p of "worse than the leader" on the ranking metric, on the questions both
        # were asked, aware that the leader is the post-hoc best (max-statistic test:
        # statistics.worse_than_best_pvalues); null for the leader, and where too few
        # clusters are shared for the test to reach 5% (no verdict)
        ("p_value", pa.float64()),
        ("tied_with_best", pa.bool_()),  # not shown worse than the leader (p >= 0.05 or null)
        ("latency_p50_s", pa.float64()),
        ("latency_p95_s", pa.float64()),
        ("prompt_tokens", pa.int64()),  # totals over the questions
        ("completion_tokens", pa.int64()),
        ("llm_calls", pa.int64()),
        ("context_chars", pa.float64()),  # mean retrieved context per question
        ("query_latency_p50_ms", pa.float64()),  # over the questions timed
        ("query_latency_p95_ms", pa.float64()),
        ("index_build_s", pa.float64()),  # of its store's index of its chunk set
        ("rerank_latency_p50_ms", pa.float64()),  # per question; null: no reranker
        ("rerank_latency_p95_ms", pa.float64()),
        ("errors", pa.int64()),  # questions whose answer failed or whose verdict was unreadable
        ("errors_flagged", pa.bool_()),  # errors on more than 10% of its answered questions
        ("judge_errors", pa.int64()),  # answers the judge gave no readable verdict on
        ("judge_error_rate", pa.float64()),  # their share of its answers; null: no judge
    ]
)


def leaderboard_schema(config_fields: Iterable[tuple[str, pa.DataType]]) -> pa.Schema:
    """The leaderboard's schema: its rank, the configurations' columns ``config_fields``
    (``CONFIG_KEY``'s among them), then its figures."""
    return pa.schema([("rank", pa.int64()), *config_fields, *FIGURES])


# One row per configuration x question: scores, costs, and what the answer was.
RESULTS = pa.schema(
    list(SCORES)
    + [
        # the question's cluster (evaluation.clusters): its first reference document, or the
        # section of its gold span (doc@start); null: the question is a cluster of its own
        pa.field("cluster", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("question_type", pa.string()),
        pa.field("question_version", pa.string()),  # null in results stored before it
        pa.field("round", pa.int64()),
        pa.field("answer", pa.string()),
        pa.field("retrieved_doc_ids", pa.list_(pa.string())),
        pa.field("answer_error", pa.string()),  # why the model gave no answer; null when it did
    ]
    + [pa.field(name, kind) for name, kind in COSTS]
    # where each retrieved chunk lies in its document, best first; null in older results
    + [pa.field("retrieved_spans", pa.list_(SPAN))]
    # the score each retrieved chunk was ranked by (RETRIEVALS); null in older results
    + [pa.field("retrieved_scores", pa.list_(pa.float64()))]
    # what was searched in place of the question (a query transformation); null: as asked
    + [pa.field("searched_query", pa.string())]
)

BREAKDOWN = pa.schema(
    [
        ("config_id", pa.string()),
        ("label", pa.string()),
        ("dimension", pa.string()),  # topic or question_type
        ("value", pa.string()),
        ("questions", pa.int64()),
    ]
    + _with_intervals(METRICS)
)

FAILURES = pa.schema(
    [
        ("config_id", pa.string()),
        ("label", pa.string()),
        ("question_id", pa.string()),
        ("question", pa.string()),
        ("topic", pa.string()),
        ("reference_answer", pa.string()),
        ("reference_doc_ids", pa.list_(pa.string())),
        ("answer", pa.string()),
        ("retrieved_doc_ids", pa.list_(pa.string())),
        ("reason", pa.string()),
        ("answer_error", pa.string()),  # why the answer failed; null when it did not
        ("judge_error", pa.string()),  # why there is no verdict; null when there is one
    ]
    + [(m, pa.float64()) for m in METRICS]
)

# A candidate run against a baseline, per configuration both evaluated.
COMPARISON = pa.schema(
    [
        ("config_id", pa.string()),
        ("label", pa.string()),
        ("is_best", pa.bool_()),  # the baseline's best (the alarm: regression.Alarm)
        ("questions", pa.int64()),  # shared by both runs
        ("baseline", pa.float64()),
        ("candidate", pa.float64()),
        ("difference", pa.float64()),  # candidate - baseline, paired
        ("difference_low", pa.float64()),
        ("difference_high", pa.float64()),
        ("p_value", pa.float64()),  # one-sided, in the direction of the difference; Holm-
        # adjusted over the shared configurations but the deployed one (tested alone)
        ("verdict", pa.string()),  # regressed | improved | unchanged
        ("flipped_to_wrong", pa.int64()),
        ("flipped_to_right", pa.int64()),
        ("deployed", pa.bool_()),  # the configuration given with --deployed: tested alone
    ]
)

FLIPS = pa.schema(
    [
        ("config_id", pa.string()),
        ("label", pa.string()),
        ("question_id", pa.string()),
        ("direction", pa.string()),  # to wrong | to right
        ("baseline", pa.float64()),
        ("candidate", pa.float64()),
        ("reason", pa.string()),  # why the candidate's answer fails, when it does
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "documents": DOCUMENTS,
    "testset": TESTSET,
    "chunks": CHUNKS,
    "retrievals": RETRIEVALS,
    "answers": ANSWERS,
    "scores": SCORES,
    "settings": pa.schema(CONFIG_KEY),  # every configuration; the run's settings in the metadata
    "leaderboard": leaderboard_schema(CONFIG_KEY),
    "results": RESULTS,
    "breakdown": BREAKDOWN,
    "failures": FAILURES,
    "comparison": COMPARISON,
    "flips": FLIPS,
}
# kinds holding configurations: their columns not declared here are kept as written
OPEN_KINDS = {"settings", "leaderboard"}


def kind_schema(kind: str, schema: pa.Schema) -> pa.Schema:
    """The schema an artifact of ``kind`` whose columns are ``schema``'s is written and read
    as: the declared one, or an open kind's declared columns typed as declared and the others
    as written, in the order written."""
    declared = SCHEMAS[kind]
    if kind not in OPEN_KINDS:
        return declared
    missing = [name for name in declared.names if name not in schema.names]
    if missing:
        raise RagsweepError(f"a {kind} table lacks the column(s) {', '.join(missing)}")
    return pa.schema(
        declared.field(f.name) if f.name in declared.names else f.remove_metadata() for f in schema
    )


def write_table(table: pa.Table, path: str | Path, kind: str, settings: dict | None = None) -> Path:
    """Write ``table`` as an Arrow IPC file of artifact ``kind``, cast to its declared schema.

    Metadata the table carries (e.g. the judge that produced it) is kept; the run's
    ``settings`` (JSON-serialisable; by default those ``table`` carries) travel in it too.
    """
    schema = kind_schema(kind, table.schema)
    settings = settings if settings is not None else settings_of(table) or None
    meta = dict(table.schema.metadata or {})
    table = table.select(schema.names).cast(schema)
    meta.update(
        {b"ragsweep.kind": kind.encode(), b"ragsweep.schema_version": SCHEMA_VERSION.encode()}
    )
    if settings is not None:
        meta[SETTINGS_KEY.encode()] = json.dumps(settings, sort_keys=True).encode()
    table = table.replace_schema_metadata(meta)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    return path


def write_batches(batches: Iterable[pa.RecordBatch], path: str | Path, kind: str) -> Path:
    """Write ``batches`` as an Arrow IPC file of artifact ``kind``, one record batch each, cast
    to its declared schema: an artifact too large to hold whole, written as it is made."""
    schema = SCHEMAS[kind].with_metadata(
        {b"ragsweep.kind": kind.encode(), b"ragsweep.schema_version": SCHEMA_VERSION.encode()}
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with ipc.new_file(path, schema) as writer:
        for batch in batches:
            writer.write_batch(batch.select(schema.names).cast(schema))
    return path


def read_table(path: str | Path, kind: str) -> pa.Table:
    """Read an Arrow IPC artifact and check that it is of ``kind`` and of this schema version."""
    try:
        with ipc.open_file(pa.memory_map(str(path))) as reader:
            table = reader.read_all()
    except (OSError, pa.ArrowInvalid) as exc:
        raise RagsweepError(f"{path}: not a readable Arrow artifact ({exc})") from None
    check_kind(path, table.schema, kind)
    try:
        schema = kind_schema(kind, table.schema)
    except RagsweepError as exc:
        raise RagsweepError(f"{path}: {exc}") from None
    return table.cast(schema.with_metadata(table.schema.metadata))


def check_kind(path: str | Path, schema: pa.Schema, kind: str) -> None:
    """Raise ``RagsweepError`` unless ``schema`` (of the artifact at ``path``) is of ``kind``
    and of this schema version."""
    meta = schema.metadata or {}
    found = meta.get(b"ragsweep.kind", b"").decode()
    version = meta.get(b"ragsweep.schema_version", b"").decode()
    if found != kind:
        raise RagsweepError(f"{path}: expected a {kind} artifact, found {found or 'no kind'}")
    if version != SCHEMA_VERSION:
        raise RagsweepError(
            f"{path}: {kind} schema version {version}, this ragsweep reads {SCHEMA_VERSION}"
        )


def settings_of(table: pa.Table) -> dict:
    """The run settings an artifact carries in its metadata (empty when it has none)."""
    raw = (table.schema.metadata or {}).get(SETTINGS_KEY.encode())
    return json.loads(raw) if raw else {}


def config_id(config: dict[str, Any]) -> str:
    """A stable id: the hash of the configuration's canonical JSON form."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]
