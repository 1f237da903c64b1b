"""A pattern's scripts run as a user runs them, without ragsweep, but many in one interpreter:
torch, transformers and llama-index (~11 CPU seconds of imports) load once per test module
rather than once per script.

The child makes ``ragsweep`` unimportable, then runs each script it is sent with ``runpy``
as ``__main__``: with its folder first on ``sys.path``, its arguments in ``sys.argv``, the
environment's changes it is sent, its output captured; then it forgets the modules beside
the script (``indexing``, ``text``, ``vector_store``...) and restores the path and the
environment, so the next script, another pattern's, imports its own. An exit is reported as
the interpreter reports it: ``sys.exit(2)`` is 2, ``sys.exit("error: ...")`` prints its
message and is 1, an exception prints its traceback and is 1."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import contextlib, io, json, os, runpy, sys, traceback
sys.modules["ragsweep"] = None  # the scripts must not need it
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # what a library writes to the file descriptor goes to the log, not the replies
for line in sys.stdin:
    script, args, env = json.loads(line)
    folder = os.path.dirname(script)
    path, environ = list(sys.path), dict(os.environ)
    sys.path.insert(0, folder)
    sys.argv = [script, *args]
    os.environ.update(env)
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exit:
            if isinstance(exit.code, int) or exit.code is None:
                code = exit.code or 0
            else:
                print(exit.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
    for name, module in list(sys.modules.items()):
        if os.path.dirname(getattr(module, "__file__", None) or "") == folder:
            del sys.modules[name]
    sys.path[:] = path
    os.environ.clear()
    os.environ.update(environ)
    replies.write(json.dumps([code, out.getvalue(), err.getvalue()]) + "\n")
    replies.flush()
"""


class PatternScripts:
    """One interpreter running patterns' scripts in turn (``run``); its own output (what
    libraries write to the file descriptors) goes to ``log``."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with log.open("w") as sink:
            self.child = subprocess.Popen(
                [sys.executable, "-c", CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=sink,
                text=True,
                env=env,
            )

    def run(
        self, path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        """Run the script at ``path`` with ``args`` and ``env``'s variables set."""
        assert self.child.stdin and self.child.stdout
        self.child.stdin.write(json.dumps([str(path), list(args), env or {}]) + "\n")
        self.child.stdin.flush()
        ready, _, _ = select.select([self.child.stdout], [], [], timeout)
        reply = self.child.stdout.readline() if ready else ""
        if not reply:
            self.close()
            raise AssertionError(
                f"the scripts' interpreter stopped: {self.log.read_text()[-3000:]}"
            )
        code, stdout, stderr = json.loads(reply)
        return subprocess.CompletedProcess([str(path), *args], code, stdout, stderr)

    def close(self) -> None:
        if self.child.poll() is None:
            assert self.child.stdin
            self.child.stdin.close()
            try:
                self.child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()


def offline_env() -> dict[str, str]:
    """The environment without the developer's LLM endpoint, the Hugging Face Hub offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSWEEP_LLM")}
    return {**env, "HF_HUB_OFFLINE": "1"}
