#!/usr/bin/env python3
"""Do the intervals and tests hold what the run says they hold, however few the documents?

Simulates test sets of QUESTIONS questions spread evenly over 1 to 20 documents, with or
without located gold spans (SECTIONS sections of ``clusters.SECTION_CHARS`` characters per
document, a question's span in one of them at random), and 0/1 scores correlated within
documents: a question is answered correctly when MU + b_d + e_q + n > 0, with the document
effect b_d ~ N(0, rho), the question's e_q ~ N(0, 1 - rho) (so rho is the latent
within-document correlation) and the configuration's run noise n ~ N(0, NOISE²) (an LLM's
sampling, a judge's wobble). Each cell goes through the functions the leaderboard and
``compare`` use: ``clusters.choose`` picks the unit, ``statistics.score_intervals`` gives the
interval of one configuration, ``statistics.worse_than_best_pvalues`` tests two identical
configurations (the leader is the one that scored higher) and ``statistics.sign_flip_pvalues``
is the regression alarm of one configuration between two nights.

What an interval is about follows the unit (``ragsweep.evaluation.clusters``): resampling
documents, it claims documents like these, whose mean is Φ(MU / √(1 + NOISE²)); resampling
sections or questions, it claims only these documents, for questions like these: the mean
over the drawn documents' success rates, each weighted by its share of the questions. The
table gives the coverage of what the output claims, and of the other target where the
output does not claim it (why it says so), with what a document unit forced below
``MIN_CLUSTERS`` would have given (coverage of documents like these, and whether the tie
test over G documents could reach 5% at all: a sign flip over G - 1 free clusters cannot go
below 2^-(G-1)).

Section effects are not simulated: questions on one passage are correlated here only
through their document. Monte Carlo error: coverage over RUNS test sets (±0.5 points at 95%,
one standard error), alarm rates over ALARM_RUNS pairs (±0.7 points at 5%).

Usage: PYTHONPATH=. python benchmarks/bench_clusters.py [RUNS ALARM_RUNS]
(default 2000 1000; 152 s on the shared 2-core VM, 2026-12-06).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from ragsweep.evaluation import clusters, statistics

QUESTIONS = 100
SECTIONS = 25  # per document: a 100-page PDF in windows of about 4 pages
MU = 0.55  # about 70% correct
NOISE = 0.25  # A/A: about 8% of the answers flip between two identical configurations
DOCUMENTS = (1, 2, 3, 5, 9, 10, 20)
CORRELATIONS = (0.0, 0.1, 0.3)
RUNS, ALARM_RUNS = 2000, 1000
ROWS = 250  # regression alarms tested per call: keeps the sign flips at their minimum
SEED = 20261206


@dataclass(frozen=True)
class Cell:
    documents: int
    rho: float
    spans: bool


@dataclass(frozen=True)
class Outcome:
    unit: str
    resampled: str  # clusters.Clusters.describe(): what the output says it resamples
    claims: str  # "documents like these" or "these documents"
    coverage: float  # of what the output claims
    other: float  # of documents like these, where the output claims only these documents
    forced: float  # a document unit forced below MIN_CLUSTERS: coverage of documents like these
    forced_can_tie: bool  # ... and whether its tie test could reach 5%
    tie_alarms: float  # A/A: the identical configuration called worse than the best
    regression_alarms: float  # A/A: the one-sided regression alarm between two nights
    cautions: list[str]


def testset(cell: Cell, rng: np.random.Generator) -> tuple[np.ndarray, clusters.Clusters]:
    """Each question's document, and the clusters ``clusters.choose`` picks for the set."""
    document = np.arange(QUESTIONS) % cell.documents
    refs = [[f"d{d}.pdf"] for d in document]
    spans = None
    if cell.spans:
        start = rng.integers(0, SECTIONS * clusters.SECTION_CHARS - 200, QUESTIONS)
        spans = [
            [{"doc_id": f"d{d}.pdf", "start": int(s), "end": int(s) + 150}]
            for d, s in zip(document, start, strict=True)
        ]
    return document, clusters.choose(refs, spans)


def scores(
    cell: Cell, document: np.ndarray, runs: int, configurations: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``configurations`` runs x questions score matrices of identical configurations (the
    same ease, their own run noise), and each run's mean over these documents."""
    effect = rng.normal(0.0, np.sqrt(cell.rho), (runs, cell.documents))[:, document]
    ease = MU + effect + rng.normal(0.0, np.sqrt(1.0 - cell.rho), (runs, QUESTIONS))
    out = np.stack(
        [
            (ease + rng.normal(0.0, NOISE, ease.shape) > 0).astype(float)
            for _ in range(configurations)
        ]
    )
    these = norm.cdf((MU + effect) / np.sqrt(1.0 - cell.rho + NOISE**2)).mean(axis=1)
    return out, these


def covered(values: np.ndarray, ids: np.ndarray, truth: np.ndarray | float) -> float:
    _, low, high = statistics.score_intervals(values, ids)
    return float(np.mean((low <= truth) & (truth <= high)))


def simulate(
    cell: Cell, runs: int = RUNS, alarm_runs: int = ALARM_RUNS, seed: int = SEED
) -> Outcome:
    rng = np.random.default_rng([seed, cell.documents, int(cell.rho * 10), cell.spans])
    document, chosen = testset(cell, rng)
    population = float(norm.cdf(MU / np.sqrt(1.0 + NOISE**2)))
    (values,), these = scores(cell, document, runs, 1, rng)
    by_document = chosen.unit == "document"
    coverage = covered(values, chosen.ids, population if by_document else these)
    other = np.nan if by_document else covered(values, chosen.ids, population)
    forced, can_tie = np.nan, True
    if not by_document and cell.documents > 1:
        forced = covered(values, document, population)
        can_tie = statistics.smallest_pvalue(cell.documents - 1) < statistics.ALPHA
    (first, second), _ = scores(cell, document, alarm_runs, 2, rng)
    tie = 0
    for a, b in zip(first, second, strict=True):
        pair = np.vstack([a, b])
        leader = int(np.argmax(statistics.means(pair)))
        tie += bool(np.nanmin(statistics.worse_than_best_pvalues(pair, chosen.ids, leader)) < 0.05)
    regression = 0
    for start in range(0, alarm_runs, ROWS):
        diff = second[start : start + ROWS] - first[start : start + ROWS]
        regression += int((statistics.sign_flip_pvalues(diff, chosen.ids) < 0.05).sum())
    return Outcome(
        chosen.unit,
        chosen.describe(),
        "documents like these" if by_document else "these documents",
        coverage,
        other,
        forced,
        can_tie,
        tie / alarm_runs,
        regression / alarm_runs,
        chosen.cautions(),
    )


def percent(value: float) -> str:
    return "-" if np.isnan(value) else f"{100 * value:.1f}%"


def main(runs: int = RUNS, alarm_runs: int = ALARM_RUNS) -> None:
    began = time.perf_counter()
    print(
        "| documents | spans | rho | resampled | intervals claim | coverage of the claim "
        "| documents like these (not claimed) | document unit forced | A/A tie | A/A alarm |"
    )
    print("|---:|---|---:|---|---|---:|---:|---:|---:|---:|")
    for documents in DOCUMENTS:
        for spans in (False, True):
            for rho in CORRELATIONS:
                out = simulate(Cell(documents, rho, spans), runs, alarm_runs)
                forced = percent(out.forced)
                if not np.isnan(out.forced) and not out.forced_can_tie:
                    forced += ", no tie verdict"
                print(
                    f"| {documents} | {'yes' if spans else 'no'} | {rho} | {out.resampled} "
                    f"| {out.claims} | {percent(out.coverage)} | {percent(out.other)} "
                    f"| {forced} | {percent(out.tie_alarms)} | {percent(out.regression_alarms)} |"
                )
    print(
        f"\n{runs} test sets per cell, {alarm_runs} A/A pairs; {time.perf_counter() - began:.0f} s"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
