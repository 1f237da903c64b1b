"""Judges measured against people: `ragsweep judges compare` ranks judge models served by the
scripted OpenAI-compatible server by Cohen's kappa on labelled answers; the agreement goes
into the report and MLflow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from builders import make_board
from judged_runs import store_judged_run
from test_labels import ragsweep

from ragsweep.core.errors import RagsweepError
from ragsweep.curation import labels
from ragsweep.curation.judge_choice import choose_judge, compare_judges, read_labelled
from ragsweep.evaluation.agreement import agreement
from ragsweep.models.llm import LLMSettings
from ragsweep.reporting.judge_agreement import insert_agreement
from ragsweep.reporting.report import render_html
from ragsweep.store import database

# the truth of each labelled answer: answer i is correct when i is even
TRUTH = {f"Answer number {i}.": i % 2 == 0 for i in range(30)}


def by_model(request: dict) -> str:
    """``exact`` agrees with the labels, ``yes`` always says correct."""
    answer = request["messages"][1]["content"].split("Assistant's answer:\n")[1].strip()
    truth = TRUTH[answer]
    said = {"exact": truth, "yes": True}[request["model"]]
    return json.dumps({"correctness": said, "correctness_reason": "scripted"})


def labelled_file(path: Path, count: int = len(TRUTH)) -> Path:
    records = [
        {
            "label": "correct" if correct else "incorrect",
            "question_version": f"v{i}",
            "answer": answer,
            "judge_model": "yes",
            "judge_prompt": "p1",
            "author": "ann",
            "question": f"Question {i}?",
            "reference_answers": [f"Reference {i}."],
        }
        for i, (answer, correct) in enumerate(list(TRUTH.items())[:count])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_judges_are_ranked_by_kappa_on_the_labelled_answers(llm_server, tmp_path):
    llm_server.models += ["exact", "yes"]
    llm_server.responder = by_model
    ranked = compare_judges(["yes", "exact"], read_labelled(labelled_file(tmp_path / "l.jsonl")))
    assert [name for name, _ in ranked] == ["exact", "yes"]
    exact, yes = (m for _, m in ranked)
    assert exact.kappa == pytest.approx(1.0) and exact.reliable and exact.labels == 30
    assert yes.accuracy == 0.5 and yes.kappa == 0  # no better than chance
    # every verdict request carried the verdict's JSON schema
    assert {r["response_format"]["type"] for r in llm_server.requests} == {"json_schema"}


def test_judges_compare_command_prints_the_ranking(llm_server, tmp_path):
    llm_server.models += ["exact", "yes"]
    llm_server.responder = by_model
    path = labelled_file(tmp_path / "l.jsonl", count=6)
    code, out, err = ragsweep(
        "judges", "compare", "--judges", "yes,exact", "--labels", str(path),
        url=f"sqlite:///{tmp_path / 'results.db'}",
    )  # fmt: skip
    assert code == 0, err
    first, second = out.splitlines()[:2]
    assert first.startswith("1. exact: 6 labels, accuracy 100.0%, Cohen's kappa 1.00")
    assert second.startswith("2. yes:") and "not shown to be reliable" in second


def test_a_labelled_file_without_the_answer_text_names_the_record(tmp_path):
    path = tmp_path / "l.jsonl"
    record = {"label": "correct", "question_version": "v", "answer_hash": "h"}
    record |= {"judge_model": "j", "judge_prompt": "p", "author": "a", "question": "Q?"}
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(RagsweepError, match=r"l.jsonl:1: field 'answer' is missing"):
        read_labelled(path)


def test_the_agreement_goes_into_the_report_once(tmp_path):
    report = tmp_path / "report.html"
    report.write_text(render_html(make_board(np.ones((2, 10)))))
    few = agreement(np.array([True, False] * 5), np.array([True, False] * 5))
    insert_agreement(report, few, "judge-x (prompt abc)")
    insert_agreement(report, few, "judge-x (prompt abc)")  # again: replaced, not repeated
    html = report.read_text()
    assert html.count('id="agreement"') == 1
    assert "the judge is not shown to be reliable (fewer than 30 labels)" in html
    assert html.index('id="agreement"') < html.index("<h2>Leaderboard</h2>")


def test_the_agreement_is_logged_to_the_runs_mlflow_parent(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from ragsweep.reporting.tracking import log_agreement, log_sweep

    monkeypatch.chdir(tmp_path)  # the store's artifacts go to ./mlruns
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    engine = database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    store_judged_run(engine, "r1", np.ones((2, 20)))
    judged, _ = labels.judged_of(engine, "r1")
    for q in range(20):
        labels.label_result(engine, "r1", judged.config_id[0], f"q{q:03d}", "agree", "ann")
    measured, judge = labels.run_agreement(engine, "r1")
    parent = log_sweep(database.load_leaderboard(engine, "r1"), uri, "r1").run_id
    assert log_agreement(uri, "r1", measured, judge) == parent
    logged = MlflowClient(uri).get_run(parent).data
    assert logged.metrics["judge_labels"] == 20 and logged.metrics["judge_reliable"] == 0
    assert logged.metrics["judge_accuracy"] == 1.0
    assert logged.tags["ragsweep.judge_agreement_of"] == judge
    with pytest.raises(RagsweepError, match="no run of the sweep 'r9'"):
        log_agreement(uri, "r9", measured, judge)


def by_question(request: dict) -> str:
    """``exact`` calls the answers to even-numbered questions correct, as the labeller
    does; ``yes`` calls every answer correct."""
    number = int(re.search(r"What about q(\d+)\?", request["messages"][1]["content"])[1])
    said = number % 2 == 0 if request["model"] == "exact" else True
    return json.dumps({"correctness": said, "correctness_reason": "scripted"})


def test_the_run_judges_with_the_listed_judge_that_agrees_best_with_the_stored_labels(
    llm_server, tmp_path, monkeypatch
):
    llm_server.models += ["exact", "yes"]
    llm_server.responder = by_question
    settings = LLMSettings(judge="yes, exact")
    assert settings.judges() == ["yes", "exact"] and LLMSettings().judges() == []
    assert choose_judge(settings).judge == "yes"  # no store: the first named
    url = f"sqlite:///{tmp_path / 'results.db'}"
    engine = database.connect(url)
    store_judged_run(engine, "r1", np.ones((1, 12)))
    for q in range(12):
        kind = "correct" if q % 2 == 0 else "incorrect"
        labels.label_result(engine, "r1", labels.judged_of(engine, "r1")[0].config_id[0],
                            f"q{q:03d}", kind, "ann")  # fmt: skip
    monkeypatch.setenv(database.ENV, url)
    assert choose_judge(settings).judge == "exact"
    assert len(llm_server.requests) == 24  # each judge on each labelled answer once
