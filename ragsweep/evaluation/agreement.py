"""How far a judge agrees with people, and the judged score corrected by their labels.

``agreement``: for verdicts a person also labelled, the number of labels, the accuracy
(share of verdicts the person agrees with), Cohen's kappa (agreement beyond what the two
sides' base rates give by chance: two judges with 80% raw agreement can differ by 20
points in their scores, so kappa is the figure to read) with a percentile bootstrap
interval, and the confusion matrix. A judge is *not shown to be reliable* below
``MIN_LABELS`` labels or below ``MIN_KAPPA``.

``corrected``: prediction-powered inference (Angelopoulos et al., Science 2023) of the human
accuracy of one configuration: the judge's mean over every judged answer, plus the mean
error of the judge on the answers a person labelled (a random subset of them), with a normal
interval whose variance counts both samples (the judge's and the people's) and their overlap.
Unbiased whatever the judge's bias; as wide as the labels leave it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

from ragsweep.evaluation.metrics import Metric

MIN_LABELS = 30
MIN_KAPPA = 0.6
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
        return self.labels >= MIN_LABELS and bool(self.kappa >= MIN_KAPPA)

    def statement(self) -> str:
        """One line: the figures, and whether the judge is shown to be reliable."""
        figures = (
            f"{self.labels} labels, accuracy {self.accuracy:.1%}, Cohen's kappa "
            f"{_num(self.kappa)} [{_num(self.kappa_low)}, {_num(self.kappa_high)}]"
        )
        if self.reliable:
            return f"{figures}: the judge agrees with people (kappa >= {MIN_KAPPA})"
        why = []
        if self.labels < MIN_LABELS:
            why.append(f"fewer than {MIN_LABELS} labels")
        if not self.kappa >= MIN_KAPPA:
            why.append(f"kappa below {MIN_KAPPA}")
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


def corrected(
    judged: np.ndarray, judged_labelled: np.ndarray, person: np.ndarray, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high) of the share of answers people would call correct, by
    prediction-powered inference, along the last axis.

    ``judged``: the judge's verdicts (0/1) on all N answers of a configuration;
    ``judged_labelled`` and ``person``: the judge's verdicts and the person's labels on the n
    of them a person labelled, chosen at random. The estimate is mean(judged) +
    mean(person - judged_labelled); its variance var(judged)/N + var(rectifier)/n +
    2 cov(judged, rectifier)/N (the labelled answers are among the N). Clipped to [0, 1].
    """
    judged = np.asarray(judged, float)
    f, h = np.asarray(judged_labelled, float), np.asarray(person, float)
    big_n, n = judged.shape[-1], f.shape[-1]
    rectifier = h - f
    estimate = judged.mean(axis=-1) + rectifier.mean(axis=-1)
    centred_f = f - f.mean(axis=-1, keepdims=True)
    centred_r = rectifier - rectifier.mean(axis=-1, keepdims=True)
    covariance = (centred_f * centred_r).sum(axis=-1) / max(n - 1, 1)
    variance = (
        judged.var(axis=-1, ddof=1) / big_n
        + rectifier.var(axis=-1, ddof=1) / n
        + 2 * covariance / big_n
    )
    half = NormalDist().inv_cdf(0.5 + level / 2) * np.sqrt(np.maximum(variance, 0.0))
    return estimate, np.clip(estimate - half, 0, 1), np.clip(estimate + half, 0, 1)
