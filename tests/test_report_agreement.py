"""A run stored where people already labelled answers it reproduces gets its judge's
agreement with them in its report when it is stored (``ragsweep run`` and ``ragsweep runs
import`` both store through ``publish_folder``), with no ``ragsweep labels agreement``
call; a run none of whose answers is labelled keeps its report as rendered. The UI's report
of a stored run shows the agreement with the labels stored by the time it is read."""

import shutil
from html import unescape

import httpx
import numpy as np
from judged_runs import store_judged_run, write_judged_folder
from ui_demo import serving_store

from ragsweep.curation import labels
from ragsweep.reporting.judge_agreement import with_stored_labels
from ragsweep.runner.closing import import_folder, publish_folder
from ragsweep.store import database

QUESTIONS = 12
VERDICTS = np.array([[1.0, 0.0] * (QUESTIONS // 2)])  # the judge: every other answer correct


def test_a_stored_run_whose_answers_are_labelled_shows_the_agreement_in_its_report(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    first = write_judged_folder(tmp_path / "runs" / "20261201-020000-000001", VERDICTS)
    rendered = (first / "report.html").read_text()
    assert publish_folder(first, url, failed={}) is True
    assert (first / "report.html").read_text() == rendered  # nothing labelled yet

    engine = database.connect(url)
    judged, _ = labels.judged_of(engine, first.name)
    for question in judged.question_id:  # people say every answer is correct
        labels.label_result(engine, first.name, judged.config_id[0], question, "correct", "ann")

    # the next night reproduces the same answers: stored, its report has the agreement
    again = tmp_path / "runs" / "20261202-020000-000001"
    shutil.copytree(first, again)
    assert import_folder(again, url) == "succeeded"
    html = unescape((again / "report.html").read_text())
    assert "<h2>The judge against people</h2>" in html and html.count('id="agreement"') == 1
    assert (
        f"{QUESTIONS} labels, accuracy 50.0%, Cohen's kappa 0.00 [0.00, 0.00]: the judge is not "
        "shown to be reliable (fewer than 30 labels, kappa's lower bound below 0.6)"
    ) in html
    assert html.index('id="agreement"') < html.index("<h2>Leaderboard</h2>")


def test_the_uis_report_shows_the_agreement_once_answers_are_labelled(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    store_judged_run(engine, "night", VERDICTS)
    with serving_store(engine, tmp_path / "runs") as base:
        before = httpx.get(f"{base}/runs/night/report.html").text
        judged, _ = labels.judged_of(engine, "night")
        for question in judged.question_id:
            labels.label_result(engine, "night", judged.config_id[0], question, "agree", "ann")
        after = unescape(httpx.get(f"{base}/runs/night/report.html").text)
    assert 'id="agreement"' not in before and "<h2>Leaderboard</h2>" in before
    assert f"{QUESTIONS} labels, accuracy 100.0%, Cohen's kappa 1.00 [1.00, 1.00]" in after
    assert after.count('id="agreement"') == 1


def test_the_rank_steps_report_has_the_agreement_with_labels_the_store_already_holds(
    tmp_path, caplog
):
    """On a cluster the report is rendered by the rank step, before the run is stored: it
    reads the labels of the answers the run reproduced from the store the step is given."""
    url = f"sqlite:///{tmp_path / 'results.db'}"
    engine = database.connect(url)
    store_judged_run(engine, "last-night", VERDICTS)
    board = database.load_leaderboard(engine, "last-night")
    results = database.load_results(engine, "last-night")  # tonight's answers: the same
    html = "<h1>Report</h1>\n<h2>Leaderboard</h2>"
    assert with_stored_labels(html, url, board, results) == html  # nothing labelled yet

    judged, _ = labels.judged_of(engine, "last-night")
    for question in judged.question_id:
        labels.label_result(engine, "last-night", judged.config_id[0], question, "agree", "ann")
    shown = unescape(with_stored_labels(html, url, board, results))
    assert f"{QUESTIONS} labels, accuracy 100.0%, Cohen's kappa 1.00" in shown
    assert shown.index('id="agreement"') < shown.index("<h2>Leaderboard</h2>")

    dead = "postgresql+psycopg://u:secret-pw@127.0.0.1:9/x"  # nothing listens on port 9
    assert with_stored_labels(html, dead, board, results) == html  # the report, whole
    assert "lacks the judge's agreement" in caplog.text and "secret-pw" not in caplog.text
