"""A stored test set's versions as a whole: each save of it (its items changed at one
time), and the set as it was after one, to revert to. ``curation.DatabaseStore`` keeps the
versions of each item; a revert stores the old set again, a new version of each item it
changes, so the history keeps what was reverted."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import TESTSET
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.store import database


def _item_rows(store: DatabaseStore, name: str) -> list[dict]:
    """The set's stored item versions, oldest first."""
    sets, items = database.testsets, database.testset_items
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(sets.c.id).where(sets.c.name == name)).scalar()
        if found is None:
            raise RagsweepError(f"results store: no test set {name!r}")
        query = sa.select(items).where(items.c.testset_id == found)
        return [
            dict(r) for r in conn.execute(query.order_by(items.c.created_at, items.c.id)).mappings()
        ]


def versions(store: DatabaseStore, name: str) -> list[dict[str, Any]]:
    """Each save of the set, numbered from 1, newest first: ``number``, ``created_at``,
    ``author``, ``comment``, ``changed`` and ``deleted`` (questions it stored anew or
    deleted) and ``questions`` (how many the set held after it)."""
    saves: dict[datetime, dict[str, Any]] = {}
    live: dict[str, bool] = {}
    for item in _item_rows(store, name):
        save = saves.setdefault(
            item["created_at"],
            {"created_at": item["created_at"], "author": None, "comment": None},
        )
        save["author"] = save["author"] or item["author"]
        save["comment"] = save["comment"] or item["comment"]
        save["changed"] = save.get("changed", 0) + (not item["deleted"])
        save["deleted"] = save.get("deleted", 0) + bool(item["deleted"])
        live[item["question_id"]] = not item["deleted"]
        save["questions"] = sum(live.values())
    numbered = [{"number": n, **s} for n, s in enumerate(saves.values(), start=1)]
    return numbered[::-1]


def as_of(store: DatabaseStore, name: str, number: int) -> pa.Table:
    """The set as it was after its save ``number`` (``versions``), in its questions' order."""
    rows = _item_rows(store, name)
    times = list(dict.fromkeys(r["created_at"] for r in rows))
    if not 1 <= number <= len(times):
        raise RagsweepError(f"test set {name!r} has no version {number} (1 to {len(times)})")
    latest: dict[str, dict] = {}
    for item in rows:
        if item["created_at"] <= times[number - 1]:
            latest[item["question_id"]] = item
    kept = [i for i in latest.values() if not i["deleted"]]
    kept.sort(key=lambda i: -1 if i["item_position"] is None else i["item_position"])
    return pa.Table.from_pylist([database.testset_row(i) for i in kept], schema=TESTSET)


def revert(store: DatabaseStore, name: str, number: int, author: str | None = None) -> None:
    """Store the set as it was after save ``number`` as its newest version."""
    store.save(name, as_of(store, name, number), author, f"reverted to version {number}")


def previous(store: DatabaseStore, name: str) -> int:
    """The number of the set's save before its latest (an import over it, an edit, a
    deletion)."""
    saves = versions(store, name)
    if len(saves) < 2:
        raise RagsweepError(f"test set {name!r} has no earlier version to go back to")
    return saves[1]["number"]


def before_latest(store: DatabaseStore, name: str) -> pa.Table:
    """The set as it was before its latest save."""
    return as_of(store, name, previous(store, name))
