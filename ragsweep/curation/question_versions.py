"""A stored question's versions (``curation.DatabaseStore.history``): what changed between
two consecutive ones, word by word, and the stored runs that were scored on each."""

from __future__ import annotations

import difflib
import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ragsweep.store.database import results, runs, testsets

# the fields a person edits, in the order a question's page shows them
FIELDS = ("question", "reference_answers", "reference_doc_ids", "reference_context")
FIELDS += ("topic", "question_type", "gold_spans")


def _text(field: str, value: Any) -> str:
    if value is None:
        return ""
    if field == "gold_spans":
        return "\n".join(f"{s['doc_id']}:{s['start']}-{s['end']}" for s in value)
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _pieces(old: str, new: str) -> list[tuple[str, str]]:
    """(kind, text) pieces that turn ``old`` into ``new``: ``same``, ``removed``,
    ``added``; words and the spaces between them kept as they are."""
    a, b = re.findall(r"\s+|\S+", old), re.findall(r"\s+|\S+", new)
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("removed", "".join(a[i1:i2])))
        if j2 > j1:
            out.append(("added", "".join(b[j1:j2])))
    return out


def diff(older: dict[str, Any] | None, newer: dict[str, Any]) -> list[dict[str, Any]]:
    """What changed from the version ``older`` (None: ``newer`` is the first) to ``newer``,
    per field (``field``, ``pieces`` from ``_pieces``); a deletion, or a version after one,
    is one change of state (``field`` ``deleted``)."""
    if older is None:
        return []
    if newer["deleted"] or older["deleted"]:
        state = "deleted" if newer["deleted"] else "restored"
        return [{"field": "deleted", "pieces": [("added", state)]}]
    return [
        {"field": f, "pieces": _pieces(_text(f, older.get(f)), _text(f, newer.get(f)))}
        for f in FIELDS
        if _text(f, older.get(f)) != _text(f, newer.get(f))
    ]


def with_diffs(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``history`` (newest first) with each version's ``changes`` from the one before."""
    older = history[1:] + [None]
    return [{**h, "changes": diff(o, h)} for h, o in zip(history, older, strict=True)]


def runs_by_version(engine: Engine, testset: str, question_id: str) -> dict[int, list[dict]]:
    """The stored runs of test set ``testset`` that scored ``question_id``, by the item
    version they scored (newest run first): each run's id and name."""
    query = (
        sa.select(
            results.c.item_version, runs.c.run_id, runs.c.title, runs.c.finished_at, runs.c.id
        )
        .select_from(
            results.join(runs, results.c.run_pk == runs.c.id).join(
                testsets, runs.c.testset_id == testsets.c.id
            )
        )
        .where(
            testsets.c.name == testset,
            results.c.question_id == question_id,
            results.c.item_version.is_not(None),
        )
        .distinct()
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
    )
    found: dict[int, list[dict]] = {}
    with engine.connect() as conn:
        for r in conn.execute(query).mappings():
            found.setdefault(r["item_version"], []).append(
                {"run_id": r["run_id"], "title": r["title"]}
            )
    return found
