"""Labelling on the UI's drill-down page, in Chromium: one click (or Enter) labels the judge's
verdict and opens the next answer of the queue; the judge's agreement with the labels is
shown beside its verdicts."""

from __future__ import annotations

import re

import numpy as np
import pytest
import ui_demo
from conftest import free_port, needs_chromium
from judged_runs import store_judged_run

from ragsweep.curation import labels
from ragsweep.evaluation.agreement import MIN_LABELS
from ragsweep.store import database
from ragsweep.ui import create_app

CONFIGS, QUESTIONS = 2, MIN_LABELS // 2  # as many labels as a reliable judge needs


@pytest.fixture
def page(shared_page):
    """The module's browser page (conftest): a new one costs Chromium more than the test."""
    return shared_page


@pytest.fixture
def served(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    verdicts = (np.random.default_rng(5).random((CONFIGS, QUESTIONS)) < 0.5).astype(float)
    store_judged_run(engine, "judged-run", verdicts)
    with ui_demo.serving(create_app(engine), free_port()) as url:
        yield engine, url


def person_says_correct(question_id: str) -> bool:
    """The person's own view: the answers to even-numbered questions are correct."""
    return int(question_id[1:]) % 2 == 0


@needs_chromium
def test_thirty_labels_entered_by_keyboard_and_click_show_kappa_and_unreliability(page, served):
    engine, url = served
    page.goto(f"{url}/runs/judged-run/label")
    page.fill("input[name=author]", "ann")
    for count in range(CONFIGS * QUESTIONS):
        question = page.locator("h1").inner_text()
        judge_correct = "Judge: correct" in page.locator("#verdict").inner_text()
        with page.expect_navigation():
            if judge_correct == person_says_correct(question):
                if count:  # the Agree button has the focus: Enter agrees
                    page.keyboard.press("Enter")
                else:
                    page.click("button[value=agree]")
            else:
                page.click("button[value=disagree]")
    assert page.locator("#queue-empty").is_visible()
    shown = page.locator("#agreement").inner_text()
    assert re.search(
        r"30 labels, accuracy [\d.]+%, Cohen's kappa -?[\d.]+ \[-?[\d.]+, [\d.]+\]", shown
    )
    # enough labels: only its kappa keeps the judge from being shown reliable
    assert "the judge is not shown to be reliable (kappa's lower bound below 0.6)" in shown
    assert "Labelled" in page.locator(".label-given").first.inner_text()
    stored = labels.load(engine)
    assert len(stored) == 30 and {lb.author for lb in stored} == {"ann"}
    # the labels are the person's view, whichever way each was given
    assert all(lb.correct == person_says_correct(lb.question_id) for lb in stored)


@needs_chromium
def test_a_label_needs_an_author_and_keeps_its_note(page, served):
    engine, url = served
    page.goto(f"{url}/runs/judged-run/label")
    page.click("button[value=correct]")  # the browser refuses: the name is required
    assert labels.load(engine) == []
    page.fill("input[name=author]", "bob")
    page.fill("input[name=note]", "the docs say 8443")
    with page.expect_navigation():
        page.click("button[value=incorrect]")
    [stored] = labels.load(engine)
    assert (stored.kind, stored.correct, stored.note) == ("incorrect", False, "the docs say 8443")
    # the next page remembers the name and shows the agreement so far
    assert page.locator("input[name=author]").input_value() == "bob"
    assert "1 labels" in page.locator("#agreement").inner_text()
