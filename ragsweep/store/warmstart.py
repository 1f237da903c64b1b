"""The model-based search's warm start: the scores that earlier runs of the same named sweep
gave the configurations they answered on every question, when those runs measured the
same thing as this one: the same questions at the same versions, the same documents (by
content), the same metric and the same answer and judge settings. A configuration's id is
a hash of its parameters, so a grown or reshaped search space keeps the scores of the
configurations it still holds.

The evaluate step reads the results store (``database.reading_url``); without one, or when
it cannot be reached, the search starts cold and the report says why in one line."""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation.surrogate import WarmStart
from ragsweep.models.llm import LLMSettings
from ragsweep.store import database
from ragsweep.sweep.settings import MODEL, RunSettings

log = logging.getLogger("ragsweep")

EARLIER_RUNS = 20  # the newest runs of the sweep looked at
REASONS_SHOWN = 2  # the mismatches a cold start names


def warm_start(
    run: RunSettings, testset: pa.Table, documents: pa.Table, metric: str, url: str | None
) -> WarmStart:
    """What the earlier runs of ``run``'s sweep (by its ``sweep_name``) in the store at
    ``url`` measured of ``metric`` (the resolved one), for a run with ``strategy`` model;
    newest run first when two scored a configuration. Nothing, with a note saying why, when
    the sweep has no name, there is no store, or no earlier run matches this run's
    ``testset`` and ``documents``."""
    if run.strategy != MODEL:
        return WarmStart()
    if not run.sweep_name:
        return WarmStart(note="cold start: the sweep has no name (--sweep, sweep_name)")
    if not url:
        return WarmStart(
            note="cold start: no results store given to this step (--no-store, or no "
            f"results-store Secret with {database.ENV})"
        )
    try:
        engine = database.connect(url)
        earlier = _earlier_runs(engine, run.sweep_name)
    except (RagsweepError, sa.exc.SQLAlchemyError) as exc:
        return WarmStart(note=f"cold start: {str(exc).splitlines()[0]}")
    if not earlier:
        return WarmStart(note=f"cold start: no earlier run of sweep {run.sweep_name!r} stored")
    record = run.record(testset, documents)
    scores: dict[str, float] = {}
    used, reasons = [], []
    for run_id, settings in earlier:
        reason = mismatch(settings or {}, record, metric)
        if reason:
            reasons.append(f"run {run_id}: {reason}")
            continue
        found = answered_means(database.load_results(engine, run_id), metric)
        if found:
            used.append(run_id)
            scores = {**found, **scores}  # the newer run's score stands
    if not scores:
        why = "; ".join(reasons[:REASONS_SHOWN]) or "no configuration answered every question"
        more = len(reasons) - REASONS_SHOWN
        return WarmStart(note=f"cold start: {why}" + (f" (and {more} more)" if more > 0 else ""))
    return WarmStart(scores, tuple(used))


def _earlier_runs(engine: sa.Engine, sweep: str) -> list[tuple[str, dict[str, Any]]]:
    """The newest runs with results of the sweep named ``sweep``, other than this one (a
    resumed local run's folder name), with their settings."""
    runs = database.runs
    query = (
        sa.select(runs.c.run_id, runs.c.settings)
        .where(runs.c.sweep_name == sweep, runs.c.status.in_(database.WITH_RESULTS))
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
        .limit(EARLIER_RUNS)
    )
    this = os.environ.get(database.RUN_ID_ENV)
    if this:
        query = query.where(runs.c.run_id != this)
    with engine.connect() as conn:
        return [(r.run_id, r.settings) for r in conn.execute(query)]


def mismatch(settings: dict[str, Any], record: dict[str, Any], metric: str) -> str:
    """Why an earlier run's ``settings`` (its stored record) did not measure what this
    run's ``record`` will measure by ``metric``; empty when it did."""
    if settings.get("testset_content") != record["testset_content"]:
        return "its questions or their versions differ from this run's test set"
    if settings.get("documents_content") != record["documents_content"]:
        before = {tuple(pair) for pair in settings.get("document_hashes") or []}
        now = {tuple(pair) for pair in record["document_hashes"]}
        changed = len({d for d, _ in before ^ now})
        return f"its documents differ ({changed} added, removed or edited)"
    measured = (settings.get("evaluation") or {}).get("promoted_by")
    if measured != metric:
        return f"it was evaluated by {measured or 'an unrecorded metric'}, not {metric}"
    try:
        earlier = LLMSettings.from_dict(settings.get("llm") or {}, "stored run").sweep_dict()
    except (RagsweepError, TypeError, KeyError):
        earlier = None
    if earlier != LLMSettings.from_dict(record["llm"]).sweep_dict():
        return "its answer or judge settings differ"
    return ""


def answered_means(results: pa.Table, metric: str) -> dict[str, float]:
    """Each configuration's mean ``metric`` over the questions of ``results``, for the
    configurations with a value on every one of them (a configuration the search did not
    answer, or halving dropped early, has none on some)."""
    if metric not in results.column_names or not results.num_rows:
        return {}
    questions = len(pc.unique(results["question_id"]))
    present = results.filter(pc.is_valid(results[metric]))
    if not present.num_rows:
        return {}
    grouped = present.group_by("config_id").aggregate([(metric, "mean"), (metric, "count")])
    counts = grouped[f"{metric}_count"].to_numpy()
    means = grouped[f"{metric}_mean"].to_numpy()
    ids = grouped["config_id"].to_pylist()
    full = np.flatnonzero(counts == questions)
    return {ids[i]: float(means[i]) for i in full if np.isfinite(means[i])}
