"""--strategy model: a surrogate of the retrieval metrics picks which configurations earn
LLM answers, at most --max-configs of them, over a space larger than that budget."""

import json
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from builders import unit_retrieval, units_testset
from test_pipeline import example_subset

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table, settings_of
from ragsweep.evaluation import halving, surrogate
from ragsweep.evaluation.halving import Round
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models.llm import LLMSettings
from ragsweep.reporting.report import render_markdown
from ragsweep.sweep import steps
from ragsweep.sweep.options import pipeline_arguments
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table

RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
QUESTIONS = 10
LAMBDAS = tuple(round(0.04 * i, 2) for i in range(1, 24))  # 23 MMR settings


def big_space() -> SearchSpace:
    """20 Top K x (similarity + 23 MMR + hybrid) = 500 configurations of one chunk set."""
    return SearchSpace(
        chunk_sizes=(64,),
        top_ks=tuple(range(1, 21)),
        search_types=("similarity", "mmr", "hybrid"),
        mmr_lambdas=LAMBDAS,
        answerers=("llm:answerer",),
    )


def hits(config_id: str) -> int:
    """How many of the questions a configuration retrieves the answer for: 0 to 10, spread
    over the space by its id (10 for about one configuration in eleven)."""
    return zlib.crc32(config_id.encode()) % (QUESTIONS + 1)


def near(config_id: str) -> int:
    """How many more questions it finds the right document for, but a passage of it that
    does not answer: its retrieval metrics see those as found, its answers do not."""
    return zlib.adler32(config_id.encode()) % (QUESTIONS - hits(config_id) + 1)


def synthetic_sweep() -> tuple[pa.Table, pa.Table, list[dict]]:
    """Every configuration of ``big_space`` retrieves, for each question it ``hits``, the
    passage that answers it; for the next ``near`` ones, a passage of the right document
    that does not; for the others, a passage of another document."""
    testset = units_testset(QUESTIONS)
    configs = big_space().all_configs()
    rows = []
    for config in configs:
        found, close = hits(config["config_id"]), near(config["config_id"])
        for i in range(QUESTIONS):
            if i < found:
                doc, passage = f"unit{i}.md", f"The code of unit {i} is zeta{i}."
            elif i < found + close:
                doc, passage = f"unit{i}.md", "Units are listed by number in this file."
            else:
                doc, passage = "other.md", "Nothing is said about that here."
            rows.append(unit_retrieval(config["config_id"], i, doc, passage))
    return pa.Table.from_pylist(rows), testset, configs


def answered_configs(table: pa.Table) -> set[str]:
    """The configurations with at least one answer."""
    return set(table.filter(pc.is_valid(table["answer"]))["config_id"].to_pylist())


@pytest.mark.parametrize("at_once", [1, 4], ids=["one at a time", "four at once"])
def test_the_model_search_answers_at_most_its_budget_and_says_why_each(llm_server, at_once):
    retrievals, testset, configs = synthetic_sweep()
    assert len(configs) >= 500
    settings = LLMSettings()
    answers, scores = steps.evaluate(
        retrievals, testset, configs, "answer_correctness", settings,
        strategy="model", max_configs=16, trials_at_once=at_once,
    )  # fmt: skip
    answered = answered_configs(answers)
    assert 0 < len(answered) <= 16
    assert llm_server.chat_calls <= 16 * QUESTIONS
    record = json.loads(scores.schema.metadata[b"ragsweep.evaluation"])
    assert record["strategy"] == "model-based search" and record["max_configs"] == 16
    trials = record["trials"]
    assert {t["config_id"] for t in trials} == answered
    # the first ones at random among the better half by retrieval; then the predictions
    assert trials[0]["reason"].startswith("drawn at random from the better half by retrieval")
    assert trials[0]["predicted"] is None
    assert all(t["predicted"] is not None for t in trials[surrogate.FIRST :])
    # the retrieval metrics lead it to a configuration that retrieves every answer
    best = max(trials, key=lambda t: t["score"])
    assert hits(best["config_id"]) == QUESTIONS and best["score"] == 1.0
    # every configuration keeps its retrieval metrics; only the answered have answers
    assert scores["context_correctness"].null_count == 0
    assert scores.num_rows == len(configs) * QUESTIONS
    board = build_board(scores, answers, testset, configs_table(configs), "answer_correctness")
    summary = render_markdown(board)
    assert "Model-based search (at most 16 configurations answered" in summary
    first = next(c["label"] for c in configs if c["config_id"] == trials[-1]["config_id"])
    assert f"{len(trials)}. {first}: predicted " in summary


def test_the_search_finds_the_best_from_free_metrics_within_few_answers():
    rng = np.random.default_rng(3)
    free = rng.random((300, 3))
    truth = 2 * free[:, 0] + free[:, 1]  # the third metric says nothing
    x, names = surrogate.features(free, ["a", "b", "c"])
    trials, observed = surrogate.search(x, names, 12, lambda batch: truth[batch], seed=1)
    assert len(trials) == len(observed) == 12
    assert len({t.config for t in trials}) == 12
    assert max(observed.values()) >= np.sort(truth)[-3]  # among the three best of 300


def test_trials_at_once_are_distinct_batches_that_still_find_the_best():
    rng = np.random.default_rng(3)
    free = rng.random((300, 3))
    truth = 2 * free[:, 0] + free[:, 1]
    x, names = surrogate.features(free, ["a", "b", "c"])
    batches: list[list[int]] = []

    def evaluate(batch: list[int]) -> np.ndarray:
        batches.append(batch)
        return truth[batch]

    trials, observed = surrogate.search(x, names, 14, evaluate, seed=1, at_once=4)
    assert [len(b) for b in batches] == [4, 4, 4, 2]  # the budget, never more
    assert [t.config for t in trials] == [i for b in batches for i in b]
    assert len(set(observed)) == 14  # no configuration twice, within a batch or across
    # after the first batch each batch is chosen by the surrogate, its later picks as if the
    # earlier ones scored their prediction: different configurations, not one guess repeated
    assert all(t.predicted is not None for t in trials[4:])
    assert max(observed.values()) >= np.sort(truth)[-3]  # among the three best of 300


def test_a_warm_start_is_not_answered_again_and_does_not_count_against_the_budget():
    free = np.linspace(0, 1, 50)[:, None]
    x, names = surrogate.features(free, ["a"])
    known = {49: 1.0, 48: 0.9, 10: 0.2, 0: 0.0}  # four: the surrogate fits from the start
    asked = []

    def answer(batch: list[int]) -> list[float]:
        asked.extend(batch)
        return [0.5] * len(batch)

    trials, observed = surrogate.search(x, names, 3, answer, 0, known)
    assert len(asked) == 3 and not set(asked) & set(known)
    assert all(t.predicted is not None for t in trials)
    assert len(observed) == 7


def test_a_configuration_without_a_score_is_not_tried_again():
    x, names = surrogate.features(np.arange(6.0)[:, None], ["a"])
    trials, observed = surrogate.search(x, names, 6, lambda b: [float("nan")] * len(b), 0)
    assert sorted(t.config for t in trials) == list(range(6)) and not observed


def test_features_leave_out_a_metric_without_spread_and_fill_a_missing_value():
    free = np.array([[1.0, 0.5, np.nan], [2.0, 0.5, np.nan], [np.nan, 0.5, np.nan]])
    x, names = surrogate.features(free, ["a", "b", "c"])
    assert names == ["a"] and x[:, 0].tolist() == pytest.approx([-1.2247, 1.2247, 0], abs=1e-4)


def test_halving_as_a_strategy_halves_even_without_a_budget():
    assert halving.plan(48, 64, 1, 0, halve=True) == halving.halving(48, 64, 5)
    assert halving.plan(4, 64, 1, 0, halve=True) == [Round(4, 16), Round(2, 32), Round(1, 64)]
    assert halving.plan(48, 64, 1, 0) == [Round(48, 64)]  # grid keeps its meaning


def test_the_model_plan_is_bounded_by_max_configs_and_by_the_llm_calls():
    configs = big_space().all_configs()
    judged = LLMSettings(judge="judge")
    assert steps.plan_model(configs, 10, judged, 0, 16) == (16, 16 * 10 * 2)
    assert steps.plan_model(configs, 10, judged, 100, 16) == (5, 100)
    with pytest.raises(RagsweepError, match="max_llm_calls=19 is too few for the model-based"):
        steps.plan_model(configs, 10, judged, 19, 16)


def test_max_configs_caps_the_grid_but_bounds_only_the_answered_with_the_model():
    space = big_space()
    with pytest.raises(RagsweepError, match="holds 500 configurations, more than the budget"):
        RunSettings(docs="d", testset="t", space=space, max_configs=16)
    settings = RunSettings(docs="d", testset="t", space=space, max_configs=16, strategy="model")
    assert pipeline_arguments(settings)["strategy"] == "model"
    with pytest.raises(RagsweepError, match="'best': expected one of grid, halving, model"):
        RunSettings(docs="d", testset="t", strategy="best")


def test_a_run_with_the_model_strategy_answers_16_of_500_configurations(llm_server, tmp_path):
    """The one kfp.local run: --strategy model --max-configs 16 over 500 configurations of
    the documents cited by 8 questions of the examples (the example subset), answered by the
    scripted LLM."""
    space = tmp_path / "space.yaml"
    space.write_text(
        "chunk_sizes: [128]\ntop_ks: [" + ", ".join(map(str, range(1, 21))) + "]\n"
        "search_types: [similarity, mmr, hybrid]\n"
        f"mmr_lambdas: [{', '.join(map(str, LAMBDAS))}]\nmmr_fetch_k: 20\n"
    )
    docs, testset = example_subset(tmp_path, questions=8)
    runs = tmp_path / "runs"
    result = subprocess.run(
        [
            RAGSWEEP, "run", "--docs", str(docs), "--testset", str(testset),
            "--space", str(space), "--llm", "answerer", "--strategy", "model",
            "--max-configs", "16", "--output", str(runs), "--no-store", "--patterns", "0",
        ],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    assert "Model-based search (at most 16 configurations answered" in result.stdout
    [run_dir] = runs.iterdir()
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    assert board.num_rows == 500
    results = read_table(run_dir / "results.arrow", "results")
    answered = answered_configs(results)
    trials = settings_of(board)["evaluation"]["trials"]
    assert len(answered) == len(trials) == 16
    assert {t["config_id"] for t in trials} == answered
    assert 0 < llm_server.chat_calls <= 16 * 8
    report = (run_dir / "report.html").read_text()
    assert "Tried: 1. " in report and "drawn at random from the better half by retrieval" in report
