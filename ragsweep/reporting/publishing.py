"""Publishing a run: storing it in the results database with what its sweep's trend shows,
computed once, here: whether its best configuration regressed against the sweep's run
stored before it (``ragsweep compare``'s alarm), so that drawing the trend compares
nothing."""

from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any

import pyarrow as pa
from sqlalchemy.engine import Engine

from ragsweep.core.errors import RagsweepError
from ragsweep.reporting.regression import compare_runs, sweep_of
from ragsweep.store import database

log = logging.getLogger("ragsweep")


def trend_alarm(
    engine: Engine, run_id: str, leaderboard: pa.Table, run_results: pa.Table
) -> bool | None:
    """Whether the run's best regressed against the latest stored run with results of its
    sweep (other than ``run_id``); None for a sweep's first run, or runs sharing nothing."""
    before = database.latest_successful(engine, sweep_of(leaderboard), exclude=run_id)
    if before is None:
        return None
    try:
        stored = (database.load_leaderboard(engine, before), database.load_results(engine, before))
        return compare_runs(stored, (leaderboard, run_results)).best_regressed
    except RagsweepError as exc:
        log.info("run %s: not compared with %s for the trend: %s", run_id, before, exc)
        return None


def publish(
    engine: Engine,
    run_id: str,
    leaderboard: pa.Table,
    run_results: pa.Table,
    testset: pa.Table,
    **options: Any,
) -> str:
    """``database.publish`` (``options``: its own) with the trend's alarm."""
    regressed = trend_alarm(engine, run_id, leaderboard, run_results)
    return database.publish(
        engine, run_id, leaderboard, run_results, testset, regressed=regressed, **options
    )


def publish_from_step(
    leaderboard: pa.Table,
    run_results: pa.Table,
    testset: pa.Table,
    pipeline_run_id: str,
) -> str:
    """The publish step: store the run when ``RAGSWEEP_STORE_URL`` is set, else skip.
    Returns the stored run id, or '' when skipped. The start time is known for local runs
    (``ragsweep run`` sets it); on a cluster the KFP run named by ``pipeline_run_id`` has it."""
    url = os.environ.get(database.ENV)
    if not url:
        log.info("no results store configured (%s is unset): run not published", database.ENV)
        return ""
    started = os.environ.get(database.STARTED_ENV)
    return publish(
        database.connect(url),
        database.current_run_id(pipeline_run_id),
        leaderboard,
        run_results,
        testset,
        pipeline_run_id=pipeline_run_id,
        started_at=datetime.fromisoformat(started) if started else None,
    )
