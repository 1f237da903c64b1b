#!/usr/bin/env python3
"""Does the corrected score hold when labels come in the labelling queue's order?

One configuration's 300 judged answers in 60 clusters of 5 questions (half the clusters
easier: people's accuracy 0.8 there, 0.4 in the others, 0.6 on average); a judge that calls
90% of the correct answers correct and 30% of the wrong ones (its raw score is 0.66);
answer_correctness agreeing with people on 80% of the correct answers and 75% of the wrong
ones. n answers are labelled; RUNS runs per row. Three ways to label and correct:

- ``queue``: ragsweep's labelling queue (``labels.queue_of``) and its correction
  (``labels.corrected_scores``): strata verdict x (does answer_correctness disagree), round
  robin over them, the disagreeing strata first in each round, random within a stratum;
  a cluster-robust interval.
- ``disagreements first``: the queue before issue 35: the answers whose verdict and
  answer_correctness disagree first, round robin over the two verdicts within each tier,
  and the correction stratified by the verdict alone (each answer its own cluster). The
  labels within a verdict are then not random: the judge's errors are over-represented.
- ``random``: n answers drawn at random, corrected as the queue corrects.

Prints the Markdown table of ``benchmarks/README.md`` and ``docs/metrics.md``: the mean
bias of the estimate, how often the 95% interval covers the true 0.6 (a run with no
estimate counts as a miss), its mean width, and the share of runs with no estimate.

    .venv/bin/python benchmarks/bench_corrected.py
"""

from __future__ import annotations

import time

import numpy as np

from ragsweep.curation import labels
from ragsweep.evaluation.agreement import CORRECTED_METRIC, corrected

ANSWERS, CLUSTERS, TRUTH, RUNS = 300, 60, 0.6, 2000
LABELS = (20, 40, 80, 160)
WAYS = ("queue", "disagreements first", "random")


def answers(rng: np.random.Generator, name: str) -> tuple[labels.Judged, np.ndarray]:
    cluster = np.repeat(np.arange(CLUSTERS), ANSWERS // CLUSTERS)
    truth = rng.random(ANSWERS) < TRUTH + rng.choice([-0.2, 0.2], CLUSTERS)[cluster]
    judge = np.where(truth, rng.random(ANSWERS) < 0.9, rng.random(ANSWERS) < 0.3)
    token = np.where(truth, rng.random(ANSWERS) < 0.8, rng.random(ANSWERS) < 0.25)
    judged = labels.Judged(
        ["c"] * ANSWERS,
        [str(i) for i in range(ANSWERS)],
        [(f"{name}-{i}", "answer") for i in range(ANSWERS)],
        judge.astype(float),
        token,
        [str(c) for c in cluster],
    )
    return judged, truth


def one_run(way: str, n: int, rng: np.random.Generator, name: str) -> tuple[float, float, float]:
    judged, truth = answers(rng, name)
    if way == "queue":
        picked = [int(p.question_id) for p in labels.queue_of(judged, {}, n)]
    elif way == "random":
        picked = list(rng.permutation(ANSWERS)[:n])
    else:
        said = judged.verdict >= 0.5
        disagree = said != judged.token_correct
        tiers = [
            [i for i in range(ANSWERS) if disagree[i] == d and said[i] == v]
            for d in (True, False)
            for v in (True, False)
        ]
        first = [i for pair in _alternate(tiers[0], tiers[1]) for i in pair]
        then = [i for pair in _alternate(tiers[2], tiers[3]) for i in pair]
        picked = (first + then)[:n]
        person = np.full(ANSWERS, np.nan)
        person[picked] = truth[picked]
        found = corrected(said.astype(int), person, np.arange(ANSWERS))
        return found.estimate, found.low, found.high
    known = {judged.key[i]: bool(truth[i]) for i in picked}
    found = labels.corrected_scores(judged, known)["c"]
    name = CORRECTED_METRIC
    return found[name], found[f"{name}_low"], found[f"{name}_high"]


def _alternate(a: list[int], b: list[int]) -> list[list[int]]:
    """[a0, b0], [a1, b1], ...: round robin over two strata, the longer one's rest last."""
    return [a[i : i + 1] + b[i : i + 1] for i in range(max(len(a), len(b)))]


def main() -> None:
    started = time.perf_counter()
    print("| labels | way | bias | coverage | width | no estimate |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in LABELS:
        for way in WAYS:
            rng = np.random.default_rng(n)
            found = np.array([one_run(way, n, rng, f"{n}-{r}") for r in range(RUNS)])
            estimate, low, high = found.T
            have = ~np.isnan(estimate)
            covered = have & (low <= TRUTH) & (high >= TRUTH)
            print(
                f"| {n} | {way} | {np.mean(estimate[have]) - TRUTH:+.3f} | {covered.mean():.1%} "
                f"| {np.mean(high[have] - low[have]):.3f} | {1 - have.mean():.1%} |"
            )
    print(f"\n{RUNS} runs per row; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
