"""Run the ragsweep pipeline on this machine with Kubeflow's local runner, no cluster.

Each step runs as a subprocess of this Python environment
(``kfp.local.SubprocessRunner(use_venv=False)``); the chunk configurations are dealt into
``RunSettings.parallelism`` groups (at most ``LOCAL_MAX_BRANCHES``) that run at once, each
step with the cores shared between them (``OMP_NUM_THREADS``);
the artifacts land under the run folder,
and the leaderboard, per-question results, breakdown, failures, report and the runnable
patterns (``patterns/``) are exported beside them (``ragsweep.runner.rundir``) before the
side steps store the run, log it to MLflow and compare it (``ragsweep.runner.closing``).
Every step's outputs are cached in the run folder, so that ``ragsweep run --resume``
continues an interrupted run; SIGINT and SIGTERM stop it within seconds
(``ragsweep.runner.interrupts``).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragsweep.core.errors import RagsweepError

if TYPE_CHECKING:  # imported where used: `ragsweep run` checks its inputs before loading them
    from ragsweep.runner.closing import Outcome
    from ragsweep.runner.terminal import Monitor, StepTotal
    from ragsweep.sweep.settings import RunSettings

log = logging.getLogger("ragsweep")


OUTPUTS = ("leaderboard", "results", "breakdown", "failures")
# kfp.local (2.17) runs a ParallelFor's iterations in a pool of at most two threads
LOCAL_MAX_BRANCHES = 2


def preflight(docs: str, testset: str, skip_unresolved: bool = False) -> None:
    """Check the inputs before the pipeline starts, with the messages its steps would give:
    the documents' location holds documents (a local folder, or an S3 prefix, listed), the
    test set (if any) parses and validates, and its document ids name listed documents. A
    question with a reference context is resolved in the pipeline, which reads the texts."""
    from ragsweep.documents.sources import document_keys
    from ragsweep.documents.testsets import check_references, load_testset

    keys = document_keys(absolute(docs, "--docs"))
    if testset:
        table = load_testset(absolute(testset, "--testset"))
        if not skip_unresolved:
            check_references(table, keys)


def run_local(
    pipeline: Callable[..., Any],
    settings: RunSettings,
    output: Path,
    store_url: str | None = None,
    verbose: bool = False,
    tracking_uri: str = "",
) -> Outcome:
    """Run ``pipeline`` (the sweep's pipeline function, which the caller brings: the library
    imports no pipeline) locally in a new run folder under ``output``; see ``execute``."""
    from ragsweep.runner.rundir import held, write_marker
    from ragsweep.sweep.options import pipeline_arguments

    settings = replace(
        settings,
        docs=absolute(settings.docs, "--docs"),
        testset=absolute(settings.testset, "--testset") if settings.testset else "",
    )
    started = datetime.now(UTC)
    run_dir = output / started.strftime("%Y%m%d-%H%M%S-%f")
    run_dir.mkdir(parents=True)
    with held(run_dir):
        arguments = pipeline_arguments(settings)
        (run_dir / "settings.json").write_text(json.dumps(arguments, indent=2) + "\n")
        settings.space.log_pruned()
        branches = min(settings.parallelism, LOCAL_MAX_BRANCHES)  # and as many groups
        write_marker(
            run_dir,
            run_id=run_dir.name,
            status="running",
            started_at=started.isoformat(),
            parallelism=settings.parallelism,
            groups=min(branches, len(settings.space.chunk_configs())),
            baseline=settings.baseline,
            record=settings.record(),
        )
        n = len(settings.space.all_configs())
        log.info("sweeping %d configurations; run folder %s", n, run_dir)
        return execute(pipeline, run_dir, store_url, verbose, tracking_uri)


def resume_local(
    pipeline: Callable[..., Any],
    output: Path,
    run_id: str | None,
    store_url: str | None = None,
    verbose: bool = False,
    tracking_uri: str = "",
    skip_unresolved: bool = False,
) -> Outcome:
    """Resume the run ``run_id`` under ``output`` (None: the newest interrupted one) with
    the settings it started with (``skip_unresolved``: leaving out the questions whose
    references match no document, from now on): the steps that finished are reused
    (kfp.local's cache in the run folder) when what they read is unchanged
    (``ragsweep.runner.reads``), the others run. The folder is locked while it runs."""
    from ragsweep.runner.rundir import find_run, held

    run_dir = find_run(output, run_id)
    with held(run_dir):
        if skip_unresolved:
            path = run_dir / "settings.json"
            arguments = json.loads(path.read_text(encoding="utf-8"))
            arguments["skip_unresolved"] = True
            path.write_text(json.dumps(arguments, indent=2) + "\n")
        log.info("resuming run %s in %s: the steps that finished are reused", run_dir.name, run_dir)
        return execute(pipeline, run_dir, store_url, verbose, tracking_uri, resumed=True)


def run_arguments(pipeline: Callable[..., Any], run_dir: Path) -> dict[str, Any]:
    """The pipeline's arguments the run folder holds (its ``settings.json``). A parameter
    added since the folder was written takes its default; one this version's pipeline no
    longer has is refused, naming it, before anything runs."""
    import inspect

    path = run_dir / "settings.json"
    arguments = json.loads(path.read_text(encoding="utf-8"))
    unknown = sorted(set(arguments) - set(inspect.signature(pipeline).parameters))
    if unknown:
        raise RagsweepError(
            f"{path}: parameter(s) {', '.join(unknown)} unknown to this version of ragsweep's "
            "pipeline (the folder was written by another version): start a new run"
        )
    return arguments


def execute(
    pipeline: Callable[..., Any],
    run_dir: Path,
    store_url: str | None,
    verbose: bool,
    tracking_uri: str,
    resumed: bool = False,
) -> Outcome:
    """Run the pipeline of the run folder (its ``settings.json``), export the leaderboard,
    per-question results, breakdown, failures, report, test set and patterns into it (whole
    or not at all), and then the side steps (``ragsweep.runner.closing``): MLflow
    (``tracking_uri``), the comparison with the baseline, and the store (``store_url``),
    which records the run only once its folder is complete. The pipeline itself stores
    nothing, logs nothing to MLflow and compares nothing: a failing side step never costs
    the results. Every step's outputs are cached in the folder, so an interrupted run
    resumes where it stopped (``resumed``). SIGINT and SIGTERM stop the run and its steps
    within seconds (``ragsweep.runner.interrupts``) and raise ``RunStopped``; a failed
    pipeline or export raises ``RunStopped`` too. Model endpoints come from the
    RAGSWEEP_LLM_* / RAGSWEEP_JUDGE_* environment, which the steps inherit. The terminal
    shows the steps' progress (``ragsweep.runner.terminal``); kfp.local's output goes to
    the folder's ``pipeline.log``, and to the terminal too when ``verbose``."""
    from kfp import local

    from ragsweep.core import progress
    from ragsweep.kubeflow.tasks import for_local_run
    from ragsweep.reporting import tracking
    from ragsweep.runner.closing import close_run
    from ragsweep.runner.interrupts import Interrupted, interruptible
    from ragsweep.runner.reads import changes, step_reads, task_digests
    from ragsweep.runner.rundir import export_run, read_marker, started_at, write_marker
    from ragsweep.runner.terminal import StepTotal
    from ragsweep.store import database

    arguments = run_arguments(pipeline, run_dir)
    reads = step_reads(pipeline, arguments)
    if resumed:
        for line in changes(read_marker(run_dir).get("reads"), reads):
            log.info("%s", line)
    marker = write_marker(
        run_dir, status="running", pid=os.getpid(), failed={}, stored=None, reads=reads
    )
    arguments["baseline"] = ""  # compared after the export, by close_run
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str((run_dir / "pipeline").resolve()),
        raise_on_error=False,
        enable_caching=True,  # the cache lives in the run folder: it serves a resume only
    )
    env = {
        database.RUN_ID_ENV: run_dir.name,
        database.STARTED_ENV: started_at(run_dir).isoformat(),
        database.ENV: "",  # the steps store nothing (close_run does)
        database.READ_ENV: store_url or "",  # but read it (warm start, the judges' labels)
        tracking.URI_ENV: "",  # nor log to MLflow
        progress.ENV: str((run_dir / "progress.jsonl").resolve()),
    }
    env.update(thread_environment(marker.get("parallelism", 1)))
    (run_dir / "progress.jsonl").write_text("")  # counters start afresh on a resume
    branches = min(marker.get("parallelism", 1), LOCAL_MAX_BRANCHES)
    local_pipeline = for_local_run(pipeline, branches, task_digests(reads))
    steps = StepTotal(  # plan's groups; plan_shards' shards, 1 until it has listed them
        local_pipeline.pipeline_spec,
        run_dir / "pipeline",
        {"plan": marker.get("groups", 1)},
        conditions=False,  # the one condition, a baseline, is compared by close_run
    )
    monitor = watch(run_dir, steps, verbose)
    stage = "the pipeline"
    try:
        with interruptible(on_stop=monitor.silence):
            with (
                StepLog(run_dir / "pipeline.log", monitor, append=resumed) as step_log,
                warnings.catch_warnings(),
            ):
                # the steps deliberately run in this environment, not in the image they name
                warnings.filterwarnings(
                    "ignore", "You may be attemping to run a task", RuntimeWarning
                )
                monitor.start()
                try:
                    with redirect_stdout(step_log), root_logging_to(step_log), environment(env):
                        task = local_pipeline(**arguments)
                finally:
                    monitor.stop()
            outputs = {
                name: Path(artifact.path)
                for name, artifact in task.outputs.items()
                if name != "run_id"
            }
            if set(outputs) != {*OUTPUTS, "report", "testset", "rag_patterns"} or not all(
                p.exists() for p in outputs.values()
            ):
                message = (
                    f"the pipeline failed: see the message above and {run_dir}/pipeline.log; "
                    f"once it is fixed, {resume_hint(run_dir)} (the steps that finished are "
                    "reused)"
                )
                raise _stopped(run_dir, store_url, "failed", message)
            stage = "the export"
            try:
                export_run(run_dir, outputs)
            except RagsweepError as exc:
                message = f"{exc}; {resume_hint(run_dir)}"
                raise _stopped(run_dir, store_url, "failed", message) from None
            stage = "the side steps"
            outcome = close_run(run_dir, store_url, tracking_uri, marker.get("baseline", ""))
    except Interrupted as exc:
        done = f"{monitor.finished} of {monitor.total_steps} steps done"
        raise _stopped(
            run_dir,
            store_url,
            "interrupted",
            f"interrupted by {exc.name} in {stage} ({done}): run {run_dir.name}; "
            f"{resume_hint(run_dir)}",
            exit_code=exc.exit_code,
        ) from None
    return outcome


class RunStopped(RagsweepError):
    """A run that ended without results: failed, or interrupted (``exit_code``: 2, or the
    signal's 128 + N). Its folder and the store (when one is set) record it."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def resume_hint(run_dir: Path) -> str:
    """The command that resumes the run."""
    return f"resume with `ragsweep run --resume {run_dir.name} --output {run_dir.parent}`"


def _stopped(
    run_dir: Path, store_url: str | None, status: str, message: str, exit_code: int = 2
) -> RunStopped:
    """Record a run that ended without results, in its folder and (when set) the store; the
    error to raise. A store that cannot be reached then is a note, not a second failure."""
    from ragsweep.runner.rundir import read_marker, started_at, write_marker
    from ragsweep.store import database

    try:
        finished = datetime.now(UTC).isoformat()
        write_marker(run_dir, status=status, message=message, finished_at=finished)
    except OSError as exc:  # a full disk: the store and the message still say it
        log.warning("cannot mark the run folder %s as %s: %s", run_dir, status, exc.strerror)
    if store_url:
        try:
            database.record_unfinished(
                database.connect(store_url),
                run_dir.name,
                read_marker(run_dir).get("record") or {},
                started_at(run_dir),
                status=status,
                detail=message,
            )
        except (RagsweepError, OSError) as exc:
            log.warning("the run's end is not recorded in the store: %s", exc)
    return RunStopped(message, exit_code)


def thread_environment(parallelism: int) -> dict[str, str]:
    """Each step's threads when ``parallelism`` chunk configurations run at once (kfp.local
    runs at most ``LOCAL_MAX_BRANCHES``): this machine's cores shared between them; none set
    when the caller chose their own."""
    from ragsweep.kubeflow.tasks import THREADS_ENV

    if THREADS_ENV in os.environ:
        return {}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    branches = max(1, min(parallelism, LOCAL_MAX_BRANCHES))
    return {THREADS_ENV: str(max(1, (cores or 1) // branches))}


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the pipeline's steps (subprocesses inherit them)."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def root_logging_to(stream: io.TextIOBase) -> Iterator[None]:
    """Send root-logger records to ``stream`` while the pipeline runs.

    kfp.local swaps the root logger's handlers for each task and puts back the ones it found,
    from several threads when a loop fans out; with ours in place, whichever it puts back
    still writes to the run's log.
    """
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers = [logging.StreamHandler(stream)]
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.handlers, root.level = saved, level


def watch(run_dir: Path, steps: StepTotal, verbose: bool) -> Monitor:
    """The run's progress display: live on a terminal, lines elsewhere (CI, a pipe)."""
    from ragsweep.runner.terminal import LineView, LiveView, Monitor

    terminal = sys.stdout
    view = LiveView(terminal) if terminal.isatty() else LineView(terminal)
    log_path = run_dir / "pipeline.log"
    return Monitor(
        view, steps.total, run_dir / "progress.jsonl", log_path, verbose, recount=steps.finished
    )


class StepLog(io.TextIOBase):
    """Where the pipeline's output goes: all of it to the run's log file, each line (without
    kfp.local's timestamp and indent) to the monitor, which decides what the terminal shows."""

    ANSI = re.compile(r"\x1b\[[0-9;]*m")
    TIMESTAMP = re.compile(r"^[\d:.]+ - \w+ - ")

    def __init__(self, path: Path, monitor: Monitor, append: bool = False) -> None:
        self.file = path.open("a" if append else "w", encoding="utf-8")
        self.monitor = monitor
        self.partial = ""
        self.lock = threading.Lock()  # loop iterations run in threads

    def write(self, text: str) -> int:
        with self.lock:
            *lines, self.partial = (self.partial + self.ANSI.sub("", text)).split("\n")
            for line in lines:
                self.file.write(line + "\n")
                line = self.TIMESTAMP.sub("", line.rstrip())
                self.monitor.line(line[4:] if line.startswith("    ") else line)
        return len(text)

    def close(self) -> None:
        self.file.write(self.partial)
        self.file.close()
        super().close()


def absolute(uri: str, flag: str) -> str:
    """S3 URIs pass through; a local path must exist and is made absolute for the steps."""
    if uri.startswith("s3://"):
        return uri
    path = Path(uri).expanduser()
    if not path.exists():
        raise RagsweepError(f"{flag}: {uri}: no such file or folder")
    return str(path.resolve())
