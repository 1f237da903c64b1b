"""Statistics for leaderboards and regression verdicts, on configs x questions matrices.

Questions that come from one document are not independent, so every figure resamples
*clusters* of questions (``ragsweep.evaluation.clusters`` chooses the unit: the first
reference document, the section of the gold span, or the question itself):

- ``bootstrap_intervals``: mean and percentile bootstrap interval per row, resampling
  clusters with replacement, widened for the few-cluster bias (``small_sample_factor``);
- ``score_intervals``: the same for scores between 0 and 1, never narrower than the
  Clopper-Pearson interval at the row's effective sample size (8 of 8: [0.63, 1]);
- ``sign_flip_pvalues``: the paired test of one row against another over the same
  questions: under "no difference" the sign of each cluster's summed difference is a coin
  flip; exact enumeration when few clusters differ, Monte Carlo (fixed seed) otherwise.
  One-sided by default: "is this configuration worse than it was?" is the question the
  regression verdicts and the deployed configuration's alarm ask;
- ``holm``: Holm's step-down adjustment for a family of configurations tested each on its
  own (the per-configuration verdicts of a comparison);
- ``worse_than_best_pvalues``: which configurations are worse than the leader, aware that
  the leader was picked *because* it scored highest: a max-statistic (Tukey-HSD-like) test
  whose null distribution is the range of the configuration means under a wild cluster
  bootstrap with the null imposed (sign flips of each cluster's deviations from the pooled
  mean); each row on the
  questions it shares with the leader (after successive halving: one level per round);
- ``smallest_pvalue``: whether a test over so few clusters can reach 5% at all;
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

from ragsweep.evaluation import clusters as clusters_of

SEED = 20261130
RESAMPLES = 2000
ALPHA = 0.05
EXACT_CLUSTERS = 12  # up to 2**12 sign patterns are enumerated; more are sampled
MIN_FLIPS = 9999
BLOCK = 1000  # resamples drawn per block: bounds memory for large grids


def cluster_ids(reference_doc_ids: Sequence[Sequence[str] | None]) -> np.ndarray:
    """One integer cluster per question: its first reference document, else its own (the
    ``document`` unit; ``ragsweep.evaluation.clusters`` chooses among units)."""
    return clusters_of.ids_of(clusters_of.document_keys(reference_doc_ids))


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


def score_intervals(
    values: np.ndarray,
    clusters: np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = ALPHA,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the mean and a (1 - alpha) interval of scores between 0 and 1 (every metric).

    The cluster bootstrap interval (``bootstrap_intervals``) collapses where the scores do
    not vary: 8 of 8 correct gives [1, 1]. So each bound reaches at least as far as the
    Clopper-Pearson interval at the row's effective sample size (``effective_sizes``):
    8 of 8 gives [0.63, 1], and a 0/1 score near 0 or 1 keeps its coverage.
    """
    center, low, high = bootstrap_intervals(values, clusters, resamples, seed, alpha)
    exact_low, exact_high = binomial_bounds(values, clusters, alpha)
    return center, np.fmin(low, exact_low), np.fmax(high, exact_high)


def effective_sizes(values: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """Per row, the number of independent 0/1 scores whose mean would vary as much as this
    row's mean does over its clusters: p(1 - p) / V, V the cluster-robust variance of the
    mean (with the G / (G - 1) correction). Where V cannot be measured (every score alike:
    all correct, all wrong), the number of clusters with a score: within-cluster correlation
    is then unknown and each cluster counts once, the conservative choice."""
    data = Clustered.of(values, clusters)
    total = data.counts.sum(axis=1)
    groups = (data.counts > 0).sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.clip(data.sums.sum(axis=1) / total, 0.0, 1.0)
        residual = data.sums - mean[:, None] * data.counts
        variance = groups / (groups - 1) * (residual**2).sum(axis=1) / total**2
        spread = mean * (1 - mean)
        sizes = np.where((variance > 1e-15) & (spread > 0), spread / variance, groups)
    return np.where(total > 0, sizes, np.nan)


def binomial_bounds(
    values: np.ndarray, clusters: np.ndarray, alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the Clopper-Pearson (1 - alpha) interval of its mean at its effective
    sample size n (``effective_sizes``), with n * mean (not always whole) successes."""
    from scipy import stats

    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    n = effective_sizes(values, clusters)
    mean = np.clip(means(values), 0.0, 1.0)
    low, high = np.full(len(values), np.nan), np.full(len(values), np.nan)
    have = ~np.isnan(n) & ~np.isnan(mean)
    x, n = mean[have] * n[have], n[have]
    with np.errstate(invalid="ignore", divide="ignore"):
        low[have] = np.where(x > 0, stats.beta.ppf(alpha / 2, x, n - x + 1), 0.0)
        high[have] = np.where(x < n, stats.beta.ppf(1 - alpha / 2, x + 1, n - x), 1.0)
    low = np.where(have, np.nan_to_num(low, nan=0.0), np.nan)
    return low, np.where(have, np.nan_to_num(high, nan=1.0), np.nan)


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
    asked: np.ndarray | None = None,
) -> np.ndarray:
    """Per row, the adjusted p-value of "worse than the ``leader`` row", controlling the
    chance that *any* row as good as the leader is called worse, whatever the rows' number.

    A row is compared with the leader on the questions both were asked (``asked``, a
    boolean matrix like ``values``; default: every question), and on those only where both
    have a value: the gap is the mean paired difference. It is worse when the gap exceeds
    what chance could make the largest difference between any two rows asked those
    questions: the range (max - min) of their means under a wild cluster bootstrap with
    the null imposed (``_stepdown``). After successive halving the rows fall into levels
    (the question sets they share with the leader: round 1's, round 2's, ...); each level
    is tested on its own questions, and its p-values are multiplied by the number of levels
    (Bonferroni), so the family-wise error over every level stays at most 5%. NaN for the
    leader and for rows without values.
    """
    values = np.atleast_2d(np.asarray(values, dtype=np.float64))
    p = np.full(len(values), np.nan)
    if not len(values):
        return p
    center = means(values)
    have = ~np.isnan(center)
    if not have[leader]:
        p[have] = 1.0
        p[leader] = np.nan
        return p
    asked = np.ones(values.shape, dtype=bool) if asked is None else np.asarray(asked, dtype=bool)
    shared = asked & asked[leader]
    levels: dict[bytes, list[int]] = {}
    for row in np.flatnonzero(have):
        if row != leader:
            levels.setdefault(np.packbits(shared[row]).tobytes(), []).append(int(row))
    for tested in levels.values():
        columns = shared[tested[0]]
        family = [int(r) for r in np.flatnonzero(have) if r == leader or asked[r][columns].all()]
        position = {r: i for i, r in enumerate(family)}
        step = _stepdown(
            values[np.ix_(family, np.flatnonzero(columns))],
            clusters[columns],
            position[leader],
            [position[r] for r in tested],
            resamples,
            seed,
        )
        p[tested] = np.minimum(1.0, len(levels) * step)
    return p


def _stepdown(
    values: np.ndarray,
    clusters: np.ndarray,
    lead: int,
    tested: list[int],
    resamples: int,
    seed: int,
) -> np.ndarray:
    """Step-down max-statistic p-values of the ``tested`` rows against the ``lead`` row,
    every row on the same questions (the columns).

    The null ("every row as good as the others") is imposed: each cluster's deviation from
    it (the row's sum in the cluster minus what the pooled mean of every row gives its
    questions, over the row's count) keeps or flips its sign, the same flips for every row
    so that their correlation is kept. For two rows with every value present this is the
    sign-flip test of their paired difference; deviations from each row's own mean
    (the unrestricted wild bootstrap) called one of two identical configurations worse in
    5.7-9.5% of runs over 10 and 20 documents (``benchmarks/bench_clusters.py``). The row
    furthest behind is tested against the range over every row, the next against the range
    over the rows not yet tested (untested rows, the leader among them, always count), and
    so on."""
    data = Clustered.of(values, clusters)
    with np.errstate(invalid="ignore"):
        paired = values[lead] - values[tested]
    both = ~np.isnan(paired)
    gaps = np.divide(
        np.where(both, paired, 0.0).sum(axis=1),
        both.sum(axis=1),
        out=np.full(len(tested), -np.inf),
        where=both.any(axis=1),
    )
    if data.n_clusters < 2:
        return np.ones(len(tested))
    totals, g = data.counts.sum(axis=1, keepdims=True), data.n_clusters
    pooled = data.sums.sum() / data.counts.sum()
    with np.errstate(invalid="ignore", divide="ignore"):  # a row without values: no deviation
        deviations = np.nan_to_num((data.sums - pooled * data.counts) / totals)
    rng = np.random.default_rng(seed)
    signs = 1.0 - 2.0 * rng.integers(0, 2, size=(resamples, g)).astype(np.int8)
    centred = signs @ deviations.T  # resamples x rows
    always = sorted(set(range(len(values))) - set(tested))  # the leader among them
    order = np.argsort(-gaps, kind="stable")
    behind = centred[:, np.asarray(tested)[order]]
    ceiling = np.maximum(
        np.maximum.accumulate(behind[:, ::-1], axis=1)[:, ::-1],
        centred[:, always].max(axis=1, keepdims=True),
    )
    floor = np.minimum(
        np.minimum.accumulate(behind[:, ::-1], axis=1)[:, ::-1],
        centred[:, always].min(axis=1, keepdims=True),
    )
    step = (1 + (ceiling - floor >= gaps[order] - 1e-12).sum(axis=0)) / (1 + resamples)
    out = np.empty(len(tested))
    out[order] = np.maximum.accumulate(step)
    return out


def smallest_pvalue(n_clusters: int, tests: int = 1) -> float:
    """The smallest p-value a sign-flip test over ``n_clusters`` clusters can give (all
    2**G sign patterns enumerated), times ``tests`` for a Bonferroni family: when it is
    not below ``ALPHA`` the test cannot reject, whatever the data."""
    return min(1.0, tests * 2.0 ** -max(n_clusters, 0))


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
