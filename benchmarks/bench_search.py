#!/usr/bin/env python3
"""Which search finds a configuration tied with the best, when only a few may be answered?

Replays four strategies on the full grid ``search_grid.py`` computed once
(``benchmarks/search_grid.arrow``: every configuration scored on every question), at
budgets of 8, 16 and 32 answered configurations, SEEDS seeds each, and prints the Markdown
table of ``benchmarks/README.md``:

- ``random``: BUDGET configurations drawn at random.
- ``autorag``: AutoRAG's procedure, re-implemented from IBM/ai4rag 0.0.3,
  ``ai4rag/core/hpo/gam_opt.py``, ``GAMOptimiser``: ``evaluate_initial_random_nodes``
  answers ``n_random_nodes=4`` configurations of a shuffled list, then each
  ``_run_iteration`` label-encodes every parameter (``_prepare_encoder``: a
  ``LabelEncoder`` per column over all combinations, a missing value as its own label, as
  ``handle_missing_values_in_combinations_being_explored`` does), fits ``LinearGAM()``
  with its defaults on the answered ones and answers the remaining configuration of
  highest prediction (``evals_per_trial=1``: greedy, no uncertainty term).
- ``halving``: ragsweep's successive halving under the same LLM budget (BUDGET x questions
  answers), over as many randomly drawn configurations as that budget can halve down
  from its smallest first sample (``halving.MIN_QUESTIONS`` questions).
- ``model``: ragsweep's ``--strategy model`` (``ragsweep.evaluation.surrogate.search``):
  a LinearGAM on the retrieval metrics every configuration has for free.

A strategy ends with the answered configuration of best mean over every question it
answered. It is *tied* when that configuration is in the full grid's tied set (the leader
and every configuration ragsweep's test does not call worse than it:
``statistics.worse_than_best_pvalues``, p >= 0.05); its *regret* is the grid leader's mean
minus the chosen configuration's mean over every question. On 64 questions ragsweep's test
ties most of the grid with its leader, so the table also gives the chance that the chosen
configuration's full-grid mean *equals* the leader's (within EXACT: the leader itself, or
a configuration scoring the same on every question, such as MMR and similarity when they
retrieve alike), is within NEAR of it, or is among the grid's TOP best by mean.

Usage: PYTHONPATH=. python benchmarks/bench_search.py [GRID] [SEEDS]
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from search_grid import CONFIG, FREE, GRID, TARGET  # noqa: E402

BUDGETS = (8, 16, 32)
SEEDS = 50
TOP = 10
EXACT = 1e-9  # float noise only: an equal mean, not a close one
NEAR = 0.005


class Grid:
    """The cached grid as matrices: configs x questions scores, per-config free metrics."""

    def __init__(self, path: Path) -> None:
        table = pa.ipc.open_file(str(path)).read_all()
        self.ids = list(dict.fromkeys(table["config_id"].to_pylist()))
        questions = list(dict.fromkeys(table["question_id"].to_pylist()))
        row = {c: i for i, c in enumerate(self.ids)}
        col = {q: j for j, q in enumerate(questions)}
        r = np.array([row[c] for c in table["config_id"].to_pylist()])
        c = np.array([col[q] for q in table["question_id"].to_pylist()])

        def matrix(name: str) -> np.ndarray:
            m = np.full((len(self.ids), len(questions)), np.nan)
            m[r, c] = table[name].to_numpy(zero_copy_only=False)
            return m

        self.scores = matrix(TARGET)
        self.free = np.column_stack(
            [
                np.nanmean(matrix(n), axis=1)
                if not np.isnan(matrix(n)).all()
                else np.full(len(self.ids), np.nan)
                for n in FREE
            ]
        )
        clusters = np.zeros(len(questions), dtype=np.int64)
        clusters[c] = table["cluster"].to_numpy()
        self.clusters = clusters
        first = {}
        for i, cid in enumerate(table["config_id"].to_pylist()):
            first.setdefault(cid, i)
        self.params = [
            {name: table[name][first[cid]].as_py() for name in CONFIG} for cid in self.ids
        ]
        self.mean = self.scores.mean(axis=1)
        self.tied = self._tied()

    def _tied(self) -> np.ndarray:
        from ragsweep.evaluation import statistics

        leader = int(np.argmax(self.mean))
        p = statistics.worse_than_best_pvalues(self.scores, self.clusters, leader)
        tied = p >= statistics.ALPHA
        tied[leader] = True
        return tied


def pick(grid: Grid, answered: list[int]) -> int:
    """The answered configuration of best mean (its whole row: each strategy here answers a
    configuration on every question, halving's survivors included)."""
    return max(answered, key=lambda i: grid.mean[i])


def random_search(grid: Grid, budget: int, seed: int) -> int:
    rng = random.Random(seed)
    return pick(grid, rng.sample(range(len(grid.ids)), budget))


def autorag(grid: Grid, budget: int, seed: int, n_random: int = 4) -> int:
    """ai4rag's GAMOptimiser.search (see the module docstring)."""
    from pygam import LinearGAM

    names = list(grid.params[0])
    columns = []
    for name in names:  # _prepare_encoder: LabelEncoder over every combination
        values = ["" if p[name] is None else str(p[name]) for p in grid.params]
        labels = {v: k for k, v in enumerate(sorted(set(values)))}
        columns.append([labels[v] for v in values])
    encoded = np.array(columns, dtype=np.float64).T
    order = list(range(len(grid.ids)))
    random.Random(seed).shuffle(order)  # evaluate_initial_random_nodes
    answered = order[: min(n_random, budget)]
    while len(answered) < budget:  # _run_iteration, evals_per_trial=1
        gam = LinearGAM().fit(encoded[answered], grid.mean[answered])
        rest = np.array(sorted(set(range(len(grid.ids))) - set(answered)))
        answered.append(int(rest[np.argmax(gam.predict(encoded[rest]))]))
    return pick(grid, answered)


def halving_search(grid: Grid, budget: int, seed: int) -> int | None:
    from ragsweep.core.errors import RagsweepError
    from ragsweep.evaluation import halving

    questions = grid.scores.shape[1]
    calls = budget * questions
    rng = np.random.default_rng(seed)
    for configs in range(len(grid.ids), 1, -1):
        try:
            rounds = halving.plan(configs, questions, 1, calls)
            break
        except RagsweepError:
            continue
    else:
        return None
    chosen = rng.choice(len(grid.ids), configs, replace=False)
    order = rng.permutation(questions)

    def evaluate(alive: list[int], first: int, last: int) -> np.ndarray:
        return grid.scores[np.ix_(chosen[alive], order[first:last])]

    reached = halving.run(rounds, configs, evaluate, seed)
    last = max(reached)
    survivors = [int(chosen[i]) for i, r in enumerate(reached) if r == last]
    return pick(grid, survivors)


def model(grid: Grid, budget: int, seed: int) -> int:
    from ragsweep.evaluation import surrogate

    x, names = surrogate.features(grid.free, FREE)
    trials, _ = surrogate.search(x, names, budget, lambda i: grid.mean[i], seed)
    return pick(grid, [t.config for t in trials])


STRATEGIES = {
    "random": random_search,
    "AutoRAG (4 random + greedy LinearGAM)": autorag,
    "halving (same LLM calls)": halving_search,
    "ragsweep model": model,
}


def main(path: Path, seeds: int) -> None:
    grid = Grid(path)
    print(
        f"{len(grid.ids)} configurations x {grid.scores.shape[1]} questions; best "
        f"{TARGET} {grid.mean.max():.4f}; {int(grid.tied.sum())} tied with it\n"
    )
    print(
        f"| strategy | budget | P(tied with best) | P(= best) | P(within {NEAR} of best) "
        f"| P(among the {TOP} best) | mean regret | CPU s per search |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in STRATEGIES:
        for budget in BUDGETS:
            print(row(grid, name, budget, seeds), flush=True)


def row(grid: Grid, name: str, budget: int, seeds: int) -> str:
    """One line of the table: strategy ``name`` at ``budget`` over ``seeds`` seeds (a
    line depends on nothing else, so lines can be computed in separate processes)."""
    strategy = STRATEGIES[name]
    start, picks = time.process_time(), []
    for seed in range(seeds):
        picks.append(strategy(grid, budget, seed))
    spent = (time.process_time() - start) / seeds
    if any(p is None for p in picks):
        return f"| {name} | {budget} | budget too small | | | | | |"
    best, top = grid.mean.max(), grid.mean >= np.sort(grid.mean)[-TOP]
    gap = np.array([best - grid.mean[p] for p in picks])
    tied = np.mean([grid.tied[p] for p in picks])
    best_few = np.mean([top[p] for p in picks])
    return (
        f"| {name} | {budget} | {tied:.2f} | {np.mean(gap <= EXACT):.2f} "
        f"| {np.mean(gap <= NEAR):.2f} | {best_few:.2f} | {gap.mean():.4f} | {spent:.2f} |"
    )


if __name__ == "__main__":
    main(
        Path(sys.argv[1]) if len(sys.argv) > 1 else GRID,
        int(sys.argv[2]) if len(sys.argv) > 2 else SEEDS,
    )
