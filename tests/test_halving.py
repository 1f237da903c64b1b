import collections
import json
import random

import numpy as np
import pyarrow as pa
import pytest
from builders import units_testset

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation import halving, statistics
from ragsweep.evaluation.halving import Round
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table
from ragsweep.sweep.steps import evaluate


def test_the_full_grid_when_there_is_no_budget_no_llm_or_enough():
    assert halving.plan(48, 64, 2, 0) == [Round(48, 64)]
    assert halving.plan(48, 64, 0, 10) == [Round(48, 64)]  # extractive, no judge: free
    assert halving.plan(48, 64, 2, 48 * 64 * 2) == [Round(48, 64)]


def test_halving_starts_from_the_largest_sample_the_budget_affords():
    rounds = halving.plan(32, 40, 1, 400)
    assert rounds == [Round(32, 5), Round(16, 10), Round(8, 20), Round(4, 40)]
    assert halving.cost(rounds, 1) == 32 * 5 + 16 * 5 + 8 * 10 + 4 * 20 == 400
    assert halving.cost(halving.halving(32, 40, 6), 1) > 400  # one more question: too dear
    rounds = halving.plan(48, 64, 2, 2000)
    assert (
        halving.cost(rounds, 2)
        <= 2000
        < halving.cost(halving.halving(48, 64, 1 + rounds[0].questions), 2)
    )
    assert rounds[-1].questions == 64 and rounds[0].configs == 48
    assert [r.configs for r in rounds] == sorted((r.configs for r in rounds), reverse=True)


def test_a_single_survivor_still_answers_every_question():
    assert halving.halving(4, 100, 10) == [
        Round(4, 10),
        Round(2, 20),
        Round(1, 40),
        Round(1, 80),
        Round(1, 100),
    ]


def test_a_budget_too_small_for_any_plan_says_what_it_needs():
    with pytest.raises(RagsweepError) as error:
        halving.plan(100, 500, 2, 1000)
    message = str(error.value)
    assert "max_llm_calls=1000 is too few for 100 configurations x 500 questions" in message
    assert "the full grid needs 100000" in message
    assert f"at least {halving.cost(halving.halving(100, 500, 5), 2)}" in message


def test_promotion_keeps_the_best_means_and_missing_scores_last():
    scores = np.array([[1, 0, np.nan], [1, 1, 1], [np.nan, np.nan, np.nan], [1, 0, 0.0]])
    for seed in range(20):
        kept = halving.promote([10, 11, 12, 13], scores, 3, np.random.default_rng(seed))
        assert kept == [11, 10, 13]


def test_ties_are_broken_by_the_seed_not_by_name_or_position():
    """Eight configurations with equal scores on every question: which four go on depends
    on the seed only (promotion sees no label, and the grid's order, which follows the
    labels, gives no edge); across 400 seeds each is promoted about half the time."""
    rounds = [Round(8, 5), Round(4, 10)]

    def tied(alive: list[int], first: int, last: int) -> np.ndarray:
        return np.ones((len(alive), last - first))

    promoted, sets = collections.Counter(), set()
    for seed in range(400):
        reached = halving.run(rounds, 8, tied, seed)
        assert halving.run(rounds, 8, tied, seed) == reached  # a rerun promotes the same
        survivors = tuple(i for i, r in enumerate(reached) if r == 1)
        assert len(survivors) == 4
        promoted.update(survivors)
        sets.add(survivors)
    # each is promoted with probability 1/2: 200 of 400 expected, sd 10
    assert all(160 <= promoted[i] <= 240 for i in range(8)), promoted
    assert len(sets) > 50  # of the 70 possible sets of four


def test_float_noise_in_equal_means_is_still_a_tie():
    values = [0.1, 0.2, 0.7, 0.3, 0.11]
    scores = np.array([values, [0.1, 0.2, 0.11, 0.7, 0.3]])  # the same values, reordered
    assert statistics.means(scores)[0] != statistics.means(scores)[1]  # by one ulp
    first = {halving.promote([0, 1], scores, 1, np.random.default_rng(s))[0] for s in range(40)}
    assert first == {0, 1}


def test_rounds_evaluate_only_new_questions_and_promote_the_true_best():
    rates = np.linspace(0.3, 0.7, 64)
    rates[17] = 0.9  # the known winner
    truth = (np.random.default_rng(11).random((64, 200)) < rates[:, None]).astype(float)
    asked = []

    def evaluate(configs: list[int], first: int, last: int) -> np.ndarray:
        asked.extend((c, q) for c in configs for q in range(first, last))
        return truth[np.ix_(configs, range(first, last))]

    rounds = halving.plan(64, 200, 1, 2000)
    reached = halving.run(rounds, 64, evaluate, seed=5)
    assert len(asked) == len(set(asked)) == halving.cost(rounds, 1) <= 2000
    finalists = [i for i, r in enumerate(reached) if r == len(rounds) - 1]
    assert 17 in finalists and max(finalists, key=lambda i: truth[i].mean()) == 17
    assert [reached.count(r) for r in range(len(rounds))] == [
        a.configs - b.configs for a, b in zip(rounds, rounds[1:] + [Round(0, 0)], strict=True)
    ]


QUESTIONS = 40
SPACE = SearchSpace(
    chunk_sizes=(64, 128),
    chunk_overlaps=(0, 8),
    top_ks=(1, 2, 3, 4),
    search_types=("similarity", "mmr"),
)


def synthetic(winner: int) -> tuple[pa.Table, pa.Table]:
    """32 configurations whose retrievals hold the answer with a known rate each: 0.95 for
    ``winner``, 0.3 to 0.65 for the others; what each retrieves is drawn with a fixed seed."""
    testset = units_testset(QUESTIONS)
    configs = SPACE.all_configs()
    rng = random.Random(7)
    rows = []
    for c, config in enumerate(configs):
        rate = 0.95 if c == winner else 0.3 + 0.35 * c / len(configs)
        for i in range(QUESTIONS):
            hit = rng.random() < rate
            passage = f"The code of unit {i} is zeta{i}." if hit else "Units have codes."
            rows.append(
                {
                    "config_id": config["config_id"],
                    "question_id": f"q{i:02}",
                    "retrieved_chunk_ids": [0],
                    "retrieved_doc_ids": [f"unit{i}.md" if hit else "other.md"],
                    "passages": [passage],
                }
            )
    return pa.Table.from_pylist(rows), testset


def test_successive_halving_promotes_the_true_best_within_the_budget(llm_server):
    winner = 5
    retrievals, testset = synthetic(winner)
    configs = SPACE.all_configs()
    judge = LLMSettings(judge="judge", concurrency=4)
    answers, scores = evaluate(
        retrievals, testset, configs, "auto", judge, max_llm_calls=400, seed=3
    )

    record = json.loads(scores.schema.metadata[b"ragsweep.evaluation"])
    assert record["strategy"] == "successive halving" and record["promoted_by"] == "correctness"
    assert record["rounds"] == [
        {"configs": 32, "questions": 5},
        {"configs": 16, "questions": 10},
        {"configs": 8, "questions": 20},
        {"configs": 4, "questions": 40},
    ]
    assert llm_server.chat_calls == record["llm_calls"] <= record["planned_llm_calls"] == 400
    # retrieval metrics on every question of every configuration; answers only where asked
    assert scores.num_rows == answers.num_rows == 32 * QUESTIONS
    assert scores["context_correctness"].null_count == 0
    assert answers["answer"].null_count == 32 * QUESTIONS - 400

    board = build_board(scores, answers, testset, configs_table(configs), "auto").leaderboard
    top = board.slice(0, 1).to_pylist()[0]
    assert top["config_id"] == configs[winner]["config_id"]
    assert top["round"] == 3 and top["questions"] == QUESTIONS
    assert board["round"].to_pylist() == sorted(board["round"].to_pylist(), reverse=True)
    assert sorted(board["questions"].to_pylist()) == [5] * 16 + [10] * 8 + [20] * 4 + [40] * 4


def test_without_a_budget_the_same_case_answers_the_whole_grid(llm_server):
    retrievals, testset = synthetic(winner=5)
    judge = LLMSettings(judge="judge", concurrency=4)
    answers, scores = evaluate(retrievals, testset, SPACE.all_configs(), "auto", judge)
    record = json.loads(scores.schema.metadata[b"ragsweep.evaluation"])
    assert record["strategy"] == "full grid" and answers["answer"].null_count == 0
    assert set(answers["round"].to_pylist()) == {0}
    assert scores["correctness"].null_count == 0


def test_a_budget_too_small_stops_before_any_call(llm_server):
    retrievals, testset = synthetic(winner=5)
    judge = LLMSettings(judge="judge")
    with pytest.raises(RagsweepError, match="max_llm_calls=100 is too few for 32 configurations"):
        evaluate(retrievals, testset, SPACE.all_configs(), "auto", judge, max_llm_calls=100)
    assert llm_server.chat_calls == 0


def test_a_negative_budget_is_refused():
    with pytest.raises(
        RagsweepError,
        match=r"max_llm_calls \(--max-llm-calls\): must be 0 .no limit. or more, not -1",
    ):
        RunSettings(docs="docs", testset="testset.json", max_llm_calls=-1)
