"""Judges against people: Cohen's kappa with its interval, and the corrected score
(prediction-powered inference) covering the true human accuracy where the judge is biased."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.curation import labels
from ragsweep.evaluation.agreement import (
    CORRECTED_METRIC,
    MIN_KAPPA,
    MIN_LABELS,
    agreement,
    corrected,
    kappa,
)


def test_kappa_matches_the_textbook_example():
    # Cohen's 2x2 example: 20 both yes, 5 judge-only yes, 10 person-only yes, 15 both no
    person = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15, bool)
    judge = np.array([1] * 20 + [1] * 5 + [0] * 10 + [0] * 15, bool)
    # observed 0.7, chance 0.6*0.5 + 0.4*0.5 = 0.5: kappa 0.4
    assert kappa(person, judge) == pytest.approx(0.4)
    found = agreement(person, judge)
    assert (found.labels, found.accuracy) == (50, pytest.approx(0.7))
    assert (found.both_correct, found.judge_only_correct) == (20, 5)
    assert (found.person_only_correct, found.both_incorrect) == (10, 15)
    assert found.kappa_low < 0.4 < found.kappa_high


def test_a_judge_that_always_says_correct_has_high_accuracy_and_zero_kappa():
    person = np.array([True] * 45 + [False] * 5)
    found = agreement(person, np.ones(50, bool))
    assert found.accuracy == pytest.approx(0.9)
    assert found.kappa == 0 or np.isnan(found.kappa)
    assert not found.reliable
    assert "not shown to be reliable (kappa's lower bound below 0.6)" in found.statement()


def test_few_labels_are_not_shown_reliable_even_when_all_agree():
    person = np.array([True, False] * 10)
    found = agreement(person, person)
    assert found.kappa == pytest.approx(1.0)
    assert found.labels < MIN_LABELS and not found.reliable
    assert f"fewer than {MIN_LABELS} labels" in found.statement()


def test_an_agreeing_judge_with_enough_labels_is_reliable():
    rng = np.random.default_rng(3)
    person = rng.random(60) < 0.5
    judge = person.copy()
    judge[:2] = ~judge[:2]
    found = agreement(person, judge)
    assert found.kappa >= 0.9 and found.reliable
    assert "the judge agrees with people" in found.statement()


def test_a_kappa_above_the_bar_with_a_lower_bound_below_it_is_not_reliable():
    """40 labels, kappa 0.70: its interval reaches well below 0.6, so the judge is not shown
    to be reliable; the point estimate alone would have called it so."""
    person = np.array([True] * 20 + [False] * 20)
    judge = person.copy()
    judge[[0, 1, 2, 20, 21, 22]] = ~judge[[0, 1, 2, 20, 21, 22]]
    found = agreement(person, judge)
    assert found.labels >= MIN_LABELS and found.kappa == pytest.approx(0.7)
    assert found.kappa_low < MIN_KAPPA and not found.reliable
    assert "kappa's lower bound below 0.6" in found.statement()


def _judged_answers(rng: np.random.Generator, answers: int, clusters: int, name: str):
    """One configuration's answers in clusters of questions (half the clusters easier):
    people's truth 0.6 on average; a judge calling 90% of the correct answers correct and
    30% of the wrong ones; answer_correctness agreeing with people 80% of the time."""
    cluster = np.repeat(np.arange(clusters), answers // clusters)
    truth = rng.random(answers) < 0.6 + rng.choice([-0.2, 0.2], clusters)[cluster]
    judge = np.where(truth, rng.random(answers) < 0.9, rng.random(answers) < 0.3)
    token = np.where(truth, rng.random(answers) < 0.8, rng.random(answers) < 0.25)
    judged = labels.Judged(
        ["c"] * answers,
        [str(i) for i in range(answers)],
        [(f"{name}-{i}", "answer") for i in range(answers)],
        judge.astype(float),
        token,
        [str(c) for c in cluster],
    )
    return judged, truth


def test_corrected_interval_covers_the_truth_when_labels_come_in_queue_order():
    """300 answers in 60 clusters, 40 labelled in the labelling queue's order (the strata
    where the judge and answer_correctness disagree first), 1000 runs: the corrected score
    is unbiased and its interval covers people's accuracy at least 93% of the time. Before,
    with the queue serving disagreements first and the correction stratified by verdict
    alone, the bias was about -0.2 and the coverage far below."""
    rng = np.random.default_rng(35)
    estimates, covered = [], []
    for run in range(1000):
        judged, truth = _judged_answers(rng, 300, 60, f"run{run}")
        asked = labels.queue_of(judged, {}, size=40)
        known = {judged.key[int(p.question_id)]: bool(truth[int(p.question_id)]) for p in asked}
        found = labels.corrected_scores(judged, known)["c"]
        estimates.append(found[CORRECTED_METRIC])
        low, high = found[f"{CORRECTED_METRIC}_low"], found[f"{CORRECTED_METRIC}_high"]
        covered.append(low <= 0.6 <= high)
    assert not np.isnan(estimates).any()
    assert abs(np.mean(estimates) - 0.6) < 0.01
    assert np.mean(covered) >= 0.93


def test_corrected_score_says_which_stratum_lacks_labels():
    rng = np.random.default_rng(2)
    judged, truth = _judged_answers(rng, 100, 20, "few")
    asked = labels.queue_of(judged, {}, size=3)  # fewer labels than strata x 2
    known = {judged.key[int(p.question_id)]: bool(truth[int(p.question_id)]) for p in asked}
    found = labels.corrected_scores(judged, known)["c"]
    assert np.isnan(found[CORRECTED_METRIC])
    assert "fewer than 2 labels in a stratum" in found["missing"]
    assert "judged correct, answer_correctness agrees: 1 of" in found["missing"]


def _simulate(runs: int, answers: int, labels: int, seed: int):
    """A judge biased upwards: it calls 95% of the correct answers correct and 40% of the
    wrong ones, so its raw mean is 0.73 where people's accuracy is 0.6; labels drawn at
    random, each answer a cluster of its own."""
    rng = np.random.default_rng(seed)
    truth = 0.6
    person = rng.random((runs, answers)) < truth
    judge = np.where(person, rng.random((runs, answers)) < 0.95, rng.random((runs, answers)) < 0.4)
    picked = np.argsort(rng.random((runs, answers)), axis=1)[:, :labels]
    rows = np.arange(runs)[:, None]
    labelled = np.full((runs, answers), np.nan)
    labelled[rows, picked] = person[rows, picked]
    return truth, judge, labelled


def _corrected(judge: np.ndarray, labelled: np.ndarray) -> np.ndarray:
    """(estimate, low, high) per run, stratified by the verdict alone."""
    alone = np.arange(judge.shape[1])
    found = [corrected(j.astype(int), h, alone) for j, h in zip(judge, labelled, strict=True)]
    return np.array([(c.estimate, c.low, c.high) for c in found]).T


def test_corrected_interval_covers_the_human_accuracy_where_the_raw_judge_is_biased():
    truth, judge, labelled = _simulate(runs=1000, answers=1000, labels=100, seed=7)
    estimate, low, high = _corrected(judge, labelled)
    coverage = np.mean((low <= truth) & (truth <= high))
    assert coverage >= 0.93
    assert abs(estimate.mean() - truth) < 0.005  # unbiased
    # the raw judged score's own interval almost never covers the truth
    raw = judge.mean(axis=1)
    half = 1.96 * judge.std(axis=1, ddof=1) / np.sqrt(judge.shape[1])
    assert np.mean((raw - half <= truth) & (truth <= raw + half)) < 0.01


def test_corrected_interval_still_covers_when_both_verdicts_get_equal_labels():
    """Both verdicts labelled alike, whatever their shares: 50 answers the judge called
    correct and 50 it called wrong, though it calls 73% correct."""
    rng = np.random.default_rng(11)
    runs, answers, truth = 1000, 1000, 0.6
    person = rng.random((runs, answers)) < truth
    judge = np.where(person, rng.random(person.shape) < 0.95, rng.random(person.shape) < 0.4)
    # per run, the first 50 answers of each verdict in a random order
    order = np.argsort(rng.random(person.shape), axis=1)
    rows = np.arange(runs)[:, None]
    said = judge[rows, order]
    rank = np.where(said, np.cumsum(said, axis=1), np.cumsum(~said, axis=1))
    picked = np.sort(np.where(rank <= 50, order, answers), axis=1)[:, :100]
    labelled = np.full((runs, answers), np.nan)
    labelled[rows, picked] = person[rows, picked]
    estimate, low, high = _corrected(judge, labelled)
    assert np.mean((low <= truth) & (truth <= high)) >= 0.93
    assert abs(np.mean(estimate) - truth) < 0.005


def test_corrected_interval_is_narrower_than_the_labels_alone_when_the_judge_is_good():
    rng = np.random.default_rng(1)
    person = rng.random((1000, 500)) < 0.7
    judge = np.where(rng.random((1000, 500)) < 0.95, person, ~person)
    labelled = np.full(person.shape, np.nan)
    labelled[:, :50] = person[:, :50]
    _, low, high = _corrected(judge, labelled)
    h = person[:, :50]
    labels_only = 2 * 1.96 * h.std(axis=1, ddof=1) / np.sqrt(50)
    assert np.median(high - low) < np.median(labels_only)
