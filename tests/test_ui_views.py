"""The views of issue 39 over the nightly demo store (tests/ui_demo.py): one question's
answers side by side across a run's configurations."""

from __future__ import annotations

from conftest import needs_chromium
from starlette.testclient import TestClient

from ragsweep.evaluation.leaderboard import failure_reason
from ragsweep.results import database
from ragsweep.ui import create_app


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
