"""One question across runs (``/questions/<id>``), over the nightly demo store
(tests/ui_demo.py): per run that asked it, the best configuration's verdict and answer,
linked to the drill-down; on SQLite in Chromium, and the query on PostgreSQL too."""

from __future__ import annotations

import ui_demo
from conftest import emptied, needs_chromium
from starlette.testclient import TestClient

from ragsweep.evaluation.leaderboard import failure_reason
from ragsweep.store import database
from ragsweep.store.question_runs import question_texts, runs_asking
from ragsweep.ui import create_app

NEWEST_FIRST = ui_demo.NIGHTS[::-1]


def best_verdicts(engine, question_id: str) -> dict[str, str]:
    """Each night's best configuration's verdict on the question, from its stored results."""
    verdicts = {}
    for night in ui_demo.NIGHTS:
        best = database.load_leaderboard(engine, night)["config_id"][0].as_py()
        rows = database.load_results(engine, night).to_pylist()
        row = next(r for r in rows if r["config_id"] == best and r["question_id"] == question_id)
        verdicts[night] = "fail" if failure_reason(row) else "pass"
    return verdicts


@needs_chromium
def test_a_drill_down_opens_its_question_in_every_run_and_each_run_links_back(
    page, demo_engine, tmp_path
):
    with ui_demo.serving_store(demo_engine, tmp_path) as demo_url:
        board = database.load_leaderboard(demo_engine, "night-3")
        config_id = board["config_id"][1].as_py()
        page.goto(f"{demo_url}/runs/night-3/configs/{config_id}/questions/q001")
        with page.expect_navigation():
            page.click("#across-runs")
        assert page.url.endswith("/questions/q001?version=q001-v1")
        rows = page.locator("#asked tr.asked-row")
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.runId)") == NEWEST_FIRST
        shown = rows.evaluate_all("rs => rs.map(r => r.classList.contains('fail'))")
        verdicts = best_verdicts(demo_engine, "q001")
        assert shown == [verdicts[n] == "fail" for n in NEWEST_FIRST]
        # the question's markup is text in the version list
        assert "<script>" in page.locator("#versions li.version .text").inner_text()
        best = database.load_leaderboard(demo_engine, "night-1")["config_id"][0].as_py()
        with page.expect_navigation():
            page.locator("tr[data-run-id=night-1] td.verdict a").click()
        assert page.url.endswith(f"/runs/night-1/configs/{best}/questions/q001")


def test_a_version_no_run_asked_is_said(demo_engine):
    page = TestClient(create_app(demo_engine)).get("/questions/q001?version=never").text
    assert 'id="no-run"' in page and "in this version" in page
    assert 'id="asked"' not in page


def test_the_matrix_links_each_question_to_its_runs(demo_engine):
    page = TestClient(create_app(demo_engine)).get("/runs/night-2/matrix").text
    assert 'href="/questions/q005" class="across-runs"' in page


def test_the_question_across_runs_reads_the_same_on_postgresql(postgres_server, tmp_path):
    pg = database.connect(emptied(postgres_server))
    try:
        ui_demo.fill(pg, tmp_path / "docs")
        rows = runs_asking(pg, "q003", "q003-v1")
        assert [r["run_id"] for r in rows] == NEWEST_FIRST
        assert all(r["best_label"] and r["answer"] for r in rows)
        assert runs_asking(pg, "q003", "another-version") == []
        texts = question_texts(pg, "q003")
        assert set(texts) == {"q003-v1"}
        assert set(texts["q003-v1"]["testsets"]) == {
            "curated.json",
            "testset.json",
        }  # curated: q000-q004
    finally:
        pg.dispose()
