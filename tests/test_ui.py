"""`ragsweep ui` in a real browser: Playwright drives the system Chromium against the app
served by uvicorn on loopback, over a SQLite store and a real PostgreSQL server holding
nightly runs and a test set (tests/ui_demo.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
import ui_demo
from conftest import emptied, free_port, needs_chromium, ragsweep_here
from mlflow.tracking import MlflowClient
from starlette.routing import Route
from starlette.testclient import TestClient
from test_pipeline import example_subset
from test_tracking import assert_logged, serving_mlflow

from ragsweep.core.errors import safe_url
from ragsweep.core.schemas import read_table
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.store import database
from ragsweep.ui import create_app
from ragsweep.ui.roots import DocRoots
from ragsweep.ui.runlist import RUNS_PAGE

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    """The demo runs' documents, one folder for both stores."""
    return tmp_path_factory.mktemp("docs")


def filled(url: str, docs: Path):
    found = database.connect(url)
    ui_demo.fill(found, docs)
    return found


@pytest.fixture(scope="module")
def engine(tmp_path_factory, docs):
    """A SQLite store holding the demo runs: the browser's."""
    found = filled(f"sqlite:///{tmp_path_factory.mktemp('ui') / 'results.db'}", docs)
    yield found
    found.dispose()


@pytest.fixture(scope="module")
def pg_engine(postgres_server, docs):
    """The same on the real PostgreSQL server: its pages are read without the browser
    (test_every_page_reads_the_same_from_postgresql_as_from_sqlite)."""
    found = filled(emptied(postgres_server), docs)
    yield found
    found.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def either_engine(request):
    """``engine``, then ``pg_engine``."""
    return request.getfixturevalue("engine" if request.param == "sqlite" else "pg_engine")


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    """Where the runs started from the page write their folders."""
    return tmp_path_factory.mktemp("ui-runs")


@pytest.fixture(scope="module")
def base_url(engine, runs_dir, tmp_path_factory):
    roots = DocRoots.of([str(tmp_path_factory.getbasetemp()), str(ROOT / "examples")])
    app = create_app(engine, runs_dir=runs_dir, docs_roots=roots)
    with ui_demo.serving(app, free_port()) as url:
        yield url


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory) -> Iterator[str]:
    """A real MLflow tracking server, for the run started from the page."""
    with serving_mlflow(tmp_path_factory.mktemp("mlflow-server")) as uri:
        yield uri


@pytest.fixture
def page(shared_page):
    """The module's browser page (conftest): a new one costs Chromium more than most tests."""
    return shared_page


PAGES = [  # what the browser tests read, and more; {config} is night-1's best
    "/",
    "/?status=succeeded&since=2026-11-28",
    "/?q=night-2",
    "/runs/night-1",
    "/runs/night-2?sort=context_correctness",
    "/runs/night-2?sort=context_chars",
    "/runs/night-1?search_type=mmr",
    "/runs/night-3",
    "/runs/night-1/configs/{config}",
    "/runs/night-1/configs/{config}/questions/q001",
    "/runs/night-1/matrix",
    "/compare?baseline=night-2&candidate=night-3",
    "/compare?runs=night-1&runs=night-2&runs=night-3",
    "/questions/q001",
    "/testsets",
    "/testsets/curated.json",
    "/testsets/curated.json/questions/q002",
    "/start",
]


def pages_read(engine, runs_dir: Path) -> dict[str, str]:
    """``PAGES`` as the app over ``engine`` renders them, what differs by store or moment
    replaced: the store's URL, the session's CSRF token, times of the day, the runs'
    durations (each fill stores its runs as finished then)."""
    config = database.load_leaderboard(engine, "night-1")["config_id"][0].as_py()
    client = TestClient(create_app(engine, runs_dir=runs_dir))
    read = {}
    for path in PAGES:
        answer = client.get(path.format(config=config))
        assert answer.status_code == 200, path
        text = answer.text.replace(safe_url(engine.url), "<store>")
        text = re.sub(r'name="csrf" value="[^"]+"', 'name="csrf"', text)
        text = re.sub(r"\d\d:\d\d(:\d\d)?", "<time>", text)
        read[path] = re.sub(r"\b\d+h \d\dm\b", "<duration>", text)
    return read


def test_every_page_reads_the_same_from_postgresql_as_from_sqlite(
    pg_engine, docs, tmp_path, tmp_path_factory
):
    """The browser tests read the SQLite store; every page they read renders the same from
    the real PostgreSQL server, its password hidden."""
    sqlite = filled(f"sqlite:///{tmp_path / 'results.db'}", docs)  # as no test changed it
    on_sqlite = pages_read(sqlite, tmp_path / "runs")
    on_pg = pages_read(pg_engine, tmp_path / "pg-runs")
    assert pg_engine.url.password and "***" in safe_url(pg_engine.url)
    for path in PAGES:
        assert pg_engine.url.password not in on_pg[path], path
        assert on_pg[path] == on_sqlite[path], path


def follow(page, selector: str) -> None:
    """Click what loads a new page, and wait until it has."""
    with page.expect_navigation():
        page.click(selector)


def job_ended(page, timeout: float = 600) -> None:
    """Wait off the job page the browser shows until its job has ended, then show it again:
    while the job runs the page reloads itself every 3 s, each reload a navigation that
    costs Chromium ~0.3 CPU s (for minutes of a pipeline run)."""
    url = page.url
    page.goto("about:blank")
    deadline = time.monotonic() + timeout
    while 'http-equiv="refresh"' in httpx.get(url, timeout=60).text:
        assert time.monotonic() < deadline, f"{url}: the job has not ended"
        time.sleep(3)  # as often as the page would reload
    page.goto(url)


def column(page, css: str) -> list[str]:
    return [t.strip() for t in page.locator(css).all_inner_texts()]


@needs_chromium
def test_runs_list_shows_every_run_newest_first_and_marks_the_regressed_night(
    page, base_url, engine
):
    page.goto(base_url)
    assert safe_url(engine.url) in page.locator("nav .store").inner_text()
    ids = column(page, "#runs tr.run-row td:first-child")
    assert ids == ["broken-night", "night-3", "night-2", "night-1"]
    assert column(page, "#runs tr.run-row td:nth-child(2)")[0] == "failed"
    sweeps = column(page, "#runs tr.run-row td:nth-child(7)")
    assert sweeps == ["other-sweep", *[ui_demo.SWEEP] * 3]
    trend = page.locator(".trend-chart")
    # one trend: the nights by their sweep's name, though night-3's key is another; the
    # failed run's sweep has no score to draw
    assert trend.count() == 1
    assert trend.locator("circle.regressed").count() == 1
    assert trend.locator("circle.night").count() == 2
    assert "night-3 (regressed)" in trend.inner_text()


@needs_chromium
def test_runs_filter_by_status_and_date(page, base_url):
    page.goto(base_url)
    page.select_option("select[name=status]", "succeeded")
    page.fill("input[name=since]", "2026-11-28")
    follow(page, "form.filters button")
    assert column(page, "#runs tr.run-row td:first-child") == ["night-3", "night-2"]


@needs_chromium
def test_a_run_page_shows_its_best_configuration_and_sorts_by_any_metric(page, base_url, engine):
    best = database.load_leaderboard(engine, "night-2").to_pylist()[0]
    page.goto(base_url)
    follow(page, "#runs a:text-is('night-2')")
    assert page.locator("#best-config").inner_text().startswith(best["label"])
    assert column(page, "#leaderboard td.rank")[0] == "1"
    follow(page, "#leaderboard th a:text-is('context correctness')")
    assert page.locator("#sorted-by").inner_text() == "context_correctness"
    values = [float(v) for v in column(page, "#leaderboard td.metric-context_correctness")]
    assert values == sorted(values, reverse=True) and len(values) == 4
    follow(page, "#leaderboard th a:text-is('context chars')")
    costs = [float(v) for v in column(page, "#leaderboard td.cost-context_chars")]
    assert costs == sorted(costs)
    assert page.locator("svg#pareto circle.front").count() >= 1
    assert page.locator("#by-topic tr.topic-row").count() == 3


@needs_chromium
def test_the_leaderboard_filters_by_search_setting(page, base_url, engine):
    board = database.load_leaderboard(engine, "night-1")
    page.goto(f"{base_url}/runs/night-1")
    page.select_option("select[name=chunker]", board["chunker"][0].as_py())
    follow(page, "form.filters button")
    assert page.locator("#leaderboard tr.config-row").count() == board.num_rows
    page.goto(f"{base_url}/runs/night-1?search_type=mmr")
    assert page.locator("#leaderboard tr.config-row").count() == 0


@needs_chromium
def test_drill_down_shows_question_answer_verdict_and_retrieved_documents(page, base_url):
    page.goto(f"{base_url}/runs/night-3")
    first = page.locator("#failures tr.failure-row a").first
    question_id = first.inner_text()
    with page.expect_navigation():
        first.click()
    assert page.locator("h1").inner_text() == question_id
    asked = {q["question_id"]: q["question"] for q in ui_demo.testset_rows().to_pylist()}
    assert page.locator("#question").inner_text() == asked[question_id]
    assert "Failed" in page.locator("#verdict").inner_text()
    assert column(page, "#retrieved code.doc") == ["doc0.md", "doc1.md"]
    assert column(page, "#retrieved .chunk-text")[0] == "Document 0. Install with the packa"
    assert page.locator("#references li").first.inner_text() == f"the answer to {question_id}"
    follow(page, "#next-failure")
    assert page.locator("h1").inner_text() > question_id
    follow(page, "#previous-failure")
    assert page.locator("h1").inner_text() == question_id


@needs_chromium
def test_user_text_is_escaped(page, base_url):
    config = page.context.request.get(f"{base_url}/runs/night-1").text()
    config_id = re.search(r'data-config-id="([0-9a-f]+)"', config).group(1)
    page.goto(f"{base_url}/runs/night-1/configs/{config_id}/questions/q001")
    assert page.locator("#question").inner_text() == "Does <script>alert('x')</script> <b>run</b>?"
    assert page.locator("#question b").count() == 0


@needs_chromium
def test_drill_down_marks_the_retrieved_documents_holding_a_gold_span(page, base_url):
    page.goto(f"{base_url}/runs/night-1")
    page.locator("#leaderboard tr.config-row a").first.click()
    follow(page, "#questions a[href$='/questions/q001']")
    assert page.locator("#gold-spans").inner_text() == "Gold spans: doc1.md characters 50–70"
    chunks = page.locator("#retrieved div.chunk")
    assert "holds a gold span" in chunks.nth(1).inner_text()
    assert "holds a gold span" not in chunks.nth(0).inner_text()
    assert chunks.nth(1).locator("mark").inner_text() == "default port is 8443"
    assert chunks.nth(0).locator("mark").count() == 0


def test_drill_down_says_when_the_documents_cannot_be_read(either_engine, tmp_path):
    engine = either_engine
    docs = database.run_info(engine, "night-1")["settings"]["docs"]
    moved = tmp_path / "moved"
    Path(docs).rename(moved)
    try:
        client = TestClient(create_app(engine))
        config_id = database.load_leaderboard(engine, "night-1")["config_id"][0].as_py()
        page = client.get(f"/runs/night-1/configs/{config_id}/questions/q001").text
        assert "The text of doc1.md cannot be read here" in page
        assert "holds a gold span" in page
    finally:
        moved.rename(docs)


def test_compare_shows_verdicts_flips_and_the_alarm(page, base_url):
    page.goto(f"{base_url}/compare")
    page.select_option("#baseline", "night-2")
    page.select_option("#candidate", "night-3")
    follow(page, "#compare-button")
    assert page.locator("#alarm").inner_text().startswith("REGRESSED")
    assert set(column(page, "#comparison td.verdict")) == {"regressed"}
    assert page.locator("#flips tr.flip-row").count() > 0
    assert "40 questions shared" in page.locator("#overlap").inner_text()
    changes = column(page, "#changes li")
    assert changes[:2] == ["documents: 10 -> 11 (1 added, 0 removed, 0 edited)",
                           "documents added (1): new-0.md"]  # fmt: skip


@needs_chromium
def test_a_question_edit_in_the_page_creates_a_new_version(page, base_url, engine):
    testsets = DatabaseStore(engine)
    question_id = testsets.load("curated.json")["question_id"][2].as_py()
    before = len(testsets.history("curated.json", question_id))
    page.goto(f"{base_url}/testsets")
    follow(page, "text=curated.json")
    follow(page, f"text={question_id}")
    page.fill("#edit textarea[name=question]", "What about it, precisely?")
    page.fill("#edit textarea[name=answers]", "the new answer\nanother answer")
    follow(page, "#edit button")
    history = testsets.history("curated.json", question_id)
    assert len(history) == before + 1
    assert history[0]["question"] == "What about it, precisely?"
    assert history[0]["reference_answers"] == ["the new answer", "another answer"]
    assert page.locator("#history tr.version-row").count() == before + 1


@needs_chromium
def test_add_import_delete_and_export_a_test_set(page, base_url, engine, tmp_path):
    source = tmp_path / "upload.jsonl"
    source.write_text(
        '{"id": "g1", "question": "Where?", "reference_answer": "Here", '
        '"reference_context": "Document 1: here it is", "conversation_history": [], '
        '"metadata": {"question_type": "simple", "seed_document_id": "a.md", "topic": "T"}}\n'
    )
    page.goto(f"{base_url}/testsets")
    page.set_input_files("#import input[type=file]", str(source))
    page.fill("#import input[name=name]", "uploaded")
    follow(page, "#import button")
    assert column(page, "#items td.label") == ["g1"]
    page.fill("#add textarea[name=question]", "Why?")
    page.fill("#add textarea[name=answers]", "Because")
    page.fill("#add textarea[name=doc_ids]", "a.md")
    follow(page, "#add button")
    follow(page, "text=← test set uploaded")
    assert len(column(page, "#items td.label")) == 2
    follow(page, "text=g1")
    follow(page, "#delete button")
    stored = DatabaseStore(engine).load("uploaded")
    assert stored["question"].to_pylist() == ["Why?"]
    exported = page.context.request.get(f"{base_url}/testsets/uploaded/export.json")
    assert exported.json()[0]["question"] == "Why?"


@needs_chromium
def test_a_run_started_from_the_page_runs_in_the_background_and_shows_its_log(
    page, base_url, tmp_path
):
    from playwright.sync_api import expect

    page.goto(f"{base_url}/start")
    page.fill("input[name=docs]", str(tmp_path / "no-such-folder"))
    page.select_option("select[name=testset]", "curated.json")
    follow(page, "form.box button")
    assert re.search(r"/jobs/[0-9a-f]{12}$", page.url)
    # the page reloads itself while the job runs
    expect(page.locator("#job-status")).to_have_text("failed (2)", timeout=120_000)
    log = page.locator("#log").inner_text()
    assert "error:" in log and "no-such-folder" in log
    page.goto(f"{base_url}/start")
    assert "failed (2)" in page.locator("main ul").last.inner_text()


@needs_chromium
def test_a_page_run_stores_its_set_by_name_logs_to_mlflow_and_its_drill_down_warns_after_an_edit(
    page, base_url, engine, runs_dir, tmp_path, embedding_cache, monkeypatch, mlflow_server
):
    """A real run (kfp.local) of a stored set, the example set's first questions over the
    documents they cite: the run joins the stored set (``ragsweep run --testset-name``),
    whose questions left out of its sample stay; it logs its sweep to a real MLflow server
    (``MLFLOW_TRACKING_URI``, the suite's one whole run doing so: tests/test_tracking.py
    checks the rest); once a document is edited, the drill-down says the text may not be
    what the run retrieved. The suite's one run started from the page (one store:
    kfp.local's run is the same on each)."""

    monkeypatch.setenv("RAGSWEEP_EMBEDDING_CACHE", str(embedding_cache))  # the job's too
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)  # the job's
    docs, first_questions = example_subset(tmp_path, questions=6)
    testsets = DatabaseStore(engine)  # stored resolved, as `ragsweep testset add --docs` does
    stored = load_testset(str(first_questions))
    testsets.save("faq.json", resolve_testset(stored, read_documents(str(docs)).table))
    names = testsets.names()
    page.goto(f"{base_url}/start")
    page.fill("input[name=docs]", str(docs))
    page.select_option("select[name=testset]", "faq.json")
    for field, value in {"chunk_sizes": "64", "top_k": "1", "max_questions": "4"}.items():
        page.fill(f"input[name={field}]", value)
    page.fill("input[name=search_types]", "similarity")
    follow(page, "form.box button")
    with page.expect_navigation(timeout=60_000):
        pass  # the job page reloads itself while the run goes on
    job_ended(page)
    assert page.locator("#job-status").inner_text() == "succeeded"
    run = database.find_runs(engine, status="succeeded", limit=1)[0]  # the newest
    info = database.run_info(engine, run["run_id"])
    assert info["testset_name"] == "faq.json" and info["settings"]["docs"] == str(docs)
    assert testsets.names() == names  # the run's test set is the stored one
    assert testsets.load("faq.json").num_rows == 6  # those left out of the sample (4) stay
    run_dir = runs_dir / run["run_id"]
    leaderboard = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    parent, _ = assert_logged(MlflowClient(mlflow_server), run_dir.name, leaderboard)
    # logged once the run folder was complete, by the run itself (not a pipeline step)
    logged = f"run {parent.info.run_id} with {leaderboard.num_rows} configurations"
    assert logged in page.locator("#log").inner_text()
    assert mlflow_server not in (run_dir / "settings.json").read_text()
    results = database.load_results(engine, run["run_id"])
    with engine.connect() as conn:
        versions = conn.execute(
            sa.select(database.results.c.item_version)
            .join(database.runs, database.runs.c.id == database.results.c.run_pk)
            .where(database.runs.c.run_id == run["run_id"])
        ).scalars()
        assert set(versions) == {1}  # the stored questions' versions, as the run asked them
    for question_id in set(results["question_id"].to_pylist()):
        assert [h["version"] for h in testsets.history("faq.json", question_id)] == [1]
    result = results.to_pylist()[0]
    drill_down = (
        f"{base_url}/runs/{run['run_id']}/configs/{result['config_id']}"
        f"/questions/{result['question_id']}"
    )
    page.goto(drill_down)
    assert page.locator("#retrieved .chunk-text").count() == 1
    assert page.locator("#documents-changed").count() == 0
    [retrieved] = result["retrieved_doc_ids"]
    with (docs / retrieved).open("a", encoding="utf-8") as edited:
        edited.write("\nA sentence added after the run.\n")
    page.goto(drill_down)
    assert "changed since this run" in page.locator("#documents-changed").inner_text()


@needs_chromium
def test_the_runs_list_pages_through_every_run(page, tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    for i in range(RUNS_PAGE * 2 + 5):
        settings = {"sweep_key": "paged", "optimization_metric": "answer_correctness"}
        database.record_unfinished(engine, f"run-{i:03d}", settings, ui_demo.FIRST_NIGHT)
    with ui_demo.serving(create_app(engine), free_port()) as url:
        page.goto(f"{url}/?status=failed")
        shown = column(page, "#runs tr.run-row td:first-child")
        assert len(shown) == RUNS_PAGE and shown[0] == f"run-{RUNS_PAGE * 2 + 4:03d}"
        assert (
            page.locator("#runs-pager")
            .inner_text()
            .startswith(f"Runs 1–{RUNS_PAGE}, newest first; more are older.")
        )
        assert page.locator("#newer-runs").count() == 0
        seen = list(shown)
        for _ in range(2):
            follow(page, "#older-runs")
            assert "status=failed" in page.url
            seen += column(page, "#runs tr.run-row td:first-child")
        assert seen == [f"run-{i:03d}" for i in reversed(range(RUNS_PAGE * 2 + 5))]
        assert page.locator("#older-runs").count() == 0
        assert (
            page.locator("#runs-pager")
            .inner_text()
            .startswith(f"Runs {RUNS_PAGE * 2 + 1}–{RUNS_PAGE * 2 + 5}, newest first.")
        )
        follow(page, "#newer-runs")
        assert column(page, "#runs tr.run-row td:first-child")[0] == f"run-{RUNS_PAGE + 4:03d}"
        assert page.goto(f"{url}/?page=0").status == 400


GENERATED_FROM = ["guides/quickstart.txt", "guides/mobile/mobile-apps.md", "api/webhooks.txt"]


@needs_chromium
def test_a_test_set_generated_from_the_page_is_stored_under_its_name(
    page, base_url, engine, llm_server, tmp_path, monkeypatch
):
    """Giskard RAGET in a background ``ragsweep generate`` (the scripted LLM writes the
    questions), followed on its job page, stored in the app's results database. Over three
    of the example documents (Giskard's topics need 4 chunks; they make ~15), with numba's
    JIT off in the job: compiling UMAP's functions costs a new process ~10 CPU s, more than
    running them as Python on so few chunks, and is no part of what the page does."""

    docs = tmp_path / "docs"
    docs.mkdir()
    for doc in GENERATED_FROM:
        shutil.copy(ROOT / "examples" / "docs" / doc, docs)
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")  # the job's environment
    name = f"generated-{engine.dialect.name}"
    page.goto(f"{base_url}/testsets")
    page.fill("#generate input[name=docs]", str(docs))
    page.fill("#generate input[name=name]", name)
    page.fill("#generate input[name=llm]", "writer")
    page.fill("#generate input[name=num_questions]", "4")
    follow(page, "#generate button")
    job_ended(page)
    assert page.locator("#job-status").inner_text() == "succeeded"
    assert f"stored 4 questions as '{name}'" in page.locator("#log").inner_text()
    follow(page, "#generated")
    assert page.locator("h1").inner_text().endswith(name)
    assert DatabaseStore(engine).load(name).num_rows == 4
    assert any(r["model"] == "writer" for r in llm_server.requests)


@needs_chromium
def test_a_run_submitted_from_the_page_reaches_openshift_and_links_its_page(
    page, base_url, monkeypatch
):
    from scripted_servers import Pipelines

    page.goto(f"{base_url}/start")
    assert page.locator("#submit").count() == 0  # not configured: no form
    secret = "sha256~ui-token-not-shown"
    with Pipelines(token=secret) as server:
        monkeypatch.setenv("RAGSWEEP_KFP_HOST", server.url)
        monkeypatch.setenv("RAGSWEEP_KFP_TOKEN", secret)
        monkeypatch.setenv("RAGSWEEP_IMAGE", "quay.io/example/ragsweep:test")
        page.goto(f"{base_url}/start")
        page.fill("#submit input[name=docs]", "s3://team-docs/kb/")
        page.fill("#submit input[name=testset]", "s3://team-eval/testset.json")
        page.fill("#submit input[name=experiment]", "from-the-ui")
        follow(page, "#submit button")
        job_ended(page)
        assert page.locator("#job-status").inner_text() == "succeeded"
        [run] = server.runs.values()
        assert run["runtime_config"]["parameters"]["test_data_key"] == "testset.json"
        [experiment] = server.experiments.values()
        assert experiment["display_name"] == "from-the-ui"
        link = page.locator("a.run-link").inner_text()
        assert link == f"{server.url}/apis/v2beta1/runs/{run['run_id']}"
        assert secret not in page.content()


def test_every_post_form_refuses_a_request_without_this_sessions_csrf_token(either_engine):
    app = create_app(either_engine)
    client = TestClient(app)
    client.get("/")  # the session's CSRF cookie
    posts = [r for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert len(posts) >= 6
    for route in posts:
        path = re.sub(r":\w+}", "}", route.path).format(  # a {question_id:path} too
            name="curated.json",
            question_id="q000",
            run_id="night-1",
            config_id="c",
            job_id="0" * 12,
            number=1,
        )
        response = client.post(path, data={"csrf": "not-the-token", "question": "x"})
        assert response.status_code == 403, route.path
        assert response.status_code == client.post(path, data={}).status_code


@needs_chromium
def test_with_a_token_every_request_needs_it(page, engine):
    token = "s3cret-token"
    with ui_demo.serving(create_app(engine, token=token), free_port()) as url:
        assert httpx.get(f"{url}/runs/night-1").status_code == 401
        assert httpx.get(f"{url}/testsets/curated.json/export.json").status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(f"{url}/runs/night-1", headers=headers).status_code == 200
        page.goto(f"{url}/runs/night-1")
        assert page.url.startswith(f"{url}/login")
        page.fill("input[name=token]", "wrong")
        follow(page, "form button")
        assert "wrong token" in page.content()
        page.goto(f"{url}/runs/night-1")
        page.fill("input[name=token]", token)
        follow(page, "form button")
        assert page.url == f"{url}/runs/night-1"
        assert page.locator("#leaderboard").count() == 1


def test_the_cli_refuses_a_non_loopback_host_without_a_token(tmp_path):
    """Through the entry point, in this process: refused before anything is served."""
    env = {**os.environ, "RAGSWEEP_STORE_URL": f"sqlite:///{tmp_path / 'r.db'}"}
    env = {**env, "RAGSWEEP_UI_TOKEN": ""}
    done = ragsweep_here("ui", "--host", "0.0.0.0", "--port", str(free_port()), env=env)
    assert done.returncode == 2
    assert "--host 0.0.0.0 exposes the results to the network" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("weak", [" ", "t0ken", "a b c d e f g h i j k l m n o"])
def test_the_cli_refuses_a_weak_token_on_a_non_loopback_host(tmp_path, weak):
    env = {**os.environ, "RAGSWEEP_STORE_URL": f"sqlite:///{tmp_path / 'r.db'}"}
    args = ["ui", "--host", "0.0.0.0", "--port", str(free_port()), "--token", weak]
    done = ragsweep_here(*args, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: ui: --host 0.0.0.0 needs a token of at least 16 characters besides white "
        "space (--token or RAGSWEEP_UI_TOKEN); make one with: openssl rand -hex 32"
    ]


def test_the_cli_serves_loopback_only_to_loopback_host_names(pg_engine):
    """From the PostgreSQL server (the CLI serves the SQLite store in the next test, and
    over IPv6 in tests/test_ui_security.py)."""
    env = {"RAGSWEEP_STORE_URL": pg_engine.url.render_as_string(hide_password=False)}
    process, url = ui_demo.serve_cli(env={**env, "RAGSWEEP_UI_TOKEN": ""})
    try:
        assert "night-3" in httpx.get(url).text
        rebound = httpx.get(url, headers={"Host": "attacker.example"})
        assert rebound.status_code == 400  # a DNS-rebound page cannot read the results
    finally:
        process.terminate()
        process.wait()


def test_the_cli_with_a_token_listens_beyond_loopback_and_checks_it(engine):
    env = {"RAGSWEEP_STORE_URL": engine.url.render_as_string(hide_password=False)}
    token = "t0ken-of-16-chars"
    process, url = ui_demo.serve_cli("--host", "0.0.0.0", env={**env, "RAGSWEEP_UI_TOKEN": token})
    try:
        assert httpx.get(f"{url}/runs/night-1").status_code == 401
        answer = httpx.get(f"{url}/runs/night-1", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200 and "leaderboard" in answer.text
        assert token not in answer.text
    finally:
        process.terminate()
        process.wait()


def test_a_run_stored_again_under_its_id_is_read_again(tmp_path):
    from builders import make_board

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    testset = ui_demo.testset_rows()
    client = TestClient(create_app(engine))
    for best in (0, 3):  # a retried publish step replaces the run
        scores = ui_demo.night_scores(0)
        scores[best] = 1.0
        board = make_board(scores)
        database.publish(engine, "retried", board.leaderboard, board.results, testset)
        label = board.leaderboard["label"][0].as_py()
        page = client.get("/runs/retried").text
        assert re.search(r'id="best-config"><b><a [^>]+>([^<]+)</a>', page).group(1) == label


def test_a_run_page_lists_the_failed_answers_like_the_report(tmp_path):
    from builders import make_board

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    scores = ui_demo.night_scores(0)
    failed = ["<b>HTTP 500</b> from the model" if i % 7 == 0 else None for i in range(scores.size)]
    board = make_board(scores, answer_error=failed)
    database.publish(
        engine, "with-errors", board.leaderboard, board.results, ui_demo.testset_rows()
    )
    page = TestClient(create_app(engine)).get("/runs/with-errors").text
    assert page.count('<tr class="error-row">') == failed.count(failed[0])
    assert "&lt;b&gt;HTTP 500&lt;/b&gt; from the model" in page
    assert "<b>HTTP 500</b>" not in page
    assert 'class="num cost-errors"' in page


def test_a_run_page_shows_rerank_latency_only_when_a_configuration_reranks(tmp_path):
    from builders import make_board, make_reranked_board, rerank_latencies

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    scores = ui_demo.night_scores(0)
    client = TestClient(create_app(engine))
    board = make_reranked_board(scores)
    database.publish(engine, "reranked", board.leaderboard, board.results, ui_demo.testset_rows())
    page = client.get("/runs/reranked").text
    assert ">rerank latency p50 ms</a>" in page and ">rerank latency p95 ms</a>" in page
    shown = dict(
        re.findall(
            r'data-config-id="([0-9a-f]+)">.*?'
            r'<td class="num cost-rerank_latency_p50_ms">([^<]*)</td>',
            page,
            re.S,
        )
    )
    expected = {
        c: f"{np.percentile(ms, 50):.3f}" if ms else "-"
        for c, ms in rerank_latencies(scores).items()
    }
    assert shown == expected
    reranking = next(c for c, ms in rerank_latencies(scores).items() if ms)
    config = client.get(f"/runs/reranked/configs/{reranking}").text
    assert "<dt>reranker</dt><dd>rerank:m</dd>" in config
    assert "<dt>rerank_fetch_k</dt><dd>5</dd>" in config

    plain = make_board(scores)
    database.publish(engine, "plain", plain.leaderboard, plain.results, ui_demo.testset_rows())
    page = client.get("/runs/plain").text
    assert "rerank latency" not in page and "cost-rerank" not in page
    assert 'class="num cost-context_chars"' in page  # the costs measured are still shown


def test_a_run_page_marks_eliminated_rows_and_says_what_its_statistics_rest_on(tmp_path):
    from builders import halved_board, make_board

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    testset = ui_demo.testset_rows()
    client = TestClient(create_app(engine))
    leader = np.r_[np.tile([1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 3), np.ones(50)]
    board = halved_board(leader, leader, asked=30)
    database.publish(engine, "halved", board.leaderboard, board.results, testset)
    page = client.get("/runs/halved").text
    dropped = board.leaderboard["config_id"][1].as_py()
    row = re.search(rf'<tr class="([^"]*)" data-config-id="{dropped}">(.*?)</tr>', page, re.S)
    assert "eliminated" in row.group(1).split() and "out after round 1" in row.group(2)
    assert "1 configuration was eliminated by successive halving" in page
    assert "Intervals and tests resample" in page

    tiny = make_board(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    database.publish(engine, "tiny", tiny.leaderboard, tiny.results, testset)
    page = client.get("/runs/tiny").text
    assert page.count("warning: only 3 questions") == 1
    assert "<th>eliminated</th>" not in page and "out after round" not in page


def test_compare_says_in_words_when_its_alarm_cannot_fire(tmp_path):
    from builders import make_board

    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    testset = ui_demo.testset_rows()
    for run_id, values in (("before", np.ones((2, 4))), ("after", np.zeros((2, 4)))):
        board = make_board(values)
        database.publish(engine, run_id, board.leaderboard, board.results, testset)
    page = TestClient(create_app(engine)).get("/compare?baseline=before&candidate=after").text
    alarm = re.search(r'id="alarm"><b>([^<]+)</b>\s*<span>(.*?)</span>', page, re.S)
    assert alarm.group(1) == "no verdict"
    assert "with 4 clusters (4 questions, each alone) this alarm cannot fire" in alarm.group(2)
    assert "p " not in alarm.group(2).split("(difference")[1].split(")")[0]
    assert "Intervals and tests resample 4 questions, each alone (4 questions in all)" in page


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        (0, "succeeded"),
        (1, "succeeded, regressed against its baseline (1)"),
        (2, "failed (2)"),
        (3, "partial: results kept, a side step failed (3)"),
        (130, "interrupted (130)"),
    ],
)
def test_a_runs_job_says_how_the_run_ended_by_its_exit_status(tmp_path, code, shown):
    from ragsweep.ui.jobs import Job

    ended = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    ended.wait()
    assert Job("j", ["run", "--docs", "d"], tmp_path / "log", ended).status == shown
    assert Job("j", ["generate"], tmp_path / "log", ended).status in (
        "succeeded",
        f"failed ({code})",
    )
