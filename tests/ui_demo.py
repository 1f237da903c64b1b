"""A results database with nightly runs and a test set, and the UI served on loopback:
shared by tests/test_ui.py and docs/ui/screenshots.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa
import uvicorn
from builders import make_board, make_testset
from sqlalchemy.engine import Engine

from ragsweep.core.schemas import DOCUMENTS, SETTINGS_KEY, SPAN, settings_of
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.reporting import publishing
from ragsweep.store import database
from ragsweep.sweep.settings import document_hashes

NIGHTS = ["night-1", "night-2", "night-3"]  # night-3 regressed: its best config got worse
SWEEP = "docs-nightly"  # the nights' sweep, followed by name across changed documents
FIRST_NIGHT = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
TESTSET = "nightly.json"
QUESTIONS = 40
DOCUMENT_TEXT = "Install with the package manager. The default port is 8443. Backups run nightly."
CHUNK_SPANS = {  # the chunks every demo configuration retrieves
    "doc0.md": {"doc_id": "doc0.md", "start": 0, "end": 34},
    "doc1.md": {"doc_id": "doc1.md", "start": 12, "end": 80},
}


def night_scores(night: int) -> np.ndarray:
    """Configs x questions: on night 3 every configuration answers far fewer questions."""
    rng = np.random.default_rng(night)
    share = [0.85, 0.65, 0.45, 0.6] if night < 2 else [0.25, 0.2, 0.15, 0.2]
    return np.stack([(rng.random(QUESTIONS) < p).astype(float) for p in share])


def testset_rows() -> pa.Table:
    """The nightly questions; one carries markup, to show it is escaped."""
    table = make_testset([f"q{i:03d}" for i in range(QUESTIONS)])
    questions = table["question"].to_pylist()
    questions[1] = "Does <script>alert('x')</script> <b>run</b>?"
    table = table.set_column(1, "question", pa.array(questions))
    spans = table["gold_spans"].to_pylist()
    spans[1] = [{"doc_id": "doc1.md", "start": 50, "end": 70}]  # "default port is 8443"
    index = table.schema.get_field_index("gold_spans")
    return table.set_column(index, "gold_spans", pa.array(spans, pa.list_(SPAN)))


def write_documents(folder: Path) -> Path:
    """The documents the demo runs retrieved from: doc0.md ... doc9.md."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(10):
        (folder / f"doc{i}.md").write_text(f"Document {i}. {DOCUMENT_TEXT}", encoding="utf-8")
    return folder


def documents_read(docs: Path, gained: int = 0) -> pa.Table:
    """The documents in ``docs`` as a run read them, and ``gained`` more (``new-<i>.md``)."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in sorted(docs.glob("*.md"))}
    texts.update({f"new-{i}.md": f"New document {i}." for i in range(gained)})
    rows = [{"doc_id": k, "source": k, "format": "md", "text": v} for k, v in texts.items()]
    return pa.Table.from_pylist(rows, schema=DOCUMENTS)


def with_chunks(board, docs: Path) -> tuple[pa.Table, pa.Table]:
    """The board's (leaderboard, results), read from ``docs``, each result's two retrieved
    chunks located in doc0.md and doc1.md."""
    settings = {**settings_of(board.leaderboard), "docs": str(docs)}
    leaderboard = board.leaderboard.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})
    spans = [
        [CHUNK_SPANS[d] for d in ids] for ids in board.results["retrieved_doc_ids"].to_pylist()
    ]
    index = board.results.schema.get_field_index("retrieved_spans")
    results = board.results.set_column(index, "retrieved_spans", pa.array(spans, pa.list_(SPAN)))
    return leaderboard, results


def fill(engine: Engine, docs: Path) -> None:
    """Three nightly runs of one sweep, ``SWEEP``, over the documents in ``docs`` (the last
    run regressed; it read one document more, so its sweep key is another), one failed
    run, and the test set in the store."""
    testset = testset_rows()
    write_documents(docs)
    for i, run_id in enumerate(NIGHTS):
        leaderboard, results = with_chunks(make_board(night_scores(i)), docs)
        settings = {**settings_of(leaderboard), "sweep_name": SWEEP}
        settings["sweep_key"] = f"{settings['sweep_key'][:8]}-{i // 2}"
        settings["document_hashes"] = document_hashes(documents_read(docs, gained=i // 2))
        leaderboard = leaderboard.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)})
        publishing.publish(
            engine,
            run_id,
            leaderboard,
            results,
            testset,
            pipeline_run_id=f"kfp-{i}",
            started_at=FIRST_NIGHT + timedelta(days=i),
        )
    settings = {"sweep_key": "other-sweep", "optimization_metric": "answer_correctness"}
    database.record_unfinished(engine, "broken-night", settings, FIRST_NIGHT + timedelta(days=3))
    DatabaseStore(engine).save("curated.json", testset.slice(0, 5))


@contextmanager
def demo_store(folder: Path) -> Iterator[Engine]:
    """A SQLite results database in ``folder`` holding ``fill``'s runs (documents beside)."""
    engine = database.connect(f"sqlite:///{folder / 'results.db'}")
    fill(engine, folder / "docs")
    yield engine
    engine.dispose()


@contextmanager
def serving(app, port: int, tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1:``port`` in a thread (over HTTPS with ``tls``,
    a certificate and key file); its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    if tls:
        config.ssl_certfile, config.ssl_keyfile = map(str, tls)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"uvicorn did not start on port {port}")
        thread.join(0.05)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


@contextmanager
def serving_store(engine: Engine, runs_dir: Path) -> Iterator[str]:
    """``ragsweep ui``'s app over ``engine`` and ``runs_dir``, served on a free port."""
    from scripted_llm import free_port

    from ragsweep.ui import create_app

    with serving(create_app(engine, runs_dir=runs_dir), free_port()) as url:
        yield url


def serve_cli(*args: str, env: dict, host: str = "127.0.0.1") -> tuple[subprocess.Popen, str]:
    """``ragsweep ui ARGS`` as a process on a free port of ``host`` (where it is reached),
    once it answers; its URL."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-c", "from ragsweep.cli import main; main()", "ui", "--port", str(port)]
        + list(args),
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    for _ in range(600):
        if process.poll() is not None:
            raise AssertionError(f"ragsweep ui ended: {process.stdout.read()}")
        try:
            httpx.get(f"{url}/login", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("ragsweep ui did not answer")
