"""How the pipeline's steps use the machine: what they import, their threads, their cost line."""

import os
import re
import subprocess
import sys

import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow.step import pipeline_step
from ragsweep.kubeflow.tasks import count_setting
from ragsweep.runner.local import LOCAL_MAX_BRANCHES, thread_environment

# The library modules each step that embeds nothing imports (components/*.py).
NOT_EMBEDDING = {
    "load_testset": [
        "ragsweep.core.schemas",
        "ragsweep.sweep.settings",
        "ragsweep.documents.sources",
        "ragsweep.documents.testsets",
    ],
    "ingest": [
        "ragsweep.sweep.settings",
        "ragsweep.documents.sampling",
        "ragsweep.documents.sources",
        "ragsweep.documents.testsets",
    ],
    "configure": ["ragsweep.kubeflow.parameters", "ragsweep.sweep.settings"],
    "plan": ["ragsweep.sweep.fanout", "ragsweep.sweep.settings", "ragsweep.sweep.steps"],
    "plan_shards": ["ragsweep.sweep.fanout", "ragsweep.core.schemas", "ragsweep.sweep.settings"],
    "merge_shards": ["ragsweep.sweep.fanout"],
    "embed_shard (nothing sharded)": ["ragsweep.sweep.fanout"],
    "evaluate": ["ragsweep.sweep.settings", "ragsweep.sweep.steps"],
    "rank": [
        "ragsweep.evaluation.leaderboard",
        "ragsweep.reporting.report",
        "ragsweep.sweep.settings",
        "ragsweep.documents.qagen",
    ],
    "publish": ["ragsweep.store.database"],
    "compare": ["ragsweep.reporting.regression"],
}
EMBEDDING_STACK = ("torch", "transformers", "sentence_transformers", "llama_index.core")


@pytest.mark.parametrize("step", sorted(NOT_EMBEDDING))
def test_steps_that_embed_nothing_start_without_the_embedding_stack(step):
    code = (
        "import importlib, sys\n"
        f"for name in {NOT_EMBEDDING[step]!r}: importlib.import_module(name)\n"
        f"print([m for m in {EMBEDDING_STACK!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"{step} imports {done.stdout.strip()}"


def test_the_steps_inside_the_fan_out_start_without_readers_and_scipy_stats():
    code = (
        "import sys\n"
        "import ragsweep.embeddings.cache, ragsweep.sweep.steps\n"
        "print([m for m in ('pypdf', 'docx', 'scipy.stats') if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_chunking_still_splits_with_llama_index_once_asked():
    import pyarrow as pa

    from ragsweep.documents.chunking import chunk_documents

    documents = pa.table({"doc_id": ["a.md"], "text": ["One sentence here. " * 40]})
    chunks = chunk_documents(documents, "sentence", 16, 0, lambda text: text.split())
    assert chunks.num_rows > 1
    assert "llama_index.core.node_parser" in sys.modules


def test_each_step_ends_with_its_peak_memory_and_time():
    code = (
        "from ragsweep.kubeflow.step import pipeline_step\n"
        "with pipeline_step('demo'):\n"
        "    ballast = bytearray(200 << 20)\n"
        "    ballast[::4096] = b'x' * len(ballast[::4096])  # touched: resident\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    match = re.fullmatch(
        r"ragsweep: step demo: peak memory (\d+) MB, [\d.]+ s( \([\d.]+ s starting\))?", line
    )
    assert match, line
    assert 200 <= int(match.group(1)) < 400


def test_a_failed_step_still_says_what_it_cost(capsys):
    with pytest.raises(SystemExit) as exit_, pipeline_step("demo"):
        raise RagsweepError("testset.json: record 1: field 'question': missing")
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert "error: testset.json: record 1" in captured.err
    assert "ragsweep: step demo: peak memory" in captured.out


def test_local_steps_share_the_cores_between_the_branches_running_at_once(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert thread_environment(1) == {"OMP_NUM_THREADS": str(cores)}
    assert thread_environment(2) == {"OMP_NUM_THREADS": str(max(1, cores // 2))}
    # kfp.local runs no more than LOCAL_MAX_BRANCHES at once, whatever the bound
    many = thread_environment(LOCAL_MAX_BRANCHES + 6)
    assert many == {"OMP_NUM_THREADS": str(max(1, cores // LOCAL_MAX_BRANCHES))}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert thread_environment(1) == {}  # the caller's own choice stands


def test_a_count_setting_is_a_whole_number():
    assert count_setting("RAGSWEEP_GPU", "") == 0
    assert count_setting("RAGSWEEP_GPU", " 2 ") == 2
    with pytest.raises(RagsweepError, match="RAGSWEEP_GPU: 'two' is not a whole number"):
        count_setting("RAGSWEEP_GPU", "two")
    with pytest.raises(RagsweepError, match="'-1'"):
        count_setting("RAGSWEEP_PARALLELISM", "-1")


CONFTEST = """
import importlib.util, sys
sys.path.insert(0, {tests!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {tests!r} + "/conftest.py")
suite = sys.modules["suite_conftest"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_configure = suite.pytest_configure
"""
PROBE = """
import os, pathlib

def test_probe():
    pathlib.Path(os.environ["PROBE_OUT"]).write_text(os.environ.get("OMP_NUM_THREADS", ""))
"""


def test_each_worker_of_the_suite_gets_its_share_of_the_cores(tmp_path):
    """The suite's conftest gives each xdist worker cores // workers threads. It once set
    the controller's whole count before the workers started, and they inherited it."""
    tests = os.path.dirname(os.path.abspath(__file__))
    (tmp_path / "conftest.py").write_text(CONFTEST.format(tests=tests))
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "PYTEST_"))}
    env["PROBE_OUT"] = str(tmp_path / "threads")
    command = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider"]
    ran = subprocess.run(
        [*command, "--rootdir", str(tmp_path), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert (tmp_path / "threads").read_text() == str(share)


@pytest.fixture(scope="module")
def module_cache_dir() -> str | None:
    """What a module fixture's runs see as ragsweep's cache folder."""
    return os.environ.get("RAGSWEEP_CACHE_DIR")


def test_module_fixtures_run_in_the_sessions_cache_not_the_users_home(
    module_cache_dir, ragsweep_cache
):
    # a setting per test came after the module fixtures: their runs wrote ONNX exports,
    # replies and digests into the home of whoever ran the suite
    assert module_cache_dir == str(ragsweep_cache)
