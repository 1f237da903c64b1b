"""One question across runs: per stored run that asked it, its best configuration's verdict
and answer, linked to the drill-down; the question's wording in each version."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ragsweep.evaluation.leaderboard import failure_reason
from ragsweep.store.question_runs import question_texts, runs_asking
from ragsweep.ui.labelling import question_path
from ragsweep.ui.runs import fmt

RUNS_SHOWN = 200


def asked_page(request: Request) -> Response:
    question_id = request.path_params["question_id"]
    version = request.query_params.get("version", "")
    engine = request.app.state.data.engine
    rows = runs_asking(engine, question_id, version or None, limit=RUNS_SHOWN)
    for r in rows:
        scores = {**(r["scores"] or {}), "question_type": r["question_type"]}
        r["reason"] = failure_reason(scores)
        r["value"] = scores.get(r["metric"]) if r["metric"] else None
        r["link"] = question_path(r["run_id"], r["best_config_id"], question_id)
    texts = question_texts(engine, question_id)
    asked = list(dict.fromkeys(r["question_version"] for r in rows))  # newest first
    return request.app.state.render(
        request,
        "asked.html",
        question_id=question_id,
        version=version,
        rows=rows,
        versions=[(v, texts.get(v or "", {})) for v in asked],
        limit=RUNS_SHOWN,
        fmt=fmt,
    )


def routes() -> list[Route]:
    return [Route("/questions/{question_id:path}", asked_page)]
