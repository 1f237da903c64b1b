"""The runs list: the runs in progress with their counters, each named sweep's trend, and
every stored run with its name, tags, test set, documents, configurations, best score and
duration, searched, filtered and paged (archived runs only when asked); a run's name, note
and tags edited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ragsweep.core.errors import RagsweepError
from ragsweep.store import database
from ragsweep.store.annotations import label_run, parse_tags
from ragsweep.ui.live import running
from ragsweep.ui.plots import trend
from ragsweep.ui.security import checked_form

STATUSES = database.STATUSES
RUNS_PAGE = 50  # runs a page of the runs list shows
MAX_PAGE = 10**9  # the last page number asked of the store
FIELDS = ("q", "sweep", "status", "tag", "since", "until", "archived")
# the archived filter: its value in the query, what it lists (find_runs's ``archived``)
ARCHIVED = {"": False, "include": None, "only": True}
ARCHIVED_CHOICES = [("", "hidden"), ("include", "shown too"), ("only", "only these")]


def _day(text: str | None, name: str) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise HTTPException(400, f"{name}: {text!r} is not a date (YYYY-MM-DD)") from None


def duration(started: datetime | None, finished: datetime | None) -> str:
    """``1h 02m``, ``4m 05s`` or ``12s``; '-' when a time is unknown."""
    if not started or not finished:
        return "-"
    seconds = max(int((finished - started).total_seconds()), 0)
    hours, minutes, s = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{hours}h {minutes:02}m" if hours else f"{minutes}m {s:02}s" if minutes else f"{s}s"


def runs_page(request: Request) -> Response:
    """Runs in progress; the trends; every run newest first, searched and filtered."""
    data, q = request.app.state.data, request.query_params
    filters = {k: q.get(k, "").strip() for k in FIELDS}
    status = filters["status"]
    if status and status not in STATUSES:
        raise HTTPException(400, f"status: {status!r}; choose from {', '.join(STATUSES)}")
    if filters["tag"]:
        try:
            if len(parse_tags(filters["tag"])) != 1:
                raise RagsweepError(f"tag: {filters['tag']!r}: filter by one tag")
        except RagsweepError as exc:
            raise HTTPException(400, str(exc)) from None
    if filters["archived"] not in ARCHIVED:
        choices = ", ".join(repr(k) for k in ARCHIVED)
        raise HTTPException(400, f"archived: {filters['archived']!r}; choose from {choices}")
    since, until = _day(filters["since"], "since"), _day(filters["until"], "until")
    number = q.get("page", "1")
    if not (number.isascii() and number.isdigit()) or int(number) < 1:
        raise HTTPException(400, f"page: {number!r} is not a page number (1, 2, ...)")
    if int(number) > MAX_PAGE:  # its offset would overflow the database's 64-bit integer
        raise HTTPException(400, f"page: {number} is past the last page of any store")
    first = (int(number) - 1) * RUNS_PAGE
    jobs = request.app.state.jobs
    jobs.name_stored_runs()
    rows = database.find_runs(
        data.engine,
        filters["sweep"] or None,
        filters["status"] or None,
        since,
        until + timedelta(days=1) if until else None,
        RUNS_PAGE + 1,
        first,
        text=filters["q"] or None,
        tag=filters["tag"] or None,
        archived=ARCHIVED[filters["archived"]],
    )
    more, rows = len(rows) > RUNS_PAGE, rows[:RUNS_PAGE]
    filtered = any(filters.values())
    # an empty list without filters: a new store, or one whose every run is archived
    all_archived = (
        not rows and not filtered and bool(database.find_runs(data.engine, limit=1, archived=True))
    )
    for row in rows:
        row["duration"] = duration(row["started_at"], row["finished_at"])

    def page_link(to: int) -> str:
        return "?" + urlencode({**{k: v for k, v in filters.items() if v}, "page": to})

    sweeps = database.sweep_names(data.engine)
    trends = []
    for key in [filters["sweep"]] if filters["sweep"] else sorted({r["sweep"] for r in rows}):
        points = data.trend(key)
        if points:
            trends.append({"sweep": key, "points": points, "svg": trend(points)})
    by_pid = {j.pid: j for j in jobs.jobs.values()}
    return request.app.state.render(
        request,
        "runs.html",
        runs=rows,
        in_progress=[(p, by_pid.get(p.pid)) for p in running(jobs.folder)],
        sweeps=sweeps,
        statuses=STATUSES,
        archived_choices=ARCHIVED_CHOICES,
        trends=trends,
        filters=filters,
        filtered=filtered,
        all_archived=all_archived,
        first=first,
        previous_page=page_link(int(number) - 1) if first else None,
        next_page=page_link(int(number) + 1) if more else None,
    )


async def label(request: Request) -> Response:
    """A run's name, note and tags, as the run page's form posts them."""
    form = await checked_form(request)
    run_id = request.path_params["run_id"]
    try:
        label_run(
            request.app.state.data.engine,
            run_id,
            title=str(form.get("title", "")),
            note=str(form.get("note", "")),
            tags=parse_tags(str(form.get("tags", ""))),
        )
    except RagsweepError as exc:
        raise HTTPException(400, str(exc)) from None
    return RedirectResponse(f"/runs/{quote(run_id, safe='')}", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/", runs_page),
        Route("/runs/{run_id}/labels", label, methods=["POST"]),
    ]
