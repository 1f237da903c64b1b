"""Runs that meet real faults: a store that refuses the write at publish, an MLflow server
that refuses, a baseline that is not stored, a full disk, SIGINT / SIGTERM / SIGKILL, a hung
LLM endpoint. Results are never thrown away, nothing is left running, and each ends with
one line saying what failed and what survived."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest
from conftest import ragsweep_here
from scripted_llm import ScriptedLLM

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table
from ragsweep.runner.closing import close_run
from ragsweep.runner.rundir import export_run, is_complete, read_marker
from ragsweep.store import database

REPO = Path(__file__).resolve().parents[1]
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
EXAMPLES = [
    "--docs",
    str(REPO / "examples/docs"),
    "--testset",
    str(REPO / "examples/testset.jsonl"),
]
SMALL = ["--chunk-sizes", "64", "--top-k", "1,3", "--search-types", "similarity"]
TIMED = ("latency", "_s", "_ms")  # columns that measure time: they differ between runs


def swept(cache: Path) -> list[str]:
    """The examples' small sweep, embedded by the module's scripted endpoint
    (``embedder``) and its vectors kept in ``cache`` (the module's: the vectors of the
    examples are the same from run to run, and no run writes to the developer's cache)."""
    return [*EXAMPLES, *SMALL, "--embedding-models", "openai:embedder", "--cache", str(cache)]


@pytest.fixture(scope="module", autouse=True)
def embedder() -> Iterator[str]:
    """A scripted OpenAI-compatible endpoint embedding the module's runs: no step loads a
    model (RAGSWEEP_EMBEDDING_BASE_URL points at it for the module)."""
    with ScriptedLLM() as server, pytest.MonkeyPatch.context() as patch:
        server.models.append("embedder")
        patch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", server.url)
        yield server.url


@pytest.fixture(scope="module")
def scripted_cache(tmp_path_factory) -> Path:
    """The module's embedding cache (the scripted vectors are the module's own)."""
    return tmp_path_factory.mktemp("embeddings")


def ragsweep(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, cwd=cwd, timeout=900)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def untimed(table):
    return table.drop_columns(
        [n for n in table.column_names if n.endswith(TIMED)]
    ).replace_schema_metadata()


@pytest.fixture(scope="module")
def reference(tmp_path_factory, scripted_cache) -> Path:
    """One uninterrupted run of the examples (two configurations), not stored."""
    out = tmp_path_factory.mktemp("reference")
    result = ragsweep("run", *swept(scripted_cache), "--no-store", "--output", str(out), cwd=out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def copy_run(run_dir: Path, target: Path) -> Path:
    copied = target / run_dir.name
    shutil.copytree(run_dir, copied, ignore=shutil.ignore_patterns("pipeline"))
    return copied


def outputs_of(run_dir: Path) -> dict[str, Path]:
    """The rank and load steps' artifacts under a run folder's pipeline root."""
    rank = next((run_dir / "pipeline").glob("*/rank"))
    found = {name: rank / name for name in ("leaderboard", "results", "breakdown", "failures")}
    found["report"] = rank / "report"
    found["rag_patterns"] = rank / "rag_patterns"
    found["testset"] = next((run_dir / "pipeline").glob("*/generate-qa/questions"))
    return found


@contextmanager
def mounted(source: str, target: Path, *options: str):
    """A real mount of ``source`` at ``target`` (tests run as root); skipped where mounting
    is refused."""
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", *options, source, str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount is not permitted here: {done.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


# --- checked before the sweep ---------------------------------------------------------


def test_a_baseline_that_is_not_stored_stops_the_run_before_the_sweep(tmp_path):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    out = tmp_path / "runs"
    result = ragsweep_here(
        "run", *EXAMPLES, *SMALL, "--store", url, "--output", str(out), "--baseline", "no-such-run"
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "no run 'no-such-run'" in last_line(result.stderr) and "store.db" in result.stderr
    assert not out.exists()  # nothing swept, nothing to lose


def test_an_mlflow_uri_that_refuses_stops_the_run_before_the_sweep(tmp_path):
    refused = f"http://127.0.0.1:{free_port()}"  # a closed loopback port
    out = tmp_path / "runs"
    result = ragsweep_here(
        "run", *EXAMPLES, *SMALL, "--no-store", "--output", str(out), "--mlflow", refused
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert refused in last_line(result.stderr) and "unreachable" in result.stderr
    assert not out.exists() or not [p for p in out.iterdir() if p.is_dir()]


def test_an_output_folder_that_cannot_be_written_stops_the_run_before_the_sweep(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    out = tmp_path / "a-file" / "runs"
    result = ragsweep_here("run", *EXAMPLES, *SMALL, "--no-store", "--output", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--output: {out}: cannot write there" in last_line(result.stderr)


# --- side steps never cost the results --------------------------------------------------


def test_an_mlflow_server_that_refuses_at_the_end_leaves_the_run_stored_as_partial(
    reference, tmp_path
):
    run_dir = copy_run(reference, tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    refused = f"http://127.0.0.1:{free_port()}"

    outcome = close_run(run_dir, url, refused, baseline="")

    assert outcome.status == "partial" and outcome.exit_code == 3
    assert set(outcome.failed) == {"track"} and refused in outcome.failed["track"]
    assert outcome.stored is True and is_complete(run_dir)
    summary = outcome.summary()
    assert "track failed" in summary and "results complete in" in summary
    [row] = database.list_runs(database.connect(url))
    assert row["status"] == "partial" and "track failed" in row["detail"]
    stored = database.load_leaderboard(database.connect(url), run_dir.name)
    assert (
        stored["config_id"] == read_table(run_dir / "leaderboard.arrow", "leaderboard")["config_id"]
    )
    assert read_marker(run_dir)["status"] == "partial"


def test_a_baseline_removed_before_the_comparison_leaves_the_run_stored_as_partial(
    reference, tmp_path
):
    run_dir = copy_run(reference, tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    database.connect(url)

    outcome = close_run(run_dir, url, "", baseline="gone-night")

    assert outcome.status == "partial" and set(outcome.failed) == {"compare"}
    assert "no run 'gone-night'" in outcome.failed["compare"]
    assert database.load_results(database.connect(url), run_dir.name).num_rows > 0


def test_a_store_that_refuses_the_write_at_publish_leaves_a_complete_folder_to_import_later(
    reference, tmp_path
):
    run_dir = copy_run(reference, tmp_path)
    folder = tmp_path / "store"
    folder.mkdir()
    url = f"sqlite:///{folder / 'results.db'}"
    database.connect(url).dispose()  # reachable and prepared when the run started
    with mounted(str(folder), folder, "--bind"):
        # then the filesystem under it turns read-only: root cannot write there either
        done = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True)
        assert done.returncode == 0, done.stderr

        outcome = close_run(run_dir, url, "", baseline="")

        assert outcome.stored is False and outcome.status == "partial"
        assert "readonly" in outcome.failed["publish"] or "read-only" in outcome.failed["publish"]
        assert f"ragsweep runs import {run_dir}" in outcome.summary()
        assert is_complete(run_dir) and read_marker(run_dir)["stored"] is False
    # the store is back: the folder is stored as it was left, complete
    imported = ragsweep_here("runs", "import", str(run_dir), "--store", url)
    assert imported.returncode == 0, imported.stderr
    listed = ragsweep_here("runs", "--store", url)
    assert run_dir.name in listed.stdout and "succeeded" in listed.stdout
    stored = database.load_results(database.connect(url), run_dir.name)
    assert stored.num_rows == read_table(run_dir / "results.arrow", "results").num_rows


def test_a_full_filesystem_leaves_no_half_written_export(reference, tmp_path):
    with mounted("tmpfs", tmp_path / "small", "-t", "tmpfs", "-o", "size=96k") as small:
        run_dir = small / reference.name
        run_dir.mkdir()
        with pytest.raises(RagsweepError) as failed:
            export_run(run_dir, outputs_of(reference))
        message = str(failed.value)
        assert str(run_dir) in message and "No space left on device" in message
        # nothing half-written: no report, no table, no staging folder
        assert sorted(p.name for p in run_dir.iterdir()) == []


def kilobytes(path: Path) -> int:
    return int(
        subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True).stdout.split()[0]
    )


def test_a_run_stored_with_results_is_never_replaced_by_a_failure_note(reference, tmp_path):
    run_dir = copy_run(reference, tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert close_run(run_dir, url, "", baseline="").status == "succeeded"
    engine = database.connect(url)

    noted = database.record_unfinished(engine, run_dir.name, {}, datetime.now(UTC))

    assert noted is False
    assert database.load_leaderboard(engine, run_dir.name).num_rows == 2


# --- signals and resume -----------------------------------------------------------------


def start_run(out: Path, cache: Path, *extra: str) -> subprocess.Popen:
    """``ragsweep run`` in a session of its own (so that a test can kill all of it)."""
    args = [RAGSWEEP, "run", *swept(cache), "--output", str(out), *extra]
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def wait_for_step(process: subprocess.Popen, function: str) -> list[psutil.Process]:
    """Wait until the run's ``function`` step runs; the run's descendants then."""
    parent = psutil.Process(process.pid)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        children = parent.children(recursive=True)
        for child in children:
            try:
                if function in " ".join(child.cmdline()):
                    return children
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.2)
    raise AssertionError(f"the {function} step never started")


@pytest.mark.parametrize(
    "signum, group",
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    # Ctrl-C signals the terminal's whole process group, the steps too; `kill` the run alone
    ids=["SIGINT to the process group (Ctrl-C)", "SIGTERM to the run (kill)"],
)
def test_a_signal_stops_the_run_and_its_steps_and_records_it_as_interrupted(
    tmp_path, signum, group, scripted_cache
):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    process = start_run(tmp_path / "runs", scripted_cache, "--store", url)
    children = wait_for_step(process, "configure")  # or a later step: each reads its output

    if group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)

    assert process.returncode == 128 + signum
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    [run_dir] = (tmp_path / "runs").iterdir()
    line = last_line(stderr)
    assert f"interrupted by {signal.Signals(signum).name}" in line
    assert f"ragsweep run --resume {run_dir.name}" in line
    assert read_marker(run_dir)["status"] == "interrupted"
    [row] = database.list_runs(database.connect(url))
    assert row["run_id"] == run_dir.name and row["status"] == "interrupted"


@dataclass
class KilledOnAFullDisk:
    run_dir: Path
    stopped: subprocess.CompletedProcess  # the resume that found the disk full
    left: list[str]  # what the run folder held then
    status: str  # and the status it was marked with
    resumed: subprocess.CompletedProcess  # the resume once there was room


@pytest.fixture(scope="module")
def killed_on_a_full_disk(reference, tmp_path_factory, scripted_cache):
    """A run killed (SIGKILL: the machine went down) while its chunk_embed step ran, on a
    disk with room for the steps' artifacts and log but not for the exports beside them;
    resumed there (its steps finish, its export finds the disk full), then resumed again
    once there is room. One run serves both faults: each would otherwise cost a run of
    its own."""
    # the killed chunk_embed may leave its outputs half written: room for them too
    [chunk_embed] = (reference / "pipeline").glob("*/*/chunk-embed")
    steps = kilobytes(reference / "pipeline") + kilobytes(chunk_embed)
    room = steps + kilobytes(reference / "pipeline.log") + 400
    small = tmp_path_factory.mktemp("full-disk") / "small"
    with mounted("tmpfs", small, "-t", "tmpfs", "-o", f"size={room}k") as out:
        process = start_run(out, scripted_cache, "--no-store")
        wait_for_step(process, "chunk_embed")
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
        [run_dir] = out.iterdir()

        stopped = ragsweep("run", "--resume", "--output", str(out), "--no-store")
        left = sorted(p.name for p in run_dir.iterdir())
        status = read_marker(run_dir)["status"]

        subprocess.run(["mount", "-o", "remount,size=64m", str(out)], check=True)
        resumed = ragsweep("run", "--resume", run_dir.name, "--output", str(out), "--no-store")
        yield KilledOnAFullDisk(run_dir, stopped, left, status, resumed)


def test_a_run_folder_on_a_full_disk_fails_in_one_line_and_resumes_once_there_is_room(
    killed_on_a_full_disk,
):
    run = killed_on_a_full_disk
    full, run_dir = run.stopped, run.run_dir
    assert full.returncode == 2 and "Traceback" not in full.stderr
    line = last_line(full.stderr)
    # (the write that found the disk full may be pyarrow's, which words it its own way)
    assert f"cannot write the run folder {run_dir}: " in line
    assert "No space left on device" in line
    assert f"ragsweep run --resume {run_dir.name}" in line
    assert "report.html" not in run.left and ".exporting" not in run.left
    assert run.status == "failed"

    resumed = run.resumed
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    # every step but rank (kfp.local's cache finds no file for its metrics output) and
    # the two that name the pipeline's job (publish, track) was reused: none embeds
    reused = [line for line in resumed.stdout.splitlines() if line.endswith(": reused")]
    assert len(reused) == 11 and "chunk-embed: reused" in resumed.stdout, resumed.stdout
    assert is_complete(run_dir) and read_marker(run_dir)["status"] == "succeeded"


def test_a_killed_run_resumes_to_the_results_of_an_uninterrupted_one(
    killed_on_a_full_disk, reference
):
    run = killed_on_a_full_disk
    # the first resume ran what the kill left undone (then its export found the disk full)
    reused = run.stopped.stdout.count(": reused")
    assert reused >= 5  # configure, load-testset, ingest, generate-qa, plan ... its inputs
    assert "chunk-embed: reused" not in run.stopped.stdout  # it was killed: it ran again
    assert run.resumed.returncode == 0, run.resumed.stderr[-2000:]
    for kind in ("leaderboard", "results"):
        got = untimed(read_table(run.run_dir / f"{kind}.arrow", kind))
        want = untimed(read_table(reference / f"{kind}.arrow", kind))
        assert got.equals(want), kind
    assert read_marker(run.run_dir)["status"] == "succeeded"


def test_resume_refuses_a_finished_run(reference):
    result = ragsweep_here("run", "--resume", reference.name, "--output", str(reference.parent))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"run {reference.name} is succeeded: nothing to resume" in last_line(result.stderr)


# --- deadlines --------------------------------------------------------------------------


class HungServer:
    """A loopback HTTP server that accepts every connection and never answers (or, with
    ``models``, answers ``GET /models`` and never a chat request)."""

    def __init__(self, models: bool = False) -> None:
        release = self.release = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if models:
                    body = b'{"data": [{"id": "m"}]}'
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                release.wait()

            def do_POST(self) -> None:
                release.wait()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


def test_a_hung_endpoint_fails_the_batch_within_its_deadline_naming_the_endpoint():
    from ragsweep.models.llm import Chat, Endpoint, EndpointDown, LLMSettings

    server = HungServer(models=True)
    try:
        endpoint = Endpoint("m", server.url, api_key="sk-hung-secret")
        settings = LLMSettings(timeout_s=0.5, max_retries=1, backoff_s=0.0, concurrency=2)
        chat = Chat(endpoint, settings)
        with pytest.raises(EndpointDown) as down:
            chat.run(list(range(6)), lambda i: chat.ask([("user", f"q{i}")]))
    finally:
        server.close()
    message = str(down.value)
    assert server.url in message and "timed out" in message and "--llm-timeout" in message
    assert "sk-hung-secret" not in message


def test_ragsweep_run_against_a_hung_endpoint_fails_naming_it_not_its_key(tmp_path, monkeypatch):
    server = HungServer()
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", server.url)
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", "sk-9f3")
    try:
        result = ragsweep_here(
            "run", *EXAMPLES, *SMALL, "--llm", "m", "--llm-timeout", "2",
            "--no-store", "--output", str(tmp_path),
        )  # fmt: skip
    finally:
        server.close()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert server.url in last_line(result.stderr) and "unreachable" in result.stderr
    assert "sk-9f3" not in result.stdout + result.stderr


def test_a_hung_judge_at_the_llm_url_is_reported_by_the_variable_the_user_set(
    tmp_path, monkeypatch
):
    """The judge falls back to RAGSWEEP_LLM_BASE_URL: the message names that variable, not
    RAGSWEEP_JUDGE_BASE_URL, which the user never set."""
    server = HungServer()
    monkeypatch.delenv("RAGSWEEP_JUDGE_BASE_URL", raising=False)
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", server.url)
    try:
        result = ragsweep_here(
            "run", *EXAMPLES, *SMALL, "--judge", "m", "--judge-timeout", "1",
            "--no-store", "--output", str(tmp_path),
        )  # fmt: skip
    finally:
        server.close()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = last_line(result.stderr)
    assert line.startswith(f"error: the judge endpoint {server.url} is unreachable")
    assert line.endswith("check RAGSWEEP_LLM_BASE_URL") and "RAGSWEEP_JUDGE" not in line


def test_the_deadlines_are_not_part_of_the_sweep_key():
    from ragsweep.models.llm import LLMSettings
    from ragsweep.sweep.settings import RunSettings

    def key(**llm) -> str:
        return RunSettings(docs="d", testset="t.json", llm=LLMSettings(**llm)).record()["sweep_key"]

    assert key() == key(timeout_s=5.0, max_retries=0, judge_timeout_s=9.0, judge_max_retries=3)
    assert key() != key(temperature=0.5)
