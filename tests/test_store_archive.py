"""Archiving a run, on SQLite, a real PostgreSQL server and Oracle (when
RAGSWEEP_TEST_ORACLE_DSN is set): the lists hide it unless asked, while its results, the
sweep's trend and ``baseline=latest`` still see it; a store made before the column gets it
when opened; ``ragsweep runs archive``."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import sqlalchemy as sa
from builders import make_board, make_testset
from conftest import emptied

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import SETTINGS_KEY, settings_of
from ragsweep.reporting import publishing
from ragsweep.store import database
from ragsweep.store.annotations import archive_run, label_run

ORACLE_DSN = os.environ.get("RAGSWEEP_TEST_ORACLE_DSN")
VALUES = np.tile([1.0, 1.0, 0.0], (2, 4))  # 2 configurations x 12 questions


@pytest.fixture(params=["sqlite", "postgresql", "oracle"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'r.db'}"
    if request.param == "postgresql":
        return emptied(request.getfixturevalue("postgres_server"))
    if not ORACLE_DSN:
        pytest.skip("set RAGSWEEP_TEST_ORACLE_DSN to test against an Oracle server")
    return emptied(ORACLE_DSN)


def publish(engine, run_id: str) -> None:
    board = make_board(VALUES)
    settings = {**settings_of(board.leaderboard), "sweep_name": "nightly"}
    leaderboard = board.leaderboard.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})
    testset = make_testset([f"q{i:03d}" for i in range(VALUES.shape[1])])
    publishing.publish(engine, run_id, leaderboard, board.results, testset)


def listed(engine, **query) -> list[str]:
    return [r["run_id"] for r in database.find_runs(engine, **query)]


def test_an_archived_run_leaves_the_lists_but_stays_the_latest_baseline(url):
    engine = database.connect(url)
    publish(engine, "night-1")
    publish(engine, "night-2")
    archive_run(engine, "night-2")

    assert listed(engine) == ["night-1"]
    assert listed(engine, archived=True) == ["night-2"]
    assert listed(engine, archived=None) == ["night-2", "night-1"]
    assert [r["run_id"] for r in database.list_runs(engine)] == ["night-1"]
    assert [r["run_id"] for r in database.list_runs(engine, archived=None)] == [
        "night-2",
        "night-1",
    ]
    # archiving hides; it changes nothing the run means
    assert database.latest_successful(engine, "nightly") == "night-2"
    assert [p["run_id"] for p in database.sweep_trend(engine, "nightly")] == ["night-1", "night-2"]
    assert database.load_leaderboard(engine, "night-2").num_rows == 2
    assert database.load_results(engine, "night-2").num_rows == 24

    first = database.run_info(engine, "night-2")["archived_at"]
    assert first is not None
    archive_run(engine, "night-2")  # again: it keeps the time it was first archived
    label_run(engine, "night-2", title="kept")
    publish(engine, "night-2")  # stored again (a resumed run, an import): still archived
    info = database.run_info(engine, "night-2")
    assert (info["archived_at"], info["title"]) == (first, "kept")

    archive_run(engine, "night-2", archived=False)
    assert listed(engine) == ["night-2", "night-1"]
    assert database.run_info(engine, "night-2")["archived_at"] is None
    with pytest.raises(RagsweepError, match="no run 'missing'"):
        archive_run(engine, "missing")


def test_a_store_made_before_archiving_gets_the_column_when_opened(url):
    engine = database.connect(url)
    publish(engine, "old-run")
    with engine.begin() as conn:  # as an older ragsweep made it
        conn.execute(sa.text("ALTER TABLE ragsweep_runs DROP COLUMN archived_at"))
    engine.dispose()

    reopened = database.connect(url)
    columns = {c["name"].lower() for c in sa.inspect(reopened).get_columns("ragsweep_runs")}
    assert "archived_at" in columns
    assert listed(reopened) == ["old-run"]  # null: not archived
    archive_run(reopened, "old-run")
    assert listed(reopened) == [] and listed(reopened, archived=True) == ["old-run"]


def test_ragsweep_runs_archive_hides_a_run_until_undone_and_runs_archived_lists_it(tmp_path):
    from test_cli import ragsweep

    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = database.connect(url)
    publish(engine, "night-1")
    publish(engine, "night-2")

    archived = ragsweep("runs", "archive", "night-2", "--store", url)
    assert archived.returncode == 0, archived.stderr
    assert archived.stdout.startswith("archived run night-2 in sqlite:///")
    plain = ragsweep("runs", "--store", url).stdout
    everything = ragsweep("runs", "--archived", "--store", url).stdout
    assert "night-1" in plain and "night-2" not in plain
    [line] = [x for x in everything.splitlines() if x.startswith("night-2")]
    assert line.endswith("[archived]")
    assert ragsweep("runs", "archive", "night-1", "--store", url).returncode == 0
    assert ragsweep("runs", "--store", url).stdout.endswith(
        "; every run is archived: `ragsweep runs --archived` lists them\n"
    )
    assert ragsweep("runs", "archive", "night-2", "--undo", "--store", url).returncode == 0
    assert "night-2" in ragsweep("runs", "--store", url).stdout
    unknown = ragsweep("runs", "archive", "nope", "--store", url)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert "error: results store: no run 'nope'" in unknown.stderr
