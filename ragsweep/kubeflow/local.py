"""Run the ragsweep pipeline on this machine with Kubeflow's local runner, no cluster.

Each step runs as a subprocess of this Python environment
(``kfp.local.SubprocessRunner(use_venv=False)``); the chunk configurations are dealt into
``RunSettings.parallelism`` groups (at most ``LOCAL_MAX_BRANCHES``) that run at once, each
step with the cores shared between them (``OMP_NUM_THREADS``);
the artifacts land under the run folder,
and the leaderboard, per-question results, breakdown, failures, report and the runnable
patterns (``patterns/``) are exported beside them.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ragsweep.core.errors import RagsweepError, safe_url
from ragsweep.core.schemas import read_table

if TYPE_CHECKING:  # imported where used: `ragsweep run` checks its inputs before loading them
    from ragsweep.kubeflow.terminal import Monitor, StepTotal
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
    settings: RunSettings, output: Path, store_url: str | None = None, verbose: bool = False
) -> Path:
    """Run the pipeline locally; return the run folder holding the leaderboard, per-question
    results, breakdown, failures, report and the test set (generated when none was given).
    With ``store_url`` the pipeline's publish step stores the run under the folder's name
    (and a failed run is noted there). Model endpoints come from the RAGSWEEP_LLM_* /
    RAGSWEEP_JUDGE_* environment, which the steps inherit. The terminal shows the steps'
    progress (``ragsweep.kubeflow.terminal``); kfp.local's output goes to the folder's
    ``pipeline.log``, and to the terminal too when ``verbose``."""
    from kfp import local

    from ragsweep.core import progress
    from ragsweep.kubeflow.tasks import for_local_run
    from ragsweep.kubeflow.terminal import StepTotal
    from ragsweep.pipelines.sweep_pipeline import sweep_pipeline
    from ragsweep.results import database
    from ragsweep.results.exports import export

    settings = replace(
        settings,
        docs=absolute(settings.docs, "--docs"),
        testset=absolute(settings.testset, "--testset") if settings.testset else "",
    )
    started = datetime.now(UTC)
    run_dir = output / started.strftime("%Y%m%d-%H%M%S-%f")
    run_dir.mkdir(parents=True)
    arguments = settings.pipeline_arguments()
    (run_dir / "settings.json").write_text(json.dumps(arguments, indent=2) + "\n")
    for reason in settings.space.pruned():
        log.warning("pruned: %s", reason)
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str((run_dir / "pipeline").resolve()),
        raise_on_error=False,
    )
    n = len(settings.space.all_configs())
    log.info("sweeping %d configurations; run folder %s", n, run_dir)
    env = {database.RUN_ID_ENV: run_dir.name, database.STARTED_ENV: started.isoformat()}
    env.update(thread_environment(settings.parallelism))
    if store_url:
        env[database.ENV] = store_url
    env[progress.ENV] = str((run_dir / "progress.jsonl").resolve())
    branches = min(settings.parallelism, LOCAL_MAX_BRANCHES)  # and as many groups
    groups = min(branches, len(settings.space.chunk_configs()))
    steps = StepTotal(  # plan's groups; plan_shards' shards, 1 until it has listed them
        sweep_pipeline.pipeline_spec,
        run_dir / "pipeline",
        {"plan": groups},
        conditions=bool(settings.baseline),  # the one condition: compare with a baseline
    )
    monitor = watch(run_dir, steps, verbose)
    with StepLog(run_dir / "pipeline.log", monitor) as step_log, warnings.catch_warnings():
        # the steps deliberately run in this environment, not in the image they name
        warnings.filterwarnings("ignore", "You may be attemping to run a task", RuntimeWarning)
        monitor.start()
        try:
            with redirect_stdout(step_log), root_logging_to(step_log), environment(env):
                task = for_local_run(sweep_pipeline, branches)(**arguments)
        finally:
            monitor.stop()
    results = {
        name: Path(artifact.path) for name, artifact in task.outputs.items() if name != "run_id"
    }
    if set(results) != {*OUTPUTS, "report", "testset", "rag_patterns"} or not all(
        p.exists() for p in results.values()
    ):
        if store_url:
            database.record_failed(
                database.connect(store_url), run_dir.name, settings.record(), started
            )
        raise RagsweepError(
            f"the pipeline failed: see the message above and {run_dir}/pipeline.log"
        )
    for name in OUTPUTS:
        export(results[name], run_dir / name, kind=name)
    shutil.copyfile(results["report"], run_dir / "report.html")
    export_questions(results["testset"], run_dir / "testset")
    shutil.copytree(results["rag_patterns"], run_dir / "patterns")
    if task.outputs["run_id"]:
        log.info("stored as run %s in %s", task.outputs["run_id"], safe_url(store_url))
    return run_dir


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
    from ragsweep.kubeflow.terminal import LineView, LiveView, Monitor

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

    def __init__(self, path: Path, monitor: Monitor) -> None:
        self.file = path.open("w", encoding="utf-8")
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


def export_questions(artifact: Path, stem: Path) -> None:
    """The run's test set (given or generated) as ``stem.arrow``, ``.jsonl`` and ``.json``."""
    from ragsweep.documents.testsets import export_testset

    table = read_table(artifact, "testset")
    shutil.copyfile(artifact, stem.with_suffix(".arrow"))
    for suffix in (".jsonl", ".json"):
        export_testset(table, stem.with_suffix(suffix))


def absolute(uri: str, flag: str) -> str:
    """S3 URIs pass through; a local path must exist and is made absolute for the steps."""
    if uri.startswith("s3://"):
        return uri
    path = Path(uri).expanduser()
    if not path.exists():
        raise RagsweepError(f"{flag}: {uri}: no such file or folder")
    return str(path.resolve())
