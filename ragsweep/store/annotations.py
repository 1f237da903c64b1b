"""What a team writes on a stored run: a name, a note and tags (``ragsweep ui``'s runs
list shows them, searches them and filters by tag), and whether it is archived (the runs
list hides it unless asked). A run stored again under its id keeps them
(``ragsweep.store.database``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ragsweep.core.errors import RagsweepError
from ragsweep.store.database import runs

TAG = re.compile(r"^[\w.:/+-]{1,40}$")  # letters, digits and . : / + - _ ; no comma, no space
MAX_TAGS = 20
MAX_TITLE, MAX_NOTE = 200, 4000


def parse_tags(text: str) -> list[str]:
    """Tags from ``text`` (separated by commas or spaces), each checked, in order, once."""
    tags = list(dict.fromkeys(t for t in re.split(r"[,\s]+", text.strip()) if t))
    for tag in tags:
        if not TAG.match(tag):
            raise RagsweepError(
                f"tags: {tag!r} is not a tag; use up to 40 letters, digits or . : / + - _"
            )
    if len(tags) > MAX_TAGS:
        raise RagsweepError(f"tags: {len(tags)} given, at most {MAX_TAGS}")
    return tags


def label_run(
    engine: Engine,
    run_id: str,
    title: str | None = None,
    note: str | None = None,
    tags: list[str] | None = None,
) -> None:
    """Set the run's name, note and tags (empty: none; None: as they are)."""
    if len(title or "") > MAX_TITLE or len(note or "") > MAX_NOTE:
        raise RagsweepError(
            f"run {run_id}: a name has at most {MAX_TITLE} characters, a note {MAX_NOTE}"
        )
    values: dict[str, str | None] = {}
    if title is not None:
        values["title"] = title.strip() or None
    if note is not None:
        values["note"] = note.strip() or None
    if tags is not None:
        parse_tags(",".join(tags))
        values["tags"] = f",{','.join(tags)}," if tags else None
    with engine.begin() as conn:
        done = conn.execute(runs.update().where(runs.c.run_id == run_id).values(**values))
    if not done.rowcount:
        raise RagsweepError(f"results store: no run {run_id!r}")


def archive_run(engine: Engine, run_id: str, archived: bool = True) -> None:
    """Archive the run (it keeps the time it was first archived), or unarchive it. Only the
    lists change: its results, its comparisons and ``baseline=latest`` do not."""
    when = sa.func.coalesce(runs.c.archived_at, datetime.now(UTC)) if archived else None
    with engine.begin() as conn:
        done = conn.execute(runs.update().where(runs.c.run_id == run_id).values(archived_at=when))
    if not done.rowcount:
        raise RagsweepError(f"results store: no run {run_id!r}; `ragsweep runs` lists them")
