"""How a pipeline step reports its progress to ``ragsweep run``'s terminal.

A step counts its work on named counters: ``expect`` when it learns how much there is (the
texts it will embed, the LLM calls it will make), ``advance`` as it gets done. When
``RAGSWEEP_PROGRESS`` names a file (``ragsweep run`` sets it for its steps), every call
appends this process's running totals to it as one JSON line, e.g.
``{"source": "3f2a...", "counter": "LLM calls", "done": 12, "total": 40, "at": 1764.2}``
(``at``: when, in seconds since the epoch, for the UI's time left at the recent pace),
which the terminal sums over the steps (``ragsweep.runner.terminal``); without it (on a
cluster) the calls do nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

ENV = "RAGSWEEP_PROGRESS"
EMBEDDED = "texts embedded"
LLM_CALLS = "LLM calls"

_SOURCE = uuid.uuid4().hex  # this process: a step's totals replace its earlier ones
_lock = threading.Lock()
_counts: dict[str, list[int]] = {}  # counter -> [done, expected, planned]


def expect(counter: str, n: int) -> None:
    """``n`` more units of work on ``counter`` are known to be coming."""
    _change(counter, expected=n)


def plan(counter: str, n: int) -> None:
    """This step will do at most ``n`` units of ``counter`` in all: its total until the
    work it ``expect``-s says more (``settle`` drops what turned out not to be needed)."""
    _change(counter, planned=n)


def advance(counter: str, n: int = 1) -> None:
    """``n`` units of ``counter`` are done."""
    _change(counter, done=n)


def settle() -> None:
    """The step is over: each counter's total becomes what it did (work planned but not
    needed, such as answers shared between configurations, no longer counts)."""
    with _lock:
        for counter, counts in _counts.items():
            if max(counts) > counts[0]:
                counts[1] = counts[2] = counts[0]
                _write(counter, counts)


def _change(counter: str, done: int = 0, expected: int = 0, planned: int = 0) -> None:
    if not os.environ.get(ENV) or not (done or expected or planned):
        return
    with _lock:
        counts = _counts.setdefault(counter, [0, 0, 0])
        counts[0] += done
        counts[1] += expected
        counts[2] = max(counts[2], planned)
        _write(counter, counts)


def _write(counter: str, counts: list[int]) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    done, expected, planned = counts
    record = {"source": _SOURCE, "counter": counter, "done": done}
    record["total"] = max(done, expected, planned)
    record["at"] = round(time.time(), 3)
    # one write of a short line to a file opened for appending: whole, between processes
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)
