"""A run's downloads from `ragsweep ui`: leaderboard and results as CSV and Parquet, the
report, the patterns folder as a zip (when the run's folder is in the UI's runs folder)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pyarrow.parquet as pq
from builders import make_board, make_testset
from starlette.testclient import TestClient

from ragsweep.store import database
from ragsweep.ui import create_app


def test_a_runs_tables_report_and_patterns_download(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    board = make_board(np.ones((2, 6)))
    testset = make_testset([f"q{i:03d}" for i in range(6)])
    database.publish(engine, "run-1", board.leaderboard, board.results, testset)
    runs_dir = tmp_path / "runs"
    pattern = runs_dir / "run-1" / "patterns" / "rank-1"
    pattern.mkdir(parents=True)
    (pattern / "pattern.json").write_text('{"rank": 1}')
    client = TestClient(create_app(engine, runs_dir=runs_dir))
    page = client.get("/runs/run-1").text
    assert 'href="/runs/run-1/patterns.zip"' in page and "leaderboard.parquet" in page

    answer = client.get("/runs/run-1/download/leaderboard.csv")
    assert answer.headers["content-disposition"] == 'attachment; filename="run-1-leaderboard.csv"'
    assert "config_id" in answer.text.splitlines()[0]
    assert len(answer.text.strip().splitlines()) == 1 + board.leaderboard.num_rows
    parquet = pq.read_table(io.BytesIO(client.get("/runs/run-1/download/results.parquet").content))
    assert parquet.num_rows == board.results.num_rows == 12
    assert client.get("/runs/run-1/download/settings.json").status_code == 404

    report = client.get("/runs/run-1/report.html")
    assert report.status_code == 200 and "<html" in report.text.lower()
    archive = zipfile.ZipFile(io.BytesIO(client.get("/runs/run-1/patterns.zip").content))
    assert archive.namelist() == ["patterns/rank-1/pattern.json"]

    database.publish(engine, "run-2", board.leaderboard, board.results, testset)
    assert "patterns.zip" not in client.get("/runs/run-2").text  # no folder here
    assert client.get("/runs/run-2/patterns.zip").status_code == 404
