"""The context every pipeline step runs in: log format, progress, AutoRAG's Secret keys, a
user's mistake as one line, and what the step cost."""

import gc
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ragsweep.core import progress
from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow.autorag import adopt_connections


@contextmanager
def pipeline_step(name: str | None = None) -> Iterator[None]:
    """The context every pipeline step runs in.

    ragsweep's log lines are printed as ``ragsweep: ...`` (the local runner keeps them in the
    run's log and shows the user the warnings, ``ragsweep: warning: ...``), its progress
    counts go to ``ragsweep.core.progress`` (settled at the end), Red Hat AutoRAG's Secret keys
    stand in for ragsweep's unset ones (``ragsweep.kubeflow.autorag``), and a user's mistake ends
    the
    step with a one-line ``error: ...`` and exit status 2, no traceback, as on the command
    line. At its
    end the step says what it cost: ``ragsweep: step retrieve: peak memory 812 MB, 12.3 s
    (2.1 s starting)``, its process's peak resident memory, the time in this context and the
    time from the process's start to it (imports). ``name``: the step's (default: the
    function the Kubeflow executor runs). In a step's own process the objects alive then are
    left out of garbage collection (``gc.freeze``): the process is about to end.
    """
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(StepFormatter())
    log = logging.getLogger("ragsweep")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    starting, started = process_age(), time.monotonic()
    try:
        for taken in adopt_connections():
            log.info("%s (Red Hat AutoRAG's Secret key)", taken)
        yield
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        progress.settle()
        took = f"{time.monotonic() - started:.1f} s"
        if starting is not None:
            took += f" ({starting:.1f} s starting)"
        executed = executor_function()
        log.info(
            "step %s: peak memory %d MB, %s", name or executed or "step", peak_memory_mb(), took
        )
        log.removeHandler(handler)
        log.propagate = True
        if executed:
            # The step's process ends next: left to the collector, the interpreter's last
            # collections walk every object torch and transformers made (seconds per step).
            gc.freeze()


class StepFormatter(logging.Formatter):
    """``ragsweep: message``; a warning's as ``ragsweep: warning: message``, which the
    local runner shows the user while the rest goes to the run's log."""

    def __init__(self) -> None:
        super().__init__("ragsweep: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        if record.levelno >= logging.WARNING:
            return text.replace("ragsweep: ", "ragsweep: warning: ", 1)
        return text


def executor_function() -> str | None:
    """The component function the Kubeflow executor runs in this process (None: not a step's
    own process)."""
    argv = sys.argv
    if "--function_to_execute" in argv[:-1]:
        return argv[argv.index("--function_to_execute") + 1]
    return None


def peak_memory_mb() -> int:
    """This process's peak resident memory so far, in MB: Linux's VmHWM, which starts afresh
    with the program (``ru_maxrss`` keeps the peak of the process that started it, when that
    one forked); elsewhere ``ru_maxrss`` (kilobytes, bytes on macOS)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1 << 20 if sys.platform == "darwin" else 1 << 10))


def process_age() -> float | None:
    """Seconds since this process started (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime", encoding="ascii") as f:
            return max(0.0, float(f.read().split()[0]) - started)
    except (OSError, ValueError, IndexError):
        return None
