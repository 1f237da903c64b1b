"""Statistics for leaderboards and regression verdicts, on configs x questions matrices.

Questions that come from one document are not independent, so every figure resamples
*clusters* of questions (a question's cluster is its first reference document; a question
without one is its own cluster):

- ``bootstrap_intervals``: mean and percentile bootstrap interval per row, resampling
  clusters with replacement, widened for the few-cluster bias (``small_sample_factor``);
- ``sign_flip_pvalues``: the paired test of one row against another over the same
  questions: under "no difference" the sign of each cluster's summed difference is a coin
  flip; exact enumeration when few clusters differ, Monte Carlo (fixed seed) otherwise.
  One-sided by default: "is this configuration worse than it was?" is the question the
  regression verdicts and the deployed configuration's alarm ask;
- ``holm``: Holm's step-down adjustment for a family of configurations tested each on its
  own (the per-configuration verdicts of a comparison);
- ``worse_than_best_pvalues``: which configurations are worse than the leader, aware that
  the leader was picked *because* it scored highest: a max-statistic (Tukey-HSD-like) test
  whose null distribution is the range of the centred configuration means under a wild
  cluster bootstrap (sign flips of each cluster's jackknife deviations);
- ``best_of_sweep_pvalue``: did the sweep's best get worse from one night to the next, the
  statistic being best-of-sweep minus best-of-sweep and its null distribution the swaps of
  the two nights within clusters (exact when the nights are exchangeable).

Rows are configurations (or simulated runs), columns are questions; NaN marks a missing
score (not evaluated, or a judge failure) and is left out of that row's mean.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SEED = 20261130
RESAMPLES = 2000
ALPHA = 0.05
EXACT_CLUSTERS = 12  # up to 2**12 sign patterns are enumerated; more are sampled
MIN_FLIPS = 9999
BLOCK = 1000  # resamples drawn per block: bounds memory for large grids


def cluster_ids(reference_doc_ids: Sequence[Sequence[str] | None]) -> np.ndarray:
    """One integer cluster per question: its first reference document, else its own."""
    labels: dict[str, int] = {}
    out = np.empty(len(reference_doc_ids), dtype=np.int64)
    for i, refs in enumerate(reference_doc_ids):
        key = f"doc:{refs[0]}" if refs else f"question:{i}"
        out[i] = labels.setdefault(key, len(labels))
    return out


@dataclass(frozen=True)
class Clustered:
    """A configs x questions matrix summed per cluster: what every resample works on."""

    sums: np.ndarray  # rows x clusters: sum of the present values
    counts: np.ndarray  # rows x clusters: how many values are present

    @classmethod
    def of(cls, values: np.ndarray, clusters: np.ndarray) -> Clustered:
        values = np.atleast_2d(np.asarray(values, dtype=np.float64))
        order = np.argsort(clusters, kind="stable")
        ordered = clusters[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        present = ~np.isnan(values[:, order])
        filled = np.where(present, values[:, order], 0.0)
        return cls(
            np.add.reduceat(filled, starts, axis=1),
            np.add.reduceat(present.astype(np.float64), starts, axis=1),
        )

    @property
    def n_clusters(self) -> int:
        return self.sums.shape[1]


def means(values: np.ndarray) -> np.ndarray:
    """Row means over the present (non-NaN) values; NaN for a row with none."""
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    present = (~np.isnan(values)).sum(axis=1)
    total = np.nansum(values, axis=1)
    return np.divide(total, present, out=np.full(len(values), np.nan), where=present > 0)


def bootstrap_intervals(
    values: np.ndarray,
    clusters: np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = ALPHA,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the mean and a (1 - alpha) cluster-bootstrap interval, as three arrays.

    Every row is resampled with the same cluster draws, so the intervals of different
    configurations are computed on the same pseudo test sets.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    data = Clustered.of(values, clusters)
    center = means(values)
    n_rows, n_clusters = data.sums.shape
    if n_clusters < 2:
        return center, center.copy(), center.copy()
    rng = np.random.default_rng(seed)
    draws = np.empty((resamples, n_rows))
    for start in range(0, resamples, BLOCK):
        n = min(BLOCK, resamples - start)
        weights = rng.multinomial(n_clusters, np.full(n_clusters, 1 / n_clusters), size=n)
        weights = weights.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            draws[start : start + n] = (weights @ data.sums.T) / (weights @ data.counts.T)
    quantile = np.nanquantile if np.isnan(draws).any() else np.quantile  # the latter is faster
    widen = small_sample_factor(n_clusters, alpha)
    with warnings.catch_warnings():  # a row with no values (not judged, say) is NaN, as wanted
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = quantile(draws, [alpha / 2, 1 - alpha / 2], axis=0)
        floor, ceiling = np.nanmin(values, axis=1), np.nanmax(values, axis=1)
    # a mean cannot leave the range of its values, however few the clusters
    low = np.maximum(center - widen * (center - low), floor)
    return center, low, np.minimum(center + widen * (high - center), ceiling)


def small_sample_factor(n_clusters: int, alpha: float = ALPHA) -> float:
    """How much to widen a bootstrap interval over few clusters: the bootstrap variance
    misses a factor G / (G - 1), and Student's t with G - 1 degrees of freedom replaces the
    normal quantile."""
    from scipy import stats  # here: the steps that import this module for halving start faster

    t = stats.t.ppf(1 - alpha / 2, n_clusters - 1) / stats.norm.ppf(1 - alpha / 2)
    return float(np.sqrt(n_clusters / (n_clusters - 1)) * t)


def sign_flip_pvalues(
    differences: np.ndarray,
    clusters: np.ndarray,
    alternative: str = "less",
    seed: int = SEED,
) -> np.ndarray:
    """Per row, the p-value of "the mean paired difference is zero" against ``alternative``:
    ``less`` (the row is worse: the question a regression alarm asks), ``greater``, or
    ``two-sided``.

    The statistic is the sum of the present differences; each cluster's sum keeps or flips
    its sign. Rows with at most ``EXACT_CLUSTERS`` non-zero cluster sums are enumerated
    exactly; the others draw random sign patterns (enough that Holm can still reject among
    all the rows) and count the observed one, so p > 0 always.
    """
    sums = Clustered.of(differences, clusters).sums
    if alternative == "greater":
        sums = -sums
    elif alternative not in ("less", "two-sided"):
        raise ValueError(f"unknown alternative {alternative!r}")
    observed = sums.sum(axis=1)
    tolerance = 1e-9 * np.maximum(1.0, np.abs(sums).sum(axis=1))
    if alternative == "two-sided":
        observed = -np.abs(observed)

    def as_extreme(totals: np.ndarray, rows: np.ndarray) -> np.ndarray:
        totals = -np.abs(totals) if alternative == "two-sided" else totals
        return totals <= observed[rows] + tolerance[rows]

    nonzero = np.abs(sums) > 1e-12
    k = nonzero.sum(axis=1)
    p = np.ones(len(sums))
    for size in np.unique(k[(k > 0) & (k <= EXACT_CLUSTERS)]):
        rows = np.flatnonzero(k == size)
        compact = sums[rows][nonzero[rows]].reshape(len(rows), size)
        patterns = 1.0 - 2.0 * ((np.arange(2**size)[:, None] >> np.arange(size)) & 1)
        p[rows] = as_extreme(compact @ patterns.T, rows[:, None]).mean(axis=1)
    sampled = np.flatnonzero(k > EXACT_CLUSTERS)
    if sampled.size:
        flips = max(MIN_FLIPS, int(np.ceil(2 * len(sums) / ALPHA)))
        rng = np.random.default_rng(seed)
        at_least = np.zeros(sampled.size)
        for start in range(0, flips, BLOCK):
            signs = 1.0 - 2.0 * rng.integers(0, 2, size=(min(BLOCK, flips - start), sums.shape[1]))
            at_least += as_extreme(signs @ sums[sampled].T, sampled).sum(axis=0)
        p[sampled] = (1 + at_least) / (1 + flips)
    return p


def holm(pvalues: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control), in input order."""
    pvalues = np.asarray(pvalues, dtype=np.float64)
    m = len(pvalues)
    order = np.argsort(pvalues, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * pvalues[order])
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def worse_than_best_pvalues(
    values: np.ndarray,
    clusters: np.ndarray,
    leader: int,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> np.ndarray:
    """Per row, the adjusted p-value of "worse than the ``leader`` row", controlling the
    chance that *any* row as good as the leader is called worse, whatever the rows' number.

    A row is worse when the leader's mean exceeds its own by more than chance could make
    the largest difference between any two rows: the gap is compared with the range
    (max - min) of the rows' centred means under a wild cluster bootstrap. Each cluster's
    jackknife deviation (the row's mean minus its mean without that cluster, times
    sqrt((G - 1) / G) for G clusters) keeps or flips its sign, the same flips for every row
    so that their correlation is kept. NaN for the leader and for rows without values.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    p = np.full(len(values), np.nan)
    if not len(values):
        return p
    data = Clustered.of(values, clusters)
    center = means(values)
    have = ~np.isnan(center)
    if data.n_clusters < 2 or have.sum() < 2 or not have[leader]:
        p[have] = 1.0
        p[leader] = np.nan
        return p
    sums, counts = data.sums[have], data.counts[have]
    totals, g = counts.sum(axis=1, keepdims=True), data.n_clusters
    with np.errstate(invalid="ignore", divide="ignore"):  # a row with values in one cluster
        without = (totals * center[have, None] - sums) / (totals - counts)
    deviations = np.nan_to_num(center[have, None] - without) * np.sqrt((g - 1) / g)
    rng = np.random.default_rng(seed)
    signs = 1.0 - 2.0 * rng.integers(0, 2, size=(resamples, g)).astype(np.int8)
    centred = signs @ deviations.T  # resamples x rows
    # step down: the row furthest behind is tested against the range over every row, the
    # next against the range over the rows not yet tested (and the leader), and so on
    gaps = center[leader] - center[have]
    lead = int(have[:leader].sum())  # the leader's position among the rows with values
    order = np.argsort(-gaps, kind="stable")
    order = order[order != lead]
    behind = centred[:, order]
    ceiling = np.maximum(
        np.maximum.accumulate(behind[:, ::-1], axis=1)[:, ::-1], centred[:, [lead]]
    )
    floor = np.minimum(np.minimum.accumulate(behind[:, ::-1], axis=1)[:, ::-1], centred[:, [lead]])
    step = (1 + (ceiling - floor >= gaps[order] - 1e-12).sum(axis=0)) / (1 + resamples)
    adjusted = np.full(have.sum(), np.nan)
    adjusted[order] = np.maximum.accumulate(step)
    p[have] = adjusted
    return p


def best_of_sweep_pvalue(
    baseline: np.ndarray,
    candidate: np.ndarray,
    clusters: np.ndarray,
    flips: int = MIN_FLIPS,
    seed: int = SEED,
) -> tuple[float, float]:
    """(T, one-sided p) for "the sweep's best got worse", on two configs x questions
    matrices of the same configurations and questions (baseline night, candidate night).

    T = max over rows of the candidate's means - max over rows of the baseline's. Under
    "the two nights are exchangeable", swapping which night is which, for every row of a
    cluster together, leaves T's distribution unchanged; p is the share of swap patterns
    (all of them up to ``EXACT_CLUSTERS`` clusters, else ``flips`` random ones plus the
    observed) with a T as low. Selecting the best on either night is part of the statistic,
    so there is no winner's curse.
    """
    base, cand = Clustered.of(baseline, clusters), Clustered.of(candidate, clusters)
    with warnings.catch_warnings():  # a row with no values on one night is NaN, as wanted
        warnings.simplefilter("ignore", RuntimeWarning)
        observed = float(np.nanmax(means(candidate)) - np.nanmax(means(baseline)))
        swap_sums, swap_counts = (base.sums - cand.sums).T, (base.counts - cand.counts).T
        total_sums, total_counts = (
            base.sums.sum(1) + cand.sums.sum(1),
            base.counts.sum(1) + cand.counts.sum(1),
        )

        def statistic(swaps: np.ndarray) -> np.ndarray:
            sums = cand.sums.sum(1) + swaps @ swap_sums
            counts = cand.counts.sum(1) + swaps @ swap_counts
            after = np.nanmax(sums / counts, axis=1)
            return after - np.nanmax((total_sums - sums) / (total_counts - counts), axis=1)

        k = base.n_clusters
        tolerance = 1e-9
        if k <= EXACT_CLUSTERS:
            swaps = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(np.float64)
            return observed, float(np.mean(statistic(swaps) <= observed + tolerance))
        rng = np.random.default_rng(seed)
        at_least = 0
        for start in range(0, flips, BLOCK):
            swaps = rng.integers(0, 2, size=(min(BLOCK, flips - start), k)).astype(np.float64)
            at_least += int(np.sum(statistic(swaps) <= observed + tolerance))
    return observed, (1 + at_least) / (1 + flips)
