"""Resume that cannot mix (issue 37): a resumed run reuses a step only if what it read (the
settings, the test set, the documents, the endpoints it calls) is unchanged, says in one line
what changed, applies --skip-unresolved, refuses the options that would change its settings,
and runs in one process at a time (the folder's lock)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ragsweep_here
from scripted_llm import ScriptedLLM, Step

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table
from ragsweep.runner.rundir import held, holder, read_marker, status_of, write_marker
from ragsweep.sweep.options import pipeline_arguments

REPO = Path(__file__).resolve().parents[1]
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
SMALL = ["--chunk-sizes", "64", "--top-k", "1", "--search-types", "similarity"]
LOST = "Tidewater ships a built-in teleporter for moving servers between data centres."


def questions(missing: bool) -> str:
    """Three questions of the examples; with ``missing``, the third cites a document that
    is not there and a context no document holds (the run's ingest step fails)."""
    lines = (REPO / "examples/testset.jsonl").read_text().splitlines()[:3]
    if missing:
        third = json.loads(lines[2])
        third["metadata"]["seed_document_id"] = "guides/missing.md"
        third["reference_context"] = LOST
        lines[2] = json.dumps(third)
    return "\n".join(lines) + "\n"


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def ragsweep(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, env=env, timeout=900)


def endpoints(server: ScriptedLLM) -> dict[str, str]:
    """The environment whose embedding and LLM endpoints are ``server``."""
    return {
        **os.environ,
        "RAGSWEEP_EMBEDDING_BASE_URL": server.url,
        "RAGSWEEP_LLM_BASE_URL": server.url,
    }


def started(out: Path, testset: Path, env: dict[str, str], *extra: str):
    """``ragsweep run`` of the examples' documents, embedded by the scripted endpoint (no
    embedding cache: each embedding is a request it counts); its output and run folder."""
    result = ragsweep(
        "run", "--docs", str(REPO / "examples/docs"), "--testset", str(testset), *SMALL,
        "--embedding-models", "openai:embedder", "--cache", "none", "--no-store",
        "--output", str(out), *extra, env=env,
    )  # fmt: skip
    [run_dir] = [p for p in out.iterdir() if p.is_dir()]
    return result, run_dir


@pytest.fixture(scope="module")
def server():
    with ScriptedLLM() as first:
        first.models.append("embedder")
        yield first


def failed_in_ingest(tmp_path: Path, server: ScriptedLLM):
    """A run whose test set cites a missing document: it fails in ingest."""
    testset = tmp_path / "testset.jsonl"
    testset.write_text(questions(missing=True))
    result, run_dir = started(tmp_path / "runs", testset, endpoints(server))
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "guides/missing.md" in result.stdout + result.stderr
    assert f"ragsweep run --resume {run_dir.name}" in last_line(result.stderr)
    return testset, run_dir


def test_a_fixed_test_set_reruns_load_testset_on_resume_and_the_run_succeeds(tmp_path, server):
    testset, run_dir = failed_in_ingest(tmp_path, server)
    testset.write_text(questions(missing=False))  # fixed

    resumed = ragsweep(
        "run", "--resume", run_dir.name, "--output", str(run_dir.parent), "--no-store",
        env=endpoints(server),
    )  # fmt: skip

    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"load-testset reruns: {testset} changed since the run read it" in resumed.stderr
    assert "configure: reused" in resumed.stdout  # the settings did not change
    assert "load-testset: reused" not in resumed.stdout
    assert read_table(run_dir / "testset.arrow", "testset").num_rows == 3
    assert read_marker(run_dir)["status"] == "succeeded"


def test_skip_unresolved_given_on_resume_applies(tmp_path, server):
    testset, run_dir = failed_in_ingest(tmp_path, server)

    resumed = ragsweep(
        "run", "--resume", run_dir.name, "--output", str(run_dir.parent), "--no-store",
        "--skip-unresolved", env=endpoints(server),
    )  # fmt: skip

    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "configure reruns: the settings changed since the run read it" in resumed.stderr
    kept = read_table(run_dir / "testset.arrow", "testset")["question_id"].to_pylist()
    assert sorted(kept) == ["q001", "q002"]  # the unresolved q003 left out
    assert json.loads((run_dir / "settings.json").read_text())["skip_unresolved"] is True


def test_a_folder_written_before_a_parameter_existed_resumes_with_its_default(tmp_path, server):
    testset, run_dir = failed_in_ingest(tmp_path, server)
    testset.write_text(questions(missing=False))
    path = run_dir / "settings.json"
    older = json.loads(path.read_text())
    del older["agents"]  # the pipeline's parameter since 2026-12-03: older folders lack it
    path.write_text(json.dumps(older))

    resumed = ragsweep(
        "run", "--resume", run_dir.name, "--output", str(run_dir.parent), "--no-store",
        env=endpoints(server),
    )  # fmt: skip

    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert read_marker(run_dir)["status"] == "succeeded"
    assert read_table(run_dir / "leaderboard.arrow", "leaderboard").num_rows == 1


def test_a_folder_with_a_parameter_this_version_lacks_is_refused_naming_it(tmp_path):
    from ragsweep.pipelines.sweep_pipeline import sweep
    from ragsweep.runner.local import run_arguments
    from ragsweep.sweep.settings import RunSettings

    arguments = pipeline_arguments(RunSettings(docs=str(REPO / "examples/docs")))
    (tmp_path / "settings.json").write_text(json.dumps({**arguments, "retired_option": 3}))

    with pytest.raises(RagsweepError) as refused:
        run_arguments(sweep, tmp_path)
    assert str(refused.value) == (
        f"{tmp_path / 'settings.json'}: parameter(s) retired_option unknown to this version "
        "of ragsweep's pipeline (the folder was written by another version): start a new run"
    )
    (tmp_path / "settings.json").write_text(json.dumps(arguments))
    assert run_arguments(sweep, tmp_path) == arguments


def test_options_that_would_change_the_settings_are_refused_with_resume(tmp_path):
    result = ragsweep_here(
        "run", "--resume", "20261201-000000-000000", "--output", str(tmp_path),
        "--chunk-sizes", "64", "--llm", "m", "--top", "5",
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = last_line(result.stderr)
    assert "--chunk-sizes, --generation-models cannot be given with it" in line
    assert "--top" not in line.split("cannot be given")[0]  # --top applies


# --- what a step read, by content ---------------------------------------------------------


def reads_of(docs: str, testset: str = "", **settings) -> dict:
    from ragsweep.pipelines.sweep_pipeline import sweep
    from ragsweep.runner.reads import step_reads
    from ragsweep.sweep.settings import RunSettings

    return step_reads(
        sweep, pipeline_arguments(RunSettings(docs=docs, testset=testset, **settings))
    )


def test_the_documents_read_are_their_content_not_their_timestamps(tmp_path):
    from ragsweep.runner.reads import changes

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Alpha.")
    (docs / "b.md").write_text("Beta.")
    before = reads_of(str(docs))

    os.utime(docs / "a.md", ns=(1, 1))  # touched: the same content
    (docs / "notes.bin").write_bytes(b"\x00")  # a file no step reads
    assert reads_of(str(docs)) == before

    (docs / "b.md").write_text("Beta, edited.")
    after = reads_of(str(docs))
    assert changes(before, after) == [
        f"ingest reruns: the documents in {docs} changed since the run read it"
    ]


def test_s3_documents_and_test_set_are_read_by_etag_and_size(s3, bucket):
    from ragsweep.runner.reads import changes

    s3.put_object(Bucket=bucket, Key="kb/a.md", Body=b"Alpha.")
    s3.put_object(Bucket=bucket, Key="t.jsonl", Body=questions(missing=False).encode())
    docs, testset = f"s3://{bucket}/kb", f"s3://{bucket}/t.jsonl"
    before = reads_of(docs, testset)

    s3.put_object(Bucket=bucket, Key="kb/a.md", Body=b"Alpha, edited.")
    s3.put_object(Bucket=bucket, Key="t.jsonl", Body=questions(missing=True).encode())

    assert changes(before, reads_of(docs, testset)) == [
        f"load-testset reruns: {testset} changed since the run read it",
        f"ingest reruns: the documents in {docs} changed since the run read it",
    ]


def test_an_endpoint_is_read_as_its_url_without_credentials_and_its_model(monkeypatch):
    from ragsweep.models.llm import LLMSettings
    from ragsweep.runner.reads import changes, task_digests
    from ragsweep.sweep.space import SearchSpace

    space = SearchSpace(answerers=("llm:granite",))
    run = {"space": space, "llm": LLMSettings(judge="judge-model")}
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", "http://user:pw@10.0.0.5:8000/v1")
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", "sk-first")
    docs = str(REPO / "examples/docs")
    before = reads_of(docs, **run)
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", "sk-second")  # a new key: the same endpoint
    assert reads_of(docs, **run) == before
    assert "sk-" not in json.dumps(before) and "pw@" not in json.dumps(before)

    monkeypatch.setenv("RAGSWEEP_JUDGE_BASE_URL", "http://10.0.0.7:8000/v1")
    after = reads_of(docs, **run)

    assert changes(before, after) == [
        "evaluate reruns: the judge endpoint of judge-model changed since the run read it "
        "(http://10.0.0.5:8000/v1 -> http://10.0.0.7:8000/v1)"
    ]
    digests = task_digests(before), task_digests(after)
    assert [s for s in digests[0] if digests[0][s] != digests[1].get(s)] == ["evaluate"]


# --- another endpoint, and a second resume at once ----------------------------------------


@dataclass
class Resumed:
    run_dir: Path
    first: ScriptedLLM  # the endpoint the run started with
    second: ScriptedLLM  # the embedding endpoint it was resumed against
    embedded_before: int  # texts the first endpoint embedded before the resume
    result: subprocess.CompletedProcess  # the resume
    pid: int  # its process
    refused: subprocess.CompletedProcess  # a second resume of the folder while it ran


@pytest.fixture(scope="module")
def resumed_elsewhere(tmp_path_factory, server):
    """A run embedded by one endpoint that fails in evaluate (its LLM answers HTTP 500),
    resumed with the embedding endpoint set to another server (the LLM now answering);
    while the resume runs, a second resume of the same folder."""
    tmp = tmp_path_factory.mktemp("elsewhere")
    testset = tmp / "testset.jsonl"
    testset.write_text(questions(missing=False))
    server.then(*[Step(status=500)] * 100)
    result, run_dir = started(
        tmp / "runs", testset, endpoints(server), "--llm", "answerer", "--llm-retries", "0"
    )
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "evaluate: failure" in result.stdout
    server.script.clear()
    embedded = len(server.embedded)
    with ScriptedLLM() as second:
        second.models.append("embedder")
        env = {**endpoints(server), "RAGSWEEP_EMBEDDING_BASE_URL": second.url}
        args = ["run", "--resume", run_dir.name, "--output", str(run_dir.parent), "--no-store"]
        process = subprocess.Popen(
            [RAGSWEEP, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        deadline = time.monotonic() + 300
        while (holder(run_dir) or {}).get("pid") != process.pid:
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
        refused = ragsweep(*args, env=env)
        stdout, stderr = process.communicate(timeout=900)
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        yield Resumed(run_dir, server, second, embedded, done, process.pid, refused)


def test_a_resume_against_another_embedding_endpoint_reruns_the_steps_that_called_it(
    resumed_elsewhere,
):
    run = resumed_elsewhere
    assert run.result.returncode == 0, run.result.stdout[-2000:] + run.result.stderr[-2000:]
    line = next(x for x in run.result.stderr.splitlines() if "chunk-embed" in x)
    assert line == (
        "embed-shard and chunk-embed rerun: the embedding model openai:embedder changed since "
        f"the run read it ({run.first.url} -> {run.second.url})"
    )
    assert run.second.embedded  # the vectors are the second endpoint's
    assert "chunk-embed: reused" not in run.result.stdout
    # the steps that read neither the embedding endpoint nor what it made are reused
    reused = set(re.findall(r"\] ([\w-]+): reused$", run.result.stdout, re.M))
    assert {"configure", "load-testset", "ingest", "generate-qa", "plan"} <= reused
    assert read_marker(run.run_dir)["status"] == "succeeded"


def test_a_second_resume_of_a_running_folder_is_refused_naming_its_host_and_pid(
    resumed_elsewhere,
):
    refused = resumed_elsewhere.refused
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    line = last_line(refused.stderr)
    assert f"PID {resumed_elsewhere.pid} on host {socket.gethostname()}" in line
    assert "one process at a time runs a run folder" in line


# --- the lock ---------------------------------------------------------------------------


HOLDER = """
import sys, time
from pathlib import Path
from ragsweep.runner.rundir import held
with held(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_lock_left_by_a_killed_process_is_no_obstacle(tmp_path):
    run_dir = tmp_path / "20261201-000000-000000"
    run_dir.mkdir()
    write_marker(run_dir, status="running", pid=os.getpid())  # a PID that is alive
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline() == "held\n"
    assert status_of(run_dir) == "running"
    assert holder(run_dir) == {"host": socket.gethostname(), "pid": process.pid}
    with (
        pytest.raises(RagsweepError, match=f"is being run by PID {process.pid} on host"),
        held(run_dir),
    ):
        pass

    process.send_signal(signal.SIGKILL)  # the machine went down: the lock file stays
    process.wait()

    assert (run_dir / "run.lock").exists()
    assert holder(run_dir) is None and status_of(run_dir) == "interrupted"
    with held(run_dir):
        assert holder(run_dir)["pid"] == os.getpid()


# --- the exports, swapped as a set ----------------------------------------------------------


WRITER = """
import sys, time
from pathlib import Path
from ragsweep.runner import rundir

symlink = rundir._symlink
def slow(*args):  # each step of the swap takes a while: a kill lands in it often
    time.sleep(0.02)
    symlink(*args)
rundir._symlink = slow

value = sys.argv[2]
with rundir.staged(Path(sys.argv[1]), whole=True) as stage:
    print("writing", flush=True)
    for name in ("leaderboard.csv", "report.html"):
        (stage / name).write_text(value)
        time.sleep(0.02)
    (stage / "patterns").mkdir()
    (stage / "patterns" / "pattern.json").write_text(value)
print("done", flush=True)
"""
SET = ("leaderboard.csv", "report.html", "patterns/pattern.json")


def test_a_kill_mid_export_leaves_the_old_exports_or_the_new_ones_never_a_mix(tmp_path):
    import random

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    subprocess.run([sys.executable, "-c", WRITER, str(run_dir), "0"], check=True)
    seen = set()
    for value in range(1, 25):
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(run_dir), str(value)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout.readline() == "writing\n"
        time.sleep(random.uniform(0, 0.25))  # writing takes 0.06 s, the swap 0.02 s a link
        process.send_signal(signal.SIGKILL)
        process.wait()
        found = {(run_dir / name).read_text() for name in SET}
        assert len(found) == 1, f"a mix of sets after a kill: {found}"
        seen.add(found.pop() == str(value))
    assert seen == {True, False}  # kills landed before and after the swap
    subprocess.run([sys.executable, "-c", WRITER, str(run_dir), "last"], check=True)
    assert {(run_dir / name).read_text() for name in SET} == {"last"}
    # what the kills left (sets, half-made links, the staging folder) is tidied away
    current = os.readlink(run_dir / "exports")
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [current, "exports", "leaderboard.csv", "patterns", "report.html"]
    )
