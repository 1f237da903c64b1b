"""A stored test set's first run: the gold spans the run locates in the documents join the
questions' versions it used, without a new version of each question (nothing a person
changed), on SQLite and a real PostgreSQL."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from builders import make_board, make_testset
from conftest import emptied

from ragsweep.core.schemas import GOLD_SPAN
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.store import database

QUESTIONS = [f"q{i:03d}" for i in range(6)]


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        return database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    return database.connect(emptied(request.getfixturevalue("postgres_server")))


def with_spans(table: pa.Table, spans: list[list[dict]]) -> pa.Table:
    index = table.schema.get_field_index("gold_spans")
    return table.set_column(index, "gold_spans", pa.array(spans, pa.list_(GOLD_SPAN)))


def run_on(engine, testset: pa.Table, run_id: str) -> None:
    """A run of the set stored as testset.json (its ``testset`` setting)."""
    board = make_board(np.ones((2, len(QUESTIONS))))
    database.publish(engine, run_id, board.leaderboard, board.results, testset)


def test_gold_spans_a_run_locates_join_the_questions_without_a_new_version(engine):
    store = DatabaseStore(engine)
    imported = make_testset(QUESTIONS)  # as the page imports it: no gold spans
    store.save("testset.json", imported)
    span = {"doc_id": "doc0.md", "start": 3, "end": 9, "found": "approximate", "score": 0.75}
    located = [[span]] * len(QUESTIONS)
    run_on(engine, with_spans(imported, located), "first-run")
    history = store.history("testset.json", "q001")
    assert [h["version"] for h in history] == [1]  # no version without a change
    assert store.load("testset.json")["gold_spans"][1].as_py() == located[1]
    stored = database.load_run_testset(engine, "first-run")
    assert stored["gold_spans"][1].as_py() == located[1]  # the drill-down's highlights
    # spans that differ from those kept are a change: a new version
    moved = [[{**span, "start": 4}]] * len(QUESTIONS)
    run_on(engine, with_spans(imported, moved), "second-run")
    assert [h["version"] for h in store.history("testset.json", "q001")] == [2, 1]
    # and an edit of the question is a new version as ever
    edited = imported.set_column(1, "question", pa.array(["Edited?"] * len(QUESTIONS)))
    store.save("testset.json", edited)
    assert [h["version"] for h in store.history("testset.json", "q001")] == [3, 2, 1]


def test_spans_stored_before_how_they_were_found_was_kept_make_no_new_version(engine):
    store = DatabaseStore(engine)
    imported = make_testset(QUESTIONS)
    place = {"doc_id": "doc0.md", "start": 3, "end": 9}
    store.save("testset.json", with_spans(imported, [[place]] * len(QUESTIONS)))
    assert store.load("testset.json")["gold_spans"][1].as_py() == [
        {**place, "found": None, "score": None}  # how they were found: not said
    ]
    located = [[{**place, "found": "exact", "score": None}]] * len(QUESTIONS)
    store.save("testset.json", with_spans(imported, located))
    assert [h["version"] for h in store.history("testset.json", "q001")] == [1]
