"""Curation a team shares, in the library: who changed a question and why, every field
editable, what changed between consecutive versions, and the runs scored on each version;
on SQLite and PostgreSQL, and on a store made before authors and comments were kept."""

from __future__ import annotations

import pyarrow as pa
import pytest
import sqlalchemy as sa
import ui_demo
from builders import make_testset
from conftest import emptied

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import GOLD_SPAN, TESTSET
from ragsweep.curation.question_versions import diff, runs_by_version, with_diffs
from ragsweep.curation.stored_sets import DatabaseStore, delete_question, edit_question
from ragsweep.documents.testsets import question_version
from ragsweep.store import database


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'results.db'}"
    return emptied(request.getfixturevalue("postgres_server"))


def with_span(table: pa.Table) -> pa.Table:
    """``table`` with a gold span on its first question."""
    spans = table["gold_spans"].to_pylist()
    spans[0] = [{"doc_id": "doc0.md", "start": 0, "end": 9, "found": "exact", "score": None}]
    index = table.schema.get_field_index("gold_spans")
    return table.set_column(index, table.schema.field(index), pa.array(spans, pa.list_(GOLD_SPAN)))


def test_each_version_keeps_who_changed_it_and_why(url):
    store = DatabaseStore(database.connect(url))
    table = make_testset(["q1", "q2"])
    store.save("set", table)
    store.save("set", edit_question(table, "q1", question="Which port?"), "Ana", " a typo ")
    store.save("set", delete_question(store.load("set"), "q2"), "Bo", "out of scope")
    [edited, first] = store.history("set", "q1")
    assert (edited["author"], edited["comment"]) == ("Ana", "a typo")
    assert (first["author"], first["comment"]) == (None, None)
    deleted = store.history("set", "q2")[0]
    assert deleted["deleted"] and (deleted["author"], deleted["comment"]) == ("Bo", "out of scope")


def test_an_overlong_author_or_comment_is_refused_and_nothing_stored(tmp_path):
    store = DatabaseStore(database.connect(f"sqlite:///{tmp_path / 'r.db'}"))
    store.save("set", make_testset(["q1"]))
    edited = edit_question(store.load("set"), "q1", question="New?")
    with pytest.raises(RagsweepError, match="author: at most 200 characters"):
        store.save("set", edited, "x" * 201)
    assert len(store.history("set", "q1")) == 1


def test_a_store_made_before_authors_gets_the_columns_and_reads_none(url):
    engine = database.connect(url)
    store = DatabaseStore(engine)
    store.save("set", make_testset(["q1"]))
    with engine.begin() as conn:
        for column in ("author", "comment"):
            conn.execute(sa.text(f"ALTER TABLE ragsweep_testset_items DROP COLUMN {column}"))
    engine.dispose()
    again = DatabaseStore(database.connect(url))  # adds the columns back, empty
    assert again.history("set", "q1")[0]["author"] is None
    again.save("set", edit_question(again.load("set"), "q1", topic="Ops"), "Ana")
    assert again.history("set", "q1")[0]["author"] == "Ana"


def test_topic_and_type_edits_keep_the_question_version_and_documents_drop_the_spans():
    table = with_span(make_testset(["q1", "q2"]).cast(TESTSET))
    version = question_version(table.to_pylist()[0])  # what the question is scored against
    retagged = edit_question(table, "q1", topic="Ops", question_type="complex")
    row = retagged.to_pylist()[0]
    assert (row["topic"], row["question_type"], row["question_version"]) == (
        "Ops",
        "complex",
        version,
    )
    assert row["gold_spans"]  # the same documents and context: the spans stay
    moved = edit_question(table, "q1", doc_ids=["doc5.md"], reference_context="The port.")
    row = moved.to_pylist()[0]
    assert row["reference_doc_ids"] == ["doc5.md"] and row["reference_context"] == "The port."
    assert row["gold_spans"] == [] and row["question_version"] != version
    cleared = edit_question(retagged, "q1", topic="", question_type="")
    assert cleared.to_pylist()[0]["topic"] is None
    with pytest.raises(RagsweepError, match="a new reference document id is empty"):
        edit_question(table, "q1", doc_ids=["doc1.md", " "])


def test_the_diff_marks_the_words_removed_and_added_per_field():
    older = {"deleted": False, "question": "Which port does it use?", "topic": "Ops"}
    newer = {"deleted": False, "question": "Which TLS port does it use?", "topic": "Ops"}
    [change] = diff(older, newer)
    assert change["field"] == "question"
    assert change["pieces"] == [
        ("same", "Which"),
        ("added", " TLS"),
        ("same", " port does it use?"),
    ]
    topic = {**newer, "topic": "Network"}
    assert diff(newer, topic) == [
        {"field": "topic", "pieces": [("removed", "Ops"), ("added", "Network")]}
    ]
    gone = {"deleted": True, "question": None}
    assert diff(newer, gone) == [{"field": "deleted", "pieces": [("added", "deleted")]}]
    assert diff(None, newer) == []
    assert [h["changes"] for h in with_diffs([newer, newer])] == [[], []]


def test_each_version_lists_the_runs_scored_on_it(url, tmp_path):
    engine = database.connect(url)
    ui_demo.fill(engine, tmp_path / "docs")
    store = DatabaseStore(engine)
    store.save("testset.json", edit_question(store.load("testset.json"), "q001", question="New?"))
    used = runs_by_version(engine, "testset.json", "q001")
    assert {v: [r["run_id"] for r in runs] for v, runs in used.items()} == {1: ui_demo.NIGHTS[::-1]}
    assert runs_by_version(engine, "curated.json", "q001") == {}  # no run read that set
    engine.dispose()
