"""A local run's folder: its marker (``run.json``: status, what failed, how it was started,
so that it can be resumed or stored later), its lock (``run.lock``: held by the process
that runs it, recording its host and PID) and its exports, written whole or not at all.

The exports (leaderboard, results, breakdown, failures, report, test set, patterns, and the
side steps' comparison) are written into a staging folder inside the run folder and become
the exports together in one rename: ``exports`` is a symlink to the current set's folder
(``.exports-<token>``), replaced whole, and each export is reached at the top of the run
folder through a symlink into it (``leaderboard.arrow -> exports/leaderboard.arrow``). So a
full disk never leaves a truncated report beside a leaderboard, a kill leaves the old set or
the new one and never a mix, and ``patterns/`` is never gone; the store records a run only
after that.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table

MARKER = "run.json"
LOCK = "run.lock"
STAGING = ".exporting"
EXPORTS = "exports"  # a symlink to the current set of exports
GENERATION = ".exports-"  # the prefix of a set's folder
TABLES = ("leaderboard", "results", "breakdown", "failures")
# a run folder's status: running; then succeeded, partial (results kept, a side step or the
# store failed), failed (no results), interrupted (resumable)
RESUMABLE = ("running", "interrupted", "failed")


def write_marker(run_dir: Path, **fields: Any) -> dict[str, Any]:
    """Update the run folder's marker with ``fields`` (written to a temporary name and
    renamed, so it is always whole). Returns the marker."""
    marker = {**read_marker(run_dir), **fields}
    tmp = run_dir / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(marker, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, run_dir / MARKER)
    return marker


def read_marker(run_dir: Path) -> dict[str, Any]:
    """The run folder's marker; empty when it has none (a folder from an older ragsweep)."""
    try:
        return json.loads((run_dir / MARKER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RagsweepError(f"{run_dir / MARKER}: unreadable ({exc})") from None


def status_of(run_dir: Path) -> str:
    """The folder's status, ``interrupted`` for one marked running that no process runs
    (killed, or the machine went down): its lock is free (a folder from an older ragsweep,
    which has none: its PID is gone)."""
    marker = read_marker(run_dir)
    status = marker.get("status", "")
    if status != "running":
        return status
    if (run_dir / LOCK).exists():
        return "running" if holder(run_dir) is not None else "interrupted"
    return "running" if _alive(marker.get("pid")) else "interrupted"


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def held(run_dir: Path) -> Iterator[None]:
    """The run folder, locked by this process while the block runs: an exclusive ``flock``
    of its ``run.lock``, which records this host and PID. The kernel releases it when the
    process ends however it ends (a SIGKILL too), so a stale lock file is no obstacle. A
    folder another process holds is refused in one line naming its host and PID."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RagsweepError(f"cannot lock the run folder {run_dir}: {exc.strerror}") from None
    try:
        for _ in range(20):  # a moment, for a reader's brief probe (``holder``) to end
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.05)
        else:
            raise RagsweepError(
                f"run {run_dir.name} is being run by {_who(holder(run_dir))}: "
                "one process at a time runs a run folder; wait for it, or stop it"
            )
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid()}).encode())
        yield
    finally:
        os.close(fd)  # and with it the lock


def holder(run_dir: Path) -> dict[str, Any] | None:
    """The host and PID of the process that holds the folder's lock (``{}`` when it has
    not written them yet); None when no process holds it."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY)
    except OSError:  # none, or unreadable: taken as not held
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return json.loads(os.pread(fd, 4096, 0) or b"{}")
            except ValueError:
                return {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _who(found: dict[str, Any] | None) -> str:
    found = found or {}
    if "pid" not in found:
        return "another process"
    return f"PID {found['pid']} on host {found.get('host', '?')}"


def last_resumable(output: Path) -> Path | None:
    """The newest run folder under ``output`` that was interrupted (or killed)."""
    folders = sorted((p for p in output.glob(f"*/{MARKER}")), reverse=True)
    for marker in folders:
        if status_of(marker.parent) == "interrupted":
            return marker.parent
    return None


def find_run(output: Path, run_id: str | None) -> Path:
    """The run folder to resume: ``run_id``'s under ``output`` (or a folder path), else the
    newest interrupted one; a clear error when there is none or it cannot be resumed."""
    if run_id:
        run_dir = Path(run_id) if Path(run_id).is_dir() else output / run_id
        if not (run_dir / MARKER).is_file():
            raise RagsweepError(
                f"--resume {run_id}: no run folder {run_dir} (with a {MARKER}); "
                "give the run id printed when it started, and the same --output"
            )
    else:
        found = last_resumable(output)
        if found is None:
            raise RagsweepError(f"--resume: no interrupted run under {output}")
        run_dir = found
    status = status_of(run_dir)
    if status not in RESUMABLE:
        hint = (
            f"; store it with `ragsweep runs import {run_dir}`"
            if not read_marker(run_dir).get("stored", True)
            else ""
        )
        raise RagsweepError(f"--resume: run {run_dir.name} is {status}: nothing to resume{hint}")
    if status == "running":
        raise RagsweepError(
            f"--resume: run {run_dir.name} is still running ({_who(holder(run_dir))}): "
            "one process at a time runs a run folder"
        )
    return run_dir


@contextmanager
def staged(run_dir: Path, whole: bool = False) -> Iterator[Path]:
    """A staging folder for exports: when the block ends well, what it wrote, with the
    current exports it did not replace (none when ``whole``: the block wrote the whole set),
    becomes the run folder's exports in one rename. On an error nothing of it is kept, and
    a full disk or a refused write is one line naming the folder."""
    stage = run_dir / STAGING
    shutil.rmtree(stage, ignore_errors=True)
    try:
        stage.mkdir()
        yield stage
        _swap_in(run_dir, stage, whole)
    except OSError as exc:
        raise RagsweepError(
            f"cannot write the run folder {run_dir}: {exc.strerror or exc}; "
            "nothing half-written was kept"
        ) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _swap_in(run_dir: Path, stage: Path, whole: bool) -> None:
    """Make ``stage`` (with the current set's other exports, hard-linked: a set's files
    are never written again) the current set: renamed to a set folder of its own, the
    ``exports`` symlink replaced by one to it (the one step that swaps the sets), the top
    level's links made, then the old set deleted."""
    current = run_dir / EXPORTS
    old = current.resolve() if current.is_dir() else None
    if old is not None and not whole:
        for item in old.iterdir():
            if not (stage / item.name).exists():
                if item.is_dir():
                    shutil.copytree(item, stage / item.name, copy_function=os.link)
                else:
                    os.link(item, stage / item.name)
    names = sorted(p.name for p in stage.iterdir())
    generation = run_dir / f"{GENERATION}{uuid.uuid4().hex[:12]}"
    os.rename(stage, generation)
    linked = [run_dir / n for n in names if not os.path.lexists(run_dir / n)]
    try:
        for link in linked:  # new names: links that lead nowhere until the swap
            _symlink(link, f"{EXPORTS}/{link.name}")
        if current.is_dir() and not current.is_symlink():  # a copied folder's set: aside
            os.rename(current, run_dir / f"{GENERATION}{uuid.uuid4().hex[:12]}")
        _symlink(current, generation.name)  # the swap
    except OSError:
        for link in linked:
            link.unlink(missing_ok=True)
        shutil.rmtree(generation, ignore_errors=True)
        raise
    for name in names:  # an older layout's files and folders at the top: links now
        top = run_dir / name
        if not top.is_symlink():
            aside = run_dir / f"{GENERATION}{uuid.uuid4().hex[:12]}"
            os.rename(top, aside)
            _symlink(top, f"{EXPORTS}/{name}")
    _tidy(run_dir, generation)


def _symlink(path: Path, target: str) -> None:
    """``path`` as a symlink to ``target``, in one rename over whatever link was there."""
    if path.is_symlink() and os.readlink(path) == target:
        return
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.link")
    os.symlink(target, tmp)
    os.replace(tmp, path)


def _tidy(run_dir: Path, generation: Path) -> None:
    """Delete the sets but ``generation`` (the old one, and any a kill left) and the
    top-level links that lead nowhere now (to an export the new set does not hold)."""
    for item in run_dir.iterdir():
        if item.name.startswith(GENERATION) and item != generation:
            if item.is_dir() and not item.is_symlink():
                shutil.rmtree(item, ignore_errors=True)
            else:
                item.unlink(missing_ok=True)
        elif item.is_symlink() and not item.exists() and item.name != EXPORTS:
            item.unlink(missing_ok=True)  # into the exports, or a link a kill left half made


def export_run(run_dir: Path, outputs: dict[str, Path]) -> None:
    """Export the pipeline's ``outputs`` (artifact paths by output name) into ``run_dir``:
    each table as .arrow, .parquet, .csv and .json, report.html, the test set and the
    patterns, made the run folder's exports together (``staged``)."""
    from ragsweep.reporting.exports import export

    with staged(run_dir, whole=True) as stage:
        for name in TABLES:
            export(outputs[name], stage / name, kind=name)
        shutil.copyfile(outputs["report"], stage / "report.html")
        export_questions(outputs["testset"], stage / "testset")
        shutil.copytree(outputs["rag_patterns"], stage / "patterns")


def export_questions(artifact: Path, stem: Path) -> None:
    """The run's test set (given or generated) as ``stem.arrow``, ``.jsonl`` and ``.json``."""
    from ragsweep.documents.testsets import export_testset

    table = read_table(artifact, "testset")
    shutil.copyfile(artifact, stem.with_suffix(".arrow"))
    for suffix in (".jsonl", ".json"):
        export_testset(table, stem.with_suffix(suffix))


def is_complete(run_dir: Path) -> bool:
    """Whether the folder holds every export (as ``export_run`` leaves it)."""
    names = [f"{t}.arrow" for t in TABLES] + ["report.html", "testset.arrow"]
    return all((run_dir / n).is_file() for n in names) and (run_dir / "patterns").is_dir()


def started_at(run_dir: Path) -> datetime:
    """When the run started (its marker's record, else its folder name)."""
    recorded = read_marker(run_dir).get("started_at")
    if recorded:
        return datetime.fromisoformat(recorded)
    from datetime import UTC

    return datetime.strptime(run_dir.name, "%Y%m%d-%H%M%S-%f").replace(tzinfo=UTC)
