"""Defects of `ragsweep ui` found by a probe (issue 39), each guarded where it showed: in
Chromium for what a page shows, with Starlette's TestClient for what a request gets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
import ui_demo
from builders import SPACE, make_answers, make_board, make_scores, make_testset
from conftest import free_port, needs_chromium
from starlette.testclient import TestClient

from ragsweep.curation import labels
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.store import database
from ragsweep.sweep.space import SearchSpace, configs_table
from ragsweep.ui import create_app
from ragsweep.ui.jobs import Job
from ragsweep.ui.live import MIN_TICKS, Count, counts

SLASHED = ["faq/refunds", "faq/shipping/intl"]


def follow(page, selector: str) -> None:
    with page.expect_navigation():
        page.click(selector)


@needs_chromium
def test_a_question_id_with_a_slash_opens_and_is_labelled_and_edited(page, tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    configs = SPACE.all_configs()[:1]
    ids = [c["config_id"] for c in configs]
    testset = make_testset(SLASHED)
    board = build_board(
        make_scores(ids, SLASHED, np.zeros((1, 2))),
        make_answers(ids, SLASHED),
        testset,
        configs_table(configs),
        "answer_correctness",
    )
    database.publish(engine, "slashed", board.leaderboard, board.results, testset)
    DatabaseStore(engine).save("faqs", testset)
    with ui_demo.serving(create_app(engine), free_port()) as url:
        page.goto(f"{url}/runs/slashed/configs/{ids[0]}")
        follow(page, f"a[href$='/questions/{SLASHED[1].replace('/', '%2F')}']")
        assert page.locator("h1").inner_text() == SLASHED[1]
        page.fill("input[name=author]", "ann")
        follow(page, "button[value=correct]")
        assert [(lb.question_id, lb.author) for lb in labels.load(engine)] == [(SLASHED[1], "ann")]

        page.goto(f"{url}/testsets/faqs")
        follow(page, f"#items a:text-is('{SLASHED[0]}')")
        assert page.locator("h1").inner_text() == SLASHED[0]
        page.fill("#edit textarea[name=question]", "Refunds within 30 days?")
        follow(page, "#edit button")
        assert page.locator("h1").inner_text() == SLASHED[0]
    edited = DatabaseStore(engine).load("faqs").to_pylist()
    assert edited[0]["question"] == "Refunds within 30 days?" and len(edited) == 2


@needs_chromium
def test_an_import_over_a_stored_name_asks_first_and_the_replacement_can_be_reverted(
    page, tmp_path
):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    store = DatabaseStore(engine)
    store.save("faqs", make_testset(["q1", "q2", "q3"]))
    upload = tmp_path / "one.jsonl"
    upload.write_text(
        '{"id": "g1", "question": "Where?", "reference_answer": "Here", '
        '"reference_context": "here", "conversation_history": [], "metadata": {}}\n'
    )
    with ui_demo.serving(create_app(engine), free_port()) as url:
        page.goto(f"{url}/testsets")
        page.set_input_files("#import input[type=file]", str(upload))
        page.fill("#import input[name=name]", "faqs")
        with page.expect_navigation() as asked:
            page.click("#import button")
        assert asked.value.status == 409
        assert "a test set 'faqs' is stored already (3 questions); tick 'Replace'" in (
            page.inner_text("main")
        )
        assert store.load("faqs")["question_id"].to_pylist() == ["q1", "q2", "q3"]

        page.go_back()
        page.set_input_files("#import input[type=file]", str(upload))
        page.fill("#import input[name=name]", "faqs")
        page.check("#import input[name=replace]")
        follow(page, "#import button")
        assert page.locator("#items tr.item-row").count() == 1
        assert store.load("faqs")["question_id"].to_pylist() == ["g1"]

        follow(page, "#revert button")
        assert page.locator("#items tr.item-row").count() == 3
    assert store.load("faqs")["question_id"].to_pylist() == ["q1", "q2", "q3"]
    assert [c["comment"] for c in store.history("faqs", "g1")][:2] == [
        "reverted the latest change",
        "imported from one.jsonl",
    ]


def test_a_set_never_changed_has_nothing_to_revert_to(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    DatabaseStore(engine).save("faqs", make_testset(["q1"]))
    client = TestClient(create_app(engine))
    csrf = re.search(r'name="csrf" value="(\w+)"', client.get("/testsets/faqs").text).group(1)
    answer = client.post("/testsets/faqs/revert", data={"csrf": csrf})
    assert answer.status_code == 400 and "no earlier version to go back to" in answer.text


def test_a_huge_page_number_and_a_nul_byte_in_a_form_are_refused_with_a_400(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    DatabaseStore(engine).save("faqs", make_testset(["q1"]))
    client = TestClient(create_app(engine, runs_dir=tmp_path / "runs"))
    huge = client.get("/?page=99999999999999999999")
    assert huge.status_code == 400 and "past the last page" in huge.text
    assert client.get("/?page=%C2%B2").status_code == 400  # a digit, but not 0-9
    csrf = re.search(r'name="csrf" value="(\w+)"', client.get("/start").text).group(1)
    form = {"csrf": csrf, "docs": f"{tmp_path}\0/x", "testset": "faqs"}
    started = client.post("/start", data=form)
    assert started.status_code == 400 and "docs: holds a NUL byte" in started.text


@needs_chromium
def test_a_run_whose_rows_are_missing_from_the_store_says_so(page, tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    board = make_board(np.ones((2, 3)))
    testset = make_testset(["q000", "q001", "q002"])
    for run_id in ("no-results", "no-leaderboard"):
        database.publish(engine, run_id, board.leaderboard, board.results, testset)
    with engine.begin() as conn:  # as a store someone pruned by hand
        for table, run_id in (
            (database.results, "no-results"),
            (database.leaderboards, "no-leaderboard"),
        ):
            pk = sa.select(database.runs.c.id).where(database.runs.c.run_id == run_id)
            conn.execute(table.delete().where(table.c.run_pk == pk.scalar_subquery()))
    with ui_demo.serving(create_app(engine), free_port()) as url:
        page.goto(f"{url}/runs/no-results")
        assert page.locator("#rows-missing").inner_text() == (
            "The store lists run no-results but holds none of its results rows: they are "
            "missing from the store (removed, or never all written), so the figures below "
            "are not the run's."
        )
        assert "0 failures" not in page.locator(".cards").inner_text()
        page.goto(f"{url}/runs/no-results/matrix")
        assert "holds none of its results rows" in page.locator("#rows-missing").inner_text()
        assert page.locator("p.pager").inner_text().strip() == "No question has a result here."
        page.goto(f"{url}/runs/no-leaderboard")
        assert "holds none of its leaderboard rows" in page.locator("#rows-missing").inner_text()
        assert "No leaderboard row of this run is in the store." in page.inner_text("#leaderboard")
        assert "matches the filters" not in page.inner_text("main")


def test_over_https_the_author_cookie_is_a_secure_host_cookie_and_is_read_back(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    DatabaseStore(engine).save("faqs", make_testset(["q1"]))
    client = TestClient(create_app(engine, https=True), base_url="https://127.0.0.1")
    csrf = re.search(r'name="csrf" value="(\w+)"', client.get("/testsets/faqs").text).group(1)
    form = {"csrf": csrf, "question": "Q?", "answers": "A", "author": "ann lee"}
    added = client.post("/testsets/faqs/questions", data=form, follow_redirects=False)
    cookie = next(c for c in added.headers.get_list("set-cookie") if "ragsweep_label_author" in c)
    assert cookie.startswith('__Host-ragsweep_label_author="ann lee"; HttpOnly; Path=/;')
    assert "; Secure" in cookie and "Domain" not in cookie
    page = client.get("/testsets/faqs").text
    assert 'name="author" value="ann lee"' in page


def write_progress(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_time_left_follows_the_recent_pace_not_the_pace_since_the_run_started(tmp_path):
    """Recorded lines: a first step embeds 300 texts over 10 minutes, then the LLM calls
    start: 20 of 200 in 15 s. At the pace since the start (20 in 615 s) 180 calls would
    take 1:32:15; at their own recent pace (20 in 15 s) they take 2:15."""
    progress = tmp_path / "progress.jsonl"
    embedded = [
        {"source": "a", "counter": "texts embedded", "done": n, "total": 300, "at": 2 * n}
        for n in range(0, 301, 30)
    ]
    calls = [{"source": "b", "counter": "LLM calls", "done": 0, "total": 200, "at": 600.0}]
    calls += [
        {"source": "b", "counter": "LLM calls", "done": n, "total": 200, "at": 600 + 0.75 * n}
        for n in range(1, 21)
    ]
    write_progress(progress, embedded + calls)
    assert counts(progress, now=615.0) == [
        Count("texts embedded", 300, 300, None),  # done: no time left
        Count("LLM calls", 20, 200, 135.0),
    ]
    assert counts(progress, now=615.0)[1].describe() == "LLM calls 20/200, ETA 2:15"


def test_no_time_left_is_shown_before_a_counter_advanced_a_few_times_recently(tmp_path):
    progress = tmp_path / "progress.jsonl"
    line = {"source": "b", "counter": "LLM calls", "total": 200}
    ticks = [{**line, "done": n, "at": 600.0 + n} for n in range(MIN_TICKS)]
    write_progress(progress, ticks)  # MIN_TICKS - 1 advances: too few to estimate
    assert counts(progress, now=610.0) == [Count("LLM calls", MIN_TICKS - 1, 200, None)]
    write_progress(progress, [*ticks, {**line, "done": MIN_TICKS, "at": 600.0 + MIN_TICKS}])
    [count] = counts(progress, now=600.0 + MIN_TICKS)
    assert count.eta_s == pytest.approx(200 - MIN_TICKS)  # one a second
    # lines without a time (an earlier ragsweep's): counted, no time left guessed; a line
    # that is not a progress record is skipped
    write_progress(progress, [{**line, "done": n} for n in range(50)] + [[1], {"done": 3}])
    assert counts(progress, now=610.0) == [Count("LLM calls", 49, 200, None)]


@needs_chromium
def test_a_long_log_line_wraps_on_the_job_page(page, tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    app = create_app(engine, runs_dir=tmp_path / "runs")
    log = tmp_path / "j.log"
    log.write_text("error: " + "x" * 3000 + "\n")
    job = Job("a1b2c3d4e5f6", ["run", "--docs", "d"], log, pid=None)
    app.state.jobs.jobs[job.id] = job
    with ui_demo.serving(app, free_port()) as url:
        page.goto(f"{url}/jobs/{job.id}")
        shown = page.locator("pre#log")
        assert shown.is_visible()
        assert shown.evaluate("e => e.scrollWidth <= e.clientWidth")
        assert shown.evaluate("e => e.clientHeight > 100")  # the line goes on below


@needs_chromium
def test_forest_labels_differing_only_at_the_end_of_a_long_label_are_told_apart(page, tmp_path):
    models = tuple(  # model folders: the whole path is the configurations' label part
        str(tmp_path / f"multilingual-e5-large-instruct-finetuned-support-tickets-{v}")
        for v in ("v1", "v2")
    )
    for model in models:
        Path(model).mkdir()
        (Path(model) / "config.json").write_text("{}")
    space = SearchSpace(
        chunk_sizes=(64,), top_ks=(1,), search_types=("similarity",), embedding_models=models
    )
    board = make_board(np.array([[1, 1, 0], [1, 0, 0]], float), space=space)
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    for run_id in ("before", "after"):
        database.publish(
            engine, run_id, board.leaderboard, board.results, make_testset(["q000", "q001", "q002"])
        )
    with ui_demo.serving(create_app(engine), free_port()) as url:
        page.goto(f"{url}/compare?runs=before&runs=after")
        drawn = page.locator("svg#forest text.forest-label")
        assert drawn.count() == 2
        shown = ["".join(t.locator("tspan").all_text_contents()) for t in drawn.all()]
        names = sorted(Path(m).name for m in models)  # a model folder's label: its name
        assert sorted(shown) == names  # whole, wrapped onto lines
        assert all(t.locator("tspan").count() > 1 for t in drawn.all())
        titles = drawn.locator("title").all_text_contents()
        assert all(any(n in title for title in titles) for n in names)  # the whole label too
        boxes = [t.bounding_box() for t in drawn.all()]
        assert boxes[0]["y"] + boxes[0]["height"] <= boxes[1]["y"]  # no label over another


@needs_chromium
def test_the_forest_plot_and_the_matrix_name_configurations_by_what_differs(page, tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    board = make_board(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0]], float))
    testset = make_testset(["q000", "q001", "q002"])
    for run_id in ("before", "after"):
        database.publish(engine, run_id, board.leaderboard, board.results, testset)
    labels_by_rank = board.leaderboard["label"].to_pylist()
    short = {
        "sentence-64/16 all-MiniLM-L6-v2 k=1 similarity extractive": "sentence-64/16 k=1",
        "sentence-64/16 all-MiniLM-L6-v2 k=3 similarity extractive": "sentence-64/16 k=3",
        "sentence-128/16 all-MiniLM-L6-v2 k=1 similarity extractive": "sentence-128/16 k=1",
    }
    assert set(labels_by_rank) == set(short)
    with ui_demo.serving(create_app(engine), free_port()) as url:
        page.goto(f"{url}/compare?runs=before&runs=after")
        drawn = page.locator("svg#forest text.forest-label")
        assert sorted(drawn.locator("tspan").all_text_contents()) == sorted(short.values())
        titles = drawn.locator("title").all_text_contents()
        assert sorted(titles) == sorted(short)  # the whole label on hover
        assert (
            page.locator("#forest-common")
            .inner_text()
            .startswith("Every configuration drawn: all-MiniLM-L6-v2 similarity extractive;")
        )
        page.goto(f"{url}/runs/before/matrix")
        heads = page.locator("#matrix th.config-head .head-label").all_inner_texts()
        assert heads == [short[label] for label in labels_by_rank]
