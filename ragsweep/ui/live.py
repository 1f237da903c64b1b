"""Runs in progress under the UI's runs folder: each run folder marked running (its
``run.json``) whose process is alive, with the counters its steps append to
``progress.jsonl`` (``ragsweep.core.progress``) summed as the terminal sums them, and a time
left at the recent pace: the counter's progress over its last 30 seconds (the terminal's
``RATE_WINDOW_S``), once it has advanced ``MIN_TICKS`` times in them (a run's earlier
steps, or a counter's first few items, say little of the rest)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ragsweep.core.errors import RagsweepError
from ragsweep.runner.rundir import MARKER, read_marker, started_at, status_of
from ragsweep.runner.terminal import Counter, format_count, format_eta

MIN_TICKS = 5  # the advances of a counter within its window before a time left is given


@dataclass(frozen=True)
class Count:
    name: str
    done: int
    total: int
    eta_s: float | None  # at the recent pace; None when done or not enough to estimate

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


def counts(progress_file: Path, now: float | None = None) -> list[Count]:
    """The counters of ``progress_file`` (each process's latest line, summed over the
    processes), each with its time left at ``now`` (default: the clock's) at its recent
    pace (the last 30 s), given once it advanced ``MIN_TICKS`` times in that window (not
    for lines without a time, written by an earlier ragsweep). A line still being written is
    skipped."""
    try:
        lines = progress_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    now = time.time() if now is None else now
    latest: dict[tuple[str, str], tuple[int, int]] = {}
    sums: dict[str, list[int]] = {}  # counter -> [done, total] over the processes
    summed: dict[str, Counter] = {}
    for line in lines:
        try:
            record = json.loads(line)
            source, name = str(record["source"]), str(record["counter"])
            pair = (int(record["done"]), int(record["total"]))
            at = None if record.get("at") is None else float(record["at"])
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        before = latest.get((source, name), (0, 0))
        latest[source, name] = pair
        done_total = sums.setdefault(name, [0, 0])
        done_total[0] += pair[0] - before[0]
        done_total[1] += pair[1] - before[1]
        counter = summed.setdefault(name, Counter(name))
        if at is None:
            counter.done, counter.total = done_total[0], max(done_total)
        else:
            counter.set(*done_total, at)
    out = []
    for name, counter in summed.items():
        ticks = len({done for _, done in counter.samples}) - 1
        eta = counter.eta(now) if ticks >= MIN_TICKS else None
        out.append(Count(name, counter.done, counter.total, eta))
    return out


def running(folder: Path) -> list[Progress]:
    """The runs in progress under ``folder``, newest first."""
    found = []
    for marker in sorted(folder.glob(f"*/{MARKER}"), reverse=True):
        run_dir = marker.parent
        try:
            if status_of(run_dir) != "running":
                continue
            start = started_at(run_dir)
            pid = read_marker(run_dir).get("pid")
        except (RagsweepError, ValueError):  # a marker being rewritten, a stranger's folder
            continue
        found.append(
            Progress(run_dir.name, run_dir, pid, start, counts(run_dir / "progress.jsonl"))
        )
    return found
