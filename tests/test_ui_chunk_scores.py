"""The drill-down shows each retrieved chunk's score (the retrieve step's
``retrieved_scores``), kept by the results database on SQLite and PostgreSQL; a run stored
before scores were kept shows none."""

from __future__ import annotations

import pyarrow as pa
import pytest
import ui_demo
from builders import make_board
from conftest import emptied, needs_chromium

from ragsweep.reporting import publishing
from ragsweep.store import database

SCORED = "scored-night"
SCORES = [0.912, 0.4204]  # the two chunks every demo configuration retrieves


def publish_scored(engine, docs) -> None:
    """A run like the demo's first night whose results carry each chunk's score."""
    leaderboard, results = ui_demo.with_chunks(make_board(ui_demo.night_scores(0)), docs)
    index = results.schema.get_field_index("retrieved_scores")
    scores = pa.array([SCORES] * results.num_rows, pa.list_(pa.float64()))
    results = results.set_column(index, "retrieved_scores", scores)
    publishing.publish(engine, SCORED, leaderboard, results, ui_demo.testset_rows())


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scores")
    with ui_demo.demo_store(folder) as found:
        publish_scored(found, folder / "docs")
        yield found


@needs_chromium
def test_the_drill_down_shows_each_chunks_score_and_an_older_run_none(page, engine, tmp_path):
    with ui_demo.serving_store(engine, tmp_path) as base_url:
        config_id = database.load_leaderboard(engine, SCORED)["config_id"][0].as_py()
        page.goto(f"{base_url}/runs/{SCORED}/configs/{config_id}/questions/q003")
        shown = page.locator("#retrieved .retrieved-row .chunk-score")
        assert [t.strip() for t in shown.all_inner_texts()] == [
            "similarity 0.912",
            "similarity 0.420",
        ]
        page.goto(f"{base_url}/runs/night-1/configs/{config_id}/questions/q003")
        assert page.locator("#retrieved .retrieved-row").count() == 2
        assert page.locator("#retrieved .chunk-score").count() == 0


def test_the_scores_are_stored_and_read_back_on_postgresql(postgres_server, tmp_path):
    pg = database.connect(emptied(postgres_server))
    try:
        ui_demo.fill(pg, tmp_path / "docs")
        publish_scored(pg, tmp_path / "docs")
        assert {
            tuple(s) for s in database.load_results(pg, SCORED)["retrieved_scores"].to_pylist()
        } == {tuple(SCORES)}
        assert set(database.load_results(pg, "night-1")["retrieved_scores"].to_pylist()) == {None}
    finally:
        pg.dispose()
