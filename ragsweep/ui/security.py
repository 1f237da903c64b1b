"""Safe by default: the Host check, an optional access token (a bearer header, or the cookie
the login form sets) with rate-limited attempts, the same-origin check and a CSRF token on
every POST, and the security headers on every response.

A CSRF token is the HMAC, under a secret this process draws at start, of the session
cookie's random id and the access token the browser presents: a page elsewhere on this host
(cookies ignore ports) can plant a session cookie, but cannot compute its token, and the
browser's ``Origin`` / ``Sec-Fetch-Site`` headers refuse its POSTs before the token is even
read."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragsweep.core.errors import RagsweepError

TOKEN_ENV = "RAGSWEEP_UI_TOKEN"
CSRF_FIELD = "csrf"
OPEN_PATHS = ("/login", "/static/", "/favicon.ico")  # reachable without the token
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
MIN_TOKEN = 16  # characters, white space aside, of a token that opens a non-loopback host
LOGIN_FAILURES, LOGIN_WINDOW_S = 5, 60.0  # wrong tokens a client may send per window
# scripts only from our static files (no inline script, no eval), fetches of our own JSON;
# inline styles (the report's CSS and chart shading); never in a frame
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]
HSTS = (b"strict-transport-security", b"max-age=31536000")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token, or with one a guesser could find
    (shorter than ``MIN_TOKEN`` characters once white space is set aside)."""
    if is_loopback(host):
        return
    if not token:
        raise RagsweepError(
            f"ui: --host {host} exposes the results to the network: give a token with "
            f"--token or {TOKEN_ENV} (every request must then carry it), or listen on "
            "127.0.0.1"
        )
    if len("".join(token.split())) < MIN_TOKEN:
        raise RagsweepError(
            f"ui: --host {host} needs a token of at least {MIN_TOKEN} characters besides "
            f"white space (--token or {TOKEN_ENV}); make one with: openssl rand -hex 32"
        )


def host_of(header: str) -> str:
    """The host name of a Host header, without its port: ``[::1]:8765`` is ``::1``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else ""
    return header.rpartition(":")[0] if ":" in header else header


def same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode(), b.encode())


@dataclass(frozen=True)
class Cookies:
    """The cookies' names and attributes: over HTTPS (``https``), ``Secure`` and the
    ``__Host-`` prefix, which a browser accepts only from a secure origin, for path ``/``
    and this exact host."""

    https: bool = False

    @property
    def session(self) -> str:
        return "__Host-ragsweep_session" if self.https else "ragsweep_session"

    @property
    def token(self) -> str:
        return "__Host-ragsweep_token" if self.https else "ragsweep_token"

    @property
    def author(self) -> str:
        """The name a person gave with a label or an edit, remembered for the next form."""
        return "__Host-ragsweep_label_author" if self.https else "ragsweep_label_author"

    def header(self, name: str, value: str, max_age: int | None = None) -> str:
        attributes = "; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if self.https else "")
        attributes += f"; Max-Age={max_age}" if max_age is not None else ""
        return f"{name}={value}{attributes}"


class LoginLimiter:
    """At most ``failures`` wrong tokens per client address in ``window`` seconds; past
    that, every attempt of the client (right or wrong) is refused until the oldest failure
    is ``window`` old. Behind a proxy every client shares the proxy's address: the limit is
    then one for all."""

    def __init__(
        self,
        failures: int = LOGIN_FAILURES,
        window: float = LOGIN_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures, self.window, self.clock = failures, window, clock
        self.seen: defaultdict[str, deque[float]] = defaultdict(deque)

    def wait(self, client: str) -> int:
        """Seconds until ``client`` may try again; 0 when it may now."""
        recent, now = self.seen.get(client, deque()), self.clock()
        while recent and recent[0] <= now - self.window:
            recent.popleft()
        if not recent:
            self.seen.pop(client, None)  # an address with no recent failure is forgotten
        if len(recent) < self.failures:
            return 0
        return max(1, int(recent[0] + self.window - now + 0.999))

    def failed(self, client: str) -> None:
        self.seen[client].append(self.clock())

    def refusal(self, client: str) -> Response | None:
        """A 429 response when ``client`` must wait, else None."""
        wait = self.wait(client)
        if not wait:
            return None
        return PlainTextResponse(
            f"429: too many wrong tokens from this address; try again in {wait} s",
            status_code=429,
            headers={"retry-after": str(wait)},
        )


def client_of(request: Request) -> str:
    return request.client.host if request.client else "-"


class Guard:
    """ASGI middleware in front of every route: the Host check, the token (when set), the
    same-origin check of unsafe methods, the session cookie and its CSRF token, and the
    security headers."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        allowed_hosts: list[str] | None = None,
        cookies: Cookies = Cookies(),
        limiter: LoginLimiter | None = None,
    ) -> None:
        self.app, self.token, self.cookies = app, token, cookies
        self.hosts = {h.strip("[]").lower() for h in allowed_hosts} if allowed_hosts else None
        self.limiter = limiter or LoginLimiter()
        self.secret = secrets.token_bytes(32)  # new per process: a restart expires the forms

    def csrf_token(self, session: str, credential: str) -> str:
        """The token of a session and the access token it presents (its cookie): one
        taken from the login page, without the access token, serves no logged-in form."""
        message = f"csrf\0{session}\0{credential}".encode()
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        session = request.cookies.get(self.cookies.session) or ""
        fresh = not session
        session = session or secrets.token_urlsafe(24)
        state = scope.setdefault("state", {})
        credential = request.cookies.get(self.cookies.token, "")
        csrf = self.csrf_token(session, credential)
        state.update(csrf=csrf, cookies=self.cookies, limiter=self.limiter)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), *HEADERS]
                headers += [HSTS] if self.cookies.https else []
                message["headers"] = headers
                if fresh:
                    cookie = self.cookies.header(self.cookies.session, session)
                    headers.append((b"set-cookie", cookie.encode()))
                if state.get("wrong_cookie") and not self.sets_token(headers):
                    # a stale token cookie costs its browser one failure, not a lockout
                    cookie = self.cookies.header(self.cookies.token, "", max_age=0)
                    headers.append((b"set-cookie", cookie.encode()))
            await send(message)

        refusal = self.refusal(request)
        if refusal is None:
            state["authorized"] = self.authorized(request)
            if not state["authorized"] and not request.url.path.startswith(OPEN_PATHS):
                refusal = self.unauthorized(request)
        await (refusal or self.app)(scope, receive, send_with_headers)

    def refusal(self, request: Request) -> Response | None:
        """400 for a Host header not served here (a DNS-rebound page); 403 for a POST a
        page of another origin made; 429 for a token (bearer or cookie) from a client over
        its limit."""
        if self.hosts is not None and host_of(request.headers.get("host", "")) not in self.hosts:
            return PlainTextResponse("400: invalid Host header", status_code=400)
        if request.method not in SAFE_METHODS and not self.same_origin(request):
            return PlainTextResponse(
                "403: this request came from a page of another site or port", status_code=403
            )
        presented = request.headers.get("authorization") or request.cookies.get(self.cookies.token)
        if self.token and presented:
            return self.limiter.refusal(client_of(request))
        return None

    def sets_token(self, headers: list[tuple[bytes, bytes]]) -> bool:
        prefix = f"{self.cookies.token}=".encode()
        return any(k == b"set-cookie" and v.startswith(prefix) for k, v in headers)

    def same_origin(self, request: Request) -> bool:
        """Whether a browser says the request comes from this app's own pages; a client
        that sends neither header (curl, a script) passes, and still needs the CSRF token."""
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return False
        origin = request.headers.get("origin")
        if origin is None:
            return True
        scheme = "https" if self.cookies.https else request.url.scheme
        return origin.lower() == f"{scheme}://{request.headers.get('host', '')}".lower()

    def authorized(self, request: Request) -> bool:
        """Whether the request carries the token; a wrong one (cookie or bearer) counts
        against its client's limit, so neither is a way to guess it unhindered."""
        if not self.token:
            return True
        cookie = request.cookies.get(self.cookies.token)
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        if same(cookie, self.token) or same(bearer, self.token):
            return True
        if cookie:
            request.scope["state"]["wrong_cookie"] = True
            self.limiter.failed(client_of(request))
        if header:
            self.limiter.failed(client_of(request))
        return False

    @staticmethod
    def unauthorized(request: Request) -> Response:
        if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            target = quote(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            return RedirectResponse(f"/login?next={target}", status_code=303)
        return PlainTextResponse("401: this ragsweep ui needs its token", status_code=401)


async def checked_form(request: Request) -> FormData:
    """The POSTed form, refused (403) unless it carries this session's CSRF token, and (400)
    when a text field holds a NUL byte, which no path, name or option can hold."""
    form = await request.form()
    if not same(str(form.get(CSRF_FIELD, "")), request.scope["state"]["csrf"]):
        raise HTTPException(403, "403: the form's CSRF token is missing or stale; reload the page")
    for key, value in form.multi_items():
        if isinstance(value, str) and "\0" in value:
            raise HTTPException(400, f"{key}: holds a NUL byte; no path, name or option can")
    return form


def remember_author(request: Request, response: Response, author: str) -> None:
    """Keep ``author`` in this browser for the next label or edit (a ``Secure``
    ``__Host-`` cookie over HTTPS, as the others)."""
    cookies: Cookies = request.scope["state"]["cookies"]
    response.set_cookie(
        cookies.author, author[:200], httponly=True, samesite="strict", secure=cookies.https
    )


def author_of(request: Request) -> str:
    """The author this browser last gave (empty: none)."""
    return request.cookies.get(request.scope["state"]["cookies"].author, "")


def _local_target(target: str) -> str:
    return target if target.startswith("/") and not target.startswith("//") else "/"


async def login(request: Request, token: str | None) -> Response:
    """The login form posted: the token cookie and a redirect; 401 for a wrong token, 429
    once a client sent too many."""
    form = await checked_form(request)
    limiter: LoginLimiter = request.scope["state"]["limiter"]
    client = client_of(request)
    refused = limiter.refusal(client)
    if refused is not None:
        return refused
    given = str(form.get("token", ""))
    if not token or not same(given, token):
        limiter.failed(client)
        return PlainTextResponse("401: wrong token", status_code=401)
    response = RedirectResponse(_local_target(str(form.get("next", "/"))), status_code=303)
    cookies: Cookies = request.scope["state"]["cookies"]
    response.headers.append("set-cookie", cookies.header(cookies.token, given))
    return response


async def logout(request: Request) -> Response:
    """Forget the token and the session in this browser; back to the login form."""
    await checked_form(request)
    cookies: Cookies = request.scope["state"]["cookies"]
    response = RedirectResponse("/login", status_code=303)
    for name in (cookies.token, cookies.session):
        response.headers.append("set-cookie", cookies.header(name, "", max_age=0))
    return response
