"""A run's downloads: its leaderboard and per-question results as CSV or Parquet, its HTML
report (rendered from the results database, as the run folder's, with the judge's agreement
with the labels stored by now), and its patterns folder as a zip when the run's folder lies
in the UI's runs folder."""

from __future__ import annotations

import io
import zipfile

import pyarrow.parquet as pq
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ragsweep.curation import labels
from ragsweep.evaluation.leaderboard import Board
from ragsweep.reporting.exports import csv_text
from ragsweep.reporting.judge_agreement import with_agreement
from ragsweep.reporting.report import render_html
from ragsweep.ui.runs import run_of

TABLES = ("leaderboard", "results")
FORMATS = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


def _attachment(name: str) -> dict[str, str]:
    return {"content-disposition": f'attachment; filename="{name}"'}


def table(request: Request) -> Response:
    run = run_of(request)
    which, kind = request.path_params["table"], request.path_params["format"]
    if which not in TABLES or kind not in FORMATS:
        raise HTTPException(
            404, f"no download {which}.{kind}; leaderboard or results, csv or parquet"
        )
    data = run.board if which == "leaderboard" else run.results
    if kind == "csv":
        body = csv_text(data).encode()
    else:
        out = io.BytesIO()
        pq.write_table(data, out)
        body = out.getvalue()
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.info["run_id"])
    return Response(
        body, media_type=FORMATS[kind], headers=_attachment(f"{safe_id}-{which}.{kind}")
    )


def report(request: Request) -> Response:
    run = run_of(request)
    run_id = run.info["run_id"]
    breakdown, failures = request.app.state.data.derived(run_id)
    html = render_html(Board(run.board, run.results, breakdown, failures))
    found = labels.run_agreement(request.app.state.data.engine, run_id)
    if found is not None and found[0].labels:
        html = with_agreement(html, *found)
    return HTMLResponse(html)


def patterns(request: Request) -> Response:
    run = run_of(request)
    folder = request.app.state.jobs.folder / run.info["run_id"] / "patterns"
    if "/" in run.info["run_id"] or run.info["run_id"].startswith(".") or not folder.is_dir():
        raise HTTPException(
            404, f"run {run.info['run_id']!r}: no patterns folder in this UI's runs folder"
        )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                archive.write(path, path.relative_to(folder.parent))
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.info["run_id"])
    return Response(
        out.getvalue(), media_type="application/zip", headers=_attachment(f"{safe_id}-patterns.zip")
    )


def routes() -> list[Route]:
    return [
        Route("/runs/{run_id}/download/{table}.{format}", table),
        Route("/runs/{run_id}/report.html", report),
        Route("/runs/{run_id}/patterns.zip", patterns),
    ]
