"""The UI's plots in Chromium, over the nightly demo store (tests/ui_demo.py): the metric
against each swept parameter, quality against cost with its Pareto front, the forest plot of
a comparison; each point links to its configuration, and user text in them is escaped."""

from __future__ import annotations

import pytest
import ui_demo
from conftest import needs_chromium

from ragsweep.store import database
from ragsweep.store.annotations import label_run
from ragsweep.ui.charts import compact, nice_ticks

PAYLOAD = "<img src=x onerror=alert(1)><script>alert('plot')</script>"


@needs_chromium
def test_a_run_page_plots_the_metric_against_each_swept_parameter(page, demo_url, demo_engine):
    board = database.load_leaderboard(demo_engine, "night-2").to_pylist()
    page.goto(f"{demo_url}/runs/night-2")
    panels = page.locator("#parameters svg.param-plot")
    assert panels.evaluate_all("ps => ps.map(p => p.dataset.parameter)") == ["chunk_size", "top_k"]
    chunk = page.locator("svg[data-parameter=chunk_size]")
    assert chunk.locator("circle.best-of-value").count() == 2  # one per chunk size
    assert chunk.locator("circle.other").count() == len(board) - 2
    # the best with chunk size 64 is the run's best: its point links to its configuration
    best = board[0]
    with page.expect_navigation():
        chunk.locator(f"a[href$='/configs/{best['config_id']}'] circle.best-of-value").click()
    assert page.url.endswith(f"/runs/night-2/configs/{best['config_id']}")


@needs_chromium
def test_the_pareto_view_links_each_point_to_its_configuration(page, demo_url, demo_engine):
    board = database.load_leaderboard(demo_engine, "night-1").to_pylist()
    page.goto(f"{demo_url}/runs/night-1")
    pareto = page.locator("svg#pareto")
    assert pareto.locator("circle").count() == len(board)
    assert pareto.locator("circle.front").count() >= 1
    assert all("e+" not in t for t in pareto.locator("text.tick").all_text_contents())
    front = pareto.locator("circle.front").first
    href = front.evaluate("c => c.parentElement.getAttribute('href')")
    with page.expect_navigation():
        front.click()
    assert page.url.endswith(href) and "/runs/night-1/configs/" in href


@needs_chromium
def test_compare_draws_a_forest_plot_of_the_differences(page, demo_url):
    page.goto(f"{demo_url}/compare?baseline=night-2&candidate=night-3")
    rows = page.locator("svg#forest g.forest-row")
    table = page.locator("#comparison tr.comparison-row")
    assert rows.count() == table.count() == 4
    assert page.locator("svg#forest g.forest-row.regressed").count() == (
        page.locator("#comparison tr.comparison-row.regressed").count()
    )
    with page.expect_navigation():
        rows.first.locator("circle").click()
    assert "/runs/night-3/configs/" in page.url


@needs_chromium
def test_a_runs_name_in_the_trend_is_escaped(page, demo_url, demo_engine):
    label_run(demo_engine, "night-2", title=PAYLOAD)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(demo_url)
    title = page.locator(".trend-chart svg a:nth-of-type(2) title")
    assert title.text_content().startswith(PAYLOAD)
    assert page.locator("img").count() == 0 and dialogs == []
    page.goto(f"{demo_url}/runs/night-2")
    assert page.locator("#run-title").inner_text() == PAYLOAD
    assert page.locator("img").count() == 0 and dialogs == []
    label_run(demo_engine, "night-2", title="")


@pytest.mark.parametrize(
    ("value", "shown"), [(1040.0, "1,040"), (12345.0, "12.3k"), (0.25, "0.25"), (3.2e6, "3.2M")]
)
def test_an_axis_figure_is_written_for_people(value, shown):
    assert compact(value) == shown


def test_ticks_are_round_and_span_the_values():
    assert nice_ticks(0.13, 0.87) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert nice_ticks(980.0, 1040.0) == pytest.approx([980, 1000, 1020, 1040])


@needs_chromium
def test_the_question_by_configuration_matrix_colours_verdicts_and_opens_the_drill_down(
    page, demo_url, demo_engine
):
    results = database.load_results(demo_engine, "night-3")
    board = database.load_leaderboard(demo_engine, "night-3")
    page.goto(f"{demo_url}/runs/night-3")
    with page.expect_navigation():
        page.click("#matrix-link")
    assert page.locator("#matrix tr.matrix-row").count() == ui_demo.QUESTIONS
    cells = page.locator("#matrix td.cell")
    assert cells.count() == results.num_rows == ui_demo.QUESTIONS * board.num_rows
    failed = page.locator("#matrix td.cell.fail").count()
    assert 0 < failed < cells.count()
    # the markup in q001's question is text in its row
    assert "<script>" in page.locator("tr[data-question-id=q001] td.text").inner_text()
    with page.expect_navigation():
        page.locator("#matrix td.cell.fail a").first.click()
    assert "/runs/night-3/configs/" in page.url and "/questions/q" in page.url
    assert page.goto(f"{demo_url}/runs/night-3/matrix?page=x").status == 400
