"""The results database: test sets (every edit kept), runs, per-question results and
leaderboards, on SQLite, PostgreSQL or Oracle Database through one SQLAlchemy Core schema.

The URL comes from ``--store``, else ``RAGSWEEP_STORE_URL``, else a SQLite file in the
user's data folder. Tables are created when missing (``create_all`` only adds, never
alters or drops), and a nullable column added since a store was created is added to it, so
older stores keep working (their rows read null there). Publishing a run is one transaction:
either all of it is stored or none.

Portable across the three backends: ``TIMESTAMP(timezone=True)`` (Oracle's ``DATE`` drops
fractions and zone), every ``String`` has a length, identity keys are ``BigInteger`` with an
``Integer`` variant on SQLite, JSON is native (SQLAlchemy >= 2.1 renders it for Oracle), and
since Oracle stores ``''`` as NULL, optional text is written as NULL when empty and required
text (an answer) reads back ``''`` from NULL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

from ragsweep.core.errors import RagsweepError, missing_extra, safe_url
from ragsweep.core.schemas import RESULTS, SETTINGS_KEY, settings_of
from ragsweep.documents.testsets import check_name
from ragsweep.sweep.space import CONFIG_FIELDS, LEADERBOARD

log = logging.getLogger("ragsweep")

ENV = "RAGSWEEP_STORE_URL"
# where a local run's steps read the store (the model search's warm start, the judges'
# labels): ENV there would turn the publish step on, and a local run stores once, at its end
READ_ENV = "RAGSWEEP_STORE_READ_URL"
DEFAULT_STORE_CONNECTION = "ragsweep-results-store"  # the Secret a cluster run reads ENV from
# `ragsweep run` names its local runs: the run folder's name and when it started
RUN_ID_ENV, STARTED_ENV = "RAGSWEEP_RUN_ID", "RAGSWEEP_RUN_STARTED_AT"
STORE_VERSION = "1"
# A run's status: ``succeeded``; ``partial``, its results stored but a side step (track,
# compare) failed; ``failed``, ``interrupted``: no results. ``detail`` says what failed.
STATUSES = ("succeeded", "partial", "failed", "interrupted")
WITH_RESULTS = ("succeeded", "partial")
CONNECT_TIMEOUT_S = 5

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
WHEN = sa.TIMESTAMP(timezone=True)

metadata = sa.MetaData()


def _key() -> sa.Column:
    return sa.Column("id", ID, sa.Identity(), primary_key=True)


meta_table = sa.Table(
    "ragsweep_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("setting", sa.String(400), nullable=False),
)

testsets = sa.Table(
    "ragsweep_testsets",
    metadata,
    _key(),
    # the file name, or generated-<YYYYMMDD>-<hash8>; never empty (Oracle makes '' NULL)
    sa.Column("name", sa.String(1000), nullable=False, unique=True),
    sa.Column("created_at", WHEN, nullable=False),
)

testset_items = sa.Table(
    "ragsweep_testset_items",
    metadata,
    _key(),
    sa.Column("testset_id", ID, sa.ForeignKey("ragsweep_testsets.id"), nullable=False),
    sa.Column("question_id", sa.String(200), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),  # 1, then +1 per edit or deletion
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("deleted", sa.Boolean, nullable=False),
    sa.Column("question", sa.Text),
    sa.Column("reference_answers", sa.JSON),
    sa.Column("reference_doc_ids", sa.JSON),
    sa.Column("reference_context", sa.Text),
    sa.Column("topic", sa.String(400)),
    sa.Column("question_type", sa.String(100)),
    sa.Column("created_at", WHEN, nullable=False),
    sa.Column("question_version", sa.String(64)),  # the test set's; null in older stores
    # null in stores made before test-set curation moved here
    # [{doc_id, start, end, found, score}]; found: exact or approximate (null in spans stored
    # before it: exact), score: an approximate span's
    sa.Column("gold_spans", sa.JSON),
    sa.Column("conversation_history", sa.Text),  # JSON text, as Giskard gives it
    sa.Column("item_position", sa.Integer),  # order in the set; added questions go last
    # who made the change and why, when they said (the UI's curation); null in older stores
    sa.Column("author", sa.String(200)),
    sa.Column("comment", sa.Text),
    sa.UniqueConstraint("testset_id", "question_id", "version", name="ragsweep_item_version"),
)

runs = sa.Table(
    "ragsweep_runs",
    metadata,
    _key(),
    sa.Column("run_id", sa.String(200), nullable=False, unique=True),
    sa.Column("sweep_key", sa.String(64), nullable=False, index=True),
    sa.Column("pipeline_run_id", sa.String(200)),
    sa.Column("testset_id", ID, sa.ForeignKey("ragsweep_testsets.id")),
    sa.Column("status", sa.String(20), nullable=False),  # one of STATUSES
    sa.Column("started_at", WHEN),
    sa.Column("finished_at", WHEN),
    sa.Column("optimization_metric", sa.String(100)),
    sa.Column("best_config_id", sa.String(64)),
    sa.Column("best_label", sa.String(400)),
    sa.Column("settings", sa.JSON),
    sa.Column("detail", sa.String(1000)),  # what failed, and what survived; null in older stores
    # what `baseline=latest` follows: the sweep's name, else its key; null in older stores,
    # where the key stands in (``_sweep``)
    sa.Column("sweep_name", sa.String(200)),
    # what the runs list shows (null in older stores): a name, a note and tags given in the
    # UI (tags as ",a,b," so that a tag is found by LIKE on every backend), the documents
    # read, and whether the run's best regressed against the sweep's run stored before it
    # (computed when it is published, so the trend compares nothing when drawn)
    sa.Column("title", sa.String(200)),
    sa.Column("note", sa.Text),
    sa.Column("tags", sa.String(1000)),
    sa.Column("documents", sa.String(1000)),
    sa.Column("regressed", sa.Boolean),
    # the best configuration's score on the run's metric, its interval, and how many
    # configurations were ranked: the runs list and the trend read no leaderboard
    sa.Column("best_score", sa.Float),
    sa.Column("best_low", sa.Float),
    sa.Column("best_high", sa.Float),
    sa.Column("configurations", sa.Integer),
    # where the run was logged to MLflow (tracking.Logged: run_id, experiment_id, uri without
    # credentials); null when it was not, and in older stores
    sa.Column("mlflow", sa.JSON),
    # when the run was archived: the runs list hides it unless asked; its results, its
    # comparisons and ``baseline=latest`` are unchanged. Null: not archived (and older stores)
    sa.Column("archived_at", WHEN),
)


def _sweep() -> sa.ColumnElement[str]:
    """A run's sweep: its name, else (a run stored before names) its key."""
    return sa.func.coalesce(runs.c.sweep_name, runs.c.sweep_key)


results = sa.Table(
    "ragsweep_results",
    metadata,
    _key(),
    sa.Column("run_pk", ID, sa.ForeignKey("ragsweep_runs.id"), nullable=False, index=True),
    sa.Column("config_id", sa.String(64), nullable=False),
    sa.Column("question_id", sa.String(200), nullable=False),
    sa.Column("item_version", sa.Integer),
    sa.Column("question_version", sa.String(64)),  # null in results stored before it
    sa.Column("cluster_doc", sa.String(1000)),  # CLUSTER is reserved in Oracle
    sa.Column("topic", sa.String(400)),
    sa.Column("question_type", sa.String(100)),
    sa.Column("answer", sa.Text),
    sa.Column("retrieved_doc_ids", sa.JSON),
    sa.Column("scores", sa.JSON),  # every metric, cost and judge field, by name
)

leaderboards = sa.Table(
    "ragsweep_leaderboards",
    metadata,
    _key(),
    sa.Column("run_pk", ID, sa.ForeignKey("ragsweep_runs.id"), nullable=False, index=True),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("config_id", sa.String(64), nullable=False),
    sa.Column("label", sa.String(400), nullable=False),
    sa.Column("config", sa.JSON),
    sa.Column("questions", sa.Integer),
    sa.Column("tied_with_best", sa.Boolean),
    sa.Column("p_value", sa.Float),
    sa.Column("figures", sa.JSON),  # means, intervals and costs, by column name
    sa.UniqueConstraint("run_pk", "config_id", name="ragsweep_leaderboard_config"),
)


# A person's label of a judged answer (``ragsweep.curation.labels``): keyed by the question
# version, the answer text's hash and the judge (model and prompt version) the person saw,
# so it holds for every run that reproduces the answer; one per author.
labels = sa.Table(
    "ragsweep_labels",
    metadata,
    _key(),
    sa.Column("question_version", sa.String(64), nullable=False),
    sa.Column("answer_hash", sa.String(64), nullable=False),
    sa.Column("judge_model", sa.String(400), nullable=False),
    sa.Column("judge_prompt", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(20), nullable=False),  # agree, disagree, correct, incorrect
    sa.Column("correct", sa.Boolean, nullable=False),  # the person's: the answer is correct
    sa.Column("judge_verdict", sa.Boolean),  # what the judge said when the person labelled
    sa.Column("note", sa.Text),
    sa.Column("author", sa.String(200), nullable=False),
    sa.Column("question_id", sa.String(200)),  # for reading; the version is the key
    sa.Column("created_at", WHEN, nullable=False),
    sa.UniqueConstraint(
        "question_version",
        "answer_hash",
        "judge_model",
        "judge_prompt",
        "author",
        name="ragsweep_label_key",
    ),
)


def default_url() -> str:
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('ragsweep')) / 'results.db'}"


def resolve_url(url: str | None = None) -> str:
    """``url``, else ``RAGSWEEP_STORE_URL``, else the default SQLite file."""
    return url or os.environ.get(ENV) or default_url()


def reading_url() -> str | None:
    """The store a pipeline step reads: ``READ_ENV`` (a local run's), else ``ENV`` (the
    results-store Secret's, on a cluster); None when neither is set."""
    return os.environ.get(READ_ENV) or os.environ.get(ENV) or None


def _scrub(text: str, url: URL) -> str:
    return text.replace(url.password, "***") if url.password else text


def connect(url: str | None = None) -> Engine:
    """An engine on the store, tables created when missing; a dead server fails fast."""
    raw = resolve_url(url)
    try:
        parsed = sa.make_url(raw)
    except sa.exc.ArgumentError:
        raise RagsweepError(
            f"results store: not a database URL: {safe_url(raw)!r}; expected e.g. "
            "sqlite:///results.db, postgresql+psycopg://user:pw@host/db, "
            "oracle+oracledb://user:pw@host:1521/?service_name=FREEPDB1"
        ) from None
    backend = parsed.get_backend_name()
    connect_args: dict[str, Any] = {}
    if backend == "postgresql":
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    elif backend == "oracle":
        connect_args.update(tcp_connect_timeout=CONNECT_TIMEOUT_S, retry_count=0)
    elif backend == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    try:
        engine = sa.create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)
        with engine.begin() as conn:
            metadata.create_all(conn, checkfirst=True)
            _add_new_columns(conn)
            _check_version(conn)
    except ModuleNotFoundError as exc:  # the dialect's driver
        extra = "postgres" if backend == "postgresql" else backend
        raise missing_extra(exc.name, extra, f"results store {safe_url(parsed)}") from None
    except sa.exc.NoSuchModuleError:
        raise RagsweepError(
            f"results store {safe_url(parsed)}: no driver for {parsed.drivername!r}; "
            "use postgresql+psycopg://, oracle+oracledb:// or sqlite:///"
        ) from None
    except (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.DatabaseError) as exc:
        reason = _scrub(str(exc.orig or exc).strip().splitlines()[0], parsed)
        raise RagsweepError(
            f"results store {safe_url(parsed)}: cannot connect or prepare tables: {reason}"
        ) from None
    return engine


def _add_new_columns(conn: Connection) -> None:
    """Add the nullable columns a store created by an older ragsweep lacks (and fill in
    the runs' best figures from their leaderboards when those columns are new)."""
    inspector = sa.inspect(conn)
    added: set[tuple[str, str]] = set()
    for table in metadata.sorted_tables:
        present = {c["name"].lower() for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name.lower() in present:
                continue
            if not column.nullable:
                raise RagsweepError(
                    f"results store: table {table.name} lacks column {column.name}; "
                    "it was made by another program or an unknown ragsweep"
                )
            kind = column.type.compile(dialect=conn.dialect)
            conn.execute(sa.text(f"ALTER TABLE {table.name} ADD {column.name} {kind}"))
            log.info("results store: added column %s.%s", table.name, column.name)
            added.add((table.name, column.name))
    if (runs.name, "best_score") in added:
        _fill_best_figures(conn)


def _fill_best_figures(conn: Connection) -> None:
    """The best figures and the number of configurations of the runs stored before the
    runs table held them, from their leaderboards."""
    query = sa.select(runs.c.id, runs.c.optimization_metric, leaderboards.c.figures).join(
        leaderboards, sa.and_(leaderboards.c.run_pk == runs.c.id, leaderboards.c.rank == 1)
    )
    counts = dict(
        conn.execute(
            sa.select(leaderboards.c.run_pk, sa.func.count()).group_by(leaderboards.c.run_pk)
        ).all()
    )
    for pk, metric, figures in conn.execute(query).all():
        values = _best_figures(metric or "", figures or {})
        values["configurations"] = counts.get(pk)
        conn.execute(runs.update().where(runs.c.id == pk).values(**values))


def _check_version(conn: Connection) -> None:
    found = conn.execute(
        sa.select(meta_table.c.setting).where(meta_table.c.name == "store_version")
    ).scalar()
    if found is None:
        conn.execute(meta_table.insert().values(name="store_version", setting=STORE_VERSION))
    elif int(found) > int(STORE_VERSION):
        raise RagsweepError(
            f"results store: written by a newer ragsweep (store version {found}, this one "
            f"reads {STORE_VERSION}); upgrade ragsweep"
        )


def _now() -> datetime:
    return datetime.now(UTC)


def _text(value: str | None) -> str | None:
    """Optional text as every backend stores it: '' is NULL (as Oracle makes it)."""
    return value or None


def _json_safe(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def _item_hash(row: dict) -> str:
    fields = ["question", "reference_answers", "reference_doc_ids", "reference_context"]
    content = {k: row.get(k) for k in fields + ["topic", "question_type"]}
    content["reference_context"] = _text(content["reference_context"])
    # present only when not empty, so that items stored before these fields keep their hash;
    # a span by its place only (how it was found follows from the place and the text)
    if row.get("gold_spans"):
        content["gold_spans"] = [
            {k: s[k] for k in ("doc_id", "start", "end")} for s in row["gold_spans"]
        ]
    if _text(row.get("conversation_history")) not in (None, "[]"):
        content["conversation_history"] = row["conversation_history"]
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _add_spans(
    conn: Connection, testset_id: int, qid: str, version: int, row: dict, content_hash: str
) -> None:
    item = testset_items.c
    conn.execute(
        testset_items.update()
        .where(item.testset_id == testset_id, item.question_id == qid, item.version == version)
        .values(gold_spans=[dict(s) for s in row["gold_spans"]], content_hash=content_hash)
    )


def save_testset(
    conn: Connection,
    name: str,
    testset: pa.Table,
    deletions: bool = True,
    run: bool = False,
    author: str | None = None,
    comment: str | None = None,
) -> tuple[int, dict[str, int]]:
    """Store the test set's items under ``name``: a new version for each changed item, and
    (with ``deletions``) a deletion version for each item no longer there, each with the
    ``author`` and ``comment`` given. A new name must be valid (``check_name``); one stored
    before the rule keeps working. From a ``run``, gold spans it located for an item that
    had none join that item's version instead (no person changed it). Returns its id and
    each item's version."""
    found = conn.execute(sa.select(testsets.c.id).where(testsets.c.name == name)).scalar()
    testset_id = (
        found
        or conn.execute(
            testsets.insert().values(name=check_name(name, "results store"), created_at=_now())
        ).inserted_primary_key[0]
    )
    latest: dict[str, tuple[int, str, bool, int | None]] = {}
    rows = conn.execute(
        sa.select(
            testset_items.c.question_id,
            testset_items.c.version,
            testset_items.c.content_hash,
            testset_items.c.deleted,
            testset_items.c.item_position,
        ).where(testset_items.c.testset_id == testset_id)
    )
    for question_id, version, content_hash, deleted, position in rows:
        if question_id not in latest or version > latest[question_id][0]:
            latest[question_id] = (version, content_hash, deleted, position)
    # a question new to the set (or back after a deletion) goes after every stored one
    last = max((p for _, _, _, p in latest.values() if p is not None), default=-1)
    now, inserts, versions = _now(), [], {}
    for row in testset.to_pylist():
        qid, content_hash = row["question_id"], _item_hash(row)
        version, old_hash, deleted, position = latest.get(qid, (0, None, True, None))
        spans_only = content_hash != old_hash and row.get("gold_spans") and not deleted
        if run and spans_only and _item_hash({**row, "gold_spans": []}) == old_hash:
            _add_spans(conn, testset_id, qid, version, row, content_hash)
            old_hash = content_hash
        if content_hash != old_hash or deleted:
            if deleted:
                last += 1
                position = last
            version += 1
            inserts.append(
                {
                    "testset_id": testset_id,
                    "question_id": qid,
                    "version": version,
                    "content_hash": content_hash,
                    "deleted": False,
                    "question": row["question"],
                    "reference_answers": row["reference_answers"],
                    "reference_doc_ids": row["reference_doc_ids"],
                    "reference_context": _text(row["reference_context"]),
                    "topic": _text(row["topic"]),
                    "question_type": _text(row["question_type"]),
                    "created_at": now,
                    "question_version": row.get("question_version"),
                    "gold_spans": [dict(s) for s in row.get("gold_spans") or []],
                    "conversation_history": _text(row.get("conversation_history")),
                    "item_position": position,
                    "author": _text(author),
                    "comment": _text(comment),
                }
            )
        versions[qid] = version
    for qid, (version, content_hash, deleted, position) in latest.items():
        if deletions and qid not in versions and not deleted:
            inserts.append(
                {
                    "testset_id": testset_id,
                    "question_id": qid,
                    "version": version + 1,
                    "content_hash": content_hash,
                    "deleted": True,
                    **dict.fromkeys(["question", "reference_answers", "reference_doc_ids"]),
                    **dict.fromkeys(["reference_context", "topic", "question_type"]),
                    **dict.fromkeys(["gold_spans", "conversation_history"]),
                    "created_at": now,
                    "question_version": None,
                    "item_position": position,
                    "author": _text(author),
                    "comment": _text(comment),
                }
            )
    if inserts:
        conn.execute(testset_items.insert(), inserts)
    return testset_id, versions


def publish(
    engine: Engine,
    run_id: str,
    leaderboard: pa.Table,
    run_results: pa.Table,
    testset: pa.Table,
    pipeline_run_id: str | None = None,
    started_at: datetime | None = None,
    status: str = "succeeded",
    detail: str | None = None,
    regressed: bool | None = None,
    mlflow: dict[str, str] | None = None,
) -> str:
    """Store a finished run in one transaction, as ``succeeded`` or ``partial`` (``detail``:
    the side steps that failed), with the trend's alarm (``regressed``; computed by
    ``ragsweep.reporting.publishing.publish``) and where it was logged to MLflow (``mlflow``,
    a ``tracking.Logged`` as a dict); a run stored before under ``run_id`` (a
    retried step, a resumed or imported run) is replaced, keeping its name, note and tags.
    Its test set goes under its file name (``stored_name``): a new version of each question
    that changed (e.g. resolved against the documents); the questions the run left out (a
    sample, unresolved ones) stay. Returns ``run_id``; a store that refuses the write is a
    ``RagsweepError``."""
    from ragsweep.documents.testsets import stored_name

    if status not in WITH_RESULTS:
        raise ValueError(f"a published run is one of {WITH_RESULTS}, not {status!r}")
    settings = settings_of(leaderboard)
    best = leaderboard.slice(0, 1).to_pylist()[0] if leaderboard.num_rows else {}
    name = stored_name(settings.get("testset", ""), testset, (started_at or _now()).date())
    row = {
        "sweep_key": settings.get("sweep_key", ""),
        "sweep_name": _text(settings.get("sweep_name")),
        "pipeline_run_id": _text(pipeline_run_id),
        "status": status,
        "started_at": started_at,
        "finished_at": _now(),
        "optimization_metric": settings.get("optimization_metric"),
        "best_config_id": best.get("config_id"),
        "best_label": best.get("label"),
        "settings": settings,
        "detail": _text(_clip(detail)),
        "documents": _text(_clip(settings.get("docs"))),
        "regressed": regressed,
        "mlflow": mlflow,
        **_best_figures(settings.get("optimization_metric") or "", best),
        "configurations": leaderboard.num_rows,
    }
    try:
        _store_run(engine, run_id, name, leaderboard, run_results, testset, row)
    except sa.exc.SQLAlchemyError as exc:
        reason = _scrub(str(getattr(exc, "orig", None) or exc).strip().splitlines()[0], engine.url)
        raise RagsweepError(
            f"results store {safe_url(engine.url)}: storing run {run_id} failed: {reason}"
        ) from None
    log.info("stored run %s in %s", run_id, safe_url(engine.url))
    return run_id


def _best_figures(metric: str, best: Mapping[str, Any]) -> dict[str, float | None]:
    """The best configuration's score on ``metric`` and its interval, as the runs table
    holds them."""
    return {
        "best_score": _json_safe(best.get(metric)),
        "best_low": _json_safe(best.get(f"{metric}_low")),
        "best_high": _json_safe(best.get(f"{metric}_high")),
    }


def _store_run(
    engine: Engine,
    run_id: str,
    name: str,
    leaderboard: pa.Table,
    run_results: pa.Table,
    testset: pa.Table,
    row: dict[str, Any],
) -> None:
    with engine.begin() as conn:
        # a run's questions may be a sample, or leave unresolved ones out: none is deleted
        testset_id, versions = save_testset(conn, name, testset, deletions=False, run=True)
        labels = _delete_run(conn, run_id)
        run_pk = conn.execute(
            runs.insert().values(run_id=run_id, testset_id=testset_id, **row, **labels)
        ).inserted_primary_key[0]
        _insert_results(conn, run_pk, run_results, versions)
        _insert_leaderboard(conn, run_pk, leaderboard)


def record_unfinished(
    engine: Engine,
    run_id: str,
    settings: dict,
    started_at: datetime,
    status: str = "failed",
    detail: str | None = None,
) -> bool:
    """Note a run that ended without results (``failed`` or ``interrupted``, ``detail``
    saying why), so that "latest successful" skips it. A run already stored with results
    under ``run_id`` is left as it is: results are never thrown away. Returns whether the
    note was written."""
    if status in WITH_RESULTS or status not in STATUSES:
        raise ValueError(f"an unfinished run is failed or interrupted, not {status!r}")
    with engine.begin() as conn:
        found = conn.execute(sa.select(runs.c.status).where(runs.c.run_id == run_id)).scalar()
        if found in WITH_RESULTS:
            log.warning("run %s is stored with results (%s): left as it is", run_id, found)
            return False
        labels = _delete_run(conn, run_id)
        conn.execute(
            runs.insert().values(
                **labels,
                run_id=run_id,
                sweep_key=settings.get("sweep_key", ""),
                sweep_name=_text(settings.get("sweep_name")),
                status=status,
                started_at=started_at,
                finished_at=_now(),
                optimization_metric=settings.get("optimization_metric"),
                settings=settings,
                detail=_text(_clip(detail)),
                documents=_text(_clip(settings.get("docs"))),
            )
        )
    return True


def _clip(text: str | None, limit: int = 1000) -> str | None:
    return text if text is None or len(text) <= limit else text[: limit - 1] + "…"


# what a user gave a run, kept when it is stored again
LABELS = ("title", "note", "tags", "archived_at")


def _delete_run(conn: Connection, run_id: str) -> dict[str, Any]:
    """Delete the run stored under ``run_id``; returns its labels (``LABELS``)."""
    found = conn.execute(
        sa.select(runs.c.id, *(runs.c[k] for k in LABELS)).where(runs.c.run_id == run_id)
    ).first()
    if found is None:
        return {}
    conn.execute(results.delete().where(results.c.run_pk == found.id))
    conn.execute(leaderboards.delete().where(leaderboards.c.run_pk == found.id))
    conn.execute(runs.delete().where(runs.c.id == found.id))
    return {k: getattr(found, k) for k in LABELS}


def delete_run(engine: Engine, run_id: str) -> None:
    """Delete the run stored under ``run_id`` (its row, leaderboard and results), in one
    transaction; an unknown id is an error and deletes nothing."""
    with engine.begin() as conn:
        if not _delete_run(conn, run_id):
            raise RagsweepError(f"results store: no run {run_id!r}; `ragsweep runs` lists them")


# RESULTS columns with a column of their own; every other one goes into ``scores`` (JSON)
_STORED = {"config_id", "question_id", "question_version", "cluster", "topic", "question_type"}
_STORED |= {"answer"}
_STORED |= {"retrieved_doc_ids"}


def _insert_results(
    conn: Connection, run_pk: int, table: pa.Table, versions: dict[str, int]
) -> None:
    rows = []
    for row in table.to_pylist():
        rows.append(
            {
                "run_pk": run_pk,
                "config_id": row["config_id"],
                "question_id": row["question_id"],
                "item_version": versions.get(row["question_id"]),
                "question_version": row.get("question_version"),
                "cluster_doc": _text(row["cluster"]),
                "topic": _text(row["topic"]),
                "question_type": _text(row["question_type"]),
                "answer": _text(row["answer"]),
                "retrieved_doc_ids": row["retrieved_doc_ids"],
                "scores": {k: _json_safe(v) for k, v in row.items() if k not in _STORED},
            }
        )
    if rows:
        conn.execute(results.insert(), rows)


def _insert_leaderboard(conn: Connection, run_pk: int, table: pa.Table) -> None:
    config_names = [name for name, _ in CONFIG_FIELDS if name not in ("config_id", "label")]
    own = {"rank", "config_id", "label", "questions", "tied_with_best", "p_value", *config_names}
    rows = [
        {
            "run_pk": run_pk,
            "rank": row["rank"],
            "config_id": row["config_id"],
            "label": row["label"],
            "config": {k: row[k] for k in config_names},
            "questions": row["questions"],
            "tied_with_best": row["tied_with_best"],
            "p_value": _json_safe(row["p_value"]),
            "figures": {k: _json_safe(v) for k, v in row.items() if k not in own},
        }
        for row in table.to_pylist()
    ]
    if rows:
        conn.execute(leaderboards.insert(), rows)


def _run_pk(conn: Connection, run_id: str) -> tuple[int, dict]:
    row = conn.execute(
        sa.select(runs.c.id, runs.c.settings, runs.c.status).where(runs.c.run_id == run_id)
    ).first()
    if row is None:
        raise RagsweepError(f"results store: no run {run_id!r}; `ragsweep runs` lists them")
    if row.status not in WITH_RESULTS:
        raise RagsweepError(f"results store: run {run_id!r} {row.status}: it has no results")
    return row.id, row.settings or {}


def check_run(engine: Engine, run_id: str) -> None:
    """Fail, naming the store, unless ``run_id`` is stored with results."""
    with engine.connect() as conn:
        try:
            _run_pk(conn, run_id)
        except RagsweepError as exc:
            raise RagsweepError(f"{exc} (in {safe_url(engine.url)})") from None


def load_leaderboard(engine: Engine, run_id: str) -> pa.Table:
    """A stored run's leaderboard, as the rank step wrote it (settings in its metadata)."""
    with engine.connect() as conn:
        pk, settings = _run_pk(conn, run_id)
        stored = conn.execute(
            sa.select(leaderboards).where(leaderboards.c.run_pk == pk).order_by(leaderboards.c.rank)
        ).mappings()
        rows = [
            {
                **(r["figures"] or {}),
                **(r["config"] or {}),
                **{k: r[k] for k in ("rank", "config_id", "label", "questions", "tied_with_best")},
                "p_value": r["p_value"],
            }
            for r in stored
        ]
    table = pa.Table.from_pylist(rows, schema=LEADERBOARD)
    return table.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})


def load_results(engine: Engine, run_id: str) -> pa.Table:
    """A stored run's per-question results."""
    with engine.connect() as conn:
        pk, _ = _run_pk(conn, run_id)
        stored = conn.execute(
            sa.select(results).where(results.c.run_pk == pk).order_by(results.c.id)
        ).mappings()
        rows = [
            {
                **(r["scores"] or {}),
                **{k: r[k] for k in ("config_id", "question_id", "question_version", "topic")},
                "cluster": r["cluster_doc"],
                "question_type": r["question_type"],
                "answer": r["answer"] or "",
                "retrieved_doc_ids": r["retrieved_doc_ids"] or [],
            }
            for r in stored
        ]
    return pa.Table.from_pylist(rows, schema=RESULTS)


def list_runs(
    engine: Engine, limit: int = 20, archived: bool | None = False
) -> list[dict[str, Any]]:
    """The latest runs first: id, status, times, metric, best configuration and when it was
    archived; ``archived`` as ``find_runs``'s."""
    columns = [
        runs.c.run_id,
        runs.c.status,
        runs.c.started_at,
        runs.c.finished_at,
        runs.c.optimization_metric,
        runs.c.best_label,
        runs.c.pipeline_run_id,
        runs.c.sweep_key,
        runs.c.detail,
        runs.c.archived_at,
        _sweep().label("sweep"),
    ]
    query = _archived(sa.select(*columns), archived)
    query = query.order_by(runs.c.finished_at.desc(), runs.c.id.desc()).limit(limit)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def _archived(query: sa.Select, archived: bool | None) -> sa.Select:
    """``query`` with the archived runs only (True), without them (False) or with all (None)."""
    if archived is None:
        return query
    return query.where(
        runs.c.archived_at.is_not(None) if archived else runs.c.archived_at.is_(None)
    )


def latest_successful(engine: Engine, sweep: str, exclude: str | None = None) -> str | None:
    """The newest run with results (succeeded, or partial: a side step failed) of the
    sweep named ``sweep`` (a run's ``sweep_name`` setting: the name given, else its sweep
    key), other than ``exclude``; None when there is none. An archived run counts: archiving
    hides a run from the lists, it does not change what it means."""
    query = (
        sa.select(runs.c.run_id)
        .where(_sweep() == sweep, runs.c.status.in_(WITH_RESULTS))
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
    )
    if exclude:
        query = query.where(runs.c.run_id != exclude)
    with engine.connect() as conn:
        return conn.execute(query.limit(1)).scalar()


def open_run(ref: str, url: str | None = None) -> tuple[pa.Table, pa.Table]:
    """A run's (leaderboard, results): from a run folder when ``ref`` is one, else from the
    store by run id."""
    from ragsweep.core.schemas import read_table

    folder = Path(ref)
    if folder.is_dir():
        for name in ("leaderboard", "results"):
            if not (folder / f"{name}.arrow").is_file():
                raise RagsweepError(f"{folder}: no {name}.arrow here; is it a ragsweep run folder?")
        return (
            read_table(folder / "leaderboard.arrow", "leaderboard"),
            read_table(folder / "results.arrow", "results"),
        )
    engine = connect(url)
    return load_leaderboard(engine, ref), load_results(engine, ref)


def current_run_id(pipeline_run_id: str) -> str:
    """The id this run is stored under: the local run folder's name, else the KFP run id."""
    return os.environ.get(RUN_ID_ENV) or pipeline_run_id


def find_runs(
    engine: Engine,
    sweep: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 200,
    offset: int = 0,
    text: str | None = None,
    tag: str | None = None,
    archived: bool | None = False,
) -> list[dict[str, Any]]:
    """Runs newest first, as ``list_runs``, filtered by sweep (its name), status, start
    time (the finish time when the start is unknown; ``since`` inclusive, ``until``
    exclusive), ``text`` (in the id, name, note, tags, sweep, documents, test set or best
    configuration, any case), ``tag`` and ``archived`` (False: the runs not archived; True:
    the archived ones; None: both); at most ``limit`` of them, after the first ``offset``.
    Each with its name, note, tags (a list), test set, documents, number of configurations,
    best score with its interval (``score``, ``low``, ``high``), ``regressed`` and
    ``archived_at``."""
    query = sa.select(
        runs.c.run_id,
        runs.c.status,
        runs.c.started_at,
        runs.c.finished_at,
        runs.c.optimization_metric,
        runs.c.best_config_id,
        runs.c.best_label,
        runs.c.pipeline_run_id,
        runs.c.sweep_key,
        runs.c.title,
        runs.c.note,
        runs.c.tags,
        runs.c.documents,
        runs.c.regressed,
        runs.c.detail,
        runs.c.configurations,
        runs.c.archived_at,
        runs.c.best_score.label("score"),
        runs.c.best_low.label("low"),
        runs.c.best_high.label("high"),
        testsets.c.name.label("testset_name"),
        _sweep().label("sweep"),
    ).select_from(runs.outerjoin(testsets, runs.c.testset_id == testsets.c.id))
    if sweep:
        query = query.where(_sweep() == sweep)
    if status:
        query = query.where(runs.c.status == status)
    when = sa.func.coalesce(runs.c.started_at, runs.c.finished_at)
    if since:
        query = query.where(when >= since)
    if until:
        query = query.where(when < until)
    if text:
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"  # wildcards as text
        searched = [runs.c.run_id, runs.c.title, runs.c.note, runs.c.tags, _sweep()]
        searched += [runs.c.documents, testsets.c.name, runs.c.best_label]
        query = query.where(sa.or_(*(c.ilike(pattern, escape="\\") for c in searched)))
    if tag:
        query = query.where(runs.c.tags.like(f"%,{tag},%"))
    query = _archived(query, archived)
    query = query.order_by(runs.c.finished_at.desc(), runs.c.id.desc())
    query = query.limit(limit).offset(offset)
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query).mappings()]
    for row in rows:
        row["tags"] = [t for t in (row["tags"] or "").split(",") if t]
    return rows


def sweep_names(engine: Engine) -> list[str]:
    """Every sweep's name (a run's ``sweep_name``, else its key), sorted."""
    with engine.connect() as conn:
        return sorted(conn.execute(sa.select(_sweep()).distinct()).scalars())


def run_info(engine: Engine, run_id: str) -> dict[str, Any]:
    """One run's row: id, status, times, metric, best configuration, test set name, settings."""
    query = (
        sa.select(runs, testsets.c.name.label("testset_name"))
        .select_from(runs.outerjoin(testsets, runs.c.testset_id == testsets.c.id))
        .where(runs.c.run_id == run_id)
    )
    with engine.connect() as conn:
        row = conn.execute(query).mappings().first()
    if row is None:
        raise RagsweepError(f"results store: no run {run_id!r}; `ragsweep runs` lists them")
    return dict(row)


def sweep_trend(engine: Engine, sweep: str, last: int | None = None) -> list[dict[str, Any]]:
    """The runs with results of the sweep named ``sweep`` (the ``last`` ones when given),
    oldest first, each with its best configuration (``label``), that one's score on the
    run's metric and its interval (``score``, ``low``, ``high``), and ``regressed``: whether
    that best regressed against the run before it (None when not compared)."""
    query = (
        sa.select(
            runs.c.run_id,
            runs.c.title,
            runs.c.started_at,
            runs.c.finished_at,
            runs.c.optimization_metric.label("metric"),
            runs.c.regressed,
            runs.c.best_label.label("label"),
            runs.c.best_score.label("score"),
            runs.c.best_low.label("low"),
            runs.c.best_high.label("high"),
        )
        .where(_sweep() == sweep, runs.c.status.in_(WITH_RESULTS))
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
        .limit(last)
    )
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()][::-1]


def load_run_testset(engine: Engine, run_id: str) -> pa.Table:
    """The questions a stored run was scored on, as the test set held them then (the item
    version each result names)."""
    from ragsweep.core.schemas import TESTSET

    with engine.connect() as conn:
        pk, _ = _run_pk(conn, run_id)
        testset_id = conn.execute(sa.select(runs.c.testset_id).where(runs.c.id == pk)).scalar()
        used = conn.execute(
            sa.select(results.c.question_id, results.c.item_version)
            .where(results.c.run_pk == pk)
            .distinct()
        ).all()
        items = conn.execute(
            sa.select(testset_items).where(testset_items.c.testset_id == testset_id)
        ).mappings()
        by_version = {(r["question_id"], r["version"]): r for r in items}
    rows, seen = [], set()
    for question_id, version in sorted(used, key=lambda u: u[0]):
        item = by_version.get((question_id, version))
        if item is None or question_id in seen:
            continue
        seen.add(question_id)
        rows.append(testset_row(item))
    return pa.Table.from_pylist(rows, schema=TESTSET)


def testset_row(item: Mapping[str, Any]) -> dict[str, Any]:
    """A stored item version (a ``testset_items`` row) as a TESTSET row: what was saved, with
    empty lists for the lists a store made before curation lacks, and the question version
    computed from the content when the store predates versions."""
    from ragsweep.documents.testsets import question_version

    row = {
        "question_id": item["question_id"],
        "question": item["question"] or "",
        "reference_answers": item["reference_answers"] or [],
        "reference_doc_ids": item["reference_doc_ids"] or [],
        "reference_context": item["reference_context"],
        "gold_spans": item["gold_spans"] or [],
        "question_type": item["question_type"],
        "topic": item["topic"],
        "conversation_history": item["conversation_history"],
    }
    row["question_version"] = item["question_version"] or question_version(row)
    return row
