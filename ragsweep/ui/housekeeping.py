"""Housekeeping pages: the jobs this UI started, a searchable run picker for the
comparison, archiving a run (the runs list hides it unless asked) and deleting one (its
stored results, then its folder in the runs folder), and a test set's versions with a
revert to one of them."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ragsweep.core.errors import RagsweepError
from ragsweep.curation import set_versions
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.store.annotations import archive_run
from ragsweep.store.database import delete_run, find_runs, run_info, sweep_names
from ragsweep.ui.security import checked_form

PICKED = 50  # runs a search of the picker shows


def jobs_page(request: Request) -> Response:
    """Every job this UI started (runs, submissions, generations), newest first."""
    jobs = sorted(request.app.state.jobs.jobs.values(), key=lambda j: j.started, reverse=True)
    return request.app.state.render(request, "jobs.html", jobs=jobs)


def pick_page(request: Request) -> Response:
    """Runs to compare, found by text (id, name, note, tags, sweep, documents, test set)
    and sweep, ``PICKED`` at most; the ones already ticked (``runs``) stay listed first."""
    q = request.query_params
    engine = request.app.state.data.engine
    text, sweep = q.get("q", "").strip(), q.get("sweep", "")
    ticked = [r for r in q.getlist("runs") if r]
    found = find_runs(engine, sweep=sweep or None, status="succeeded", limit=PICKED, text=text)
    listed = []
    for run_id in ticked:
        try:
            listed.append(run_info(engine, run_id))
        except RagsweepError:
            continue  # deleted since: not offered
    listed += [r for r in found if r["run_id"] not in ticked]
    return request.app.state.render(
        request,
        "pick.html",
        runs=listed,
        ticked=set(ticked),
        text=text,
        sweep=sweep,
        sweeps=sweep_names(engine),
        limit=PICKED,
    )


def _folder(request: Request, run_id: str) -> Path | None:
    """The run's folder in the UI's runs folder, if there is one; refused (400) when the
    id would name a path outside it."""
    runs_dir = request.app.state.jobs.folder.resolve()
    folder = (runs_dir / run_id).resolve()
    if folder.parent != runs_dir:
        raise HTTPException(400, f"run id {run_id!r} names no folder of the runs folder")
    return folder if folder.is_dir() else None


def delete_form(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    try:
        info = run_info(request.app.state.data.engine, run_id)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    return request.app.state.render(
        request, "delete_run.html", run=info, folder=_folder(request, run_id)
    )


async def delete(request: Request) -> Response:
    """Delete the run once its id is typed again: every check first (the confirmation, the
    folder's place), then the stored run, then its folder; nothing is deleted when a check
    or the database fails."""
    form = await checked_form(request)
    run_id = request.path_params["run_id"]
    if form.get("confirm", "") != run_id:
        raise HTTPException(400, f"type the run id {run_id!r} to delete it: nothing deleted")
    folder = _folder(request, run_id)
    try:
        delete_run(request.app.state.data.engine, run_id)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    if folder is not None:
        try:
            shutil.rmtree(folder)
        except OSError as exc:
            raise HTTPException(
                500,
                f"run {run_id!r} was deleted from the results database, but not its folder "
                f"{folder}: {exc}",
            ) from None
    return RedirectResponse("/", status_code=303)


async def _set_archived(request: Request, archived: bool) -> Response:
    await checked_form(request)
    run_id = request.path_params["run_id"]
    try:
        archive_run(request.app.state.data.engine, run_id, archived)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    return RedirectResponse(f"/runs/{quote(run_id, safe='')}", status_code=303)


async def archive(request: Request) -> Response:
    """Archive the run: the runs list hides it unless asked; then its page again."""
    return await _set_archived(request, True)


async def unarchive(request: Request) -> Response:
    return await _set_archived(request, False)


def versions_page(request: Request) -> Response:
    """A test set's saves, newest first, each with a button to revert to it."""
    name = request.path_params["name"]
    try:
        found = set_versions.versions(DatabaseStore(request.app.state.data.engine), name)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    return request.app.state.render(request, "testset_versions.html", name=name, versions=found)


async def revert(request: Request) -> Response:
    """Store the set as it was after the version chosen, as its newest version."""
    form = await checked_form(request)
    name, number = request.path_params["name"], request.path_params["number"]
    try:
        set_versions.revert(
            DatabaseStore(request.app.state.data.engine),
            name,
            number,
            str(form.get("author", "")).strip() or None,
        )
    except RagsweepError as exc:
        raise HTTPException(400, str(exc)) from None
    return RedirectResponse(f"/testsets/{quote(name, safe='')}/versions", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/jobs", jobs_page),
        Route("/compare/pick", pick_page),
        Route("/runs/{run_id}/delete", delete_form, methods=["GET"]),
        Route("/runs/{run_id}/delete", delete, methods=["POST"]),
        Route("/runs/{run_id}/archive", archive, methods=["POST"]),
        Route("/runs/{run_id}/unarchive", unarchive, methods=["POST"]),
        Route("/testsets/{name}/versions", versions_page, methods=["GET"]),
        Route("/testsets/{name}/versions/{number:int}/revert", revert, methods=["POST"]),
    ]
