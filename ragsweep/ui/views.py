"""The views over one run beyond its drill-downs: one question's answers side by side
across the run's configurations (deployed assistants included), and the charts' data."""

from __future__ import annotations

import pyarrow.compute as pc
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ragsweep.evaluation.leaderboard import failure_reason
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


def routes() -> list[Route]:
    return [Route("/runs/{run_id}/side-by-side", side_by_side_page)]
