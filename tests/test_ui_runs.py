"""The runs list of `ragsweep ui` in Chromium: 500 stored runs of 5 named sweeps (its load
time, search, tag filter, trends), names, notes and tags, runs in progress with their
counters, jobs that survive a restart of the UI, an empty database."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
import ui_demo
from builders import make_board, make_testset
from conftest import needs_chromium

from ragsweep.core.schemas import SETTINGS_KEY, settings_of
from ragsweep.reporting import publishing
from ragsweep.runner.rundir import held, write_marker
from ragsweep.store import database
from ragsweep.store.annotations import archive_run, label_run
from ragsweep.ui import create_app
from ragsweep.ui.data import TREND_RUNS
from ragsweep.ui.jobs import Job, Jobs
from ragsweep.ui.roots import DocRoots

SWEEPS = [f"team-{name}" for name in ("faq", "manuals", "support", "api", "legal")]
RUNS = 500
LOAD_BUDGET_S = 1.0  # the budget for the first load of the runs page
MAX_STATEMENTS = 15  # a page of runs, its trends and filters: none per run
FIRST = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
PAYLOAD = "<script>alert('run')</script><img src=x onerror=alert(1)>"


@pytest.fixture
def page(shared_page):
    """The module's browser page (conftest): a new one costs Chromium more than most tests."""
    return shared_page


def fast_sqlite(engine: sa.Engine) -> sa.Engine:
    """The test's own SQLite file without a disk flush per commit: 500 publishes in seconds."""
    sa.event.listen(engine, "connect", lambda conn, _: conn.execute("PRAGMA synchronous=OFF"))
    engine.dispose()
    return engine


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    """A store holding RUNS runs of the five SWEEPS, one every 5 hours; every 50th run
    regressed against the one before in its sweep."""
    engine = fast_sqlite(database.connect(f"sqlite:///{tmp_path_factory.mktemp('crowd')}/r.db"))
    testset = make_testset([f"q{i:03d}" for i in range(12)])
    good = make_board((np.random.default_rng(5).random((2, 12)) < 0.8).astype(float))
    bad = make_board(np.zeros((2, 12)))
    for i in range(RUNS):
        board = bad if i % 50 == 49 else good
        settings = {**settings_of(board.leaderboard), "sweep_name": SWEEPS[i % 5]}
        settings["docs"] = f"s3://docs/{SWEEPS[i % 5]}/"
        leaderboard = board.leaderboard.replace_schema_metadata(
            {SETTINGS_KEY: json.dumps(settings)}
        )
        started = FIRST + timedelta(hours=i * 5)
        # the alarm (a comparison each) for the runs the trends show; the older ones as stored
        # by an earlier ragsweep, without it: the page reads the same columns of every run
        shown = i // len(SWEEPS) >= RUNS // len(SWEEPS) - TREND_RUNS
        store = publishing.publish if shown else database.publish
        store(engine, f"run-{i:03d}", leaderboard, board.results, testset, started_at=started)
    label_run(engine, "run-123", title="bigger chunks", note="tried 512", tags=["chunking", "q4"])
    label_run(engine, "run-321", title="reranker", tags=["q4"])
    return engine


@pytest.fixture(scope="module")
def crowded_url(crowded, tmp_path_factory):
    with ui_demo.serving_store(crowded, tmp_path_factory.mktemp("crowd-runs")) as url:
        yield url


def column(page, css: str) -> list[str]:
    return [t.strip() for t in page.locator(css).all_inner_texts()]


@needs_chromium
def test_the_runs_page_with_500_runs_of_5_sweeps_loads_in_a_few_queries(page, crowded, crowded_url):
    """The first load reads a page of runs and the trends precomputed at publish: a few
    queries whatever the number of runs. Its time is printed (the issue's budget is 1 s),
    not asserted: a busy machine would fail a sound page."""
    page.goto(f"{crowded_url}/static/ui.css")  # the browser and its connection, warmed up
    statements = []

    def count(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    sa.event.listen(crowded, "before_cursor_execute", count)
    started = time.perf_counter()
    try:
        response = page.goto(crowded_url)  # the first page this app renders
    finally:
        sa.event.remove(crowded, "before_cursor_execute", count)
    elapsed = time.perf_counter() - started
    print(
        f"\nfirst load of the runs page with {RUNS} runs of {len(SWEEPS)} sweeps: "
        f"{elapsed:.3f} s (budget {LOAD_BUDGET_S} s), {len(statements)} SQL statements"
    )
    assert response.status == 200
    assert 0 < len(statements) <= MAX_STATEMENTS, statements
    # the newest first, each with its sweep's trend of the last runs, dated
    assert column(page, "#runs tr.run-row td:first-child")[0] == f"run-{RUNS - 1}"
    charts = page.locator(".trend-chart")
    assert sorted(charts.evaluate_all("cs => cs.map(c => c.dataset.sweep)")) == sorted(SWEEPS)
    for chart in charts.all():
        assert chart.locator("circle").count() == TREND_RUNS
        assert chart.locator("text.date").count() >= 2
    # every 50th run (run-049, run-099, ...: sweep team-legal) regressed against the one before
    legal = page.locator(".trend-chart[data-sweep='team-legal']")
    shown = RUNS // 5 - TREND_RUNS
    assert legal.locator("circle.regressed").count() == sum(
        1 for i in range(4, RUNS, 5) if i % 50 == 49 and i // 5 >= shown
    )


@needs_chromium
def test_the_runs_list_shows_what_a_run_is_and_searches_names_notes_and_tags(page, crowded_url):
    page.goto(f"{crowded_url}/?q=bigger")
    assert column(page, "#runs tr.run-row td:first-child") == ["run-123"]
    row = page.locator("#runs tr.run-row")
    assert "bigger chunks" in row.locator("td.run-name").inner_text()
    assert row.locator("td.documents").inner_text() == "s3://docs/team-api/"
    assert row.locator("td.configurations").inner_text() == "2"
    assert row.locator("td.score").inner_text().startswith("0.")
    assert row.locator("td:nth-child(4)").inner_text() != "-"  # its duration
    page.click("a.tag:text-is('q4')")
    page.wait_for_url("**/?tag=q4")
    assert column(page, "#runs tr.run-row td:first-child") == ["run-321", "run-123"]
    page.goto(f"{crowded_url}/?q=TEAM-LEGAL&status=succeeded")  # any case
    assert set(column(page, "#runs tr.run-row td:nth-child(7)")) == {"team-legal"}
    page.goto(f"{crowded_url}/?q=100%25")  # a wildcard searched as text: no run matches
    assert page.locator("#runs tr.run-row").count() == 0
    assert page.goto(f"{crowded_url}/?tag=a,b").status == 400


@needs_chromium
def test_a_trend_point_links_to_its_comparison_with_the_run_before(page, crowded_url):
    page.goto(f"{crowded_url}/?sweep=team-faq")
    with page.expect_navigation():
        page.locator(".trend-chart svg a").last.click()
    assert page.url.endswith(f"/compare?baseline=run-{RUNS - 10}&candidate=run-{RUNS - 5}")


@needs_chromium
def test_a_runs_name_note_and_tags_are_edited_on_its_page_and_kept_when_stored_again(
    page, tmp_path
):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    board = make_board(np.ones((2, 12)))
    testset = make_testset([f"q{i:03d}" for i in range(12)])
    database.publish(engine, "labelled", board.leaderboard, board.results, testset)
    with ui_demo.serving_store(engine, tmp_path / "runs") as url:
        page.goto(f"{url}/runs/labelled")
        page.click("#edit-labels summary")
        page.fill("input[name=title]", PAYLOAD)
        page.fill("textarea[name=note]", f"why: {PAYLOAD}")
        page.fill("input[name=tags]", "baseline, nightly")
        with page.expect_navigation():
            page.click("#edit-labels button")
        assert page.locator("#run-title").inner_text() == PAYLOAD  # shown as text
        assert column(page, "#run-tags a.tag") == ["baseline", "nightly"]
        database.publish(engine, "labelled", board.leaderboard, board.results, testset)
        page.goto(url)
        assert page.locator("#runs td.run-name b").inner_text() == PAYLOAD
        assert "why: " + PAYLOAD in page.locator("#runs td.run-name .note").inner_text()
        assert page.locator("img, #runs script").count() == 0
        page.goto(f"{url}/runs/labelled")
        page.click("#edit-labels summary")
        page.fill("input[name=tags]", "no<tag>")
        with page.expect_navigation():
            page.click("#edit-labels button")
        assert "is not a tag" in page.content()
    assert database.find_runs(engine)[0]["tags"] == ["baseline", "nightly"]


@needs_chromium
def test_a_run_archived_on_its_page_leaves_the_runs_list_and_the_filter_shows_it_again(
    page, tmp_path
):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    board = make_board(np.ones((2, 12)))
    testset = make_testset([f"q{i:03d}" for i in range(12)])
    for run_id in ("kept", "old-try"):
        database.publish(engine, run_id, board.leaderboard, board.results, testset)
    with ui_demo.serving_store(engine, tmp_path / "runs") as url:
        page.goto(f"{url}/runs/old-try")
        with page.expect_navigation():
            page.click("#archive-button")
        assert page.url == f"{url}/runs/old-try"
        assert "Archived " in page.locator("#archived").inner_text()
        page.goto(url)
        assert column(page, "#runs tr.run-row td:first-child") == ["kept"]
        with page.expect_navigation():  # the filter: archived runs shown too, and marked
            page.select_option("#archived-filter", "include")
            page.click("form.filters button")
        assert column(page, "#runs tr.run-row td:first-child") == ["old-try", "kept"]
        assert column(page, "#runs tr.run-row td:nth-child(2)") == [
            "succeeded archived",
            "succeeded",
        ]
        page.goto(f"{url}/?archived=only")
        assert column(page, "#runs tr.run-row td:first-child") == ["old-try"]
        assert page.goto(f"{url}/?archived=maybe").status == 400
        archive_run(engine, "kept")  # every run archived: said, not "no run is stored yet"
        page.goto(url)
        assert page.locator("#empty").count() == 0
        assert page.locator("#no-run").inner_text() == (
            "Every stored run is archived: show the archived runs."
        )
        archive_run(engine, "kept", archived=False)
        page.goto(f"{url}/runs/old-try")
        with page.expect_navigation():
            page.click("#archive-button")  # now: Unarchive
        assert page.locator("#archived").count() == 0
        page.goto(url)
        assert column(page, "#runs tr.run-row td:first-child") == ["old-try", "kept"]


@needs_chromium
def test_an_empty_database_points_to_start_a_run_and_no_page_asks_for_a_missing_icon(
    page, tmp_path
):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    missing: list[str] = []

    def not_found(response) -> None:
        if response.status == 404:
            missing.append(response.url)

    page.on("response", not_found)
    try:
        with ui_demo.serving_store(engine, tmp_path / "runs") as url:
            page.goto(url)
            with page.expect_navigation():
                page.click("#empty a#start-a-run")
            assert page.url == f"{url}/start"
            assert page.goto(f"{url}/favicon.ico").status == 200
    finally:
        page.remove_listener("response", not_found)
    assert missing == []


def running_folder(runs_dir, name: str, pid: int, started: datetime):
    folder = runs_dir / name
    folder.mkdir(parents=True)
    write_marker(folder, status="running", pid=pid, started_at=started.isoformat())
    return folder


@needs_chromium
def test_a_run_in_progress_shows_its_counters_and_time_left(page, tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    runs_dir = tmp_path / "runs"
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = running_folder(runs_dir, "20261201-100000-000000", alive.pid, datetime.now(UTC))
        write_marker(folder, started_at=(datetime.now(UTC) - timedelta(seconds=60)).isoformat())
        at = time.time()
        # two steps' processes, each line replacing its process's earlier one: 16 calls in
        # the last 28 s, so 44 more take 77 s and the moments since (at the pace since the
        # run started 60 s ago, 2:45)
        lines = [
            {"source": "a", "counter": "LLM calls", "done": n, "total": 40, "at": at - 28 + n}
            for n in range(0, 11, 2)
        ]
        lines += [
            {"source": "b", "counter": "LLM calls", "done": n, "total": 20, "at": at - 12 + n}
            for n in range(0, 7, 2)
        ]
        lines.append({"source": "a", "counter": "texts embedded", "done": 300, "total": 300})
        text = "\n".join(json.dumps(line) for line in lines) + '\n{"source": "b", "coun'
        (folder / "progress.jsonl").write_text(text)
        gone = running_folder(runs_dir, "20261201-090000-000000", 2**22 + 7, datetime.now(UTC))
        with ui_demo.serving_store(engine, runs_dir) as url:
            page.goto(url)
            rows = page.locator("#in-progress tr.running-row")
            assert rows.count() == 1  # the folder whose process is gone is not in progress
            assert rows.get_attribute("data-run-id") == folder.name
            counters = column(page, "#in-progress .counter")
            assert re.fullmatch(r"LLM calls 16/60, ETA 1:[1-5]\d", counters[0])
            assert counters[1:] == ["texts embedded 300/300"]  # done: no time left
            assert rows.locator("td.eta").inner_text() == counters[0].split(", ")[1]
            assert gone.name not in page.content()
    finally:
        alive.kill()
        alive.wait()


def test_a_restarted_ui_still_lists_the_jobs_it_started_and_how_they_ended(tmp_path):
    from starlette.testclient import TestClient

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    runs_dir, docs = tmp_path / "runs", ui_demo.write_documents(tmp_path / "docs")
    jobs = Jobs(runs_dir, engine, DocRoots.of([str(tmp_path)]))
    ended = jobs.start(str(docs), "no-such-set", {"chunk_sizes": "many"}, title=PAYLOAD)
    ended.process.wait(timeout=120)
    restarted = create_app(engine, runs_dir=runs_dir)  # another UI over the same folder
    with TestClient(restarted) as client:
        listed = client.get("/start").text
        escaped = "&lt;script&gt;alert(&#39;run&#39;)&lt;/script&gt;"
        assert ended.id in listed and escaped in listed and "<script>" not in listed
        page = client.get(f"/jobs/{ended.id}")
        assert page.status_code == 200 and escaped in page.text and "<script>" not in page.text
        assert f"failed ({ended.process.returncode})" in page.text
        assert "many" in page.text  # its log: what the CLI refused
        assert client.get("/jobs/unknown").status_code == 404


def test_cancel_stops_a_running_job_as_ctrl_c_would(tmp_path):
    from starlette.testclient import TestClient

    from ragsweep.ui.jobs import Job

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    app = create_app(engine, runs_dir=tmp_path / "runs")
    stops = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))"
    process = subprocess.Popen(
        [sys.executable, "-c", f"{stops}; print('up', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    assert process.stdout.readline() == b"up\n"  # its handler is in place
    job = Job("a1b2c3d4e5f6", ["run", "--docs", "d"], tmp_path / "j.log", process, pid=process.pid)
    app.state.jobs.jobs[job.id] = job
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/jobs/{job.id}").text
        assert 'id="cancel"' in page
        csrf = re.search(r'name="csrf" value="(\w+)"', page).group(1)
        origin = {"origin": "http://127.0.0.1"}
        answer = client.post(f"/jobs/{job.id}/cancel", data={"csrf": csrf}, headers=origin)
        assert answer.status_code == 200  # back on the job page
        process.wait(timeout=30)
        assert job.status == "interrupted (143)"
        assert 'id="cancel"' not in client.get(f"/jobs/{job.id}").text


def test_the_name_typed_on_start_a_run_is_stored_once_the_run_closed_its_marker(tmp_path):
    """The run's closing clears its marker's PID; its lock file still says which process ran
    it, so the job finds its run and names it."""
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    runs_dir = tmp_path / "runs"
    folder = running_folder(runs_dir, "20261206-010000-000000", os.getpid(), datetime.now(UTC))
    with held(folder):  # the run's process (this one) locks its folder, recording its PID
        pass
    write_marker(folder, status="succeeded", pid=None)  # as closing leaves it
    board = make_board(np.ones((2, 4)))
    testset = make_testset([f"q{i}" for i in range(4)])
    database.publish(engine, folder.name, board.leaderboard, board.results, testset)
    jobs = Jobs(runs_dir, engine, DocRoots.of([str(tmp_path)]))
    job = Job("0a1b2c3d4e5f", ["run"], runs_dir / ".ui-job-0a1b2c3d4e5f.log", pid=os.getpid())
    job.title = "bigger chunks"
    job.exit_file.write_text("0")
    jobs.jobs[job.id] = job
    jobs.name_stored_runs()
    assert database.find_runs(engine)[0]["title"] == "bigger chunks"


def test_no_finished_job_is_left_a_zombie(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    jobs = Jobs(tmp_path / "runs", engine, DocRoots.of([str(tmp_path)]))
    started = [jobs.submit("docs", "s3://b/t.jsonl", f"e{i}") for i in range(3)]
    deadline = time.monotonic() + 120
    for job in started:
        while not job.exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    states = {}
    while time.monotonic() < deadline:  # an ended child is reaped within moments, unasked
        states = {job.pid: process_state(job.pid) for job in started}
        if all(state is None for state in states.values()):
            break
        time.sleep(0.1)
    assert states == {job.pid: None for job in started}


def process_state(pid: int) -> str | None:
    """The state letter of a process (Z: a zombie), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None
