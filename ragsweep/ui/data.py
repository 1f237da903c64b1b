"""What the pages read, through ragsweep.store.database's API, with the derived tables (breakdown,
failures, comparisons) computed once per run and kept while the app runs."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import pyarrow as pa
from sqlalchemy.engine import Engine

from ragsweep.evaluation import leaderboard
from ragsweep.reporting.regression import Comparison, compare_runs
from ragsweep.store import database
from ragsweep.ui.documents import S3_RECHECK_S

TREND_RUNS = 30  # nights drawn per sweep

log = logging.getLogger("ragsweep")


@dataclass(frozen=True)
class RunData:
    info: dict[str, Any]
    board: pa.Table  # the leaderboard (LEADERBOARD)
    results: pa.Table
    testset: pa.Table  # the questions as the run saw them

    def questions(self) -> dict[str, dict]:
        return {q["question_id"]: q for q in self.testset.to_pylist()}

    def missing(self) -> str:
        """What the store lacks of a run it lists (its leaderboard or results rows, removed
        or never all written), as a sentence; empty when nothing is missing."""
        parts = [
            name
            for name, t in (("leaderboard", self.board), ("results", self.results))
            if t.num_rows == 0
        ]
        if not parts:
            return ""
        return (
            f"The store lists run {self.info['run_id']} but holds none of its "
            f"{' or '.join(parts)} rows: they are missing from the store (removed, or never "
            "all written), so the figures below are not the run's."
        )

    @property
    def locations(self) -> tuple[str, ...]:
        """Where the run read its documents (its ``docs`` and ``more_docs`` settings)."""
        settings = self.info.get("settings") or {}
        return tuple(d for d in [settings.get("docs"), *settings.get("more_docs", [])] if d)


def _stamp(locations: tuple[str, ...]) -> tuple:
    """What changes when a document under ``locations`` does: each local file's size and
    modification time; for S3, the minute (read again at most every S3_RECHECK_S)."""
    stamp: list = []
    for location in locations:
        if location.startswith("s3://"):
            stamp.append(int(time.time() // S3_RECHECK_S))
            continue
        for folder, _, names in os.walk(location):
            for name in sorted(names):
                with contextlib.suppress(OSError):
                    info = os.stat(os.path.join(folder, name))
                    stamp.append((folder, name, info.st_size, info.st_mtime_ns))
    return tuple(stamp)


class Data:
    """The results database as the pages need it. What is derived from a run is kept by
    its id and finish time, so a run stored again under the same id is read again."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._run = lru_cache(maxsize=16)(self._load)
        self._derived = lru_cache(maxsize=16)(self._derive)
        self._compare = lru_cache(maxsize=64)(self._compared)
        self._changed = lru_cache(maxsize=16)(self._documents_changed)

    def _version(self, run_id: str) -> tuple[str, Any]:
        return run_id, database.run_info(self.engine, run_id)["finished_at"]

    def run(self, run_id: str) -> RunData:
        """The run, its row read afresh (a name, note or tags edited since it was loaded)."""
        info = database.run_info(self.engine, run_id)
        return replace(self._run((run_id, info["finished_at"])), info=info)

    def derived(self, run_id: str) -> tuple[pa.Table, pa.Table]:
        """(breakdown, failures of the best) as the report shows them."""
        return self._derived(self._version(run_id))

    def compare(self, baseline: str, candidate: str) -> Comparison:
        return self._compare(self._version(baseline), self._version(candidate))

    def documents_changed(self, run_id: str) -> bool | None:
        """Whether the run's documents changed since it read them: the content hash of the
        documents it kept (``documents_content``) differs from today's; None when it cannot
        be told (a run that recorded none, documents unreadable here)."""
        version = self._version(run_id)
        return self._changed(version, _stamp(self._run(version).locations))

    def _documents_changed(self, version: tuple[str, Any], stamp: tuple) -> bool | None:
        from ragsweep.documents.sampling import sample_documents
        from ragsweep.documents.sources import read_locations
        from ragsweep.sweep.settings import documents_fingerprint

        run = self._run(version)
        settings = run.info.get("settings") or {}
        recorded = settings.get("documents_content")
        if not recorded or not run.locations:
            return None
        try:  # the run's own reading: every document, then its document budget
            documents = read_locations(list(run.locations)).table
            budget, seed = settings.get("max_document_bytes", 0), settings.get("seed", 0)
            kept = sample_documents(documents, run.testset, budget, seed)
        except Exception as exc:  # any reason the documents are unavailable: not told
            log.info("ui: cannot check the documents of run %s: %s", version[0], exc)
            return None
        return documents_fingerprint(kept) != recorded

    def _load(self, version: tuple[str, Any]) -> RunData:
        run_id = version[0]
        return RunData(
            database.run_info(self.engine, run_id),
            database.load_leaderboard(self.engine, run_id),
            database.load_results(self.engine, run_id),
            database.load_run_testset(self.engine, run_id),
        )

    def _derive(self, version: tuple[str, Any]) -> tuple[pa.Table, pa.Table]:
        r = self._run(version)
        return (
            leaderboard.breakdown(r.results, r.board, r.testset),
            leaderboard.failures(r.results, r.board, r.testset),
        )

    def _compared(self, baseline: tuple[str, Any], candidate: tuple[str, Any]) -> Comparison:
        a, b = self._run(baseline), self._run(candidate)
        return compare_runs((a.board, a.results), (b.board, b.results))

    def trend(self, sweep: str) -> list[dict[str, Any]]:
        """The sweep's last TREND_RUNS runs with results, oldest first, each marked
        ``regressed`` as it was when published (the alarm of its comparison with the run
        before)."""
        return database.sweep_trend(self.engine, sweep, last=TREND_RUNS)
