"""Log a finished sweep to MLflow: one parent run per sweep, one nested child per configuration.

The parent run holds the run's settings as parameters (the full settings as
``settings.json``), the best configuration's id, label and figures, and the leaderboard and
report as artifacts. Each child run (tag ``mlflow.parentRunId``) holds one leaderboard row:
its configuration as parameters, every metric with its interval bounds (``<metric>_low``,
``<metric>_high``), and its rank, p-value and costs as metrics. The tracking URI may carry
credentials: it is never logged, and messages show it without them (``safe_uri``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pyarrow as pa

from ragsweep.core.errors import RagsweepError, missing_extra
from ragsweep.core.schemas import settings_of
from ragsweep.evaluation.agreement import Agreement
from ragsweep.sweep.space import CONFIG_FIELDS

log = logging.getLogger("ragsweep")

URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
DEFAULT_EXPERIMENT = "ragsweep"
HEALTH_TIMEOUT_S = 5
MAX_PARAM_CHARS = 6000  # MLflow's limit on a parameter's value
BATCH = 100  # MLflow takes at most 100 parameters (1000 metrics) per log_batch call
PARAMETER_COLUMNS = [name for name, _ in CONFIG_FIELDS]


def resolve_uri(uri: str | None = None) -> str:
    """``uri``, else ``MLFLOW_TRACKING_URI``; empty: MLflow is not used."""
    return (uri or os.environ.get(URI_ENV, "")).strip()


def safe_uri(uri: str) -> str:
    """The URI for messages: no user, password or query (they may hold credentials)."""
    parts = urlsplit(uri)
    if "@" not in parts.netloc and not parts.query and not parts.fragment:
        return uri
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_reachable(uri: str) -> None:
    """Fail fast, with a message, when the tracking server at ``uri`` does not answer."""
    if not uri.startswith(("http://", "https://")):
        return
    import httpx

    url = uri.split("?")[0].rstrip("/") + "/health"
    try:
        response = httpx.get(url, timeout=HEALTH_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise RagsweepError(
            f"MLflow tracking server {safe_uri(uri)} is unreachable ({type(exc).__name__}); "
            "check the URI (--mlflow or MLFLOW_TRACKING_URI) and that the server runs"
        ) from None
    if response.status_code >= 400:
        raise RagsweepError(
            f"MLflow tracking server {safe_uri(uri)}: /health answered HTTP {response.status_code}"
        )


@dataclass(frozen=True)
class Logged:
    """Where a sweep went in MLflow: its parent run, its experiment, the tracking store
    (``safe_uri``: no credentials)."""

    run_id: str
    experiment_id: str
    uri: str


def run_link(logged: dict[str, str]) -> str | None:
    """The MLflow UI's page of a logged run (a ``Logged`` as a dict) when its tracking store is
    a server (http or https); None for a file or database store (no page to open)."""
    uri = logged.get("uri") or ""
    if not uri.startswith(("http://", "https://")) or not logged.get("run_id"):
        return None
    experiment, run = (
        quote(logged.get("experiment_id") or "0", safe=""),
        quote(logged["run_id"], safe=""),
    )
    return f"{uri.rstrip('/')}/#/experiments/{experiment}/runs/{run}"


def log_sweep(
    leaderboard: pa.Table,
    uri: str,
    run_name: str,
    report: Path | None = None,
    experiment: str | None = None,
) -> Logged:
    """Log the sweep whose ``leaderboard`` this is to the tracking store at ``uri``, as the
    parent run ``run_name`` in ``experiment`` (default: ``MLFLOW_EXPERIMENT_NAME``, else
    ragsweep). Returns where it went (the parent run). Raises ``RagsweepError`` when MLflow
    cannot be reached or refuses a write; the parent run is then marked failed when it
    exists."""
    try:
        from mlflow.exceptions import MlflowException
    except ModuleNotFoundError as exc:
        raise missing_extra(exc.name, "mlflow", "tracking to MLflow") from None
    check_reachable(uri)

    experiment = experiment or os.environ.get(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT
    client, parent = _client(uri), None
    try:
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        parent = client.create_run(
            experiment_id, run_name=run_name, tags={"ragsweep.run_id": run_name}
        ).info.run_id
        _log_parent(client, parent, leaderboard, report)
        for row in leaderboard.to_pylist():
            child = client.create_run(
                experiment_id,
                run_name=row["label"] or row["config_id"],
                tags={"mlflow.parentRunId": parent, "ragsweep.run_id": run_name},
            ).info.run_id
            _log(client, child, params=_config_params(row), metrics=_row_metrics(row))
            client.set_terminated(child)
        client.set_terminated(parent)
    except ImportError as exc:  # mlflow-skinny has no local stores
        raise RagsweepError(
            f"MLflow {safe_uri(uri)}: this store needs the whole of MLflow ({exc.name} is "
            "missing): pip install 'ragsweep[mlflow]'"
        ) from None
    except (MlflowException, OSError) as exc:
        if parent is not None:
            with contextlib.suppress(MlflowException, OSError):
                client.set_terminated(parent, status="FAILED")
        text = str(exc).replace(uri, safe_uri(uri)).strip() or type(exc).__name__
        first = text.splitlines()[0]
        raise RagsweepError(
            f"MLflow {safe_uri(uri)}: logging the sweep failed: {first[:300]}"
        ) from None
    log.info(
        "logged to MLflow %s: experiment %r, run %s with %d configurations",
        safe_uri(uri),
        experiment,
        parent,
        leaderboard.num_rows,
    )
    return Logged(parent, experiment_id, safe_uri(uri))


def log_from_step(leaderboard: pa.Table, report: Path, uri: str, run_name: str) -> str:
    """The pipeline's logging: to ``uri``, else ``MLFLOW_TRACKING_URI``; none: skipped.
    MLflow failing is a warning, not a failed run: the results are kept, and
    ``ragsweep track`` logs a run folder later. Returns the parent run's id, or ''."""
    uri = resolve_uri(uri)
    if not uri:
        return ""
    try:
        return log_sweep(leaderboard, uri, run_name, report=report).run_id
    except RagsweepError as exc:
        log.warning(
            "%s. The sweep is not in MLflow; its results are kept (log a run folder later "
            "with `ragsweep track RUN_DIR --mlflow URI`)",
            exc,
        )
        return ""


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _log_parent(client, run_id: str, leaderboard: pa.Table, report: Path | None) -> None:
    settings = settings_of(leaderboard)
    params = {k: _param_value(v) for k, v in flatten(settings).items()}
    best = leaderboard.slice(0, 1).to_pylist()
    tags = {}
    metrics: dict[str, float] = {"configurations": float(leaderboard.num_rows)}
    if best:
        tags = {"ragsweep.best_config_id": best[0]["config_id"]}
        tags["ragsweep.best_label"] = best[0]["label"] or ""
        params.update({f"best.{k}": v for k, v in _config_params(best[0]).items()})
        metrics.update({f"best.{k}": v for k, v in _row_metrics(best[0]).items()})
    _log(client, run_id, params=params, metrics=metrics, tags=tags)
    with tempfile.TemporaryDirectory() as folder:
        _write_leaderboard(leaderboard, Path(folder))
        Path(folder, "settings.json").write_text(
            json.dumps(settings, indent=2, sort_keys=True), encoding="utf-8"
        )
        if report is not None:
            Path(folder, "report.html").write_bytes(Path(report).read_bytes())
        client.log_artifacts(run_id, folder)


def _write_leaderboard(leaderboard: pa.Table, folder: Path) -> None:
    import pyarrow.parquet as pq

    from ragsweep.core.schemas import write_table
    from ragsweep.reporting.exports import csv_text

    write_table(leaderboard, folder / "leaderboard.arrow", "leaderboard")
    pq.write_table(leaderboard, folder / "leaderboard.parquet")
    (folder / "leaderboard.csv").write_text(csv_text(leaderboard), encoding="utf-8")


def _log(
    client,
    run_id: str,
    params: dict[str, str],
    metrics: dict[str, float],
    tags: dict[str, str] | None = None,
) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.time import get_current_time_millis

    now = get_current_time_millis()
    items = [Param(k, v) for k, v in params.items()]
    for i in range(0, len(items), BATCH):
        client.log_batch(run_id, params=items[i : i + BATCH])
    values = [Metric(k, v, now, 0) for k, v in metrics.items()]
    for i in range(0, len(values), 10 * BATCH):
        client.log_batch(run_id, metrics=values[i : i + 10 * BATCH])
    if tags:
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _config_params(row: dict[str, Any]) -> dict[str, str]:
    """A leaderboard row's configuration: its fields that have a value."""
    return {k: _param_value(row[k]) for k in PARAMETER_COLUMNS if row.get(k) is not None}


def _row_metrics(row: dict[str, Any]) -> dict[str, float]:
    """Every number of a leaderboard row but its configuration's: metrics with their
    interval bounds, rank, questions, p-value, costs; flags as 0 or 1. Nulls are left out."""
    out = {}
    for name, value in row.items():
        if name in PARAMETER_COLUMNS or value is None or isinstance(value, str):
            continue
        if isinstance(value, bool | int | float) and not math.isnan(float(value)):
            out[name] = float(value)
    return out


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level of dotted keys; lists and scalars are values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(text) > MAX_PARAM_CHARS:  # the whole value is in settings.json
        return text[: MAX_PARAM_CHARS - 1] + "…"
    return text


def agreement_metrics(measured: Agreement) -> dict[str, float]:
    """The judge's agreement with people as MLflow metrics (finite ones only)."""
    figures = {
        "judge_labels": measured.labels,
        "judge_accuracy": measured.accuracy,
        "judge_kappa": measured.kappa,
        "judge_kappa_low": measured.kappa_low,
        "judge_kappa_high": measured.kappa_high,
        "judge_reliable": float(measured.reliable),
    }
    return {k: float(v) for k, v in figures.items() if math.isfinite(v)}


def log_agreement(uri: str, run_name: str, measured: Agreement, judge: str) -> str:
    """Log the judge's agreement with people to the MLflow parent run of the sweep
    ``run_name`` (tagged ``ragsweep.run_id``; ``log_sweep`` made it). Returns its id."""
    try:
        from mlflow.exceptions import MlflowException
    except ModuleNotFoundError as exc:
        raise missing_extra(exc.name, "mlflow", "tracking to MLflow") from None
    check_reachable(uri)
    client = _client(uri)
    try:
        found = [
            run
            for experiment in client.search_experiments()
            for run in client.search_runs(
                [experiment.experiment_id],
                f"tags.`ragsweep.run_id` = '{run_name}' and tags.`mlflow.parentRunId` IS NULL",
            )
        ]
        if not found:
            raise RagsweepError(
                f"MLflow {safe_uri(uri)}: no run of the sweep {run_name!r}; log it first "
                "(`ragsweep track RUN_DIR`)"
            )
        parent = found[0].info.run_id
        tags = {"ragsweep.judge_agreement_of": judge}
        _log(client, parent, params={}, metrics=agreement_metrics(measured), tags=tags)
    except MlflowException as exc:
        first = str(exc).replace(uri, safe_uri(uri)).strip().splitlines()[0]
        raise RagsweepError(
            f"MLflow {safe_uri(uri)}: logging the agreement failed: {first}"
        ) from None
    return parent
