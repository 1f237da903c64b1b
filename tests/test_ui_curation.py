"""Curation pages in Chromium, over the nightly demo store (tests/ui_demo.py): every field
of a question edited with an author and a comment, the history's word diff, each version
linked to the runs scored on it, and a selection exported, retagged and deleted at once."""

from __future__ import annotations

import json
from pathlib import Path

import ui_demo
from conftest import needs_chromium

from ragsweep.curation.stored_sets import DatabaseStore


def follow(page, selector: str) -> None:
    with page.expect_navigation():
        page.click(selector)


@needs_chromium
def test_every_field_is_edited_with_who_and_why_and_the_history_shows_the_diff(
    page, demo_url, demo_engine
):
    page.goto(f"{demo_url}/testsets/curated.json/questions/q002")
    page.fill("#edit textarea[name=question]", "What about q002, precisely?")
    page.fill("#edit textarea[name=doc_ids]", "doc2.md\ndoc7.md")
    page.fill("#edit textarea[name=reference_context]", "Line one.\nLine two.")
    page.fill("#edit input[name=topic]", "Networking")
    page.fill("#edit input[name=question_type]", "complex")
    page.fill("#edit input[name=author]", "Ana")
    page.fill("#edit input[name=comment]", "the set's wording")
    follow(page, "#edit button")
    [latest, *_] = DatabaseStore(demo_engine).history("curated.json", "q002")
    assert latest["question"] == "What about q002, precisely?"
    assert latest["reference_doc_ids"] == ["doc2.md", "doc7.md"]
    assert latest["reference_context"] == "Line one.\nLine two."
    assert (latest["topic"], latest["question_type"]) == ("Networking", "complex")
    assert (latest["author"], latest["comment"]) == ("Ana", "the set's wording")
    row = page.locator("#history tr.version-row").first
    assert row.locator("td.author").inner_text().split("\n") == ["Ana", "the set's wording"]
    fields = row.locator(".change").evaluate_all("cs => cs.map(c => c.dataset.field)")
    assert fields == ["question", "reference_doc_ids", "reference_context", "topic"]
    question = row.locator(".change[data-field=question]")
    assert question.locator("ins").evaluate_all("es => es.map(e => e.textContent)") == [
        "q002, precisely?"
    ]
    assert question.locator("del").evaluate_all("es => es.map(e => e.textContent)") == ["q002?"]
    # the author is remembered; saving the page as it is (CR LF lines) changes nothing
    assert page.locator("#edit input[name=author]").input_value() == "Ana"
    follow(page, "#edit button")
    assert len(DatabaseStore(demo_engine).history("curated.json", "q002")) == 2


@needs_chromium
def test_each_version_links_to_the_runs_scored_on_it(page, demo_url):
    page.goto(f"{demo_url}/testsets/testset.json/questions/q004")
    links = page.locator("#history tr.version-row[data-version='1'] a.used-by")
    assert links.all_inner_texts() == ui_demo.NIGHTS[::-1]
    with page.expect_navigation():
        links.first.click()
    assert page.url.endswith("/runs/night-3")


@needs_chromium
def test_a_selection_is_exported_retagged_and_deleted_at_once(page, demo_url, demo_engine):
    page.goto(f"{demo_url}/testsets/curated.json")
    for question_id in ("q000", "q003"):
        page.check(f"tr[data-question-id={question_id}] input[name=q]")
    with page.expect_download() as download:
        page.click("#export-selection-jsonl")
    lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["q000", "q003"]
    page.goto(f"{demo_url}/testsets/curated.json")
    for question_id in ("q000", "q003"):
        page.check(f"tr[data-question-id={question_id}] input[name=q]")
    page.fill("#selection-value", "Billing")
    page.fill("#selection input[name=author]", "Bo")
    follow(page, "#selection-topic")
    stored = {
        q["question_id"]: q for q in DatabaseStore(demo_engine).load("curated.json").to_pylist()
    }
    assert stored["q000"]["topic"] == stored["q003"]["topic"] == "Billing"
    assert stored["q001"]["topic"] != "Billing"
    assert DatabaseStore(demo_engine).history("curated.json", "q003")[0]["author"] == "Bo"
    page.check("tr[data-question-id=q000] input[name=q]")
    page.check("tr[data-question-id=q003] input[name=q]")
    follow(page, "#selection-delete")
    assert "q000" not in page.locator("#items").inner_text()
    left = DatabaseStore(demo_engine).load("curated.json")["question_id"].to_pylist()
    assert "q000" not in left and "q003" not in left and "q001" in left


@needs_chromium
def test_an_action_without_a_selection_is_refused(page, demo_url):
    page.goto(f"{demo_url}/testsets/curated.json")
    with page.expect_navigation() as done:
        page.click("#selection-delete")
    assert done.value.status == 400
    assert "tick the questions" in page.locator("main").inner_text()
