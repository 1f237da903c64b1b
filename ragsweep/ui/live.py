"""Runs in progress under the UI's runs folder: each run folder marked running (its
``run.json``) whose process is alive, with the counters its steps append to
``progress.jsonl`` (``ragsweep.core.progress``) summed as the terminal sums them, and a time
left from the pace so far."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow.rundir import MARKER, read_marker, started_at, status_of
from ragsweep.kubeflow.terminal import format_count, format_eta

ETA_AFTER = 0.1  # the share of a counter done before its pace is extrapolated to a time left


@dataclass(frozen=True)
class Count:
    name: str
    done: int
    total: int
    eta_s: float | None  # at the pace since the run started; None when unknown or done

    def describe(self) -> str:
        """``LLM calls 12/40, ETA 0:37`` as the terminal writes it."""
        text = f"{self.name} {format_count(self.done)}/{format_count(self.total)}"
        eta = format_eta(self.eta_s)
        return f"{text}, {eta}" if eta else text


@dataclass(frozen=True)
class Progress:
    run_id: str
    folder: Path
    pid: int | None
    started: datetime
    counts: list[Count]

    @property
    def eta_s(self) -> float | None:
        """The longest time left among the counters."""
        known = [c.eta_s for c in self.counts if c.eta_s is not None]
        return max(known) if known else None

    @property
    def eta(self) -> str:
        return format_eta(self.eta_s)


def counts(progress_file: Path, elapsed_s: float) -> list[Count]:
    """The counters of ``progress_file`` (each process's latest line, summed over the
    processes), with the time left at the pace of ``elapsed_s`` once a tenth of a counter is
    done (none before). A line still being written is skipped."""
    latest: dict[tuple[str, str], tuple[int, int]] = {}
    try:
        lines = progress_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
            latest[record["source"], record["counter"]] = (record["done"], record["total"])
        except (ValueError, KeyError, TypeError):
            continue
    summed: dict[str, list[int]] = {}
    for (_, counter), (done, total) in latest.items():
        pair = summed.setdefault(counter, [0, 0])
        pair[0] += done
        pair[1] += total
    out = []
    for name, (done, total) in summed.items():
        worth = done >= ETA_AFTER * total  # a first item's pace says little of the rest
        eta = elapsed_s * (total - done) / done if worth and 0 < done < total else None
        out.append(Count(name, done, max(done, total), eta))
    return out


def running(folder: Path) -> list[Progress]:
    """The runs in progress under ``folder``, newest first."""
    found = []
    now = datetime.now(UTC)
    for marker in sorted(folder.glob(f"*/{MARKER}"), reverse=True):
        run_dir = marker.parent
        try:
            if status_of(run_dir) != "running":
                continue
            start = started_at(run_dir)
            pid = read_marker(run_dir).get("pid")
        except (RagsweepError, ValueError):  # a marker being rewritten, a stranger's folder
            continue
        elapsed = max((now - start).total_seconds(), 0.0)
        found.append(
            Progress(run_dir.name, run_dir, pid, start, counts(run_dir / "progress.jsonl", elapsed))
        )
    return found
