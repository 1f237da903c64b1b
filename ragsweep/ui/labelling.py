"""Labelling on the drill-down page: one click says whether the judge's verdict on the
answer is right (agree / disagree) or what the answer is (correct / incorrect), with an
optional note, and opens the next answer of the labelling queue
(``ragsweep.curation.labels.queue``). Keyboard: the first button has the focus (Enter
agrees), Tab moves between them, and each has an access key (a, d, c, i). The judge's
agreement with the labels is shown beside its verdict. No script: the page's policy
forbids it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ragsweep.core.errors import RagsweepError
from ragsweep.curation import labels
from ragsweep.reporting.judge_agreement import agreement_section
from ragsweep.ui.security import author_of, checked_form, remember_author

BUTTONS = (  # (label, what the button says, access key)
    ("agree", "Agree with the judge", "a"),
    ("disagree", "Disagree", "d"),
    ("correct", "Correct", "c"),
    ("incorrect", "Incorrect", "i"),
)


def question_path(run_id: str, config_id: str, question_id: str) -> str:
    return (
        f"/runs/{quote(run_id, safe='')}/configs/{quote(config_id, safe='')}"
        f"/questions/{quote(question_id, safe='')}"
    )


def context(request: Request, run_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """What the drill-down page shows of labelling: the agreement, this answer's labels,
    the author remembered, the buttons."""
    engine = request.app.state.data.engine
    found = labels.run_agreement(engine, run_id)
    key = (result.get("question_version") or "", labels.answer_hash(result.get("answer") or ""))
    given = [lb for lb in labels.load(engine) if (lb.question_version, lb.answer_hash) == key]
    return {
        "agreement": agreement_section(*found) if found else None,
        "labels_given": given,
        "label_author": author_of(request),
        "label_buttons": BUTTONS if result.get("correctness") is not None else BUTTONS[2:],
    }


async def label(request: Request) -> Response:
    """A label posted: stored, then the next answer of the queue (this one when none is
    left)."""
    form = await checked_form(request)
    run_id, config_id, question_id = (
        request.path_params[k] for k in ("run_id", "config_id", "question_id")
    )
    author = str(form.get("author", "")).strip()
    if not author:
        raise HTTPException(400, "a label needs its author: fill in your name")
    engine = request.app.state.data.engine
    try:
        labels.label_result(
            engine,
            run_id,
            config_id,
            question_id,
            str(form.get("label", "")),
            author[:200],
            str(form.get("note", "")).strip() or None,
        )
        following = labels.queue(engine, run_id, size=1)
    except RagsweepError as exc:
        raise HTTPException(400, str(exc)) from None
    target = (
        question_path(run_id, following[0].config_id, following[0].question_id)
        if following
        else question_path(run_id, config_id, question_id) + "?queue=empty"
    )
    response = RedirectResponse(target, status_code=303)
    remember_author(request, response, author)
    return response


async def start(request: Request) -> Response:
    """The first answer of the run's labelling queue."""
    run_id = request.path_params["run_id"]
    try:
        first = labels.queue(request.app.state.data.engine, run_id, size=1)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    if not first:
        raise HTTPException(404, f"run {run_id!r}: no judged answer is left to label")
    return RedirectResponse(question_path(run_id, first[0].config_id, first[0].question_id), 303)


def routes() -> list[Route]:
    return [
        Route("/runs/{run_id}/label", start),
        Route(
            "/runs/{run_id}/configs/{config_id}/questions/{question_id:path}/label",
            label,
            methods=["POST"],
        ),
    ]
