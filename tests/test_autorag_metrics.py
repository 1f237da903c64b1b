"""Red Hat AutoRAG's answer_relevance and overall_score, as ai4rag defines them: scored when
a run ranks by one, against the scripted judge; and both as --optimization-metric end to end."""

import csv
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table, settings_of
from ragsweep.evaluation.judge import parse_relevance
from ragsweep.evaluation.leaderboard import resolve_metric
from ragsweep.evaluation.scoring import OVERALL_PARTS, score_answers
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.steps import plan_evaluation

ROOT = Path(__file__).resolve().parent.parent
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
JUDGE = LLMSettings(judge="judge", backoff_s=0.01)
ANSWERS = pa.table(
    {
        "config_id": ["c1", "c1", "c2", "c2"],
        "question_id": ["q1", "q2", "q1", "q2"],
        "retrieved_doc_ids": [["a.md"], ["b.md"], ["b.md"], ["a.md"]],
        "context": ["The console uses port 9000.", "Backups: 90 days.", "Backups: 90 days.", "x"],
        "answer": ["The console uses port 9000.", "", "Soup on Fridays.", None],
        "answer_error": [None, "HTTP 500 after 5 call(s): boom", None, None],
    }
)
TESTSET = pa.table(
    {
        "question_id": ["q1", "q2"],
        "question": ["Which port does the console use?", "How long are backups kept?"],
        "reference_answers": [["Port 9000."], ["90 days"]],
        "reference_doc_ids": [["a.md"], ["b.md"]],
    }
)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"score": 1, "rationale": "off topic"}', 0.0),
        ('{"score": 3, "rationale": "partly"}', 0.5),
        ('Here: {"score": 5, "rationale": "fully"}', 1.0),
    ],
)
def test_answer_relevance_scales_the_judges_1_to_5_to_0_to_1_as_ai4rag(reply, expected):
    assert parse_relevance(reply)[0] == expected


@pytest.mark.parametrize("reply", ['{"score": 0}', '{"score": 6}', '{"score": 3.5}', "4", "{}"])
def test_a_rating_outside_1_to_5_or_not_a_whole_number_is_unreadable(reply):
    with pytest.raises(ValueError, match="score"):
        parse_relevance(reply)


def test_autorag_scores_rate_relevance_and_average_the_four_metrics_per_question(llm_server):
    scores = score_answers(ANSWERS, TESTSET, JUDGE, autorag=True).to_pylist()
    relevance = [row["answer_relevance"] for row in scores]
    # the scripted judge: 1 + the question's words the answer holds (console, port), scaled
    assert relevance[0] == pytest.approx((1 + 2 - 1) / 4) and relevance[2] == 0.0
    assert relevance[1] == 0.0 and relevance[3] is None  # a failed answer; none given
    for row in scores[:3]:
        parts = [row[name] for name in OVERALL_PARTS if row[name] is not None]
        assert len(parts) == 4 and row["overall_score"] == pytest.approx(np.mean(parts))
    assert scores[3]["overall_score"] is None  # not answered
    rated = [r for r in llm_server.requests if "You rate how well" in r["messages"][0]["content"]]
    assert len(rated) == 2 and rated[0]["response_format"]["type"] == "json_schema"
    assert {"score", "rationale"} <= set(
        rated[0]["response_format"]["json_schema"]["schema"]["properties"]
    )


def test_without_a_judge_overall_score_averages_the_three_other_metrics(llm_server):
    plain = score_answers(ANSWERS, TESTSET, LLMSettings(), autorag=True).to_pylist()
    assert all(row["answer_relevance"] is None for row in plain)
    first = plain[0]
    three = [first["faithfulness"], first["answer_correctness"], first["context_correctness"]]
    assert first["overall_score"] == pytest.approx(np.mean(three))
    assert llm_server.chat_calls == 0


def test_other_metrics_score_neither_and_ask_the_judge_nothing_more(llm_server):
    scores = score_answers(ANSWERS, TESTSET, JUDGE)
    assert scores["answer_relevance"].null_count == scores["overall_score"].null_count == 4
    assert llm_server.chat_calls == 2  # the two verdicts


def test_answer_relevance_needs_a_judge():
    with pytest.raises(RagsweepError, match="'answer_relevance': needs a judge"):
        resolve_metric("answer_relevance", judged=False)
    assert resolve_metric("overall_score", judged=False) == "overall_score"


def test_a_run_ranks_by_overall_score_with_answer_relevance_beside_it(llm_server, tmp_path):
    runs = tmp_path / "runs"
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(ROOT / "examples" / "docs"), "--testset",
         str(ROOT / "examples" / "testset.jsonl"), "--max-questions", "8", "--llm", "answerer",
         "--judge", "judge", "--optimization-metric", "overall_score", "--chunk-sizes", "128",
         "--top-k", "1,3", "--search-types", "similarity", "--output", str(runs), "--no-store"],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    assert "ranked by overall_score" in result.stdout and "answer relevance" in result.stdout
    [run] = runs.iterdir()
    board = read_table(run / "leaderboard.arrow", "leaderboard")
    assert settings_of(board)["optimization_metric"] == "overall_score"
    overall = board["overall_score"].to_pylist()
    assert overall == sorted(overall, reverse=True) and None not in overall
    assert None not in board["answer_relevance"].to_pylist()
    assert all(0 <= v <= 1 for v in board["answer_relevance_low"].to_pylist())
    results = read_table(run / "results.arrow", "results")
    assert results["answer_relevance"].null_count == 0 and results.num_rows == 2 * 8
    shown = subprocess.run(
        [RAGSWEEP, "leaderboard", str(run), "--sort", "answer_relevance", "--format", "csv"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    rated = [float(row["answer_relevance"]) for row in rows]
    assert len(rated) == 2 and rated == sorted(rated, reverse=True)


def test_ranking_by_an_autorag_metric_plans_a_relevance_rating_beside_each_verdict():
    configs = [{"answerer": "extractive"}, {"answerer": "extractive"}]
    # extractive answers: the judge's verdict, and with autorag its rating, per answer
    assert plan_evaluation(configs, 10, JUDGE, 0)[1] == 2 * 10
    assert plan_evaluation(configs, 10, JUDGE, 0, autorag=True)[1] == 2 * 10 * 2
    assert plan_evaluation(configs, 10, JUDGE, 0, strategy="model", autorag=True)[1] == 40
    assert plan_evaluation(configs, 10, JUDGE, 19, strategy="model")[1] == 10  # one, unrated
    with pytest.raises(RagsweepError, match="max_llm_calls=19 is too few for the model-based"):
        plan_evaluation(configs, 10, JUDGE, 19, strategy="model", autorag=True)
