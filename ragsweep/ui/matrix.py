"""A run's question x configuration matrix: every question (a row) against every
configuration (a column, in rank order), each cell the verdict's colour and a link to the
drill-down; questions a page at a time."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ragsweep.evaluation.leaderboard import failure_reason
from ragsweep.reporting.exports import ranking_metric
from ragsweep.ui.charts import differing
from ragsweep.ui.runs import fmt, run_of

QUESTIONS_PAGE = 100


def matrix_page(request: Request) -> Response:
    run = run_of(request)
    number = request.query_params.get("page", "1")
    if not (number.isascii() and number.isdigit()) or int(number) < 1:
        raise HTTPException(400, f"page: {number!r} is not a page number (1, 2, ...)")
    metric = ranking_metric(run.board)
    configs = run.board.select(["config_id", "label", "rank"]).to_pylist()
    cells: dict[tuple[str, str], dict] = {}
    for r in run.results.to_pylist():
        reason = failure_reason(r)
        cells[r["question_id"], r["config_id"]] = {
            "verdict": "fail" if reason else "pass",
            "value": r.get(metric),
            "reason": reason or "",
        }
    questions = run.questions()
    ids = sorted({q for q, _ in cells})
    first = (int(number) - 1) * QUESTIONS_PAGE
    shown = ids[first : first + QUESTIONS_PAGE]
    passed = {
        c["config_id"]: sum(
            cells.get((q, c["config_id"]), {}).get("verdict") == "pass" for q in ids
        )
        for c in configs
    }
    return request.app.state.render(
        request,
        "matrix.html",
        run=run.info,
        metric=metric,
        configs=configs,
        heads=differing([c["label"] for c in configs])[0],
        questions=[(q, questions.get(q, {}).get("question") or "") for q in shown],
        cells=cells,
        passed=passed,
        total=len(ids),
        first=first,
        page=int(number),
        more=first + QUESTIONS_PAGE < len(ids),
        missing=run.missing(),
        fmt=fmt,
    )


def routes() -> list[Route]:
    return [Route("/runs/{run_id}/matrix", matrix_page)]
