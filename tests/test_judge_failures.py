"""Judge failures charged honestly (issue 35): a judged score ranks every configuration on
the questions all of them have a verdict for, the judge-error rate stands next to it, and a
metric that cannot tell configurations apart (faithfulness with extractive answers) is
neither offered to rank by nor shown as a figure."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from builders import SPACE, make_answers, make_board, make_scores, make_testset

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.reporting.exports import csv_text, render
from ragsweep.reporting.report import render_html
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table

JUDGE = {"model": "scripted-judge", "endpoint": "http://127.0.0.1/v1"}


def judged(verdicts: np.ndarray, space: SearchSpace = SPACE, metric: str = "correctness"):
    """A board whose judge gave ``verdicts`` (configs x questions; NaN: its reply could not
    be read, with the judge_error the judge step records then)."""
    configs = space.all_configs()[: len(verdicts)]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(np.shape(verdicts)[1])]
    flat = np.asarray(verdicts, float).ravel()
    scores = make_scores(ids, questions, np.nan_to_num(verdicts))
    for name, values in (
        ("correctness", pa.array(flat, mask=np.isnan(flat))),
        ("judge_error", pa.array([("no JSON" if np.isnan(v) else None) for v in flat])),
    ):
        scores = scores.set_column(scores.schema.get_field_index(name), name, values)
    scores = scores.replace_schema_metadata({"ragsweep.judge": json.dumps(JUDGE)})
    settings = RunSettings("docs", "testset.json", space, metric).record()
    testset = make_testset(questions)
    answers = make_answers(ids, questions)
    return build_board(scores, answers, testset, configs_table(configs), metric, settings=settings)


def tripping() -> np.ndarray:
    """40 questions: the first 20 easy, the last 20 hard. The first configuration is right on
    every easy one and 8 hard ones (0.70); the second on 18 easy ones, and the judge cannot
    read its verdict on any hard one: on its own judged questions it scores 0.90."""
    steady = np.r_[np.ones(20), np.ones(8), np.zeros(12)]
    tripped = np.r_[np.ones(18), np.zeros(2), np.full(20, np.nan)]
    return np.vstack([steady, tripped])


def test_a_configuration_the_judge_fails_more_is_not_ranked_on_its_easier_questions():
    board = judged(tripping()).leaderboard.to_pylist()
    ids = [c["config_id"] for c in SPACE.all_configs()[:2]]
    # on the 20 questions both have a verdict for: 1.00 against 0.90
    assert [r["config_id"] for r in board] == ids
    assert [r["questions"] for r in board] == [20, 20]
    assert [r["correctness"] for r in board] == [pytest.approx(1.0), pytest.approx(0.9)]
    assert [r["judge_errors"] for r in board] == [0, 20]
    assert [r["judge_error_rate"] for r in board] == [0.0, 0.5]


def test_the_judge_error_rate_stands_next_to_the_judged_score_in_every_output():
    board = judged(tripping())
    text = render(board.leaderboard)
    header = text.splitlines()[0]
    assert "correctness [95% CI]  judge errors" in header
    assert " 50.0%" in text.splitlines()[3] and "judge errors: the share" in text
    assert "judge_error_rate" in csv_text(board.leaderboard).splitlines()[0]
    html = render_html(board)
    assert "<th>judge errors</th>" in html and '<td class="num judge-errors">50.0%</td>' in html


def test_ranking_by_answer_correctness_puts_the_judge_errors_after_correctness():
    board = judged(tripping(), metric="answer_correctness").leaderboard
    header = render(board).splitlines()[0]
    assert "  correctness  judge errors" in header


def test_faithfulness_with_extractive_answers_is_refused_as_the_ranking_metric():
    with pytest.raises(RagsweepError, match="faithfulness: cannot rank these configurations"):
        RunSettings("docs", "testset.json", SPACE, "faithfulness")
    configs = SPACE.all_configs()[:2]
    ids = [c["config_id"] for c in configs]
    questions = ["q000", "q001"]
    with pytest.raises(RagsweepError, match="every configuration answers with extractive"):
        build_board(
            make_scores(ids, questions, np.ones((2, 2))),
            make_answers(ids, questions),
            make_testset(questions),
            configs_table(configs),
            "faithfulness",
        )


def test_the_cli_refuses_faithfulness_without_a_model_answerer_in_one_line(kb):
    from test_cli import assert_user_error, ragsweep

    _, docs, testset = kb
    ran = ragsweep("run", "--docs", str(docs), "--testset", str(testset), "--no-store",
                   "--metric", "faithfulness")  # fmt: skip
    assert_user_error(ran, "faithfulness: cannot rank these configurations", "copies the")


def test_faithfulness_with_extractive_answers_is_shown_as_not_measured():
    values = (np.random.default_rng(0).random((3, 20)) < 0.6).astype(float)
    board = make_board(values)
    assert board.leaderboard["faithfulness"].null_count == 3  # blank in the exports
    text = render(board.leaderboard)
    lines = text.splitlines()
    at = lines[0].index("faithfulness")
    assert all(line[at : at + 12].strip() == "n/a" for line in lines[2:5])
    assert "n/a : faithfulness not measured: every configuration answers with extractive" in text
    assert "n/a : faithfulness not measured" in render_html(board)


def test_faithfulness_with_a_model_answerer_is_measured_and_can_rank():
    space = SearchSpace(chunk_sizes=(64,), top_ks=(1, 3), answerers=("extractive", "llm:m"))
    values = (np.random.default_rng(0).random((3, 20)) < 0.6).astype(float)
    board = make_board(values, space, metric="faithfulness").leaderboard
    assert board["faithfulness"].to_pylist() == [1.0] * 3
    assert "not measured" not in render(board)
