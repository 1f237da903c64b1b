"""Model-based search: which configurations earn LLM answers when the space holds more
configurations than the budget (``--strategy model``, ``--max-configs N``).

What a configuration retrieves costs no LLM call, so its retrieval metrics are known for
every configuration before the first answer (multi-fidelity: the cheap fidelity is free and
complete). The search keeps the better half by retrieval (``screen``), answers a few of
them at random, then fits a surrogate of the optimised metric on the retrieval metrics
(pyGAM's ``LinearGAM``, one linear term per metric, its smoothing chosen by generalised
cross-validation) and answers, one configuration at a time, the one whose prediction's
upper bound is highest; it starts from the configurations earlier runs of the sweep
evaluated (``known``) when there are any.
AutoRAG's procedure (ai4rag's ``GAMOptimiser``) fits the same kind of model on the
configurations' parameters alone, after four random ones; ``benchmarks/bench_search.py``
compares the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

FREE_METRICS = ("context_correctness", "document_recall", "span_recall", "span_precision")
RECALL = ("context_correctness", "document_recall", "span_recall")  # found the reference?
UPPER = 0.5  # the width of the prediction interval whose upper bound is maximised
LAMBDAS = np.logspace(-2, 2, 5)  # the smoothing penalties generalised cross-validation picks from
FIRST = 4  # configurations answered before the surrogate is fitted (at most)


@dataclass(frozen=True)
class WarmStart:
    """What earlier runs of the sweep measured, for the search to start from: each
    configuration's mean score (config id -> mean of the optimised metric over every
    question, as measured), the ``runs`` it comes from, and a ``note`` for the report (why
    the search starts cold; empty when there is nothing to say)."""

    scores: Mapping[str, float] = field(default_factory=dict)
    runs: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Trial:
    config: int  # the configuration's index
    predicted: float | None  # the surrogate's prediction when chosen; None: not fitted yet
    upper: float | None  # the upper bound that chose it
    reason: str  # why it was chosen, for the report


def features(free: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """The surrogate's inputs: each free metric's per-configuration mean (``free``, configs x
    metrics, NaN where unknown), centred and scaled; a metric with no spread (or no value)
    is left out, a missing value is the metric's mean. Returns the matrix and its names."""
    free = np.asarray(free, dtype=np.float64)
    kept, columns = [], []
    for j, name in enumerate(names):
        column = free[:, j]
        if np.isnan(column).all():
            continue
        column = np.where(np.isnan(column), np.nanmean(column), column)
        spread = column.std()
        if spread > 1e-12:
            columns.append((column - column.mean()) / spread)
            kept.append(name)
    matrix = np.column_stack(columns) if columns else np.zeros((len(free), 0))
    return matrix, kept


def screen(x: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """The configurations the search may answer: the better half by retrieval (the mean of
    the standardised ``RECALL`` metrics at least its median), as successive halving keeps
    the better half of a round; every configuration when no recall metric has a spread."""
    columns = [j for j, name in enumerate(names) if name in RECALL]
    if not columns:
        return np.ones(len(x), dtype=bool)
    composite = x[:, columns].mean(axis=1)
    return composite >= np.median(composite)


def _first(candidates: np.ndarray, taken: set[int], rng: np.random.Generator) -> tuple[int, str]:
    """A configuration of the initial design: one of the better half by retrieval not yet
    taken, at random (any other when none is left)."""
    for pool, reason in ((candidates, "the better half by retrieval"), (None, "the rest")):
        left = [i for i in range(len(candidates)) if i not in taken and (pool is None or pool[i])]
        if left:
            return int(rng.choice(left)), f"drawn at random from {reason}"
    raise ValueError("no configuration left")


def fit(x: np.ndarray, observed: Mapping[int, float]):
    """``LinearGAM`` of the observed scores on the features, one linear term per feature."""
    from pygam import LinearGAM, l

    rows = sorted(observed)
    terms = l(0)
    for j in range(1, x.shape[1]):
        terms = terms + l(j)
    gam = LinearGAM(terms)
    y = np.array([observed[i] for i in rows])
    return gam.gridsearch(x[rows], y, progress=False, lam=LAMBDAS)


def propose(
    x: np.ndarray,
    candidates: np.ndarray,
    observed: Mapping[int, float],
    rng: np.random.Generator,
    tried: set[int] | None = None,
) -> Trial:
    """The configuration to answer next, among the ``candidates`` (a mask) neither observed
    nor ``tried``: the initial design while fewer than ``FIRST`` are observed (or they
    score alike, or there are no features); then the highest upper bound of the fitted
    surrogate (ties at random)."""
    taken = set(observed) | (tried or set())
    distinct = len({round(v, 12) for v in observed.values()})
    left = np.array([i for i in range(len(x)) if i not in taken and candidates[i]])
    if len(observed) < FIRST or not x.shape[1] or distinct < 2 or not len(left):
        config, reason = _first(candidates, taken, rng)
        return Trial(config, None, None, reason)
    gam = fit(x, observed)
    mean = gam.predict(x[left])
    upper = gam.prediction_intervals(x[left], width=UPPER)[:, 1]
    upper = np.where(np.isfinite(upper), upper, mean)
    tiebreak = rng.permutation(len(left))
    best = int(np.lexsort((tiebreak, -np.round(upper, 12)))[0])
    return Trial(
        int(left[best]),
        float(mean[best]),
        float(upper[best]),
        f"predicted {mean[best]:.3f} (upper bound {upper[best]:.3f}) from {len(observed)} answered",
    )


def search(
    x: np.ndarray,
    names: Sequence[str],
    budget: int,
    evaluate: Callable[[int], float],
    seed: int,
    known: Mapping[int, float] | None = None,
) -> tuple[list[Trial], dict[int, float]]:
    """Answer at most ``budget`` configurations, one at a time (``evaluate(i)``: the
    configuration's score, higher is better; NaN when it has none), starting from the
    ``known`` scores of earlier runs (they count as observed, not against the budget).
    Returns the trials in order and every observed score."""
    rng = np.random.default_rng(seed)
    candidates = screen(x, names)
    observed = {i: float(v) for i, v in (known or {}).items() if math.isfinite(v)}
    tried: set[int] = set(observed)
    trials: list[Trial] = []
    for _ in range(min(budget, len(x) - len(tried))):
        trial = propose(x, candidates, observed, rng, tried)
        score = evaluate(trial.config)
        trials.append(trial)
        tried.add(trial.config)
        if math.isfinite(score):  # one without a score is not tried again and teaches nothing
            observed[trial.config] = float(score)
    return trials, observed
