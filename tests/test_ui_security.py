"""`ragsweep ui` against its host's other tenants, in a real browser: Playwright drives the
system Chromium against the app served by uvicorn on loopback, and a second HTTP server on
another loopback port plays the hostile page (cookies ignore ports)."""

from __future__ import annotations

import html
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import ui_demo
from conftest import free_port, needs_chromium
from starlette.testclient import TestClient

from ragsweep.core.errors import RagsweepError, safe_url
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.store import database
from ragsweep.ui import create_app
from ragsweep.ui.roots import DocRoots
from ragsweep.ui.security import CSP, LoginLimiter

TOKEN = "s3cret-token"
TRAVERSAL = "../../../../somewhere/x"
GISKARD_LINE = (
    '{"id": "g1", "question": "Where?", "reference_answer": "Here", '
    '"reference_context": "Document 1: here it is", "conversation_history": [], '
    '"metadata": {"question_type": "simple", "seed_document_id": "a.md", "topic": "T"}}\n'
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    with ui_demo.demo_store(tmp_path_factory.mktemp("ui")) as found:
        yield found


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("deep") / "a" / "b" / "runs"


@pytest.fixture(scope="module")
def served(engine, runs_dir, tmp_path_factory):
    """(the app, its URL): no token, documents allowed under the session's temp folder."""
    app = create_app(
        engine, runs_dir=runs_dir, docs_roots=DocRoots.of([str(tmp_path_factory.getbasetemp())])
    )
    with ui_demo.serving(app, free_port()) as url:
        yield app, url


@pytest.fixture(scope="module")
def base_url(served) -> str:
    return served[1]


@pytest.fixture
def page(shared_page):
    """The module's browser page (conftest): a new one costs Chromium more than most tests."""
    return shared_page


def submit(page, selector: str):
    """Click what posts a form; the response the page navigated to."""
    with page.expect_navigation() as navigation:
        page.click(selector)
    return navigation.value


# --- test-set names that are paths --------------------------------------------------------


def choose_upload(page, base_url: str, source) -> None:
    """Write a one-question Giskard file at ``source`` and choose it in the import form."""
    source.write_text(GISKARD_LINE)
    page.goto(f"{base_url}/testsets")
    page.set_input_files("#import input[type=file]", str(source))


@needs_chromium
@pytest.mark.parametrize("name", [TRAVERSAL, "/tmp/ragsweep-absolute/x"])
def test_a_test_set_name_that_could_be_a_path_is_refused_on_import(
    page, base_url, engine, tmp_path, name
):
    choose_upload(page, base_url, tmp_path / "upload.jsonl")
    page.fill("#import input[name=name]", name)
    response = submit(page, "#import button")
    assert response.status == 400
    assert "name: a test set needs a name of 1 to 100 letters" in page.inner_text("main")
    assert name not in DatabaseStore(engine).names()


@needs_chromium
def test_an_uploaded_file_name_only_suggests_a_valid_name(page, base_url, engine, tmp_path):
    choose_upload(page, base_url, tmp_path / "my set (2).jsonl")
    submit(page, "#import button")
    assert page.locator("h1").inner_text().endswith("my-set-2-.jsonl")
    assert DatabaseStore(engine).load("my-set-2-.jsonl")["question"].to_pylist() == ["Where?"]


@needs_chromium
def test_a_path_like_name_stored_before_the_rule_cannot_start_a_run(
    page, served, engine, runs_dir, tmp_path
):
    """Such a name once made the page write ``<runs>/.ui-testsets/<name>.arrow``, outside
    the runs folder; now it starts nothing and writes nothing."""
    app, url = served
    with engine.begin() as conn:  # as an older ragsweep stored it
        conn.execute(
            database.testsets.insert().values(name=TRAVERSAL, created_at=datetime.now(UTC))
        )
    DatabaseStore(engine).save(TRAVERSAL, ui_demo.testset_rows().slice(0, 2))
    page.goto(f"{url}/start")
    page.fill("input[name=docs]", str(tmp_path))
    page.select_option("select[name=testset]", TRAVERSAL)
    response = submit(page, "form.box button")
    assert response.status == 400
    assert "testset: a test set needs a name of" in page.inner_text("main")
    assert not app.state.jobs.jobs
    escaped = runs_dir / ".ui-testsets" / f"{TRAVERSAL}.arrow"
    assert not escaped.parent.exists() and not list(runs_dir.parents[2].rglob("x.arrow"))


# --- the cross-port attack -----------------------------------------------------------------


@contextmanager
def hostile_server(pages: dict[str, str], cookies: list[str]) -> Iterator[str]:
    """A second HTTP server on another loopback port: serves ``pages`` by path, each with
    ``cookies`` set (for host 127.0.0.1, whatever its port); its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path not in pages:
                self.send_error(404)
                return
            body = pages[self.path].encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            for cookie in cookies:
                self.send_header("set-cookie", cookie)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def form(action: str, fields: dict[str, str], button: str) -> str:
    inputs = "".join(
        f'<input name="{k}" value="{html.escape(v, quote=True)}">' for k, v in fields.items()
    )
    return f'<form method="post" action="{action}">{inputs}<button id="{button}">go</button></form>'


def a_session_pair(url: str, path: str = "/testsets", cookie: str = "") -> tuple[str, str]:
    """(session cookie, CSRF token) that a client fetched for itself from the ui."""
    answer = httpx.get(f"{url}{path}", headers={"Cookie": cookie} if cookie else {})
    token = re.search(r'name="csrf" value="([^"]+)"', answer.text).group(1)
    return answer.cookies["ragsweep_session"], token


@needs_chromium
def test_a_page_on_another_loopback_port_cannot_edit_delete_or_start_with_a_planted_cookie(
    page, served, engine, tmp_path
):
    """The attacker plants its own session cookie (and the old CSRF cookie) in the victim's
    browser and posts the matching token: Chromium says the posts come from another origin
    (Origin, Sec-Fetch-Site: same-site), and the ui refuses each before reading the form."""
    app, url = served
    question_id = DatabaseStore(engine).load("curated.json")["question_id"][0].as_py()
    before = DatabaseStore(engine).history("curated.json", question_id)
    session, csrf = a_session_pair(url)
    target = f"{url}/testsets/curated.json/questions/{question_id}"
    attack = form(f"{target}/edit", {"csrf": csrf, "question": "pwned", "answers": "x"}, "edit")
    attack += form(f"{target}/delete", {"csrf": csrf}, "delete")
    attack += form(
        f"{url}/start", {"csrf": csrf, "docs": str(tmp_path), "testset": "curated.json"}, "start"
    )
    planted = [f"ragsweep_session={session}; Path=/", f"ragsweep_csrf={csrf}; Path=/"]
    with hostile_server({"/": attack}, planted) as hostile:
        for button in ("edit", "delete", "start"):
            page.goto(hostile)
            sent = {c["name"]: c["value"] for c in page.context.cookies(url)}
            assert sent["ragsweep_session"] == session  # planted: the ui's host got it
            response = submit(page, f"#{button}")
            assert response.status == 403, button
            assert "came from a page of another site or port" in page.content()
    assert DatabaseStore(engine).history("curated.json", question_id) == before
    assert not app.state.jobs.jobs


@needs_chromium
def test_no_other_page_can_frame_the_ui(page, base_url):
    with hostile_server({"/": f'<iframe src="{base_url}/testsets"></iframe>'}, []) as hostile:
        page.goto(hostile)
        page.wait_for_load_state("load")
        [framed] = [f for f in page.frames if f != page.main_frame]
        assert framed.locator("#testsets").count() == 0


def test_a_csrf_token_serves_only_the_session_and_access_token_it_was_made_for(engine):
    """Without the browser's Origin header (a script): a token from the login page, open to
    anyone, or from another session, or made up, is refused; the session's own passes."""
    add = "/testsets/curated.json/questions"
    fields = {"question": "Q?", "answers": "A", "doc_ids": "doc0.md"}
    with ui_demo.serving(create_app(engine, token=TOKEN), free_port()) as url:
        login_session, login_csrf = a_session_pair(url, "/login")
        own_session, own_csrf = a_session_pair(url, "/testsets", f"ragsweep_token={TOKEN}")

        def post(session: str, csrf: str) -> httpx.Response:
            cookie = f"ragsweep_session={session}; ragsweep_token={TOKEN}"
            return httpx.post(
                f"{url}{add}", data={**fields, "csrf": csrf}, headers={"Cookie": cookie}
            )

        for session, csrf in [
            (login_session, login_csrf),  # planted from the login page
            (own_session, login_csrf),
            (own_session, "made-up"),
        ]:
            refused = post(session, csrf)
            assert refused.status_code == 403 and "CSRF token" in refused.text
        assert post(own_session, own_csrf).status_code == 303


# --- headers and cookies ---------------------------------------------------------------------


@needs_chromium
def test_every_response_carries_the_security_headers(page, base_url):
    for path in ("/", "/login", "/testsets/no-such-set", "/static/ui.css"):
        response = page.goto(f"{base_url}{path}")
        headers = response.headers
        assert headers["content-security-policy"] == CSP, path
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
        assert "strict-transport-security" not in headers  # plain HTTP: no HSTS
    cookie = next(c for c in page.context.cookies(base_url) if c["name"] == "ragsweep_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]


def test_an_internal_error_page_carries_the_security_headers_too(tmp_path):
    engine = database.connect(f"sqlite:///{tmp_path / 'r.db'}")
    with engine.begin() as conn:  # a store damaged under the running app
        conn.execute(sa.text(f"DROP TABLE {database.runs.name}"))
    answer = TestClient(create_app(engine), raise_server_exceptions=False).get("/")
    assert answer.status_code == 500 and "internal error" in answer.text
    assert answer.headers["content-security-policy"] == CSP
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_over_https_the_cookies_are_secure_host_cookies_and_posts_must_come_from_https(engine):
    with ui_demo.serving(create_app(engine, token=TOKEN, https=True), free_port()) as url:
        login = httpx.get(f"{url}/login")
        assert login.headers["strict-transport-security"] == "max-age=31536000"
        session = login.headers["set-cookie"]
        assert session.startswith("__Host-ragsweep_session=")
        assert "; Path=/; HttpOnly; SameSite=Strict; Secure" in session and "Domain" not in session
        csrf = re.search(r'name="csrf" value="([^"]+)"', login.text).group(1)
        host = url.removeprefix("http://")
        posted = {"csrf": csrf, "token": TOKEN, "next": "/"}
        cookie = f"__Host-ragsweep_session={login.cookies['__Host-ragsweep_session']}"

        def post(origin: str) -> httpx.Response:
            headers = {"Cookie": cookie, "Origin": origin}
            return httpx.post(f"{url}/login", data=posted, headers=headers)

        assert post(f"http://{host}").status_code == 403
        secure = post(f"https://{host}")
        assert secure.status_code == 303
        assert secure.headers["set-cookie"].startswith(f"__Host-ragsweep_token={TOKEN};")
        assert "; Secure" in secure.headers["set-cookie"]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate (Debian package openssl)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


@needs_chromium
def test_over_tls_chromium_keeps_the_host_cookies_and_posts_from_the_https_pages(
    browser, engine, tmp_path
):
    app = create_app(engine, token=TOKEN, https=True)
    with ui_demo.serving(app, free_port(), tls=self_signed(tmp_path)) as url:
        context = browser.new_context(ignore_https_errors=True)
        page = context.new_page()
        page.goto(f"{url}/testsets/curated.json")
        assert page.url.startswith(f"{url}/login")
        page.fill("input[name=token]", TOKEN)
        submit(page, "form button")
        assert page.url == f"{url}/testsets/curated.json"
        cookies = {c["name"]: c for c in context.cookies(url)}
        assert set(cookies) == {"__Host-ragsweep_session", "__Host-ragsweep_token"}
        assert all(c["secure"] and c["httpOnly"] and c["path"] == "/" for c in cookies.values())
        page.fill("#add textarea[name=question]", "Over TLS?")
        page.fill("#add textarea[name=answers]", "Yes")
        page.fill("#add textarea[name=doc_ids]", "doc0.md")
        response = submit(page, "#add button")
        assert response.status == 200 and response.headers["strict-transport-security"]
        assert "Over TLS?" in DatabaseStore(engine).load("curated.json")["question"].to_pylist()
        submit(page, "#logout button")
        assert {c["name"] for c in context.cookies(url)} <= {"__Host-ragsweep_session"}
        context.close()


# --- login: nothing shown, rate limit, logout ------------------------------------------------


@needs_chromium
def test_the_login_page_shows_nothing_about_the_store(page, engine):
    with ui_demo.serving(create_app(engine, token=TOKEN), free_port()) as url:
        page.goto(f"{url}/runs/night-1")
        assert page.url.startswith(f"{url}/login")
        shown = page.content()
        assert safe_url(engine.url) not in shown
        assert engine.url.database not in shown and "sqlite" not in shown
        assert page.locator("nav .store, nav a").count() == 0


@needs_chromium
def test_login_attempts_are_rate_limited_per_client(page, engine):
    with ui_demo.serving(create_app(engine, token=TOKEN), free_port()) as url:
        for attempt in range(5):
            page.goto(f"{url}/login")
            page.fill("input[name=token]", f"guess-{attempt}")
            assert submit(page, "form button").status == 401
        page.goto(f"{url}/login")
        page.fill("input[name=token]", TOKEN)  # right, but too late
        response = submit(page, "form button")
        assert response.status == 429 and int(response.headers["retry-after"]) > 0
        assert "too many wrong tokens" in page.content()
        bearer = httpx.get(f"{url}/runs/night-1", headers={"Authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 429  # the same address: the bearer header waits too


def test_tokens_guessed_through_the_cookie_are_rate_limited_and_a_stale_cookie_is_dropped(
    engine,
):
    client = TestClient(create_app(engine, token=TOKEN))
    statuses = []
    for attempt in range(20):
        client.cookies.set("ragsweep_token", f"guess-{attempt}")
        statuses.append(client.get("/runs/night-1").status_code)
    assert statuses[:5] == [401] * 5 and set(statuses[5:]) == {429}
    client.cookies.set("ragsweep_token", TOKEN)  # right, but too late
    assert client.get("/runs/night-1").status_code == 429

    fresh = TestClient(create_app(engine, token=TOKEN))
    fresh.cookies.set("ragsweep_token", "from-before-a-restart")
    answer = fresh.get("/runs/night-1")
    assert answer.status_code == 401
    assert "ragsweep_token=; Path=/" in answer.headers["set-cookie"]  # the browser forgets it


def test_a_client_may_try_again_once_its_oldest_failure_leaves_the_window():
    now = [1000.0]
    limiter = LoginLimiter(failures=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.wait("10.0.0.1") == 0
        limiter.failed("10.0.0.1")
        now[0] += 10
    assert limiter.wait("10.0.0.1") == 30  # the first failure, at 1000, leaves at 1060
    assert limiter.wait("10.0.0.2") == 0  # another address is not held back
    now[0] = 1060.0
    assert limiter.wait("10.0.0.1") == 0
    now[0] = 1100.0
    assert limiter.wait("10.0.0.1") == 0 and limiter.seen == {}  # nothing kept per address


@needs_chromium
def test_logout_forgets_the_token_in_this_browser(page, engine):
    with ui_demo.serving(create_app(engine, token=TOKEN), free_port()) as url:
        page.goto(f"{url}/login?next=/runs/night-1")
        page.fill("input[name=token]", TOKEN)
        submit(page, "form button")
        assert page.url == f"{url}/runs/night-1"
        assert safe_url(engine.url) in page.locator("nav .store").inner_text()
        submit(page, "#logout button")
        assert page.url == f"{url}/login"
        assert "ragsweep_token" not in {c["name"] for c in page.context.cookies(url)}
        page.goto(f"{url}/runs/night-1")
        assert page.url.startswith(f"{url}/login")


# --- document roots ----------------------------------------------------------------------


@needs_chromium
def test_a_run_or_generation_reads_documents_only_under_the_allowed_roots(page, served):
    app, url = served
    page.goto(f"{url}/start")
    assert page.locator("#docs-roots").inner_text() == app.state.jobs.roots.describe()
    page.fill("input[name=docs]", "/etc")
    page.select_option("select[name=testset]", "curated.json")
    response = submit(page, "form.box button")
    assert response.status == 400
    assert "docs: /etc is outside the document roots this ui allows" in page.inner_text("main")
    page.goto(f"{url}/testsets")
    page.fill("#generate input[name=docs]", "/etc/../etc")
    page.fill("#generate input[name=name]", "from-etc")
    page.fill("#generate input[name=llm]", "writer")
    assert submit(page, "#generate button").status == 400
    assert "outside the document roots" in page.inner_text("main")
    assert not app.state.jobs.jobs


def test_document_roots_hold_folders_and_s3_prefixes_and_nothing_around_them(tmp_path):
    inside = tmp_path / "kb" / "team"
    inside.mkdir(parents=True)
    (tmp_path / "kb2").mkdir()
    (tmp_path / "kb" / "link").symlink_to(tmp_path / "kb2")
    roots = DocRoots.of([str(tmp_path / "kb"), "s3://bucket/kb"])
    assert roots.check(str(inside)) == str(inside.resolve())
    assert roots.check(f"{tmp_path}/kb2/../kb/team") == str(inside.resolve())
    assert roots.check("s3://bucket/kb/team/") == "s3://bucket/kb/team/"
    for outside in (
        str(tmp_path / "kb2"),
        str(tmp_path / "kb" / "link"),  # a link leading out
        "s3://bucket/kb2",
        "s3://other/kb",
    ):
        with pytest.raises(RagsweepError, match="outside the document roots"):
            roots.check(outside)
    with pytest.raises(RagsweepError, match="cannot hold '.' or '..' parts"):
        roots.check("s3://bucket/kb/../secrets")
    assert DocRoots.of(["s3://"]).check("s3://any/prefix") == "s3://any/prefix"
    with pytest.raises(RagsweepError, match="--docs-root /no/such/folder: no such folder"):
        DocRoots.of(["/no/such/folder"])


# --- the command: IPv6 loopback, options -------------------------------------------------------


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@needs_chromium
@pytest.mark.skipif(not ipv6_loopback(), reason="this host has no IPv6 loopback (::1)")
def test_the_cli_serves_and_accepts_forms_on_ipv6_loopback(page, engine):
    env = {"RAGSWEEP_STORE_URL": str(engine.url), "RAGSWEEP_UI_TOKEN": ""}
    process, url = ui_demo.serve_cli("--host", "::1", env=env, host="::1")
    try:
        assert httpx.get(url).status_code == 200
        assert httpx.get(url, headers={"Host": "attacker.example"}).status_code == 400
        page.goto(f"{url}/testsets/curated.json")
        page.fill("#add textarea[name=question]", "Over IPv6?")
        page.fill("#add textarea[name=answers]", "Yes")
        page.fill("#add textarea[name=doc_ids]", "doc0.md")
        assert submit(page, "#add button").status == 200  # Origin http://[::1]:port accepted
        assert "Over IPv6?" in DatabaseStore(engine).load("curated.json")["question"].to_pylist()
    finally:
        process.terminate()
        process.wait()


def test_the_cli_refuses_a_docs_root_that_is_no_folder(tmp_path, monkeypatch, capsys):
    """Through the entry point, in this process: refused before anything is served."""
    from ragsweep.cli import main

    monkeypatch.setenv("RAGSWEEP_STORE_URL", f"sqlite:///{tmp_path / 'r.db'}")
    args = ["ui", "--port", str(free_port()), "--docs-root", str(tmp_path / "nope")]
    monkeypatch.setattr(sys, "argv", ["ragsweep", *args])
    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == 2
    stderr = capsys.readouterr().err
    assert f"error: --docs-root {tmp_path / 'nope'}: no such folder" in stderr
    assert "Traceback" not in stderr


PAYLOAD = "<img src=x onerror=alert(1)><script>alert('ui')</script>"


class Dialogs(list):
    """The messages of the dialogs a page opened (each dismissed)."""

    def dismiss(self, dialog) -> None:
        self.append(dialog.message)
        dialog.dismiss()


def watch_dialogs(page) -> Dialogs:
    """Dialogs the page opens from now; ``page.remove_listener("dialog", d.dismiss)`` ends
    it (the module's tests share the page)."""
    dialogs = Dialogs()
    page.on("dialog", dialogs.dismiss)
    return dialogs


@needs_chromium
def test_the_compare_of_many_runs_and_a_question_across_runs_escape_names_and_answers(
    page, tmp_path
):
    from ragsweep.store.annotations import label_run

    with ui_demo.demo_store(tmp_path) as engine:
        label_run(engine, "night-3", title=PAYLOAD)
        with engine.begin() as conn:
            conn.execute(sa.update(database.results).values(answer=PAYLOAD))
        dialogs = watch_dialogs(page)
        with ui_demo.serving_store(engine, tmp_path / "runs") as base_url:
            page.goto(f"{base_url}/compare?runs=night-1&runs=night-2&runs=night-3")
            assert page.locator("section.comparison").count() == 2
            assert PAYLOAD in page.locator("#run-3 option[selected]").inner_text()
            page.goto(f"{base_url}/questions/q001")
            assert page.locator("tr[data-run-id=night-3] td a").first.inner_text() == PAYLOAD
            assert page.locator("tr[data-run-id=night-2] td.text").inner_text() == PAYLOAD
            page.goto(f"{base_url}/questions/{PAYLOAD}")
            assert PAYLOAD in page.locator("h1").inner_text()
        assert page.locator("img").count() == 0 and dialogs == []
        page.remove_listener("dialog", dialogs.dismiss)


@needs_chromium
def test_curation_escapes_authors_comments_diffs_and_the_selection(page, tmp_path):
    from ragsweep.curation.stored_sets import edit_question

    with ui_demo.demo_store(tmp_path) as engine:
        store = DatabaseStore(engine)
        edited = edit_question(
            store.load("curated.json"), "q001", question=PAYLOAD, topic=PAYLOAD, doc_ids=[PAYLOAD]
        )
        store.save("curated.json", edited, author=PAYLOAD, comment=PAYLOAD)
        dialogs = watch_dialogs(page)
        with ui_demo.serving_store(engine, tmp_path / "runs") as base_url:
            page.goto(f"{base_url}/testsets/curated.json/questions/q001")
            latest = page.locator("#history tr.version-row").first
            assert latest.locator("td.author").inner_text().split("\n") == [PAYLOAD, PAYLOAD]
            assert PAYLOAD in latest.locator(".change[data-field=topic] ins").inner_text()
            assert page.locator("#edit input[name=topic]").input_value() == PAYLOAD
            page.goto(f"{base_url}/testsets/curated.json")
            assert PAYLOAD in page.locator("tr[data-question-id=q001]").inner_text()
        assert page.locator("img").count() == 0 and dialogs == []
        page.remove_listener("dialog", dialogs.dismiss)
