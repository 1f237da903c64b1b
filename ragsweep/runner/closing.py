"""A local run's side steps, after its folder is complete: compare with a baseline
(compare), log to MLflow (track), store the run (publish; then the report gets the judge's
agreement with the labels the store holds for the run's answers).

None of them can throw results away: each failure is noted (the run is then ``partial``)
and the others still run; the store is written last, with the run's final status, so it
never says "succeeded" about a run whose folder is incomplete or whose comparison failed.
A store that cannot be written leaves the folder as it is, with the command that stores it
later (``ragsweep runs import RUN_DIR``).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ragsweep.core.errors import RagsweepError, safe_url
from ragsweep.core.schemas import read_table, write_table
from ragsweep.runner.rundir import read_marker, staged, started_at, write_marker

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ragsweep.reporting.regression import Comparison

log = logging.getLogger("ragsweep")

PARTIAL_EXIT = 3  # results kept, a side step (or the store) failed
MLFLOW_FILE = "mlflow.json"  # where the track side step logged the run (tracking.Logged)


@dataclass
class Outcome:
    """How a run ended: its status, the side steps that failed (step -> one line), whether
    it was stored (None: no store asked for), and the comparison with its baseline."""

    run_dir: Path
    status: str
    failed: dict[str, str] = field(default_factory=dict)
    stored: bool | None = None
    store: str = ""
    baseline: str | None = None
    sweep: str = ""  # what `latest` follows: the sweep's name, else its key
    no_baseline: str = ""  # why `latest` found no baseline (no earlier run of the sweep)
    comparison: Comparison | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "succeeded" else PARTIAL_EXIT

    def summary(self) -> str:
        """The run's last line: what failed, and what survived where."""
        run_id, kept = self.run_dir.name, f"results complete in {self.run_dir}"
        where = f"stored in {self.store}" if self.stored else ""
        if self.status == "succeeded":
            return f"run {run_id} succeeded: " + ", ".join(x for x in (kept, where) if x)
        failures = "; ".join(f"{step} failed: {why}" for step, why in self.failed.items())
        parts = [kept, where]
        if self.stored is False:
            parts.append(f"not stored: store it with `ragsweep runs import {self.run_dir}`")
        return f"run {run_id} partial: {failures}. Kept: " + ", ".join(p for p in parts if p)


def close_run(run_dir: Path, store_url: str | None, tracking_uri: str, baseline: str) -> Outcome:
    """Run the side steps on a complete run folder and record how it ended (its marker and,
    with ``store_url``, the store). The comparison goes into the folder too (``_compare``)."""
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    outcome = Outcome(run_dir, "succeeded", store=safe_url(store_url) if store_url else "")
    if baseline:  # first: the report MLflow gets holds the comparison
        _compare(outcome, board, baseline, store_url)
    if tracking_uri:
        _track(outcome, board, tracking_uri)
    if store_url:
        outcome.stored = publish_folder(run_dir, store_url, outcome.failed)
        if not outcome.stored:
            outcome.status = "partial"
    try:
        write_marker(
            run_dir,
            status=outcome.status,
            failed=outcome.failed,
            stored=outcome.stored,
            finished_at=datetime.now(UTC).isoformat(),
            pid=None,
        )
    except OSError as exc:  # the results are whole; only the folder's note is missing
        log.warning("cannot mark the run folder %s as %s: %s", run_dir, outcome.status, exc)
    return outcome


def _track(outcome: Outcome, board, uri: str) -> None:
    """Log the run to MLflow, and where it went into the folder (``MLFLOW_FILE``: the
    results database keeps it, and the run's page links to it)."""
    from ragsweep.reporting.tracking import log_sweep

    report = outcome.run_dir / "report.html"
    try:
        logged = log_sweep(board, uri, outcome.run_dir.name, report=report)
        with staged(outcome.run_dir) as stage:
            (stage / MLFLOW_FILE).write_text(json.dumps(asdict(logged)) + "\n")
    except RagsweepError as exc:
        outcome.failed["track"] = f"{exc} (log it later: `ragsweep track {outcome.run_dir}`)"
        outcome.status = "partial"


def _compare(outcome: Outcome, board, baseline: str, store_url: str | None) -> None:
    """Compare with the baseline (``latest``: the sweep's latest run with results), into the
    folder: ``comparison.arrow``, ``comparison.md``, the verdict's figures ``verdict.json``
    and the report's section (or why there is no baseline)."""
    from ragsweep.reporting.regression import (
        compare_runs,
        no_baseline,
        render,
        resolve_baseline,
        sweep_of,
        verdict_metrics,
    )
    from ragsweep.reporting.report import insert_comparison
    from ragsweep.store import database

    run_dir = outcome.run_dir
    try:
        if not store_url:
            raise RagsweepError("the baseline is read from the results store, and none is set")
        engine = database.connect(store_url)
        found = resolve_baseline(engine, baseline, board, run_dir.name)
        outcome.baseline, outcome.sweep = found, sweep_of(board)
        if found is None:
            outcome.no_baseline = no_baseline(board)
        else:
            stored = database.load_leaderboard(engine, found), database.load_results(engine, found)
            current = (board, read_table(run_dir / "results.arrow", "results"))
            outcome.comparison = compare_runs(stored, current)
        with staged(run_dir) as stage:
            shutil.copyfile(run_dir / "report.html", stage / "report.html")
            insert_comparison(stage / "report.html", outcome.comparison, outcome.no_baseline)
            if outcome.comparison is not None:
                write_table(outcome.comparison.table, stage / "comparison.arrow", "comparison")
                text = render(outcome.comparison, "markdown") + "\n"
                (stage / "comparison.md").write_text(text, encoding="utf-8")
                figures = verdict_metrics(outcome.comparison)  # as the cluster's compare logs
                (stage / "verdict.json").write_text(json.dumps(figures, indent=1) + "\n")
    except RagsweepError as exc:
        outcome.failed["compare"] = str(exc)
        outcome.status = "partial"


def publish_folder(run_dir: Path, store_url: str, failed: dict[str, str]) -> bool:
    """Store a complete run folder under its name, as succeeded or (with ``failed`` side
    steps) partial; a failure to store is added to ``failed``. Returns whether it was
    stored."""
    from ragsweep.reporting import publishing
    from ragsweep.store import database

    detail = "; ".join(f"{step} failed: {why}" for step, why in failed.items()) or None
    try:
        engine = database.connect(store_url)
        publishing.publish(
            engine,
            run_dir.name,
            read_table(run_dir / "leaderboard.arrow", "leaderboard"),
            read_table(run_dir / "results.arrow", "results"),
            read_table(run_dir / "testset.arrow", "testset"),
            started_at=started_at(run_dir),
            status="partial" if failed else "succeeded",
            detail=detail,
            mlflow=_logged(run_dir),
        )
    except RagsweepError as exc:
        failed["publish"] = str(exc)
        return False
    report_agreement(run_dir, engine)
    return True


def report_agreement(run_dir: Path, engine: Engine) -> None:
    """Into the stored run's report: its judge's agreement with the labels the store holds
    for its answers (labels given on an earlier run whose answers this one reproduced);
    nothing when none of its judged answers is labelled. The results are whole without it:
    a failure is a warning."""
    from ragsweep.curation.labels import run_agreement
    from ragsweep.reporting.judge_agreement import insert_agreement

    try:
        found = run_agreement(engine, run_dir.name)
        if found is None or not found[0].labels:
            return
        with staged(run_dir) as stage:
            shutil.copyfile(run_dir / "report.html", stage / "report.html")
            insert_agreement(stage / "report.html", *found)
    except RagsweepError as exc:
        log.warning(
            "run %s: its report lacks the judge's agreement with people: %s", run_dir.name, exc
        )


def _logged(run_dir: Path) -> dict | None:
    """Where the run went in MLflow (``MLFLOW_FILE``), None when it was not logged or the
    file cannot be read (said in the log: the run is stored without its MLflow link)."""
    path = run_dir / MLFLOW_FILE
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s); the run is stored without its MLflow link", path, exc)
        return None
    return found if isinstance(found, dict) else None


def import_folder(run_dir: Path, store_url: str) -> str:
    """``ragsweep runs import``: store a complete run folder that was not stored (the store
    was down, or the run had none), with the status and failures its marker records."""
    from ragsweep.runner.rundir import is_complete

    if not is_complete(run_dir):
        raise RagsweepError(
            f"{run_dir}: not a complete run folder (leaderboard, results, report, test set, "
            "patterns); only a finished run can be imported"
        )
    marker = read_marker(run_dir)
    failed = {k: v for k, v in (marker.get("failed") or {}).items() if k != "publish"}
    if not publish_folder(run_dir, store_url, failed):
        raise RagsweepError(failed["publish"])
    status = "partial" if failed else "succeeded"
    if marker:
        write_marker(run_dir, status=status, failed=failed, stored=True)
    return status
