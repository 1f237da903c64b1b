"""The MLflow run of a stored run: where the track side step logged it is kept in the run
folder (``mlflow.json``) and the results database, and the run's page links to it (a
tracking server's page) or names it (a file or database store, no page)."""

from __future__ import annotations

import json

import pytest
import ui_demo
from builders import make_board
from conftest import emptied
from starlette.testclient import TestClient

from ragsweep.core.schemas import write_table
from ragsweep.reporting.tracking import run_link
from ragsweep.runner.closing import MLFLOW_FILE, close_run
from ragsweep.store import database
from ragsweep.ui import create_app

RUN = "20261201-020000-000000"  # a run folder's name: when it started


def run_folder(tmp_path):
    """A finished run's folder as close_run reads it (no patterns: nothing here needs them)."""
    board = make_board(ui_demo.night_scores(0))
    folder = tmp_path / RUN
    write_table(board.leaderboard, folder / "leaderboard.arrow", "leaderboard")
    write_table(board.results, folder / "results.arrow", "results")
    write_table(ui_demo.testset_rows(), folder / "testset.arrow", "testset")
    (folder / "report.html").write_text("<html>report</html>", encoding="utf-8")
    return folder


def test_a_tracked_run_keeps_its_mlflow_run_in_the_folder_and_the_store(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)  # MLflow puts a local store's artifacts in ./mlruns
    folder, tracking = run_folder(tmp_path), f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = f"sqlite:///{tmp_path / 'results.db'}"
    outcome = close_run(folder, store, tracking, baseline="")
    assert outcome.status == "succeeded", outcome.failed
    logged = json.loads((folder / MLFLOW_FILE).read_text())
    run = MlflowClient(tracking).get_run(logged["run_id"])
    assert run.info.experiment_id == logged["experiment_id"] and logged["uri"] == tracking
    engine = database.connect(store)
    assert database.run_info(engine, RUN)["mlflow"] == logged
    page = TestClient(create_app(engine)).get(f"/runs/{RUN}").text
    assert f"run <code>{logged['run_id']}</code> in {tracking}" in page  # no page to link


def test_a_run_logged_to_a_tracking_server_links_to_its_page_with_no_credentials(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    board = make_board(ui_demo.night_scores(0))
    logged = {"run_id": "abc123", "experiment_id": "7", "uri": "https://mlflow.example:5000/"}
    database.publish(
        engine, "served", board.leaderboard, board.results, ui_demo.testset_rows(), mlflow=logged
    )
    database.publish(engine, "untracked", board.leaderboard, board.results, ui_demo.testset_rows())
    client = TestClient(create_app(engine))
    link = "https://mlflow.example:5000/#/experiments/7/runs/abc123"
    assert f'<a href="{link}" rel="noopener noreferrer">' in client.get("/runs/served").text
    assert 'id="mlflow"' not in client.get("/runs/untracked").text


@pytest.mark.parametrize(
    ("logged", "link"),
    [
        ({"run_id": "r1", "experiment_id": "3", "uri": "http://127.0.0.1:5000"}, True),
        ({"run_id": "r1", "experiment_id": "3", "uri": "sqlite:///m.db"}, False),
        ({"run_id": "r1", "experiment_id": "3", "uri": "javascript:alert(1)//"}, False),
        ({"run_id": "", "experiment_id": "3", "uri": "http://127.0.0.1:5000"}, False),
    ],
)
def test_only_a_tracking_server_gets_a_link(logged, link):
    assert (run_link(logged) is not None) == link


def test_the_mlflow_run_is_stored_and_read_back_on_postgresql(postgres_server):
    engine = database.connect(emptied(postgres_server))
    try:
        board = make_board(ui_demo.night_scores(0))
        logged = {"run_id": "abc123", "experiment_id": "7", "uri": "http://127.0.0.1:5000"}
        testset = ui_demo.testset_rows()
        database.publish(engine, "pg-run", board.leaderboard, board.results, testset, mlflow=logged)
        assert database.run_info(engine, "pg-run")["mlflow"] == logged
    finally:
        engine.dispose()
