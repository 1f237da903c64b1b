"""The views of issue 39 over the nightly demo store (tests/ui_demo.py): one question's
answers side by side across a run's configurations."""

from __future__ import annotations

import time

import test_ui_runs
import ui_demo
from conftest import needs_chromium
from starlette.testclient import TestClient

from ragsweep.evaluation.leaderboard import failure_reason
from ragsweep.store import database
from ragsweep.ui import create_app

crowded = test_ui_runs.crowded  # the store of 500 runs (a fixture of this module's own)


def stored(engine, run_id: str, question_id: str) -> list[dict]:
    """The run's results for the question, in leaderboard order."""
    order = database.load_leaderboard(engine, run_id)["config_id"].to_pylist()
    rows = [
        r
        for r in database.load_results(engine, run_id).to_pylist()
        if r["question_id"] == question_id
    ]
    return sorted(rows, key=lambda r: order.index(r["config_id"]))


@needs_chromium
def test_one_question_side_by_side_shows_each_configurations_answer_verdict_and_chunks(
    module_page, demo_engine, demo_url
):
    page = module_page
    page.goto(f"{demo_url}/runs/night-1")
    with page.expect_navigation():
        page.click("#side-by-side-link")
    page.fill("#pick-question input[name=question]", "q001")
    with page.expect_navigation():
        page.click("#pick-question button")
    assert page.url.endswith("/runs/night-1/side-by-side?question=q001")
    expected = stored(demo_engine, "night-1", "q001")
    heads = page.locator("#side-by-side th.side-config")
    assert heads.evaluate_all("hs => hs.map(h => h.dataset.configId)") == [
        r["config_id"] for r in expected
    ]
    answers = page.locator("#side-by-side td.side-answer").all_inner_texts()
    assert answers == [r["answer"] for r in expected]
    verdicts = page.locator("#side-by-side td.side-verdict")
    failed = verdicts.evaluate_all("ts => ts.map(t => t.classList.contains('fail'))")
    assert failed == [bool(failure_reason(r)) for r in expected]
    assert set(failed) == {True, False}  # q001: some configurations passed, some failed
    chunks = page.locator("#side-by-side td.side-chunks").evaluate_all(
        "ts => ts.map(t => [...t.querySelectorAll('code.doc')].map(c => c.textContent))"
    )
    assert chunks == [r["retrieved_doc_ids"] for r in expected]
    # the chunk's text is read from the documents, its gold span marked
    assert "default port is 8443" in page.locator("td.side-chunks mark").first.inner_text()
    # the question's markup is text
    assert "<script>" in page.locator("#question").inner_text()
    # each column links to its drill-down, which links back
    with page.expect_navigation():
        page.locator("th.side-config a").first.click()
    assert f"/configs/{expected[0]['config_id']}/questions/q001" in page.url
    with page.expect_navigation():
        page.click("#side-by-side-link")
    assert page.url.endswith("/runs/night-1/side-by-side?question=q001")


def test_side_by_side_of_a_question_the_run_did_not_ask_is_a_404(demo_engine):
    client = TestClient(create_app(demo_engine))
    response = client.get("/runs/night-1/side-by-side?question=nowhere")
    assert response.status_code == 404 and "nowhere" in response.text
    listing = client.get("/runs/night-1/side-by-side").text
    assert 'href="?question=q039"' in listing


def top_of_board(engine, run_id: str) -> tuple[float, float, set[str], set[str]]:
    """The run's best score, a threshold between its second and third best, and the
    configurations above it and below it."""
    board = database.load_leaderboard(engine, run_id).to_pylist()
    scores = sorted({r["answer_correctness"] for r in board}, reverse=True)
    threshold = (scores[1] + scores[2]) / 2
    above = {r["config_id"] for r in board if r["answer_correctness"] > threshold}
    return scores[0], threshold, above, {r["config_id"] for r in board} - above


def drag(page, chart_id: str, start: list[float], end: list[float]) -> None:
    """A mouse drag on a chart, from and to pixels of its canvas."""
    page.locator(f"#{chart_id}").scroll_into_view_if_needed()
    box = page.locator(f"#{chart_id}").bounding_box()
    page.mouse.move(box["x"] + start[0], box["y"] + start[1])
    page.mouse.down()
    page.mouse.move(box["x"] + end[0], box["y"] + end[1], steps=8)
    page.mouse.up()


def rows_marked(page) -> tuple[set[str], set[str]]:
    rows = page.locator("#leaderboard tr.config-row")
    marks = rows.evaluate_all(
        "rs => rs.map(r => [r.dataset.configId, r.classList.contains('chart-selected'),"
        " r.classList.contains('chart-dimmed')])"
    )
    return {c for c, s, _ in marks if s}, {c for c, _, d in marks if d}


# where a value lies on the parallel coordinates' last axis (the metrics'), in canvas pixels
PARALLEL_POINT = """([value]) => {
  const chart = echarts.getInstanceByDom(document.getElementById('parallel-chart'));
  const parallel = chart.getModel().getComponent('parallel').coordinateSystem;
  const dims = parallel.dimensions;
  return parallel.dataToPoint(value, dims[dims.length - 3]);
}"""
SCATTER_Y = """([value]) => echarts.getInstanceByDom(document.getElementById('scatter-chart'))
  .convertToPixel({yAxisIndex: 0}, value)"""


@needs_chromium
def test_brushing_either_chart_highlights_its_configurations_rows_under_the_csp(
    browser, demo_engine, demo_url
):
    context = browser.new_context()
    page = context.new_page()
    console = []
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda e: console.append(str(e)))
    try:
        response = page.goto(f"{demo_url}/runs/night-1")
        assert "script-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_selector("#run-charts[data-ready=true]")
        best, threshold, above, below = top_of_board(demo_engine, "night-1")
        assert rows_marked(page) == (set(), set())
        # parallel coordinates: brush the ranking metric's axis from its top to the threshold
        top = page.evaluate(PARALLEL_POINT, [best])
        low = page.evaluate(PARALLEL_POINT, [threshold])
        drag(page, "parallel-chart", [top[0], top[1] - 4], low)
        page.wait_for_selector("#leaderboard tr.chart-selected")
        assert rows_marked(page) == (above, below)
        assert "2 of 4 configurations selected" in page.inner_text("#chart-selection")
        page.check("#only-selected")
        visible = page.locator("#leaderboard tr.config-row:visible")
        assert visible.evaluate_all("rs => rs.map(r => r.dataset.configId)") == [
            r
            for r in database.load_leaderboard(demo_engine, "night-1")["config_id"].to_pylist()
            if r in above
        ]
        page.uncheck("#only-selected")
        # the scatter (the metric against chunk size): a new drawing clears the selection,
        # then a rectangle over the points above the threshold selects them
        page.select_option("#scatter-x", "top_k")
        assert rows_marked(page) == (set(), set())
        page.locator("#scatter-chart").scroll_into_view_if_needed()
        box = page.locator("#scatter-chart").bounding_box()
        y = page.evaluate(SCATTER_Y, [threshold])
        drag(page, "scatter-chart", [62, 42], [box["width"] - 32, y])
        page.wait_for_selector("#leaderboard tr.chart-selected")
        assert rows_marked(page) == (above, below)
        # labels are text in the tooltips, and the page broke no rule of the CSP
        assert not [m for m in console if "Content Security Policy" in m or "Refused" in m]
        assert not [m for m in console if "rror" in m], console
    finally:
        context.close()


@needs_chromium
def test_the_new_views_of_a_run_among_500_load_in_the_budget(page, crowded, tmp_path):
    """The side-by-side view and the run page with its charts drawn, in a store of 500
    runs: their times are printed (the issue's budget is 1 s), not asserted: a busy machine
    would fail a sound page."""
    with ui_demo.serving_store(crowded, tmp_path) as url:
        page.goto(f"{url}/static/ui.css")  # the browser and its connection, warmed up
        timed = {}
        for name, path, ready in (
            ("run page, charts drawn", "/runs/run-250", "#run-charts[data-ready=true]"),
            ("side by side", "/runs/run-250/side-by-side?question=q003", "#side-by-side"),
        ):
            started = time.perf_counter()
            assert page.goto(url + path).status == 200
            page.wait_for_selector(ready, state="attached")
            timed[name] = time.perf_counter() - started
    print(
        f"\nwith {test_ui_runs.RUNS} runs (budget {test_ui_runs.LOAD_BUDGET_S} s): "
        + ", ".join(f"{k} {v:.3f} s" for k, v in timed.items())
    )
    assert page.locator("#side-by-side th.side-config").count() == 2


@needs_chromium
def test_the_run_picker_finds_runs_by_text_and_compares_the_ticked_ones(page, crowded, tmp_path):
    with ui_demo.serving_store(crowded, tmp_path) as url:
        page.goto(f"{url}/compare")
        with page.expect_navigation():
            page.click("#pick-link")
        page.fill("#pick-search input[name=q]", "run-12")
        with page.expect_navigation():
            page.click("#pick-search button")
        listed = page.locator("#picked tr.pick-row").evaluate_all(
            "rs => rs.map(r => r.dataset.runId)"
        )
        assert listed and all("run-12" in r for r in listed) and "run-123" in listed
        page.check("tr[data-run-id=run-120] input")
        page.check("tr[data-run-id=run-123] input")
        with page.expect_navigation():
            page.click("#pick-runs button")
        assert "runs=run-120" in page.url and "runs=run-123" in page.url
        # in the order listed (newest first): the first ticked is the baseline
        assert page.locator("#baseline").input_value() == "run-123"
        assert page.locator("#candidate").input_value() == "run-120"


def test_the_jobs_page_lists_the_jobs_this_ui_started(demo_engine, tmp_path):
    from ragsweep.ui.jobs import Job

    app = create_app(demo_engine, runs_dir=tmp_path)
    job = Job("job-1", ["run", "--docs", "d"], tmp_path / ".ui-job-job-1.log", pid=None)
    job.title = "<b>nightly</b>"
    app.state.jobs.jobs[job.id] = job
    page = TestClient(app).get("/jobs").text
    assert 'data-job-id="job-1"' in page and "&lt;b&gt;nightly&lt;/b&gt;" in page


def test_deleting_a_run_needs_its_id_typed_then_removes_it_and_its_folder(tmp_path):
    with ui_demo.demo_store(tmp_path / "store") as engine:
        runs_dir = tmp_path / "runs"
        (runs_dir / "night-2").mkdir(parents=True)
        (runs_dir / "night-2" / "report.html").write_text("report")
        client = TestClient(create_app(engine, runs_dir=runs_dir))
        form = client.get("/runs/night-2/delete").text
        assert str(runs_dir / "night-2") in form
        csrf = form.split('name="csrf" value="')[1].split('"')[0]
        # a wrong confirmation deletes nothing
        refused = client.post("/runs/night-2/delete", data={"csrf": csrf, "confirm": "night-1"})
        assert refused.status_code == 400 and "nothing deleted" in refused.text
        assert (runs_dir / "night-2").is_dir()
        assert client.get("/runs/night-2").status_code == 200
        # a run id naming a path outside the runs folder is refused before any deletion
        outside = client.post("/runs/%2E%2E/delete", data={"csrf": csrf, "confirm": ".."})
        assert outside.status_code == 400 and runs_dir.is_dir()
        done = client.post(
            "/runs/night-2/delete",
            data={"csrf": csrf, "confirm": "night-2"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        assert not (runs_dir / "night-2").exists()
        assert client.get("/runs/night-2").status_code == 404
        assert "night-2" not in [r["run_id"] for r in database.find_runs(engine)]
        assert client.get("/runs/night-1").status_code == 200  # the others stay


def test_a_test_set_reverted_to_an_earlier_version_holds_its_questions_again(tmp_path):
    from ragsweep.curation.stored_sets import DatabaseStore, delete_question, edit_question

    with ui_demo.demo_store(tmp_path / "store") as engine:
        store = DatabaseStore(engine)
        first = store.load("curated.json")
        changed = edit_question(delete_question(first, "q001"), "q002", question="Reworded?")
        store.save("curated.json", changed, "Ana", "<b>tidy</b>")
        client = TestClient(create_app(engine))
        page = client.get("/testsets/curated.json/versions").text
        assert page.count('class="set-version"') == 2 and "&lt;b&gt;tidy&lt;/b&gt;" in page
        assert 'id="versions-link"' in client.get("/testsets/curated.json").text
        csrf = page.split('name="csrf" value="')[1].split('"')[0]
        done = client.post(
            "/testsets/curated.json/versions/1/revert",
            data={"csrf": csrf, "author": "Bo"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        reverted = store.load("curated.json")

        def texts(table):
            return dict(
                zip(table["question_id"].to_pylist(), table["question"].to_pylist(), strict=True)
            )

        assert texts(reverted) == texts(first)  # q001 back (stored again, it comes last)
        history = store.history("curated.json", "q002")
        assert history[0]["author"] == "Bo" and history[0]["comment"] == "reverted to version 1"
        assert client.get("/testsets/curated.json/versions").text.count('class="set-version"') == 3
        missing = client.post("/testsets/curated.json/versions/9/revert", data={"csrf": csrf})
        assert missing.status_code == 400 and "no version 9" in missing.text
