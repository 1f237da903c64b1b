"""How far a judge agrees with people, and the judged score corrected by their labels.

``agreement``: for verdicts a person also labelled, the number of labels, the accuracy
(share of verdicts the person agrees with), Cohen's kappa (agreement beyond what the two
sides' base rates give by chance: two judges with 80% raw agreement can differ by 20
points in their scores, so kappa is the figure to read) with a percentile bootstrap
interval, and the confusion matrix. A judge is *not shown to be reliable* below
``MIN_LABELS`` labels or when kappa's lower bound is below ``MIN_KAPPA``: a point estimate of
0.65 over 30 labels is as much a sign of 0.4 as of 0.9.

``corrected``: prediction-powered inference (Angelopoulos et al., Science 2023) of the human
accuracy of one configuration, stratified as the labelling queue draws its labels (the
judge's verdict, and whether it disagrees with the token metric): the judge's verdicts over
every judged answer, corrected by its errors on the answers a person labelled, with a
cluster-robust interval whose variance counts both samples (the judge's and the people's).
Unbiased whatever the judge's bias and whatever order the queue served its strata in; as
wide as the labels leave it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

from ragsweep.evaluation.metrics import Metric
from ragsweep.evaluation.statistics import small_sample_factor

MIN_LABELS = 30
MIN_KAPPA = 0.6  # what kappa's lower bound must reach
MIN_STRATUM_LABELS = 2  # labels each stratum of the corrected score needs
RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
CORRECTED_METRIC = "correctness_corrected"
# declared as a registered metric is (direction, range), but computed from the stored labels
# when asked, not per question by a step: not in the ``ragsweep.metrics`` group, whose
# every metric is a column of every run's artifacts
CORRECTED = Metric("recorded", higher_is_better=True, low=0.0, high=1.0)


@dataclass(frozen=True)
class Agreement:
    """A judge against people's labels on the same answers."""

    labels: int
    accuracy: float
    kappa: float  # NaN when undefined (one side gave a single verdict throughout)
    kappa_low: float
    kappa_high: float
    # rows: the person said correct / incorrect; columns: the judge said correct / incorrect
    both_correct: int
    judge_only_correct: int  # the judge said correct, the person incorrect
    person_only_correct: int
    both_incorrect: int

    @property
    def reliable(self) -> bool:
        return self.labels >= MIN_LABELS and bool(self.kappa_low >= MIN_KAPPA)

    def statement(self) -> str:
        """One line: the figures, and whether the judge is shown to be reliable."""
        figures = (
            f"{self.labels} labels, accuracy {self.accuracy:.1%}, Cohen's kappa "
            f"{_num(self.kappa)} [{_num(self.kappa_low)}, {_num(self.kappa_high)}]"
        )
        if self.reliable:
            return f"{figures}: the judge agrees with people (kappa's lower bound >= {MIN_KAPPA})"
        why = []
        if self.labels < MIN_LABELS:
            why.append(f"fewer than {MIN_LABELS} labels")
        if not self.kappa_low >= MIN_KAPPA:
            why.append(f"kappa's lower bound below {MIN_KAPPA}")
        return f"{figures}: the judge is not shown to be reliable ({', '.join(why)})"

    def to_dict(self) -> dict:
        return {**asdict(self), "reliable": self.reliable}


def _num(value: float) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.2f}"


def kappa(person: np.ndarray, judge: np.ndarray) -> np.ndarray:
    """Cohen's kappa of two boolean raters along the last axis (NaN where undefined)."""
    person, judge = np.asarray(person, bool), np.asarray(judge, bool)
    observed = (person == judge).mean(axis=-1)
    p, j = person.mean(axis=-1), judge.mean(axis=-1)
    chance = p * j + (1 - p) * (1 - j)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)


def agreement(
    person: np.ndarray, judge: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED
) -> Agreement:
    """The judge's verdicts against the person's labels of the same answers (booleans)."""
    person, judge = np.asarray(person, bool), np.asarray(judge, bool)
    n = len(person)
    if n == 0:
        nan = float("nan")
        return Agreement(0, nan, nan, nan, nan, 0, 0, 0, 0)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    boot = kappa(person[draws], judge[draws])
    tail = (1 - LEVEL) / 2 * 100
    low, high = (
        np.nanpercentile(boot, [tail, 100 - tail]) if np.isfinite(boot).any() else (np.nan,) * 2
    )
    return Agreement(
        labels=n,
        accuracy=float((person == judge).mean()),
        kappa=float(kappa(person, judge)),
        kappa_low=float(low),
        kappa_high=float(high),
        both_correct=int((person & judge).sum()),
        judge_only_correct=int((~person & judge).sum()),
        person_only_correct=int((person & ~judge).sum()),
        both_incorrect=int((~person & ~judge).sum()),
    )


@dataclass(frozen=True)
class Corrected:
    """One configuration's corrected score: estimate and interval, or why there is none."""

    estimate: float
    low: float
    high: float
    labels: int
    missing: str | None = None  # why there is no estimate (a stratum with too few labels)


def corrected(
    stratum: np.ndarray,
    person: np.ndarray,
    clusters: np.ndarray,
    names: dict[int, str] | None = None,
    level: float = LEVEL,
) -> Corrected:
    """The share of a configuration's answers people would call correct, by stratified
    prediction-powered inference (Fisch et al. 2024), with a cluster-robust interval.

    Per answer (one configuration's N): ``stratum``, the stratum the labelling queue drew it
    from (an integer that the judge's verdict and what the queue ordered by determine, so
    that labels are a random sample *within* each stratum whatever order the queue served
    the strata in); ``person``, the person's label (1, 0, NaN where unlabelled);
    ``clusters``, the question's cluster. With N_s answers, n_s labels and k_s of them
    correct in stratum s, the estimate is sum_s (N_s / N) k_s / n_s: unbiased whatever the
    judge's bias and however unequally the queue labelled the strata.

    Its variance is the larger of two: the cluster-robust (sandwich) variance of the
    estimate's linearisation, each cluster's answers and labels summed first, as every
    other figure resamples clusters; and the variance with independent answers and each
    stratum's rate taken as (k + 1) / (n + 2), so that a stratum whose few labels all agree
    still counts some doubt. The interval is normal, widened for few clusters
    (``statistics.small_sample_factor``), clipped to [0, 1]. No estimate (NaN, and
    ``missing`` says why) when a stratum has fewer than ``MIN_STRATUM_LABELS`` labels (or
    fewer than its answers, when it has only one).
    """
    stratum = np.asarray(stratum)
    person = np.asarray(person, float)
    labelled = ~np.isnan(person)
    total = len(stratum)
    found, at = np.unique(stratum, return_inverse=True)
    size = np.bincount(at, minlength=len(found)).astype(float)
    n = np.bincount(at, weights=labelled.astype(float), minlength=len(found))
    k = np.bincount(at, weights=np.where(labelled, person, 0.0), minlength=len(found))
    short = n < np.minimum(MIN_STRATUM_LABELS, size)
    if total == 0 or short.any():
        nan = float("nan")
        lacking = [
            f"{(names or {}).get(int(s), f'stratum {s}')}: {int(n[i])} of {int(size[i])} labelled"
            for i, s in enumerate(found)
            if short[i]
        ]
        why = f"fewer than {MIN_STRATUM_LABELS} labels in a stratum ({'; '.join(lacking)})"
        return Corrected(nan, nan, nan, int(labelled.sum()), why if total else "no answers")
    weight = size / total
    rate = k / n
    estimate = float(weight @ rate)
    # the linearisation's terms per answer, summed per cluster
    term = (rate[at] - estimate) / total
    term += np.where(labelled, (weight / n)[at] * (np.nan_to_num(person) - rate[at]), 0.0)
    groups, of_group = np.unique(np.asarray(clusters), return_inverse=True)
    per_cluster = np.bincount(of_group, weights=term, minlength=len(groups))
    g = len(groups)
    clustered = g / (g - 1) * float(per_cluster @ per_cluster) if g > 1 else np.inf
    smoothed = (k + 1) / (n + 2)
    independent = float(
        (weight**2 * smoothed * (1 - smoothed) / n).sum()
        + (weight * (rate - estimate) ** 2).sum() / total
    )
    widen = small_sample_factor(g) if g > 1 else 1.0
    half = NormalDist().inv_cdf(0.5 + level / 2) * widen * np.sqrt(max(clustered, independent))
    low, high = max(estimate - half, 0.0), min(estimate + half, 1.0)
    return Corrected(estimate, low, high, int(labelled.sum()))
