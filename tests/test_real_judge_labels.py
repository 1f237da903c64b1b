"""A real judge measured against people: questions of the example test set on part of the
example docs, answered extractively and judged by SmolLM2-135M (the session fixture
``real_llm``), stored in a results database; 30 labels (``MIN_LABELS``, the fewest on which
a judge can be shown reliable: its verdict then rests on kappa, not on the count) entered on
the UI's labelling pages in Chromium; then the UI, its report and the run folder's report
show the judge's Cohen's kappa with its interval and that it is not shown to be reliable.
The answers are extractive (one passage each, to keep the judge's prompts short) so that the
real model is asked only for verdicts (30 distinct answers need 30 judgments, one call
each)."""

from __future__ import annotations

import json
import os
import re
import shutil
from html import unescape
from pathlib import Path

import httpx
import pytest
from conftest import needs_chromium, ragsweep_here
from test_labels import ragsweep
from ui_demo import serving_store

from ragsweep.core.schemas import read_table, settings_of
from ragsweep.curation import labels
from ragsweep.evaluation.agreement import MIN_LABELS
from ragsweep.evaluation.metrics import token_recall
from ragsweep.store import database

ROOT = Path(__file__).resolve().parent.parent
LABELS = MIN_LABELS  # 30: fewer would make the judge unreliable for their count alone
QUESTIONS = LABELS + 1  # a verdict the model could not give is not labelled: one to spare
FOLDERS = ("admin", "guides", "faq", "release-notes")  # of examples/docs: 43 questions
STATEMENT = re.compile(
    rf"{LABELS} labels, accuracy [\d.]+%, Cohen's kappa (-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]"
    r": the judge is not shown to be reliable \(kappa's lower bound below 0\.6\)"
)


@pytest.fixture(scope="module")
def judged_run(real_llm, tmp_path_factory, scripted_embedder):
    """The first QUESTIONS questions of examples/testset.jsonl on the FOLDERS of
    examples/docs, answered extractively, judged by the real model and stored: (run folder,
    store URL). The command runs in this process (its steps are processes of their own);
    the texts are embedded by the scripted endpoint, so that no step loads a model."""
    work = tmp_path_factory.mktemp("real-judge")
    docs = work / "docs"
    for folder in FOLDERS:
        shutil.copytree(ROOT / "examples" / "docs" / folder, docs / folder)
    items = [
        line
        for line in (ROOT / "examples" / "testset.jsonl").read_text().splitlines()
        if json.loads(line)["metadata"]["seed_document_id"].split("/")[0] in FOLDERS
    ]
    testset = work / "testset.jsonl"
    testset.write_text("\n".join(items[:QUESTIONS]) + "\n")
    url = f"sqlite:///{work / 'results.db'}"
    env = {
        **os.environ,
        "RAGSWEEP_LLM_BASE_URL": real_llm.url,
        "RAGSWEEP_CACHE_DIR": str(work / "cache"),
        database.ENV: url,
        "RAGSWEEP_EMBEDDING_BASE_URL": scripted_embedder.url,
    }
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(testset),
        "--judge", real_llm.model, "--max-tokens", "128", "--concurrency", "1",
        "--judge-timeout", "600", "--chunk-sizes", "128", "--top-k", "1",
        "--search-types", "similarity", "--embedding-models", "openai:embedder",
        "--output", str(work / "runs"), "--cache", str(work / "vectors"), "--patterns", "0",
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run] = (work / "runs").iterdir()
    return run, url


def person_says_correct(page) -> bool:
    """The labeller reads the references and the answer: correct when the answer holds
    most of a reference's words."""
    answer = page.locator("#answer").inner_text()
    references = page.locator("#references li.text").all_inner_texts()
    return any(token_recall(reference, answer) >= 0.5 for reference in references)


@needs_chromium
def test_thirty_ui_labels_show_the_real_judges_kappa_and_unreliability_in_ui_and_reports(
    page, judged_run
):
    run, url = judged_run
    settings = settings_of(read_table(run / "leaderboard.arrow", "leaderboard"))
    assert settings["judge"]["model"] == "smollm2"
    assert settings["judge_unreadable"]["unreadable"] <= QUESTIONS - LABELS
    engine = database.connect(url)
    with serving_store(engine, run.parent) as base:
        page.goto(f"{base}/runs/{run.name}/label")
        page.fill("input[name=author]", "ann")
        for _ in range(LABELS):
            judge_correct = "Judge: correct" in page.locator("#verdict").inner_text()
            agrees = judge_correct == person_says_correct(page)
            with page.expect_navigation():
                page.click(f"button[value={'agree' if agrees else 'disagree'}]")
        shown = page.locator("#agreement").inner_text()
        report = unescape(httpx.get(f"{base}/runs/{run.name}/report.html").text)
    stored = labels.load(engine)
    assert len(stored) == LABELS and {lb.judge_model for lb in stored} == {"smollm2"}
    # the UI: kappa with its interval, and the judge not shown to be reliable
    found = STATEMENT.search(shown)
    assert found, shown
    kappa, low, high = (float(v) for v in found.groups())
    assert low <= kappa <= high
    assert STATEMENT.search(report), "the UI's report lacks the judge's agreement"
    # the run folder's report, from the stored labels
    code, out, err = ragsweep(
        "labels", "agreement", run.name, "--report", str(run / "report.html"),
        url=url,
    )  # fmt: skip
    assert code == 0, err
    assert STATEMENT.search(out)
    assert STATEMENT.search(unescape((run / "report.html").read_text()))
    figures = labels.run_agreement(engine, run.name)[0]
    assert figures.labels == LABELS and figures.kappa == pytest.approx(kappa, abs=0.006)
    assert not figures.reliable
