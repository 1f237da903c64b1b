"""MLflow: a sweep is one parent run with a nested child per configuration, checked in real
tracking stores (a SQLite backend, and `mlflow server` on loopback) with MlflowClient. A
whole `ragsweep run` logging to the server is tests/test_ui.py's run started from the page
(one pipeline run for both)."""

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import pytest
from builders import make_board
from conftest import free_port, ragsweep_here
from mlflow.tracking import MlflowClient
from test_cli import assert_user_error

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import METRICS, read_table
from ragsweep.reporting.tracking import log_sweep, safe_uri
from ragsweep.sweep.space import CONFIG_FIELDS

REPO = Path(__file__).resolve().parent.parent
MLFLOW = str(Path(sys.executable).parent / "mlflow")


@contextmanager
def serving_mlflow(root: Path) -> Iterator[str]:
    """A real MLflow tracking server on a free port of 127.0.0.1 (SQLite backend in ``root``,
    artifacts served from there); its URI. Without its job runner (a Huey consumer for
    MLflow's GenAI jobs, which ragsweep never submits): ~6 CPU s of imports saved."""
    port = free_port()
    command = [MLFLOW, "server", "--backend-store-uri", f"sqlite:///{root}/mlflow.db"]
    command += ["--artifacts-destination", str(root / "artifacts")]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    log = (root / "server.log").open("w")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=env)
    uri = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            if server.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{uri}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not answer /health within 120 s")
        yield uri
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a loaded machine: its workers are slow to stop
            server.kill()
            server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory) -> Iterator[str]:
    with serving_mlflow(tmp_path_factory.mktemp("mlflow-server")) as uri:
        yield uri


def the_sweep(client: MlflowClient, run_name: str):
    """The parent run named ``run_name`` and its children."""
    experiment = client.get_experiment_by_name("ragsweep")
    runs = client.search_runs([experiment.experiment_id], f"tags.`ragsweep.run_id` = '{run_name}'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parents) == 1
    [parent] = parents
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == len(runs) - 1
    return parent, children


def assert_logged(client: MlflowClient, run_name: str, leaderboard: pa.Table):
    """One parent and one finished child per leaderboard row, whose parameters are the
    configuration and whose metrics equal the row's figures with their bounds."""
    parent, children = the_sweep(client, run_name)
    assert parent.info.status == "FINISHED"
    rows = {row["config_id"]: row for row in leaderboard.to_pylist()}
    assert sorted(c.data.params["config_id"] for c in children) == sorted(rows)
    for child in children:
        assert child.info.status == "FINISHED"
        row = rows[child.data.params["config_id"]]
        for field, _ in CONFIG_FIELDS:
            if row[field] is not None:
                assert child.data.params[field] == str(row[field])
        for metric in METRICS:
            for name in (metric, f"{metric}_low", f"{metric}_high"):
                if row[name] is None:
                    assert name not in child.data.metrics
                else:
                    assert child.data.metrics[name] == row[name]
        assert child.data.metrics["rank"] == row["rank"]
        assert child.data.metrics["tied_with_best"] == float(row["tied_with_best"])
    best = leaderboard.to_pylist()[0]
    assert parent.data.tags["ragsweep.best_config_id"] == best["config_id"]
    assert parent.data.params["best.config_id"] == best["config_id"]
    metric = json.loads(leaderboard.schema.metadata[b"ragsweep.settings"])["optimization_metric"]
    assert parent.data.params["optimization_metric"] == metric
    assert parent.data.metrics[f"best.{metric}"] == best[metric]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"leaderboard.arrow", "leaderboard.csv", "report.html", "settings.json"} <= artifacts
    copy = client.download_artifacts(parent.info.run_id, "leaderboard.arrow")
    assert read_table(copy, "leaderboard").equals(leaderboard)
    return parent, children


@pytest.fixture
def board():
    values = np.random.default_rng(3).uniform(size=(4, 40))
    values[0] += 0.3
    return make_board(np.clip(values, 0, 1)).leaderboard


def test_a_sweep_is_one_parent_run_with_a_nested_child_per_configuration_in_sqlite(
    tmp_path, board, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # MLflow puts a local store's artifacts in ./mlruns
    report = tmp_path / "report.html"
    report.write_text("<html>the report</html>")
    uri = f"sqlite:///{tmp_path}/mlflow.db"

    parent_id = log_sweep(board, uri, "run-1", report=report).run_id

    client = MlflowClient(uri)
    parent, children = assert_logged(client, "run-1", board)
    assert parent.info.run_id == parent_id
    assert len(children) == board.num_rows == 4
    html = client.download_artifacts(parent_id, "report.html")
    assert Path(html).read_text() == "<html>the report</html>"


def test_a_sweep_logs_its_embedding_runtimes_though_a_model_name_is_no_parameter_name(
    tmp_path, monkeypatch
):
    """``all-MiniLM-L6-v2@onnx-int8`` cannot name an MLflow parameter: the runtimes and
    identities the run fixed are logged as one parameter each."""
    from dataclasses import replace

    from ragsweep.core.schemas import SETTINGS_KEY
    from ragsweep.sweep.settings import RunSettings

    monkeypatch.chdir(tmp_path)
    model = "all-MiniLM-L6-v2@onnx-int8"
    run = RunSettings("docs", "t.json", optimization_metric="answer_correctness")
    fixed = replace(
        run,
        embedding_runtimes={model: "onnx-int8"},
        embedding_identities={model: "onnx-int8:8ecdeafc6ea90025"},
    )
    values = np.random.default_rng(3).uniform(size=(2, 10))
    board = make_board(values).leaderboard
    board = board.replace_schema_metadata({SETTINGS_KEY: json.dumps(fixed.record())})
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    parent_id = log_sweep(board, uri, "run-runtimes").run_id
    params = MlflowClient(uri).get_run(parent_id).data.params
    assert json.loads(params["embedding_runtimes"]) == [[model, "onnx-int8"]]
    assert json.loads(params["embedding_identities"]) == [[model, "onnx-int8:8ecdeafc6ea90025"]]


def test_a_server_with_credentials_in_its_uri_gets_the_sweep_and_never_the_uri(
    mlflow_server, board, caplog, tmp_path
):
    uri = mlflow_server.replace("http://", "http://alice:s3cret-pw@")
    caplog.set_level("INFO", logger="ragsweep")

    report = tmp_path / "report.html"
    report.write_text("<html>the report</html>")
    log_sweep(board, uri, "run-credentials", report=report)

    client = MlflowClient(mlflow_server)
    parent, children = assert_logged(client, "run-credentials", board)
    for run in (parent, *children):
        logged = json.dumps([run.data.params, run.data.tags, run.info.run_name])
        assert "s3cret" not in logged and "alice" not in logged
    assert "s3cret" not in caplog.text and mlflow_server in caplog.text


def test_an_unreachable_server_is_a_clear_error_without_the_credentials(board):
    uri = f"http://bob:hunter2@127.0.0.1:{free_port()}"
    with pytest.raises(RagsweepError, match="unreachable") as caught:
        log_sweep(board, uri, "run-x")
    assert "hunter2" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_messages_show_the_uri_without_user_password_or_query():
    assert safe_uri("https://u:pw@mlflow.example:5000/x?token=t") == "https://mlflow.example:5000/x"
    assert safe_uri("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"


EXAMPLES = [
    "--docs",
    str(REPO / "examples/docs"),
    "--testset",
    str(REPO / "examples/testset.jsonl"),
]
SMALL = ["--chunk-sizes", "64,128", "--top-k", "1", "--search-types", "similarity", "--no-store"]


def test_ragsweep_run_stops_before_the_sweep_when_mlflow_does_not_answer(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    result = ragsweep_here("run", *EXAMPLES, *SMALL, "--output", str(tmp_path), "--mlflow", dead)
    assert_user_error(result, "MLflow tracking server", "unreachable")
    assert not any(tmp_path.iterdir())  # nothing ran, nothing to lose


def test_mlflow_failing_in_the_pipeline_is_a_warning_and_the_run_goes_on(board, tmp_path, caplog):
    from ragsweep.reporting.tracking import log_from_step

    caplog.set_level("WARNING", logger="ragsweep")
    dead = f"http://carol:pw-9@127.0.0.1:{free_port()}"
    assert log_from_step(board, tmp_path / "report.html", dead, "run-y") == ""
    assert "unreachable" in caplog.text and "ragsweep track" in caplog.text
    assert "pw-9" not in caplog.text
    assert log_from_step(board, tmp_path / "report.html", "", "run-y") == ""  # no URI: skipped


def test_ragsweep_track_logs_a_finished_run_folder(board, tmp_path, mlflow_server):
    """To the module's server (a new SQLite store costs its ~2 CPU s of migrations)."""
    from ragsweep.core.schemas import write_table

    run_dir = tmp_path / "20261201-000000-000000"
    run_dir.mkdir()
    write_table(board, run_dir / "leaderboard.arrow", "leaderboard")
    (run_dir / "report.html").write_text("<html>r</html>")

    result = ragsweep_here("track", str(run_dir), "--mlflow", mlflow_server)

    assert result.returncode == 0, result.stderr
    assert_logged(MlflowClient(mlflow_server), run_dir.name, board)
    missing = ragsweep_here("track", str(tmp_path), "--mlflow", mlflow_server)
    assert_user_error(missing, "not a run folder")


def test_track_step_skips_without_a_uri_and_logs_with_the_secrets_variable(
    board, tmp_path, monkeypatch, mlflow_server
):
    from kfp import dsl

    from ragsweep.components.track import track
    from ragsweep.core.schemas import write_table

    leaderboard = dsl.Dataset(uri=str(tmp_path / "leaderboard"))
    write_table(board, leaderboard.path, "leaderboard")
    report = dsl.HTML(uri=str(tmp_path / "report"))
    Path(report.path).write_text("<html>r</html>")
    step = {"leaderboard": leaderboard, "report": report, "pipeline_run_id": "kfp-run-7"}

    assert track.python_func(**step, mlflow_tracking_uri="") == ""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server)  # as the Secret sets it on a cluster
    parent = track.python_func(**step, mlflow_tracking_uri="")

    assert assert_logged(MlflowClient(mlflow_server), "kfp-run-7", board)[0].info.run_id == parent
