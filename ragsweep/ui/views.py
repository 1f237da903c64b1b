"""The views over one run beyond its drill-downs: one question's answers side by side
across the run's configurations (deployed assistants included), and the data of the run
page's interactive charts (drawn by static/charts.js)."""

from __future__ import annotations

import math
from typing import Any

import pyarrow.compute as pc
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ragsweep.core.schemas import METRICS
from ragsweep.evaluation.leaderboard import failure_reason
from ragsweep.reporting.exports import ranking_metric
from ragsweep.ui.charts import PARAMETERS
from ragsweep.ui.documents import retrieved_chunks, score_name
from ragsweep.ui.labelling import question_path
from ragsweep.ui.runs import fmt, run_of


def side_by_side_page(request: Request) -> Response:
    """One question (``?question=ID``) as every configuration of the run answered it, in
    leaderboard order: answer, verdict and the judge's reason, retrieved chunks. Without a
    question: the run's questions to choose from."""
    run = run_of(request)
    questions = run.questions()
    question_id = request.query_params.get("question", "")
    if not question_id:
        return request.app.state.render(
            request, "side_by_side.html", run=run.info, questions=questions, question=None
        )
    results = run.results.filter(pc.equal(run.results["question_id"], question_id)).to_pylist()
    if not results:
        raise HTTPException(
            404, f"run {run.info['run_id']!r} has no result for question {question_id!r}"
        )
    by_config = {r["config_id"]: r for r in results}
    question = questions.get(question_id, {})
    docs = list(run.locations)
    columns = []
    for config in run.board.to_pylist():  # ranked: the best first
        result = by_config.get(config["config_id"])
        if result is None:
            continue
        columns.append(
            {
                "config": config,
                "result": result,
                "reason": failure_reason(result),
                "chunks": retrieved_chunks(result, question, docs),
                "score_name": score_name(config),
                "link": question_path(run.info["run_id"], config["config_id"], question_id),
            }
        )
    return request.app.state.render(
        request,
        "side_by_side.html",
        run=run.info,
        questions=questions,
        question_id=question_id,
        question=question,
        columns=columns,
        fmt=fmt,
    )


def _numeric(values: list) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in present
    )


def _finite(value: Any) -> Any:
    """JSON has no NaN: a value not measured is null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def chart_data(request: Request) -> Response:
    """What the run page's parallel coordinates and scatter draw, as JSON (never inlined in
    the page): the swept parameters that vary (numeric or not), the metrics measured (the
    ranking one first), and per configuration its id, label, rank and values."""
    board = run_of(request).board
    metric = ranking_metric(board)
    measured = [m for m in METRICS if board.num_rows and board[m].null_count < board.num_rows]
    metrics = [metric] + [m for m in measured if m != metric]
    parameters = [
        p
        for p in PARAMETERS
        if p in board.column_names and len({v for v in board[p].to_pylist() if v is not None}) > 1
    ]
    columns = ["config_id", "label", "rank", *parameters, *metrics]
    return JSONResponse(
        {
            "metric": metric,
            "parameters": [
                {"name": p, "numeric": _numeric(board[p].to_pylist())} for p in parameters
            ],
            "metrics": metrics,
            "rows": [
                {k: _finite(v) for k, v in row.items()} for row in board.select(columns).to_pylist()
            ],
        }
    )


def routes() -> list[Route]:
    return [
        Route("/runs/{run_id}/side-by-side", side_by_side_page),
        Route("/runs/{run_id}/charts.json", chart_data),
    ]
