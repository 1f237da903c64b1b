"""Run the ragsweep pipeline on this machine with Kubeflow's local runner, no cluster.

Each step runs as a subprocess of this Python environment
(``kfp.local.SubprocessRunner(use_venv=False)``); the artifacts land under the run folder,
and the leaderboard and per-question scores are exported beside them.
"""

from __future__ import annotations

import io
import json
import logging
import re
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.csv as csv
import pyarrow.parquet as pq

from ragsweep.errors import RagsweepError
from ragsweep.leaderboard import check_metric
from ragsweep.llm import LLMSettings
from ragsweep.schemas import read_table
from ragsweep.space import SearchSpace

log = logging.getLogger("ragsweep")


def run_local(
    docs: str,
    testset: str,
    space: SearchSpace,
    metric: str,
    output: Path,
    llm: LLMSettings | None = None,
    qa_generation: dict | None = None,
) -> Path:
    """Run the pipeline locally; return the run folder holding leaderboard and scores.

    An empty ``testset`` has the pipeline generate one with ``qa_generation``; model
    endpoints come from the RAGSWEEP_LLM_* / RAGSWEEP_JUDGE_* environment, which the steps
    inherit.
    """
    from kfp import local

    from ragsweep.pipelines.sweep_pipeline import DEFAULT_QA, sweep_pipeline

    check_metric(metric)
    docs = absolute(docs, "--docs")
    testset = absolute(testset, "--testset") if testset else ""
    run_dir = output / datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    run_dir.mkdir(parents=True)
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str((run_dir / "pipeline").resolve()),
        raise_on_error=False,
    )
    arguments = {
        "docs": docs,
        "testset": testset,
        "search_space": space.to_dict(),
        "optimization_metric": metric,
        "llm": (llm or LLMSettings()).to_dict(),
        "qa_generation": qa_generation or DEFAULT_QA,
    }
    (run_dir / "parameters.json").write_text(json.dumps(arguments, indent=2) + "\n")
    n = len(space.all_configs())
    log.info("sweeping %d configurations; run folder %s", n, run_dir)
    with StepLog(run_dir / "pipeline.log") as step_log, warnings.catch_warnings():
        # the steps deliberately run in this environment, not in the image they name
        warnings.filterwarnings("ignore", "You may be attemping to run a task", RuntimeWarning)
        with redirect_stdout(step_log), root_logging_to(step_log):
            task = sweep_pipeline(**arguments)
    results = {name: Path(artifact.path) for name, artifact in task.outputs.items()}
    expected = {"leaderboard", "scores", "testset"}
    if set(results) != expected or not all(p.exists() for p in results.values()):
        raise RagsweepError(
            f"the pipeline failed: see the message above and {run_dir}/pipeline.log"
        )
    for name in ("leaderboard", "scores"):
        export(results[name], run_dir / name, kind=name)
    export_questions(results["testset"], run_dir / "testset")
    return run_dir


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


class StepLog(io.TextIOBase):
    """Where the pipeline's output goes: all of it to the run's log file, and to the terminal
    only each step's start and end and ragsweep's own progress and error lines."""

    SHOWN = re.compile(r"^(ragsweep:|error:)|Executing task|finished with status")
    ANSI = re.compile(r"\x1b\[[0-9;]*m")
    TIMESTAMP = re.compile(r"^[\d:.]+ - \w+ - ")

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")
        self.terminal = sys.stdout
        self.partial = ""
        self.lock = threading.Lock()  # loop iterations run in threads

    def write(self, text: str) -> int:
        with self.lock:
            *lines, self.partial = (self.partial + self.ANSI.sub("", text)).split("\n")
            for line in lines:
                self.file.write(line + "\n")
                line = self.TIMESTAMP.sub("", line.strip())
                if self.SHOWN.search(line):
                    self.terminal.write(f"  {line}\n")
                    self.terminal.flush()
        return len(text)

    def close(self) -> None:
        self.file.write(self.partial)
        self.file.close()
        super().close()


def export(artifact: Path, stem: Path, kind: str) -> None:
    """Copy an Arrow artifact to ``stem.arrow`` and write it as ``stem.parquet`` and ``.csv``."""
    table = read_table(artifact, kind)
    shutil.copyfile(artifact, stem.with_suffix(".arrow"))
    pq.write_table(table, stem.with_suffix(".parquet"))
    csv.write_csv(table, stem.with_suffix(".csv"))


def export_questions(artifact: Path, stem: Path) -> None:
    """The run's test set (given or generated) as ``stem.arrow``, ``.jsonl`` and ``.json``."""
    from ragsweep.testset import export_testset

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
