"""A judged run stored in a results database, for the label and agreement tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
from builders import SPACE, make_answers, make_scores, make_testset

from ragsweep.core.schemas import write_table
from ragsweep.evaluation.leaderboard import Board, build_board
from ragsweep.reporting.report import render_html
from ragsweep.store import database
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import configs_table

JUDGE = {
    "model": "scripted-judge",
    "endpoint": "http://127.0.0.1/v1",
    "system_prompt": "grade",
    "template": "{question} {references} {answer}",
    "out_of_scope_note": "",
}


def judged_board(
    verdicts: np.ndarray, judge: dict | None = None, testset=None
) -> tuple[Board, pa.Table]:
    """The board of a run whose judge gave ``verdicts`` (configs x questions, 1/0/NaN); its
    answer correctness is the verdict (so the token metric agrees with the judge); and its
    test set."""
    configs = SPACE.all_configs()[: len(verdicts)]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(np.shape(verdicts)[1])]
    testset = testset if testset is not None else make_testset(questions)
    scores = make_scores(ids, questions, np.nan_to_num(verdicts))
    flat = np.asarray(verdicts, float).ravel()
    scores = scores.set_column(
        scores.schema.get_field_index("correctness"),
        "correctness",
        pa.array(flat, mask=np.isnan(flat)),
    )
    scores = scores.replace_schema_metadata({"ragsweep.judge": json.dumps(judge or JUDGE)})
    settings = RunSettings("docs", "testset.json", SPACE, "correctness").record()
    board = build_board(
        scores,
        make_answers(ids, questions),
        testset,
        configs_table(configs),
        "correctness",
        settings=settings,
    )
    return board, testset


def store_judged_run(
    engine, run_id: str, verdicts: np.ndarray, judge: dict | None = None, testset=None
) -> pa.Table:
    """Publish a run whose judge gave ``verdicts`` (``judged_board``). Returns the test set."""
    board, testset = judged_board(verdicts, judge, testset)
    database.publish(engine, run_id, board.leaderboard, board.results, testset)
    return testset


def write_judged_folder(run_dir: Path, verdicts: np.ndarray) -> Path:
    """A complete run folder of a run whose judge gave ``verdicts`` (``judged_board``)."""
    board, testset = judged_board(verdicts)
    (run_dir / "patterns").mkdir(parents=True)
    write_table(board.leaderboard, run_dir / "leaderboard.arrow", "leaderboard")
    write_table(board.results, run_dir / "results.arrow", "results")
    write_table(board.breakdown, run_dir / "breakdown.arrow", "breakdown")
    write_table(board.failures, run_dir / "failures.arrow", "failures")
    write_table(testset, run_dir / "testset.arrow", "testset")
    (run_dir / "report.html").write_text(render_html(board), encoding="utf-8")
    return run_dir
