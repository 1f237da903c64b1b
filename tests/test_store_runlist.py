"""What the runs list reads from the results database, on SQLite and a real PostgreSQL:
names, notes and tags (kept when a run is stored again), search and tag filter, the best
figures and the regression flag computed when a run is published, and a store made before
those columns getting them, filled in from its leaderboards."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sqlalchemy as sa
from builders import make_board, make_testset
from conftest import emptied

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import SETTINGS_KEY, settings_of
from ragsweep.reporting import publishing
from ragsweep.store import database
from ragsweep.store.annotations import label_run, parse_tags

NEW_COLUMNS = ("best_score", "best_low", "best_high", "configurations", "regressed", "title")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'r.db'}"
    return emptied(request.getfixturevalue("postgres_server"))


def publish(engine, run_id: str, values: np.ndarray, sweep: str = "nightly") -> None:
    board = make_board(values)
    settings = {**settings_of(board.leaderboard), "sweep_name": sweep, "docs": "s3://b/docs/"}
    leaderboard = board.leaderboard.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})
    testset = make_testset([f"q{i:03d}" for i in range(values.shape[1])])
    publishing.publish(engine, run_id, leaderboard, board.results, testset)


GOOD = np.tile([1.0, 1.0, 1.0, 0.0], (2, 10))  # 2 configurations x 40 questions
BAD = np.zeros((2, 40))


def test_publish_records_the_best_figures_and_whether_the_best_regressed(url):
    engine = database.connect(url)
    publish(engine, "night-1", GOOD)
    publish(engine, "night-2", GOOD)
    publish(engine, "night-3", BAD)
    publish(engine, "other", BAD, sweep="another")
    runs = {r["run_id"]: r for r in database.find_runs(engine)}
    assert [runs[n]["regressed"] for n in ("night-1", "night-2", "night-3")] == [None, False, True]
    assert runs["other"]["regressed"] is None  # the first of its sweep
    assert runs["night-1"]["score"] == pytest.approx(0.75)
    assert runs["night-1"]["low"] < 0.75 < runs["night-1"]["high"]
    assert runs["night-3"]["score"] == 0.0
    assert runs["night-1"]["configurations"] == 2
    assert runs["night-1"]["documents"] == "s3://b/docs/"
    trend = database.sweep_trend(engine, "nightly", last=2)
    assert [(p["run_id"], p["regressed"]) for p in trend] == [("night-2", False), ("night-3", True)]


def test_names_notes_and_tags_are_searched_and_kept_when_a_run_is_stored_again(url):
    engine = database.connect(url)
    publish(engine, "night-1", GOOD)
    publish(engine, "night-2", GOOD)
    label_run(engine, "night-1", title="Bigger Chunks", note="50% fewer calls", tags=["q4", "a_b"])
    publish(engine, "night-1", GOOD)  # stored again (a resumed run, an import)
    [row] = [r for r in database.find_runs(engine) if r["run_id"] == "night-1"]
    assert (row["title"], row["note"], row["tags"]) == (
        "Bigger Chunks",
        "50% fewer calls",
        ["q4", "a_b"],
    )

    def found(**query) -> list[str]:
        return [r["run_id"] for r in database.find_runs(engine, **query)]

    assert found(text="bigger chunks") == ["night-1"]  # any case
    assert found(text="50%") == ["night-1"]
    assert found(text="0% f") == ["night-1"] and found(text="5_%") == []  # wildcards are text
    assert found(text="b/docs") == ["night-1", "night-2"]  # the documents
    assert (
        found(tag="q4") == ["night-1"] and found(tag="q") == [] and found(tag="a_b") == ["night-1"]
    )
    label_run(engine, "night-1", note="")  # one field changed, the others kept
    [row] = [r for r in database.find_runs(engine) if r["run_id"] == "night-1"]
    assert (row["title"], row["note"], row["tags"]) == ("Bigger Chunks", None, ["q4", "a_b"])
    with pytest.raises(RagsweepError, match="no run 'missing'"):
        label_run(engine, "missing", title="x")


@pytest.mark.parametrize(
    ("text", "tags"), [("a,b c", ["a", "b", "c"]), (" q4,, q4 v1.2 ", ["q4", "v1.2"]), ("", [])]
)
def test_tags_are_split_on_commas_and_spaces_once_each(text, tags):
    assert parse_tags(text) == tags


@pytest.mark.parametrize("bad", ["<b>", "%", "x" * 41, ",".join(f"t{i}" for i in range(21))])
def test_a_tag_of_markup_wildcards_or_too_many_is_refused(bad):
    with pytest.raises(RagsweepError, match="tags: "):
        parse_tags(bad)


def test_a_store_made_before_the_runs_figures_gets_them_from_its_leaderboards(url):
    engine = database.connect(url)
    publish(engine, "old-1", GOOD)
    publish(engine, "old-2", BAD)
    with engine.begin() as conn:  # as an older ragsweep made it
        for column in NEW_COLUMNS:
            conn.execute(sa.text(f"ALTER TABLE ragsweep_runs DROP COLUMN {column}"))
    engine.dispose()
    reopened = database.connect(url)
    runs = {r["run_id"]: r for r in database.find_runs(reopened)}
    assert runs["old-1"]["score"] == pytest.approx(0.75) and runs["old-2"]["score"] == 0.0
    assert runs["old-1"]["configurations"] == 2
    assert runs["old-2"]["regressed"] is None  # not compared: no mark, never a wrong one
    assert runs["old-1"]["title"] is None
