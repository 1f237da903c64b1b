"""SIGINT and SIGTERM during a local run: stop within seconds, leave nothing running.

kfp.local runs each step as a child process and reads its output in a thread; left alone,
Ctrl-C unwinds through its thread pool while the running step goes on (and later steps
start), and SIGTERM kills the runner and orphans the step. Here the first signal raises
``Interrupted`` in the main thread (the runner then records the run as interrupted) and
starts a reaper that stops every descendant process: SIGTERM, then SIGKILL after
``GRACE_S``, and any step started meanwhile as soon as it appears, until the process ends.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

GRACE_S = 2.0  # a step's time to end after SIGTERM before it is killed
POLL_S = 0.1


class Interrupted(BaseException):  # noqa: N818 (like KeyboardInterrupt, not an error)
    """The run was asked to stop (by ``signum``); a BaseException, so that no step runner's
    ``except Exception`` takes it for a failed task."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


@contextmanager
def interruptible(on_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise ``Interrupted`` (once) and stop every
    child process, after calling ``on_stop`` (e.g. to stop showing the steps' output: on a
    terminal's Ctrl-C they get SIGINT too, and fail with a traceback of their own).
    Outside the main thread (where signals cannot be handled) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = threading.Event()

    def handle(signum: int, _frame) -> None:
        if stopping.is_set():
            return  # already stopping: the reaper is at work
        stopping.set()
        if on_stop is not None:
            on_stop()
        threading.Thread(target=reap, name="ragsweep-reaper", daemon=True).start()
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if not stopping.is_set() else signal.SIG_IGN)


def reap() -> None:
    """Stop every descendant of this process, now and as long as it lives: SIGTERM first,
    SIGKILL after ``GRACE_S``."""
    import psutil

    me = psutil.Process()
    seen: dict[int, float] = {}
    while True:
        now = time.monotonic()
        for child in me.children(recursive=True):
            try:
                if child.pid not in seen:
                    seen[child.pid] = now
                    child.terminate()
                elif now - seen[child.pid] > GRACE_S:
                    child.kill()
            except psutil.NoSuchProcess:
                continue
        time.sleep(POLL_S)
