"""Regression verdicts between two runs, from run folders and from the store."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from builders import SPACE, make_board, make_testset

from ragsweep import store
from ragsweep.regression import compare_runs, render, verdict_metrics
from ragsweep.schemas import write_table

RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")


def baseline_values(questions=60, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((3, questions)) < 0.75).astype(float)


def runs(candidate_values, baseline=None):
    before = make_board(baseline_values() if baseline is None else baseline)
    after = make_board(candidate_values)
    return (before.leaderboard, before.results), (after.leaderboard, after.results)


def test_an_identical_rerun_is_unchanged_everywhere():
    values = baseline_values()
    result = compare_runs(*runs(values))
    assert set(result.table["verdict"].to_pylist()) == {"unchanged"}
    assert not result.best_regressed
    assert result.flips.num_rows == 0
    assert verdict_metrics(result)["best_regressed"] == 0.0


def test_a_real_drop_of_the_best_configuration_raises_the_alarm_and_lists_flips():
    values = baseline_values()
    best = make_board(values).leaderboard["config_id"][0].as_py()
    row = [c["config_id"] for c in SPACE.all_configs()].index(best)
    passing = np.flatnonzero(values[row] == 1)[:15]
    worse = values.copy()
    worse[row, passing] = 0.0  # 15 questions the best answered now fail
    result = compare_runs(*runs(worse, values))
    assert result.best["config_id"] == best
    assert result.best["verdict"] == "regressed" and result.best_regressed
    assert result.best["difference"] == pytest.approx(-15 / 60)
    assert result.best["difference_high"] < 0
    assert result.best["flipped_to_wrong"] == 15
    flipped = result.flips.filter(pc.equal(result.flips["config_id"], best))
    assert sorted(flipped["question_id"].to_pylist()) == [f"q{i:03d}" for i in passing]
    others = [r["verdict"] for r in result.table.to_pylist() if not r["is_best"]]
    assert others == ["unchanged", "unchanged"]
    text = render(result)
    assert "REGRESSED" in text and "now fails (15)" in text
    assert verdict_metrics(result)["best_regressed"] == 1.0


def test_an_improvement_is_called_improved_not_an_alarm():
    values = baseline_values()
    better = np.ones_like(values)
    result = compare_runs(*runs(better, values))
    assert set(result.table["verdict"].to_pylist()) == {"improved"}
    assert not result.best_regressed


def test_runs_without_shared_questions_are_a_clear_error():
    from ragsweep.errors import RagsweepError

    (bl, br), cand = runs(baseline_values())
    renamed = br.set_column(1, "question_id", [[f"x{i}" for i in range(br.num_rows)]])
    with pytest.raises(RagsweepError, match="share no configuration or no question"):
        compare_runs((bl, renamed), cand)


def write_run(folder: Path, values) -> Path:
    b = make_board(values)
    folder.mkdir()
    write_table(b.leaderboard, folder / "leaderboard.arrow", "leaderboard")
    write_table(b.results, folder / "results.arrow", "results")
    return folder


def cli(*args):
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, timeout=120)


def test_compare_command_exits_1_on_a_regression_0_otherwise_2_on_a_mistake(tmp_path):
    values = baseline_values()
    worse = values.copy()
    worse[:, :20] = 0.0
    base = write_run(tmp_path / "base", values)
    same = write_run(tmp_path / "same", values)
    bad = write_run(tmp_path / "bad", worse)
    assert cli("compare", str(base), str(same)).returncode == 0
    result = cli("compare", str(base), str(bad))
    assert result.returncode == 1, result.stderr
    assert "REGRESSED" in result.stdout
    missing = cli("compare", str(base), "no-such-run", "--store", f"sqlite:///{tmp_path}/r.db")
    assert missing.returncode == 2 and "no run 'no-such-run'" in missing.stderr


def test_compare_reads_stored_runs_by_id(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = store.connect(url)
    for run_id, values in [("a", baseline_values()), ("b", baseline_values(seed=1))]:
        b = make_board(values)
        questions = make_testset(b.results["question_id"].unique().to_pylist())
        store.publish(engine, run_id, b.leaderboard, b.results, questions)
    result = cli("compare", "a", "b", "--store", url, "--format", "markdown")
    assert result.returncode in (0, 1), result.stderr
    assert result.stdout.startswith("| verdict |")
