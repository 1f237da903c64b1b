"""Stored test sets and their curation: add a question, delete one, edit a question or its
reference answers while its reference context and metadata stay as they are. An edited
question keeps its ``question_id`` and gets a new ``question_version``: it is not compared
with its old self.

A store holds named test sets behind ``Store``; ``DatabaseStore`` keeps them in the results
database (``ragsweep.store.database``), losslessly (every reference answer and document, gold
spans,
reference context, topic, type, conversation history), and every change as a new version of
the items it changes, so an item's history can be read back. A run reads a stored set as
its test data ``store:<name>`` (``load_test_data``), or through ``ragsweep run
--testset-name``; both read it with ``live_questions``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ragsweep.core.errors import RagsweepError, safe_url
from ragsweep.core.schemas import TESTSET
from ragsweep.documents.testsets import check_limits, content_id, question_version
from ragsweep.store import database

MAX_AUTHOR, MAX_COMMENT = 200, 2000
_ITEM_FIELDS = [
    "question",
    "reference_answers",
    "reference_doc_ids",
    "reference_context",
    "topic",
    "question_type",
    "question_version",
    "gold_spans",
    "conversation_history",
]


class Store(Protocol):
    """Named test sets (TESTSET tables)."""

    def names(self) -> list[str]: ...

    def load(self, name: str) -> pa.Table: ...

    def save(self, name: str, table: pa.Table) -> None: ...


def _utc(when: datetime | None) -> datetime | None:
    """A stored time, zoned (SQLite gives it back without its zone)."""
    return when.replace(tzinfo=UTC) if when is not None and when.tzinfo is None else when


class DatabaseStore:
    """Test sets in the results database: ``load`` gives the latest version of each item,
    ``save`` stores a new version of each item that changed (a deletion is a version too)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def names(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(conn.execute(sa.select(database.testsets.c.name)).scalars())

    def load(self, name: str) -> pa.Table:
        with self.engine.connect() as conn:
            items = _items(conn, self._id(conn, name))
        latest: dict[str, dict] = {}
        for item in items:  # oldest version first
            latest[item["question_id"]] = item
        live = [i for i in latest.values() if not i["deleted"]]
        # in the order first stored; items stored before positions were kept come first
        live.sort(key=lambda i: (_position(i), i["question_id"]))
        return pa.Table.from_pylist([database.testset_row(i) for i in live], schema=TESTSET)

    def save(
        self, name: str, table: pa.Table, author: str | None = None, comment: str | None = None
    ) -> None:
        """Store ``table`` under ``name``: a new version of each item it changes, deletes or
        adds, marked with who made the change (``author``) and why (``comment``)."""
        if len(author or "") > MAX_AUTHOR or len(comment or "") > MAX_COMMENT:
            raise RagsweepError(
                f"author: at most {MAX_AUTHOR} characters; comment: at most {MAX_COMMENT}"
            )
        try:
            with self.engine.begin() as conn:
                database.save_testset(
                    conn,
                    name,
                    table.select(TESTSET.names).cast(TESTSET),
                    author=(author or "").strip() or None,
                    comment=(comment or "").strip() or None,
                )
        except sa.exc.IntegrityError:  # the same item version, or set, stored meanwhile
            raise RagsweepError(
                f"test set {name!r} was changed by someone else while this change was being "
                "stored; nothing of it was stored: load the set again and redo the change"
            ) from None

    def summaries(self) -> list[dict[str, Any]]:
        """Each test set by name: ``name``, ``questions`` (in its latest version),
        ``changed_at`` (its latest change) and ``versions`` (the changes stored: adding the
        set, then each save that changed, added or deleted questions)."""
        items, sets = database.testset_items, database.testsets
        query = sa.select(
            sets.c.name,
            sets.c.created_at,
            items.c.question_id,
            items.c.version,
            items.c.deleted,
            items.c.created_at.label("changed_at"),
        ).select_from(sets.outerjoin(items, items.c.testset_id == sets.c.id))
        found: dict[str, dict] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query.order_by(items.c.version)).mappings():
                each = found.setdefault(
                    row["name"], {"created_at": row["created_at"], "latest": {}, "times": set()}
                )
                if row["question_id"] is not None:
                    each["latest"][row["question_id"]] = row["deleted"]
                    each["times"].add(_utc(row["changed_at"]))
        return [
            {
                "name": name,
                "questions": sum(not deleted for deleted in each["latest"].values()),
                "changed_at": max(each["times"], default=None) or _utc(each["created_at"]),
                "versions": len(each["times"]),
            }
            for name, each in sorted(found.items())
        ]

    def history(self, name: str, question_id: str) -> list[dict[str, Any]]:
        """Every stored version of one question, newest first: ``version``, ``created_at``,
        ``deleted``, ``author``, ``comment`` and the item's fields (null in a deletion)."""
        with self.engine.connect() as conn:
            items = _items(conn, self._id(conn, name), question_id)
        if not items:
            raise RagsweepError(f"no question {question_id!r} was ever in test set {name!r}")
        return [
            {
                "question_id": i["question_id"],
                "version": i["version"],
                "created_at": _utc(i["created_at"]),
                "deleted": bool(i["deleted"]),
                "author": i["author"],
                "comment": i["comment"],
                **({f: None for f in _ITEM_FIELDS} if i["deleted"] else database.testset_row(i)),
            }
            for i in reversed(items)
        ]

    def _id(self, conn: sa.Connection, name: str) -> int:
        found = conn.execute(
            sa.select(database.testsets.c.id).where(database.testsets.c.name == name)
        ).scalar()
        if found is None:
            stored = self.names()
            raise RagsweepError(
                f"no test set {name!r} in {safe_url(self.engine.url)}; stored: "
                f"{', '.join(stored) if stored else 'none'} "
                "(`ragsweep testset add NAME FILE` stores one)"
            )
        return found


def live_questions(testsets: DatabaseStore, name: str) -> pa.Table:
    """The questions of the stored test set ``name`` as they are now, for a run; an unknown
    name stops with the names stored, an empty set with a message."""
    table = testsets.load(name)
    if not table.num_rows:
        raise RagsweepError(
            f"test set {name!r} in {safe_url(testsets.engine.url)} has no questions "
            "(`ragsweep testset add-question` adds one)"
        )
    return table


def load_test_data(uri: str) -> pa.Table:
    """The ``load_testset`` step's test set: ``store:<name>``, the stored set's questions as
    they are when the step runs (every field: ``DatabaseStore.load``), from the results
    database that ``RAGSWEEP_STORE_URL`` names; else the test data file at ``uri``; no
    location, an empty test set (``generate_qa`` then makes one)."""
    from ragsweep.documents.testsets import load_testset, stored_set_name

    if not uri:
        return TESTSET.empty_table()
    name = stored_set_name(uri)
    if name is None:
        return load_testset(uri)
    url = os.environ.get(database.ENV)
    if not url:
        raise RagsweepError(
            f"test_data_key {uri!r} is read from the results database, but {database.ENV} is "
            f"unset in this step: on OpenShift AI, put the key {database.ENV} in the "
            "results-store Secret (pipeline parameter results_store_secret_name, default "
            f"{database.DEFAULT_STORE_CONNECTION!r}); locally, set {database.ENV}"
        )
    return live_questions(DatabaseStore(database.connect(url)), name)


def _items(conn: sa.Connection, testset_id: int, question_id: str | None = None) -> list[dict]:
    """A set's stored item versions (of one question if given), oldest first."""
    items = database.testset_items
    query = sa.select(items).where(items.c.testset_id == testset_id)
    if question_id is not None:
        query = query.where(items.c.question_id == question_id)
    rows = conn.execute(query.order_by(items.c.question_id, items.c.version)).mappings()
    return [dict(r) for r in rows]


def _position(item: dict) -> int:
    return -1 if item["item_position"] is None else item["item_position"]


def row_of(testset: pa.Table, question_id: str) -> int:
    """The row number of ``question_id``."""
    found = pc.index(testset.column("question_id"), question_id).as_py()
    if found < 0:
        ids = testset.column("question_id").to_pylist()
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise RagsweepError(f"no question {question_id!r} in the test set (ids: {shown})")
    return found


def delete_question(testset: pa.Table, question_id: str) -> pa.Table:
    """The test set without ``question_id``."""
    row = row_of(testset, question_id)
    return pa.concat_tables([testset.slice(0, row), testset.slice(row + 1)])


def edit_question(
    testset: pa.Table,
    question_id: str,
    question: str | None = None,
    answers: list[str] | None = None,
    doc_ids: list[str] | None = None,
    reference_context: str | None = None,
    topic: str | None = None,
    question_type: str | None = None,
) -> pa.Table:
    """The test set with new content for ``question_id``: each field given (not None)
    replaces its value; an empty ``reference_context``, ``topic`` or ``question_type``
    clears it. New reference documents or a new reference context drop the gold spans
    located from the old ones (located again when the set is next resolved against the
    documents, ``--docs``). The ``question_version`` is that of the new content; an edit
    that changes nothing keeps it."""
    row = row_of(testset, question_id)
    if question is not None and not question.strip():
        raise RagsweepError("the new question is empty")
    if answers is not None and (not answers or not all(a.strip() for a in answers)):
        raise RagsweepError("a new reference answer is empty")
    if doc_ids is not None and not all(d.strip() for d in doc_ids):
        raise RagsweepError("a new reference document id is empty")
    rows = testset.to_pylist()
    old = dict(rows[row])
    new = {
        "question": question,
        "reference_answers": None if answers is None else list(answers),
        "reference_doc_ids": None if doc_ids is None else list(doc_ids),
        "reference_context": reference_context,
        "topic": topic,
        "question_type": question_type,
    }
    for field, value in new.items():
        if value is not None:
            rows[row][field] = value if value != "" else None
    moved = ("reference_doc_ids", "reference_context")
    if any(rows[row][f] != old[f] for f in moved):
        rows[row]["gold_spans"] = []
    check_limits("the edited question", rows[row])
    if rows[row] != old:  # an edit that changes nothing keeps the version
        rows[row]["question_version"] = question_version(rows[row])
    return pa.Table.from_pylist(rows, schema=testset.schema)


def add_question(
    testset: pa.Table,
    question: str,
    answers: list[str],
    doc_ids: list[str],
    topic: str | None = None,
    question_type: str | None = None,
) -> pa.Table:
    """The test set with a new question at its end; its id comes from its content (as for
    an AutoRAG item), and gold spans are located when the set is next resolved against the
    documents (``--docs``)."""
    if not question or not question.strip():
        raise RagsweepError("the new question is empty")
    if not answers or not all(a and a.strip() for a in answers):
        raise RagsweepError("the new question needs reference answers, none of them empty")
    if not all(d and d.strip() for d in doc_ids):
        raise RagsweepError("a reference document id of the new question is empty")
    row: dict[str, Any] = dict.fromkeys(TESTSET.names)
    row.update(question=question, reference_answers=list(answers), gold_spans=[])
    row.update(reference_doc_ids=list(doc_ids), topic=topic or None)
    row.update(question_type=question_type or None)
    row["question_id"] = content_id(question, row["reference_answers"])
    if row["question_id"] in testset.column("question_id").to_pylist():
        raise RagsweepError(
            f"the test set already has this question and these answers, as {row['question_id']}"
        )
    check_limits("the new question", row)
    row["question_version"] = question_version(row)
    return pa.concat_tables([testset, pa.Table.from_pylist([row], schema=testset.schema)])
