"""How many configurations answer how many questions: the full grid, or successive halving
when the grid would cost more LLM calls than the run may make.

Successive halving evaluates every configuration on a small seeded sample of the questions,
promotes the better half to twice as many questions, and so on until the survivors have
answered every question. The samples are nested (each round's questions begin with the
previous round's), so a promoted configuration pays only for its new questions and every
comparison is paired on shared questions. The first sample is the largest the budget
allows: the more questions a configuration is judged on before it can be dropped, the less
a lucky or unlucky draw decides. Ties in a round (the norm on a few questions scored 0 or 1)
are broken by a random order drawn from the run's seed, never by name: a rerun with the same
seed promotes the same configurations, and no label is favoured by its spelling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation import statistics

MIN_QUESTIONS = 5  # no configuration is dropped on fewer questions
KEEP = 0.5  # the share of a round's configurations promoted to the next


@dataclass(frozen=True)
class Round:
    configs: int  # configurations evaluated in this round
    questions: int  # on the first this-many questions of the seeded order


def cost(rounds: Sequence[Round], calls_per_answer: int) -> int:
    """LLM calls the rounds make at most: each round asks only the questions new to it."""
    total, asked = 0, 0
    for r in rounds:
        total += r.configs * (r.questions - asked) * calls_per_answer
        asked = r.questions
    return total


def halving(configs: int, questions: int, first: int) -> list[Round]:
    """The rounds starting from ``first`` questions: half the configurations, twice the
    questions, until the survivors answer every question."""
    rounds = [Round(configs, min(first, questions))]
    while rounds[-1].questions < questions:
        last = rounds[-1]
        rounds.append(
            Round(max(1, math.ceil(last.configs * KEEP)), min(2 * last.questions, questions))
        )
    return rounds


def plan(
    configs: int, questions: int, calls_per_answer: int, max_llm_calls: int, halve: bool = False
) -> list[Round]:
    """One round of the whole grid when there is no budget or it is enough (unless
    ``halve``); else successive halving from the largest first sample the budget affords
    (``halve`` without a budget: from the sample that leaves one configuration answering
    every question, at least ``MIN_QUESTIONS``).

    ``calls_per_answer``: LLM calls one configuration makes on one question (an answer from
    a model, a verdict from the judge), before the sharing of identical contexts and the
    reply cache, which only lower the count.
    """
    grid = [Round(configs, questions)]
    if halve and max_llm_calls <= 0:
        halvings = math.ceil(math.log2(max(configs, 1)))
        first = max(MIN_QUESTIONS, math.ceil(questions / 2**halvings))
        return halving(configs, questions, first) if first < questions else grid
    if max_llm_calls <= 0 or (not halve and cost(grid, calls_per_answer) <= max_llm_calls):
        return grid
    for first in range(questions - 1, MIN_QUESTIONS - 1, -1):
        rounds = halving(configs, questions, first)
        if cost(rounds, calls_per_answer) <= max_llm_calls:
            return rounds
    smallest = halving(configs, questions, MIN_QUESTIONS)
    raise RagsweepError(
        f"max_llm_calls={max_llm_calls} is too few for {configs} configurations x "
        f"{questions} questions: the full grid needs {cost(grid, calls_per_answer)} LLM "
        f"calls, successive halving from {MIN_QUESTIONS} questions at least "
        f"{cost(smallest, calls_per_answer)}; raise the budget or shrink the search space"
    )


def promote(
    candidates: Sequence[int], scores: np.ndarray, keep: int, rng: np.random.Generator
) -> list[int]:
    """The ``keep`` candidates with the best mean score (rows of ``scores``, NaN for a
    missing score, ranked last). Equal means (to 12 decimals, so that summation order does
    not matter) are ordered by a random permutation drawn from ``rng``."""
    mean = np.round(np.nan_to_num(statistics.means(scores), nan=-np.inf), 12)
    tiebreak = rng.permutation(len(candidates))
    order = np.lexsort((tiebreak, -mean))  # by mean, best first; then the random order
    return [candidates[i] for i in order[:keep]]


Evaluate = Callable[[list[int], int, int], np.ndarray]


def run(rounds: Sequence[Round], configs: int, evaluate: Evaluate, seed: int) -> list[int]:
    """Play the rounds over ``configs`` configurations (indexes ``0..configs-1``).
    ``evaluate(alive, first, last)`` scores configurations on questions ``first:last`` of
    the order, a configs x questions matrix (NaN: no score); promotion compares the mean over
    every question asked so far, ties broken by an order drawn from ``seed``. Returns the
    last round each configuration reached."""
    rng = np.random.default_rng(seed)
    scores = np.full((configs, rounds[-1].questions), np.nan)
    reached = [0] * configs
    alive, asked = list(range(configs)), 0
    for number, step in enumerate(rounds):
        if number:
            alive = promote(alive, scores[alive, :asked], step.configs, rng)
        scores[np.ix_(alive, range(asked, step.questions))] = evaluate(alive, asked, step.questions)
        for i in alive:
            reached[i] = number
        asked = step.questions
    return reached


def describe(rounds: Sequence[Round]) -> str:
    """``48 x 8 -> 24 x 16 -> ...`` (configurations x questions per round)."""
    return " -> ".join(f"{r.configs} x {r.questions}" for r in rounds)
