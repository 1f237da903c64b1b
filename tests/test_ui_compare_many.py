"""Compare of up to five runs, each against the first (the baseline), over the nightly demo
store (tests/ui_demo.py): one forest plot holds every candidate's differences, one section
per candidate holds its alarm, verdicts, flips and overlap."""

from __future__ import annotations

import json

import pytest
import ui_demo
from conftest import needs_chromium
from starlette.testclient import TestClient

from ragsweep.core.schemas import SETTINGS_KEY, settings_of
from ragsweep.store import database
from ragsweep.ui import create_app


@pytest.fixture(scope="module")
def client(demo_engine, tmp_path_factory):
    return TestClient(create_app(demo_engine, runs_dir=tmp_path_factory.mktemp("runs")))


@needs_chromium
def test_three_runs_compare_against_the_first_in_one_forest_plot(page, demo_engine, tmp_path):
    with ui_demo.serving_store(demo_engine, tmp_path) as demo_url:
        page.goto(f"{demo_url}/compare")
        page.select_option("#baseline", "night-1")
        page.select_option("#candidate", "night-2")
        page.select_option("#run-3", "night-3")
        with page.expect_navigation():
            page.click("#compare-button")
        sections = page.locator("section.comparison")
        assert sections.evaluate_all("s => s.map(e => e.dataset.candidate)") == [
            "night-2",
            "night-3",
        ]
        for candidate, table in (("night-2", "#comparison"), ("night-3", "#comparison-2")):
            lines = page.locator(f"svg#forest g.forest-row[data-candidate={candidate}]")
            assert lines.count() == page.locator(f"{table} tr.comparison-row").count() == 4
        # night-3's best got far worse than night-1's; night-2 is night-1's twin
        assert page.locator("#alarm-2").inner_text().startswith("REGRESSED")
        assert page.locator("svg#forest g.forest-row.regressed[data-candidate=night-3]").count()
        assert not page.locator("svg#forest g.forest-row.regressed[data-candidate=night-2]").count()
        # the selectors keep the choice, and a line leads to its candidate's configuration
        assert page.locator("#run-3").input_value() == "night-3"
        with page.expect_navigation():
            page.locator("svg#forest g.forest-row[data-candidate=night-3] circle").first.click()
        assert "/runs/night-3/configs/" in page.url


def test_the_baseline_and_candidate_links_of_the_trend_still_compare_two_runs(client):
    page = client.get("/compare?baseline=night-2&candidate=night-3").text
    assert page.count('class="comparison"') == 1
    assert 'id="alarm"><b>REGRESSED</b>' in page


def test_a_run_pages_compare_link_puts_the_run_second(client):
    page = client.get("/compare?candidate=night-3").text
    assert '<select name="runs" id="candidate"><option value="">choose</option>' in page
    candidate = page.split('id="candidate"')[1].split("</select>")[0]
    assert '<option value="night-3" selected>' in candidate
    assert 'class="comparison"' not in page


def test_compare_refuses_more_than_five_runs_or_a_run_twice(client):
    six = "&".join(f"runs=r{i}" for i in range(6))
    refused = client.get(f"/compare?{six}")
    assert refused.status_code == 400 and "at most 5 runs, not 6" in refused.text
    twice = client.get("/compare?runs=night-1&runs=night-2&runs=night-1")
    assert twice.status_code == 400 and "names a run twice" in twice.text


def test_a_run_that_cannot_be_compared_is_said_and_the_others_keep_their_sections(client):
    page = client.get("/compare?runs=night-1&runs=no-such-run&runs=night-3").text
    errors = page.split('id="error"')[1].split("</div>")[0]
    assert errors.count('class="compare-error"') == 1 and "no-such-run" in errors
    assert 'data-candidate="night-3"' in page and page.count('class="comparison"') == 1
    assert 'id="forest"' in page
    alone = client.get("/compare?runs=night-1&runs=no-such-run").text
    assert "no-such-run" in alone and 'id="forest"' not in alone


def test_the_run_selectors_list_one_sweeps_runs_and_keep_a_chosen_one(client, demo_engine):
    board = database.load_leaderboard(demo_engine, "night-1")
    settings = {**settings_of(board), "sweep_name": "another-sweep", "sweep_key": "another"}
    board = board.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})
    results = database.load_results(demo_engine, "night-1")
    database.publish(demo_engine, "other-run", board, results, ui_demo.testset_rows())
    page = client.get(f"/compare?sweep={ui_demo.SWEEP}&runs=other-run").text
    baseline = page.split('id="baseline"')[1].split("</select>")[0]
    options = [o.split('"')[0] for o in baseline.split('<option value="')[2:]]
    assert set(options) == {*ui_demo.NIGHTS, "other-run"}  # the nights' sweep, and the chosen
    assert "other-run" not in client.get(f"/compare?sweep={ui_demo.SWEEP}").text
    assert "other-run" in client.get("/compare").text
    assert f'<option value="{ui_demo.SWEEP}" selected>' in page
