"""The leaderboard: intervals, the tie with the best, costs, breakdowns, failures, exports."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml
from builders import (
    SPACE,
    halved_board,
    make_answers,
    make_board,
    make_scores,
    make_testset,
    one_pdf_board,
)

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table, settings_of, write_table
from ragsweep.evaluation.clusters import SECTION_CHARS
from ragsweep.evaluation.leaderboard import build_board, failure_reason, per_question
from ragsweep.reporting.exports import best_spec, render
from ragsweep.reporting.report import judge_warning, render_html, render_markdown, statistics_lines
from ragsweep.sweep.space import SearchSpace, configs_table


def scores_matrix(seed=0, questions=80):
    """Four configurations: a strong one, one a hair behind, one identical to it, a weak one."""
    rng = np.random.default_rng(seed)
    strong = (rng.random(questions) < 0.8).astype(float)
    close = strong.copy()
    close[:2] = 0.0
    weak = (rng.random(questions) < 0.3).astype(float)
    return np.vstack([strong, close, strong, weak])


def test_every_metric_has_a_mean_inside_its_interval():
    board = make_board(scores_matrix()).leaderboard
    # (faithfulness is not measured with extractive answers: tests/test_judge_failures.py)
    for m in ("answer_correctness", "context_correctness", "document_recall"):
        low, mean, high = (board[c].to_numpy() for c in (f"{m}_low", m, f"{m}_high"))
        assert np.all(low <= mean) and np.all(mean <= high)
    assert np.all(board["answer_correctness_high"].to_numpy() > board["answer_correctness_low"])


def test_the_close_and_identical_configurations_tie_with_the_best_the_weak_one_does_not():
    board = make_board(scores_matrix()).leaderboard.to_pylist()
    means = [r["answer_correctness"] for r in board]
    assert means == sorted(means, reverse=True)
    assert [r["tied_with_best"] for r in board] == [True, True, True, False]
    assert board[0]["p_value"] is None
    assert board[-1]["p_value"] < 0.001


def test_figures_are_reproducible_with_the_fixed_seed():
    first = make_board(scores_matrix()).leaderboard
    assert first.equals(make_board(scores_matrix()).leaderboard)


def test_context_size_is_always_a_cost_and_llm_costs_flow_through_when_recorded():
    values = scores_matrix(questions=20)
    plain = make_board(values).leaderboard
    assert plain["latency_p50_s"].null_count == plain.num_rows
    assert plain["prompt_tokens"].null_count == plain.num_rows
    assert all(c > 0 for c in plain["context_chars"].to_pylist())

    n = values.size
    latencies = [float(i % 20 + 1) for i in range(n)]  # 1..20 s per configuration
    board = make_board(
        values, latency_s=latencies, prompt_tokens=[100] * n, llm_calls=[2] * n
    ).leaderboard.to_pylist()
    assert {r["latency_p50_s"] for r in board} == {10.5}
    assert [r["latency_p95_s"] for r in board] == pytest.approx([19.05] * 4)
    assert {r["prompt_tokens"] for r in board} == {2000}
    assert {r["llm_calls"] for r in board} == {40}
    assert {r["completion_tokens"] for r in board} == {None}


def test_breakdown_counts_questions_per_topic_and_type():
    board = make_board(scores_matrix(questions=30))
    rows = board.breakdown.to_pylist()
    best = board.leaderboard["config_id"][0].as_py()
    by_topic = {
        r["value"]: r["questions"]
        for r in rows
        if r["config_id"] == best and r["dimension"] == "topic"
    }
    assert by_topic == {"API": 10, "Backup": 10, "Install": 10}
    types = {r["value"] for r in rows if r["dimension"] == "question_type"}
    assert types == {"simple", "complex"}


def test_failures_list_the_best_configurations_wrong_answers_with_their_reason():
    values = scores_matrix(questions=20)
    board = make_board(values)
    failed = board.failures.to_pylist()
    assert len(failed) == int((values[0] == 0).sum())
    assert {f["config_id"] for f in failed} == {board.leaderboard["config_id"][0].as_py()}
    first = failed[0]
    assert first["question"].startswith("What about")
    assert first["reference_answer"].startswith("the answer to")
    assert "no retrieved chunk comes from a reference document" in first["reason"]


def errors_board():
    """``scores_matrix`` with failed answers: 3 of 20 for the strong configuration and its
    twin (15%: flagged), 2 for the close one (10%: not flagged), none for the weak one."""
    values = scores_matrix(questions=20)
    failed = {0: 3, 1: 2, 2: 3, 3: 0}
    errors = [
        f"HTTP 400 after 1 call(s): context of config {c} too long" if q < failed[c] else None
        for c in range(4)
        for q in range(20)
    ]
    return make_board(values, answer_error=errors)


def test_failed_answers_are_counted_per_configuration_and_flagged_above_a_tenth():
    board = errors_board()
    rows = {r["config_id"]: r for r in board.leaderboard.to_pylist()}
    ids = [c["config_id"] for c in SPACE.all_configs()[:4]]
    assert [rows[c]["errors"] for c in ids] == [3, 2, 3, 0]
    assert [rows[c]["errors_flagged"] for c in ids] == [True, False, True, False]
    results = board.results.filter(pc.equal(board.results["config_id"], ids[3]))
    assert results["answer_error"].null_count == 20
    plain = make_board(scores_matrix(questions=20)).leaderboard
    assert set(plain["errors"].to_pylist()) == {0} and not any(plain["errors_flagged"].to_pylist())


def test_failures_say_the_answer_failed_and_carry_the_error():
    board = errors_board()
    failed = [f for f in board.failures.to_pylist() if f["answer_error"]]
    assert len(failed) == 3 and all(f["question_id"] < "q003" for f in failed)
    for f in failed:
        assert f"answer failed: {f['answer_error']}" in f["reason"]
        assert "reference answer's words" not in f["reason"]


def test_a_failure_reason_names_the_failed_answer_or_the_unreadable_verdict_not_a_verdict():
    failed = {"correctness": 0.0, "correctness_reason": "answer failed: HTTP 400"}
    row = {**failed, "answer_error": "HTTP 400", "judge_error": "not judged: the answer failed"}
    assert failure_reason(row) == "answer failed: HTTP 400"
    unread = {"correctness": 0.0, "correctness_reason": "verdict unreadable: x", "judge_error": "x"}
    assert failure_reason(unread) == "verdict unreadable: x"
    wrong = {"correctness": 0.0, "correctness_reason": "Says 8443.", "judge_error": None}
    assert failure_reason(wrong) == "judged wrong: Says 8443."


def test_the_terminal_table_shows_errors_only_when_there_are_some_and_marks_the_flagged():
    text = render(errors_board().leaderboard)
    header = text.splitlines()[0]
    assert header.split()[-1] == "errors"
    rows = {line.split()[-1] for line in text.splitlines()[2:6]}
    assert rows == {"!", "2", "0"}
    assert "! : errors on more than 10% of the configuration's answered questions" in text
    markdown = render(errors_board().leaderboard, "markdown")
    assert "| errors |" in markdown and "| 3 ! |" in markdown
    plain = render(make_board(scores_matrix()).leaderboard)
    assert "errors" not in plain


def test_scores_without_answers_are_an_error():
    ids = [c["config_id"] for c in SPACE.all_configs()[:1]]
    scores = make_scores(ids, ["q1", "q2"], np.ones((1, 2)))
    with pytest.raises(ValueError, match="no answer"):
        per_question(scores, make_answers(ids, ["q1"]), make_testset(["q1", "q2"]))


def test_leaderboard_round_trips_as_an_artifact_with_its_settings(tmp_path):
    board = make_board(scores_matrix()).leaderboard
    path = write_table(board, tmp_path / "lb.arrow", "leaderboard")
    again = read_table(path, "leaderboard")
    assert settings_of(again)["optimization_metric"] == "answer_correctness"
    assert again.drop(["rank"]).equals(board.drop(["rank"]).cast(again.drop(["rank"]).schema))


def test_terminal_table_shows_the_interval_and_marks_the_tie():
    text = render(make_board(scores_matrix()).leaderboard, top=3)
    header, rule, first, *rest = text.splitlines()
    assert "answer correctness [95% CI]" in header
    assert first.split()[:2] == ["1", "="]
    assert "[" in first and "]" in first
    assert "... 1 more" in text


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown"])
def test_other_formats_hold_every_row(fmt):
    board = make_board(scores_matrix()).leaderboard
    text = render(board, fmt)
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["rank"] for r in rows] == ["1", "2", "3", "4"]
        assert "answer_correctness_low" in rows[0]
    elif fmt == "json":
        rows = json.loads(text)
        assert [r["rank"] for r in rows] == [1, 2, 3, 4]
        assert rows[0]["p_value"] is None
    else:
        lines = text.splitlines()
        assert lines[1].startswith("| ---")
        assert len(lines) == 2 + 4


def test_sort_by_a_cost_puts_the_cheapest_first_and_unknown_columns_are_refused():
    board = make_board(scores_matrix()).leaderboard
    rows = json.loads(render(board, "json", sort="context_chars"))
    chars = [r["context_chars"] for r in rows]
    assert chars == sorted(chars)
    with pytest.raises(RagsweepError, match="--sort: unknown column 'speed'"):
        render(board, sort="speed")
    with pytest.raises(RagsweepError, match="--format"):
        render(board, "xml")


def test_best_spec_is_a_search_space_that_reproduces_exactly_the_winner():
    board = make_board(scores_matrix()).leaderboard
    spec = best_spec(board)
    assert spec.startswith("# best configuration: ")
    space = SearchSpace.from_dict(yaml.safe_load(spec))
    [config] = space.all_configs()
    assert config["config_id"] == board["config_id"][0].as_py()


def test_best_of_an_empty_leaderboard_is_a_clear_error():
    empty = make_board(scores_matrix()).leaderboard.slice(0, 0)
    with pytest.raises(RagsweepError, match="empty"):
        best_spec(empty)


def test_pa_nulls_in_a_metric_are_left_out_of_its_mean():
    values = scores_matrix(questions=10)
    values[0, :5] = np.nan  # e.g. judge failures
    board = make_board(values).leaderboard.to_pylist()
    row = next(r for r in board if r["config_id"] == SPACE.all_configs()[0]["config_id"])
    assert row["answer_correctness"] == pytest.approx(np.nanmean(values[0]))
    assert isinstance(pa.scalar(row["answer_correctness"]).as_py(), float)


def test_results_keep_each_retrieved_chunks_span_and_export_it_to_csv(tmp_path):
    from ragsweep.reporting.exports import export

    config_ids = [c["config_id"] for c in SPACE.all_configs()[:2]]
    question_ids = [f"q{i:03d}" for i in range(4)]
    answers = make_answers(config_ids, question_ids)
    spans = [
        {"doc_id": "doc0.md", "start": 3, "end": 9},
        {"doc_id": "doc1.md", "start": 0, "end": 4},
    ]
    column = answers.schema.get_field_index("retrieved_spans")
    kind = answers.schema.field(column).type
    answers = answers.set_column(
        column, "retrieved_spans", pa.array([spans] * answers.num_rows, kind)
    )
    scores = make_scores(config_ids, question_ids, np.ones((2, 4)))
    results = per_question(scores, answers, make_testset(question_ids))
    assert results["retrieved_spans"].to_pylist() == [spans] * 8
    write_table(results, tmp_path / "results.arrow", "results")
    (tmp_path / "out").mkdir()
    export(tmp_path / "results.arrow", tmp_path / "out" / "results", "results")
    assert "doc0.md:3-9; doc1.md:0-4" in (tmp_path / "out" / "results.csv").read_text()


def test_one_pdf_is_clustered_by_section_with_intervals_of_width_and_a_verdict():
    rng = np.random.default_rng(5)
    strong = (rng.random(48) < 0.9).astype(float)
    weak = (rng.random(48) < 0.35).astype(float)
    board = one_pdf_board(np.vstack([strong, strong, weak]))
    lb = board.leaderboard.to_pylist()
    assert all(r["answer_correctness_high"] > r["answer_correctness_low"] for r in lb)
    assert [r["tied_with_best"] for r in lb] == [True, True, False]
    record = settings_of(board.leaderboard)["clusters"]
    assert record["unit"] == "section" and record["count"] == 12 and record["questions"] == 48
    assert set(board.results["cluster"].to_pylist()) == {
        f"manual.pdf@{s * SECTION_CHARS}" for s in range(12)
    }
    lines = statistics_lines(board.leaderboard)
    assert lines[0] == (
        "Intervals and tests resample 12 document sections of 4000 characters (48 questions in "
        "all): they describe this document only, for questions like these."
    )
    # one PDF cannot give intervals for documents like these: said, with the document count
    assert [line[:52] for line in lines if line.startswith("warning")] == [
        "warning: the questions come from 1 document, too few"
    ]


def test_a_perfect_score_on_8_questions_has_an_interval_below_1():
    board = make_board(np.ones((2, 8)))
    lb = board.leaderboard.to_pylist()
    assert lb[0]["answer_correctness"] == 1.0
    assert lb[0]["answer_correctness_low"] < 0.7 and lb[0]["answer_correctness_high"] == 1.0


def test_a_tiny_test_set_warns_in_one_line_and_cannot_call_a_configuration_worse():
    board = make_board(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    lb = board.leaderboard.to_pylist()
    assert lb[1]["p_value"] is None and lb[1]["tied_with_best"]  # 3 clusters: no verdict
    lines = statistics_lines(board.leaderboard)
    warnings = [line for line in lines if line.startswith("warning: only 3 questions")]
    assert len(warnings) == 1
    assert any("too few clusters with the best for the test to reach 5%" in x for x in lines)
    assert "warning: only 3 questions" in render_markdown(board)
    assert "warning: only 3 questions" in render_html(board)


def test_an_eliminated_configuration_is_compared_with_the_leader_on_the_questions_both_answered():
    # the first 30 questions (round 0) were hard for everyone: the leader scored 0.1 there
    # and 1 on the rest; the dropped configuration matched it on the questions both answered
    leader = np.r_[np.tile([1.0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 3), np.ones(50)]
    board = halved_board(leader, leader.copy(), asked=30)
    lb = board.leaderboard.to_pylist()
    assert lb[1]["eliminated"] and lb[1]["round"] == 0 and not lb[0]["eliminated"]
    assert lb[1]["questions"] == 30 and lb[1]["answer_correctness"] == pytest.approx(0.1)
    assert lb[1]["tied_with_best"] and lb[1]["p_value"] >= 0.05  # unpaired it looked far worse
    assert "out after round 1" in render(board.leaderboard)
    # a dropped configuration truly worse on the shared questions is still called worse
    worse = halved_board(np.ones(80), np.zeros(80), asked=30).leaderboard.to_pylist()
    assert worse[1]["p_value"] < 0.05 and not worse[1]["tied_with_best"]


def test_a_verdict_the_judge_could_not_give_is_left_out_and_counted_against_the_judge():
    values = scores_matrix(questions=40)
    configs = SPACE.all_configs()[:4]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(40)]
    scores = make_scores(ids, questions, values)
    correctness = values.ravel().copy()
    unread = np.zeros(correctness.size, dtype=bool)
    unread[[0, 1, 2]] = True  # the strong configuration's first three verdicts
    correctness[unread] = np.nan
    errors = ["judge reply unreadable after 2 corrective retries" if u else None for u in unread]
    for name, column in (
        ("correctness", pa.array(correctness, pa.float64(), mask=unread)),
        ("judge_error", pa.array(errors, pa.string())),
    ):
        scores = scores.set_column(scores.schema.get_field_index(name), name, column)
    answers = make_answers(ids, questions)
    board = build_board(scores, answers, make_testset(questions), configs_table(configs), "auto")
    rows = {r["config_id"]: r for r in board.leaderboard.to_pylist()}
    assert settings_of(board.leaderboard)["optimization_metric"] == "correctness"
    assert rows[ids[0]]["questions"] == 37 and rows[ids[0]]["judge_errors"] == 3
    assert rows[ids[0]]["correctness"] == pytest.approx(np.mean(values[0, 3:]))
    assert [rows[c]["judge_errors"] for c in ids[1:]] == [0, 0, 0]
    record = settings_of(board.leaderboard)["judge_unreadable"]
    assert record == {"answers": 160, "unreadable": 3}
    assert judge_warning(settings_of(board.leaderboard)) is None  # 1.9%: under 5%


def test_a_judge_unreadable_on_more_than_5_percent_of_answers_is_said():
    line = judge_warning({"judge_unreadable": {"answers": 200, "unreadable": 14}})
    assert line.startswith("warning: the judge's verdict could not be read on 7.0%")
    assert judge_warning({"judge_unreadable": {"answers": 200, "unreadable": 10}}) is None


def test_the_terminal_leaderboard_of_a_tiny_set_says_its_warning_once(tmp_path):
    board = make_board(np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]))
    path = tmp_path / "leaderboard.arrow"
    write_table(board.leaderboard, path, "leaderboard")
    ragsweep = str(Path(sys.executable).parent / "ragsweep")
    shown = subprocess.run([ragsweep, "leaderboard", str(path)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("warning: only 3 questions") == 1
    assert "Intervals and tests resample 3 questions, each alone (3 questions" in shown.stdout
