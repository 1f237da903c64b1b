"""The app factory: routes, templates (Jinja2, autoescaped), static files, the guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ragsweep.core.errors import safe_url
from ragsweep.reporting.report import CSS
from ragsweep.ui import (
    across_runs,
    downloads,
    housekeeping,
    jobs,
    labelling,
    matrix,
    runlist,
    runs,
    security,
    testset_pages,
    views,
)
from ragsweep.ui.data import Data
from ragsweep.ui.roots import DocRoots

HERE = Path(__file__).parent


def segment(value: object) -> str:
    """``value`` as one path segment: ``/`` encoded too (``urlencode`` leaves it), so a
    question id holding one still names one question."""
    return quote(str(value), safe="")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every user text escaped; report SVG passes through |safe only
        undefined=jinja2.StrictUndefined,
    )
    env.globals["report_css"] = CSS
    env.filters["segment"] = segment
    for name in env.list_templates(extensions=["html"]):  # compiled now, not on a first visit
        env.get_template(name)
    return env


def create_app(
    engine: Engine,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    runs_dir: Path | None = None,
    docs_roots: DocRoots | None = None,
    https: bool = False,
    limiter: security.LoginLimiter | None = None,
) -> Starlette:
    """The web app over the results database behind ``engine``.

    ``token``: when set, every request but the login form must carry it (``Authorization:
    Bearer`` or the cookie the login form sets). ``allowed_hosts``: the Host headers
    accepted (None: any). ``runs_dir``: where runs started from the page write their folders.
    ``docs_roots``: where those runs may read documents (default: the current folder).
    ``https``: browsers reach the app over HTTPS (Secure ``__Host-`` cookies, HSTS).
    ``limiter``: how many wrong tokens a client may send (default ``LoginLimiter()``).
    """
    env = _environment()

    def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
        state = request.scope["state"]
        html = env.get_template(template).render(
            request=request,
            csrf=state["csrf"],
            authorized=state.get("authorized", False),
            store_url=safe_url(engine.url),
            token_required=bool(token),
            **context,
        )
        return HTMLResponse(html, status_code=status_code)

    async def error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        plain = "state" not in request.scope or "csrf" not in request.scope["state"]
        response = (
            Response(str(detail), status_code=status, media_type="text/plain")
            if plain
            else render(request, "error.html", status_code=status, status=status, detail=detail)
        )
        if not isinstance(exc, HTTPException):  # answered outside the guard: its headers here
            response.raw_headers.extend(security.HEADERS)
        return response

    async def login_form(request: Request) -> Response:
        return render(request, "login.html", target=request.query_params.get("next", "/"))

    async def login(request: Request) -> Response:
        return await security.login(request, token)

    async def favicon(request: Request) -> Response:
        return FileResponse(HERE / "static" / "favicon.svg", media_type="image/svg+xml")

    routes = [
        *runlist.routes(),
        *matrix.routes(),
        *across_runs.routes(),
        *views.routes(),
        *housekeeping.routes(),
        *downloads.routes(),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", security.logout, methods=["POST"]),
        Route(
            "/runs/{run_id}/configs/{config_id}/questions/{question_id:path}", runs.question_page
        ),
        Route("/runs/{run_id}/configs/{config_id}", runs.config_page),
        Route("/runs/{run_id}", runs.run_page),
        Route("/compare", runs.compare_page),
        *labelling.routes(),
        *testset_pages.routes(),
        *jobs.routes(),
        Route("/favicon.ico", favicon),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    guard = Middleware(
        security.Guard,
        token=token,
        allowed_hosts=allowed_hosts,
        cookies=security.Cookies(https),
        limiter=limiter,
    )
    app = Starlette(
        routes=routes,
        middleware=[guard],
        exception_handlers={HTTPException: error, 500: error},
    )
    app.state.data = Data(engine)
    app.state.render = render
    app.state.jobs = jobs.Jobs(runs_dir or Path("runs"), engine, docs_roots or DocRoots.default())
    return app
