"""Safe by default: an optional access token checked on every request (a bearer header, or
the cookie the login form sets), and a per-session CSRF token on every POST form."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ragsweep.core.errors import RagsweepError

TOKEN_ENV = "RAGSWEEP_UI_TOKEN"
TOKEN_COOKIE, CSRF_COOKIE, CSRF_FIELD = "ragsweep_token", "ragsweep_csrf", "csrf"
OPEN_PATHS = ("/login", "/static/")  # reachable without the token


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token."""
    if not is_loopback(host) and not token:
        raise RagsweepError(
            f"ui: --host {host} exposes the results to the network: give a token with "
            f"--token or {TOKEN_ENV} (every request must then carry it), or listen on "
            "127.0.0.1"
        )


def same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


class Guard:
    """ASGI middleware: the token check (when a token is set) and the CSRF cookie."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if self.token and not self.allowed(request):
            await self.refusal(request)(scope, receive, send)
            return
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
        scope.setdefault("state", {})["csrf"] = csrf
        fresh = CSRF_COOKIE not in request.cookies

        async def with_cookie(message: dict) -> None:
            if fresh and message["type"] == "http.response.start":
                cookie = f"{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict"
                message.setdefault("headers", []).append((b"set-cookie", cookie.encode()))
            await send(message)

        await self.app(scope, receive, with_cookie)

    def allowed(self, request: Request) -> bool:
        if request.url.path.startswith(OPEN_PATHS):
            return True
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        return same(bearer, self.token) or same(request.cookies.get(TOKEN_COOKIE), self.token)

    @staticmethod
    def refusal(request: Request) -> Response:
        if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            target = quote(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            return RedirectResponse(f"/login?next={target}", status_code=303)
        return PlainTextResponse("401: this ragsweep ui needs its token", status_code=401)


async def checked_form(request: Request) -> FormData:
    """The POSTed form, refused (403) unless it carries this session's CSRF token."""
    form = await request.form()
    if not same(str(form.get(CSRF_FIELD, "")), request.cookies.get(CSRF_COOKIE)):
        raise HTTPException(403, "403: the form's CSRF token is missing or stale; reload the page")
    return form


def login_response(token: str | None, given: str, target: str) -> Response:
    """After the login form: the token cookie and a redirect, or 401."""
    if not token or not same(given, token):
        return PlainTextResponse("401: wrong token", status_code=401)
    if not target.startswith("/") or target.startswith("//"):
        target = "/"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
    return response
