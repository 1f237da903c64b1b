"""What ``ragsweep run`` shows while the pipeline runs: steps done of total, the steps
running, and the steps' counters (``ragsweep.core.progress``) with their rate and time left.

On a terminal, one live display (rich) with a line above it per finished step; elsewhere (CI,
a pipe), a line per finished step and a line per changed counter at most every
``interval_s`` seconds. kfp.local's own lines and the steps' output go to the run's log
only, unless ``verbose``; a warning a step logs is shown, and a failed step's output is
shown whole, with where the log is.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

RATE_WINDOW_S = 30.0  # a counter's rate: its progress over the last this many seconds
FAILED_LINES = 200  # the most lines of a failed step's output shown
STARTED = re.compile(r"^Executing task '([\w-]+)'")
FINISHED = re.compile(r"^Task '([\w-]+)' finished with status (\w+)")
REUSED = re.compile(r"^Task '?([\w-]+)'? cache hit")  # kfp.local's cache: a resumed run
COST = re.compile(r"^ragsweep: step (\w+): (peak memory .*)")
WARNING = re.compile(r"^ragsweep: warning: ")
KFP_OWN = re.compile(
    r"^(Running pipeline|Streamed logs|Executing task|Task '|Pipeline '|-{20,}|\[KFP Executor)"
)


def format_count(n: int) -> str:
    return f"{n:,}"


def format_rate(per_s: float | None) -> str:
    """``12.3/s``, ``1,234/s``, or per minute below one a second; empty when unknown."""
    if per_s is None:
        return ""
    if per_s >= 100:
        return f"{per_s:,.0f}/s"
    if per_s >= 1:
        return f"{per_s:.1f}/s"
    return f"{per_s * 60:.1f}/min"


def format_eta(seconds: float | None) -> str:
    """Time left as ``ETA 1:02:03`` or ``ETA 2:05``; empty when unknown."""
    if seconds is None:
        return ""
    s = round(seconds)
    hours, minutes, s = s // 3600, s // 60 % 60, s % 60
    return f"ETA {hours}:{minutes:02}:{s:02}" if hours else f"ETA {minutes}:{s:02}"


@dataclass
class Counter:
    """One counter summed over the steps: done of total, and its recent rate."""

    name: str
    done: int = 0
    total: int = 0
    samples: deque = field(default_factory=deque)  # (time, done), the last RATE_WINDOW_S

    def set(self, done: int, total: int, now: float) -> None:
        self.done, self.total = done, max(total, done)
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[1][0] >= RATE_WINDOW_S:
            self.samples.popleft()

    def rate(self, now: float) -> float | None:
        """Units a second over the window (None before two samples a moment apart, or with
        no progress in it)."""
        if not self.samples:
            return None
        since, before = self.samples[0]
        if now - since < 0.5 or self.done <= before:
            return None
        return (self.done - before) / (now - since)

    def eta(self, now: float) -> float | None:
        """Seconds left at the current rate (None when done, or no rate yet)."""
        rate = self.rate(now)
        if self.done >= self.total or not rate:
            return None
        return (self.total - self.done) / rate

    def detail(self, now: float, sep: str = ", ") -> str:
        """Rate and time left, e.g. ``120/s, ETA 0:03``, what of them is known."""
        return sep.join(x for x in (format_rate(self.rate(now)), format_eta(self.eta(now))) if x)

    def describe(self, now: float) -> str:
        """``texts embedded 483/850 (120/s, ETA 0:03)``."""
        text = f"{self.name} {format_count(self.done)}/{format_count(self.total)}"
        detail = self.detail(now)
        return f"{text} ({detail})" if detail else text


def count_steps(spec: Any, loop_items: Mapping[str, int], conditions: bool) -> int:
    """The steps a compiled pipeline (``PipelineSpec``) runs: each loop's steps as many times
    as ``loop_items`` gives for the loop task's name (1 when it names none), a condition's
    steps when ``conditions`` (whether its branch is taken)."""

    def count(dag: Any) -> int:
        n = 0
        for name, task in dag.tasks.items():
            component = spec.components[task.component_ref.name]
            if component.WhichOneof("implementation") != "dag":
                n += 1
                continue
            inner = count(component.dag)
            if task.WhichOneof("iterator"):
                inner *= loop_items.get(name, 1)
            if task.trigger_policy.condition and not conditions:
                inner = 0
            n += inner
        return n

    return count(spec.root.dag)


class StepTotal:
    """The steps a run of a compiled pipeline (``PipelineSpec``) makes: each loop counted
    first with the items ``estimates`` gives for the step listing them (1 when none), and,
    once that step has finished, with as many as it listed (read from its output in
    ``pipeline_root``)."""

    def __init__(
        self, spec: Any, pipeline_root: Path, estimates: Mapping[str, int], conditions: bool
    ) -> None:
        self.spec, self.root, self.conditions = spec, pipeline_root, conditions
        self.loops: dict[str, tuple[str, str]] = {}  # listing step -> (loop task, its output)
        for name, task in spec.root.dag.tasks.items():
            if task.WhichOneof("iterator") == "parameter_iterator":
                item = task.parameter_iterator.items.input_parameter
                source = task.inputs.parameters[item].task_output_parameter
                self.loops[source.producer_task] = (name, source.output_parameter_key)
        self.items = {loop: estimates.get(step, 1) for step, (loop, _) in self.loops.items()}
        self.total = count_steps(spec, self.items, conditions)

    def finished(self, step: str) -> int:
        """The total, after ``step`` finished."""
        if step in self.loops:
            loop, key = self.loops[step]
            for output in self.root.glob(f"*/{step}/executor_output.json"):
                self.items[loop] = len(json.loads(output.read_text())["parameterValues"][key])
            self.total = count_steps(self.spec, self.items, self.conditions)
        return self.total


class Tail:
    """The new complete JSON lines of a progress file, read from where the last call ended."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def read(self) -> list[dict]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


class LineView:
    """Line-based output: a line per finished step, a counter's line when it changed."""

    def __init__(self, out: TextIO, interval_s: float = 15.0) -> None:
        self.out, self.interval_s, self.shown_at = out, interval_s, 0.0
        self.shown: dict[str, tuple[int, int]] = {}

    def print(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def refresh(self, monitor: Monitor, now: float, force: bool = False) -> None:
        if not force and now - self.shown_at < self.interval_s:
            return
        self.shown_at = now
        for counter in monitor.counters.values():
            if self.shown.get(counter.name) != (counter.done, counter.total):
                self.shown[counter.name] = (counter.done, counter.total)
                self.print(f"  {counter.describe(now)}")

    def close(self) -> None:
        pass


class LiveView:
    """One live rich display: a bar for the steps (the running ones named) and one for each
    counter, with its rate and time left; printed lines go above it."""

    def __init__(self, out: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.progress = Progress(
            TextColumn("{task.description:<15}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            console=Console(file=out, force_terminal=True),
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=4,
        )
        self.steps = self.progress.add_task("steps", total=None, detail="")
        self.bars: dict[str, Any] = {}
        self.progress.start()

    def print(self, text: str) -> None:
        self.progress.console.print(text, markup=False, highlight=False)

    def refresh(self, monitor: Monitor, now: float, force: bool = False) -> None:
        running = ", ".join(monitor.running) or ""
        self.progress.update(
            self.steps, completed=monitor.finished, total=monitor.total_steps, detail=running
        )
        for counter in monitor.counters.values():
            if counter.name not in self.bars:
                self.bars[counter.name] = self.progress.add_task(counter.name, detail="")
            self.progress.update(
                self.bars[counter.name],
                completed=counter.done,
                total=counter.total,
                detail=counter.detail(now, "  "),
            )

    def close(self) -> None:
        self.progress.stop()


class Monitor:
    """Reads the pipeline's output lines (``line``) and the steps' progress file, and keeps
    the view up to date: at each step's end, and from a thread (``start`` / ``stop``) that
    polls the file four times a second."""

    def __init__(
        self,
        view: LineView | LiveView,
        total_steps: int,
        progress_file: Path,
        log_path: Path,
        verbose: bool = False,
        clock: Callable[[], float] = time.monotonic,
        recount: Callable[[str], int] | None = None,
    ) -> None:
        self.view, self.total_steps, self.verbose, self.clock = view, total_steps, verbose, clock
        self.recount = recount  # the total after a step finished (StepTotal.finished)
        self.tail, self.log_path = Tail(progress_file), log_path
        self.finished = 0
        self.reused = 0  # of them, finished in an earlier attempt (a resumed run)
        self.silenced = False  # the run is being stopped: its output is no longer shown
        self.running: list[str] = []
        self.costs: dict[str, list[str]] = {}  # step -> its cost lines not yet shown
        self.output: deque[str] = deque(maxlen=FAILED_LINES)  # the running steps' output
        self.counters: dict[str, Counter] = {}
        self.sources: dict[tuple[str, str], tuple[int, int]] = {}
        self.in_input = False  # in the executor's input, a JSON block no one needs to see
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def start(self) -> None:
        with self.lock:
            self.update()
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join()
        with self.lock:
            self.update(force=True)
            self.view.close()

    def _poll(self) -> None:
        while not self.stopping.wait(0.25):
            with self.lock:
                self.update()

    def update(self, force: bool = False) -> None:
        """Take in the progress file's new lines and refresh the view."""
        now = self.clock()
        changed: set[str] = set()
        for record in self.tail.read():
            name = record["counter"]
            self.sources[(name, record["source"])] = (record["done"], record["total"])
            changed.add(name)
        for name in changed:
            done = sum(d for (n, _), (d, _) in self.sources.items() if n == name)
            total = sum(t for (n, _), (_, t) in self.sources.items() if n == name)
            self.counters.setdefault(name, Counter(name)).set(done, total, now)
        self.view.refresh(self, now, force)

    def silence(self) -> None:
        """Show no more of the pipeline's output (the run is being stopped: its steps'
        failures are the stop's, not theirs). Safe from a signal handler: takes no lock."""
        self.silenced = True

    def line(self, line: str) -> None:
        """One line of the pipeline's output (kfp.local's timestamp taken off)."""
        if self.silenced:
            return
        with self.lock:
            if self.verbose:
                self.view.print(f"  {line}")
            if started := STARTED.match(line):
                self.running.append(started[1])
                if len(self.running) == 1:
                    self.output.clear()
            elif finished := FINISHED.match(line):
                self._finished(finished[1], finished[2])
            elif reused := REUSED.match(line):
                self.reused += 1
                self._finished(reused[1], "REUSED")
            elif cost := COST.match(line):
                self.costs.setdefault(cost[1].replace("_", "-"), []).append(cost[2])
            elif not self.verbose and WARNING.match(line):
                self.view.print(f"  {line}")
            if line.endswith("Got executor_input:"):
                self.in_input = True
            elif self.in_input:
                self.in_input = line != "}"
            elif self.running and line.strip() and not KFP_OWN.match(line):
                self.output.append(line)

    def _finished(self, name: str, status: str) -> None:
        if name in self.running:
            self.running.remove(name)
        self.finished += 1
        if self.recount and status in ("SUCCESS", "REUSED"):
            self.total_steps = self.recount(name)
        self.total_steps = max(self.total_steps, self.finished + len(self.running))
        if status == "REUSED":
            self.view.print(f"[{self.finished}/{self.total_steps}] {name}: reused")
            self.update(force=True)
            return
        costs = self.costs.get(name) or [""]
        cost = costs.pop(0)
        if status == "SUCCESS":
            self.view.print(f"[{self.finished}/{self.total_steps}] {name}: {cost or 'done'}")
            self.update(force=True)
            return
        self.view.print(f"[{self.finished}/{self.total_steps}] {name}: {status.lower()}")
        if not self.verbose:
            self.view.print(f"  its output (all of it in {self.log_path}):")
            for kept in self.output:
                self.view.print(f"    {kept}")
        self.output.clear()
