"""People's labels in the results database: stored by answer and judge on SQLite and
PostgreSQL, imported and exported with clear per-record errors, the labelling queue, the
judge's agreement, the corrected scores, and the `ragsweep labels` / `leaderboard` commands."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from conftest import emptied, ragsweep_here
from judged_runs import store_judged_run

from ragsweep.core.errors import RagsweepError
from ragsweep.curation import labels
from ragsweep.models.replies import digest
from ragsweep.store import database


@pytest.fixture
def engine(tmp_path):
    return database.connect(f"sqlite:///{tmp_path / 'results.db'}")


@pytest.fixture(params=["sqlite", "postgresql"])
def any_engine(request, tmp_path):
    """A store on each backend, for what the backends could store differently."""
    if request.param == "sqlite":
        return database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    return database.connect(emptied(request.getfixturevalue("postgres_server")))


def verdicts(seed: int = 0, configs: int = 3, questions: int = 20) -> np.ndarray:
    return (np.random.default_rng(seed).random((configs, questions)) < 0.6).astype(float)


def label_every_answer(engine, run_id: str, say) -> int:
    """Label every judged answer of the run; ``say(verdict) -> kind``."""
    judged, _ = labels.judged_of(engine, run_id)
    count = 0
    for config, question, verdict in zip(
        judged.config_id, judged.question_id, judged.verdict, strict=True
    ):
        labels.label_result(engine, run_id, config, question, say(bool(verdict)), "ann")
        count += 1
    return count


def test_a_label_is_keyed_by_question_version_answer_and_judge_and_replaced_by_its_author(
    any_engine,
):
    engine = any_engine
    store_judged_run(engine, "r1", verdicts())
    judged, (model, prompt) = labels.judged_of(engine, "r1")
    config, question = judged.config_id[0], judged.question_id[0]
    first = labels.label_result(engine, "r1", config, question, "agree", "ann", "right")
    assert (first.judge_model, first.judge_prompt) == (model, prompt)
    assert first.correct == bool(judged.verdict[0])
    assert first.answer_hash == labels.answer_hash(f"answer of {config} to {question}")
    labels.label_result(engine, "r1", config, question, "disagree", "ann")
    labels.label_result(engine, "r1", config, question, "correct", "bob")
    stored = labels.load(engine)
    assert [(x.author, x.kind) for x in stored] == [("ann", "disagree"), ("bob", "correct")]
    assert stored[0].correct is not first.correct and stored[0].note is None


def test_a_label_stays_valid_for_another_run_that_reproduces_the_answer(engine):
    store_judged_run(engine, "r1", verdicts())
    label_every_answer(engine, "r1", lambda verdict: "agree")
    store_judged_run(engine, "r2", verdicts())  # the same answers, judged again
    measured, judge = labels.run_agreement(engine, "r2")
    assert measured.labels == 60 and measured.accuracy == 1.0 and "scripted-judge" in judge


def test_agree_without_the_judges_verdict_and_an_unknown_label_are_refused(engine):
    store_judged_run(engine, "r1", np.full((1, 3), np.nan))
    judged, _ = labels.judged_of(engine, "r1")
    with pytest.raises(RagsweepError, match="field 'judge_verdict'.*'agree' needs"):
        labels.label_result(engine, "r1", judged.config_id[0], "q000", "agree", "ann")
    with pytest.raises(RagsweepError, match="field 'label': 'maybe' is not one of"):
        labels.label_result(engine, "r1", judged.config_id[0], "q000", "maybe", "ann")
    with pytest.raises(RagsweepError, match="has no answer to 'q999'"):
        labels.label_result(engine, "r1", judged.config_id[0], "q999", "correct", "ann")
    assert labels.load(engine) == []


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_labels_exported_and_imported_again_are_the_same(any_engine, tmp_path, suffix):
    engine = any_engine
    store_judged_run(engine, "r1", verdicts(questions=4))
    label_every_answer(engine, "r1", lambda verdict: "incorrect" if verdict else "correct")
    before = labels.load(engine)
    path = tmp_path / f"labels{suffix}"
    assert labels.export_file(engine, path) == 12
    other = database.connect(f"sqlite:///{tmp_path / 'other.db'}")
    assert labels.add(other, labels.read_file(path)) == 12
    assert labels.load(other) == before


def test_an_exported_label_carries_the_question_references_and_answer(engine, tmp_path):
    store_judged_run(engine, "r1", verdicts(configs=1, questions=2))
    label_every_answer(engine, "r1", lambda verdict: "agree")
    labels.export_file(engine, tmp_path / "labels.jsonl")
    first = json.loads((tmp_path / "labels.jsonl").read_text().splitlines()[0])
    assert first["question"] == "What about q000?"
    assert first["reference_answers"] == ["the answer to q000"]
    assert first["answer"].startswith("answer of ") and first["label"] == "agree"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"label": "agree", "answer": "x"}', "labels.jsonl:2: field 'judge_verdict'"),
        ('{"label": "nope"}', "labels.jsonl:2: field 'label': 'nope' is not one of"),
        ('{"label": "correct", "answer": "x"}', "labels.jsonl:2: field 'question_version'"),
        ('{"label": "correct", "judge_verdict": "perhaps"}', "field 'judge_verdict': 'perhaps'"),
        ("{not json", "labels.jsonl:2: not JSON"),
    ],
)
def test_a_bad_record_names_its_file_line_and_field_and_nothing_is_stored(tmp_path, line, problem):
    good = {
        "label": "correct",
        "question_version": "v1",
        "answer": "Port 9000.",
        "judge_model": "judge",
        "judge_prompt": "p1",
        "author": "ann",
    }
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(good) + "\n" + line + "\n")
    with pytest.raises(RagsweepError, match=problem.replace("(", r"\(")):
        labels.read_file(path)


def test_a_bad_csv_row_names_its_line(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(
        "label,question_version,answer_hash,judge_model,judge_prompt,author\n"
        "correct,v1,h1,judge,p1,ann\n"
        "correct,v2,h2,judge,p1,\n"
    )
    with pytest.raises(RagsweepError, match=r"labels.csv:3: field 'author' is missing"):
        labels.read_file(path)


def test_the_queue_goes_round_the_strata_and_draws_each_in_a_random_order(engine):
    store_judged_run(engine, "r1", verdicts(seed=1, configs=2, questions=8))
    judged, _ = labels.judged_of(engine, "r1")
    proposed = labels.queue(engine, "r1", size=16)
    # round robin over configuration x verdict (the token metric agrees with the judge here)
    assert len({(p.config_id, p.verdict) for p in proposed[:4]}) == 4
    assert proposed[0].why == labels.STRATA[2]  # "judged correct, answer_correctness agrees"
    # within a stratum, in the order of the answers' hashes: not the questions' order
    key_of = {
        (c, q): k for c, q, k in zip(judged.config_id, judged.question_id, judged.key, strict=True)
    }
    for stratum in {(p.config_id, p.verdict) for p in proposed}:
        keys = [
            key_of[(p.config_id, p.question_id)]
            for p in proposed
            if (p.config_id, p.verdict) == stratum
        ]
        assert keys == sorted(keys, key=lambda key: digest(list(key)))
    assert [p.question_id for p in proposed] != sorted(p.question_id for p in proposed)
    first = proposed[0]
    labels.label_result(engine, "r1", first.config_id, first.question_id, "correct", "ann")
    assert (first.config_id, first.question_id) not in [
        (p.config_id, p.question_id) for p in labels.queue(engine, "r1", 16)
    ]


def test_an_agreeing_labeller_gives_kappa_one_and_a_contrary_one_a_negative_kappa(engine):
    store_judged_run(engine, "r1", verdicts(questions=12))
    label_every_answer(engine, "r1", lambda verdict: "agree")
    measured, _ = labels.run_agreement(engine, "r1")
    assert measured.labels == 36 and measured.kappa == pytest.approx(1.0) and measured.reliable
    label_every_answer(engine, "r1", lambda verdict: "disagree")
    measured, _ = labels.run_agreement(engine, "r1")
    assert measured.accuracy == 0 and measured.kappa < -0.9 and not measured.reliable


def test_corrected_scores_follow_the_labels_not_the_judge(engine):
    store_judged_run(engine, "r1", np.ones((2, 10)))  # the judge calls every answer correct
    judged, _ = labels.judged_of(engine, "r1")
    first = judged.config_id[0]
    for q in range(5):  # people find half of the first configuration's answers wrong
        kind = "disagree" if q % 2 else "agree"
        labels.label_result(engine, "r1", first, f"q{q:03d}", kind, "ann")
    board = labels.corrected_board(engine, "r1")
    assert board[0]["config_id"] == first and board[0]["labels"] == 5
    assert board[0]["correctness_corrected"] == pytest.approx(1 - 2 / 5)
    assert board[0]["correctness_corrected_low"] < 0.6 < board[0]["correctness_corrected_high"]
    assert np.isnan(board[1]["correctness_corrected"]) and board[1]["correctness"] == 1.0


def ragsweep(*args: str, url: str) -> tuple[int, str, str]:
    """``ragsweep ARGS`` in this process, on the store ``url``: (exit status, out, err)."""
    ran = ragsweep_here(*args, env={**os.environ, database.ENV: url})
    return ran.returncode, ran.stdout, ran.stderr


def test_labels_commands_add_and_import_and_the_leaderboard_shows_agreement(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    engine = database.connect(url)
    store_judged_run(engine, "r1", verdicts(configs=2, questions=4))
    judged, _ = labels.judged_of(engine, "r1")

    def cli(*args: str) -> tuple[int, str, str]:
        return ragsweep(*args, url=url)

    code, out, err = cli(
        "labels", "add", "r1", "--config", judged.config_id[0], "--question", "q000",
        "--label", "correct", "--author", "ann", "--note", "checked the docs",
    )  # fmt: skip
    assert code == 0, err
    assert "the answer is correct" in out
    path = tmp_path / "labels.csv"
    labels.export_file(engine, path)
    code, out, _ = cli("leaderboard", "r1")
    assert "not shown to be reliable (fewer than 30 labels" in out
    code, out, _ = cli("leaderboard", "r1", "--metric", "correctness_corrected")
    assert "correctness_corrected [95% CI]" in out
    path.write_text(path.read_text().replace("\ncorrect,", "\nsure,", 1))
    code, _, err = cli("labels", "import", str(path))
    assert code == 2 and "Traceback" not in err
    assert f"error: {path}:2: field 'label': 'sure'" in err
