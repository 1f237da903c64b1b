"""How far a judge agrees with people, and the judged score corrected by their labels.

``agreement``: for verdicts a person also labelled, the number of labels, the accuracy
(share of verdicts the person agrees with), Cohen's kappa (agreement beyond what the two
sides' base rates give by chance: two judges with 80% raw agreement can differ by 20
points in their scores, so kappa is the figure to read) with a percentile bootstrap
interval, and the confusion matrix. A judge is *not shown to be reliable* below
``MIN_LABELS`` labels or below ``MIN_KAPPA``.

``corrected``: prediction-powered inference (Angelopoulos et al., Science 2023) of the human
accuracy of one configuration, stratified by the judge's verdict: the judge's verdicts over
every judged answer, corrected by its errors on the answers a person labelled, with a normal
interval whose variance counts both samples (the judge's and the people's). Unbiased
whatever the judge's bias; as wide as the labels leave it.
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
    prediction-powered inference stratified by the judge's verdict, along the last axis.

    ``judged``: the judge's verdicts (0/1) on all N answers of a configuration;
    ``judged_labelled`` and ``person``: the judge's verdicts and the person's labels on the n
    of them a person labelled. Within each verdict v, the labels give the share p_v of
    answers people call correct; the estimate is their mix by the verdicts' shares over all
    N: pi p_1 + (1 - pi) p_0, i.e. the judge's mean plus its mean error in each verdict
    (a rectifier per stratum: Fisch et al. 2024, stratified PPI). So a queue that labels
    both verdicts equally, whatever their shares, biases nothing, provided the labels are
    random within each verdict. Variance: pi^2 p_1(1-p_1)/n_1 + (1-pi)^2 p_0(1-p_0)/n_0 +
    (p_1 - p_0)^2 pi(1-pi)/N, each p_v taken as (k + 1)/(n_v + 2) there, so that a verdict
    whose few labels all agree still has some. NaN when a verdict the judge gave has no
    label. Estimate and bounds in [0, 1].
    """
    judged = np.asarray(judged, float)
    f, h = np.asarray(judged_labelled, float), np.asarray(person, float)
    big_n = judged.shape[-1]
    share = judged.mean(axis=-1)  # pi: the share of verdicts "correct"
    estimate = np.zeros(np.shape(share))
    variance = np.zeros(np.shape(share))
    rates = []
    for verdict, weight in ((1.0, share), (0.0, 1 - share)):
        inside = f == verdict
        count = inside.sum(axis=-1)
        agreed = (h * inside).sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(count > 0, agreed / count, np.nan)
        smoothed = (agreed + 1) / (count + 2)
        missing = (weight > 0) & (count == 0)
        rate_used = np.where(weight > 0, rate, 0.0)
        estimate = estimate + np.where(missing, np.nan, weight * rate_used)
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(weight > 0, weight**2 * smoothed * (1 - smoothed) / count, 0.0)
        variance = variance + term
        rates.append(np.where(count > 0, rate, smoothed))
    variance = variance + (rates[0] - rates[1]) ** 2 * share * (1 - share) / big_n
    half = NormalDist().inv_cdf(0.5 + level / 2) * np.sqrt(variance)
    estimate = np.clip(estimate, 0, 1)
    return estimate, np.clip(estimate - half, 0, 1), np.clip(estimate + half, 0, 1)
