"""The one exception type for a user's mistake: the CLI prints it as one line and exits non-zero."""

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class RagsweepError(Exception):
    """Bad input or an unreachable source, with a message that says what to fix.

    Name the file, the record and the field where there is one, e.g.
    ``testset.json: record 3: field 'question': expected a string, got 42``.
    """


@contextmanager
def pipeline_step() -> Iterator[None]:
    """The context every pipeline step runs in.

    ragsweep's progress lines are printed as ``ragsweep: ...`` (the local runner shows the
    user those and keeps the rest in the run's log), and a user's mistake ends the step with
    a one-line ``error: ...`` and exit status 2, no traceback, as on the command line.
    """
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("ragsweep: %(message)s"))
    log = logging.getLogger("ragsweep")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        yield
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        log.removeHandler(handler)
        log.propagate = True
