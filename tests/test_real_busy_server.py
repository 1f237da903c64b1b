"""A local one-slot server that is merely busy is waited for (issue 36): SmolLM2-135M behind
llama.cpp's server (the session fixture ``real_llm``: one slot, one thread, as a laptop's
Ollama serves by default) answers and judges 7 questions x 2 configurations at the
default options (8 in flight, 40 s deadlines), while another process keeps a core busy.
Before, requests queued behind the one slot timed out and were sent again; now the client
reads the slot count, streams, and waits while the server makes progress. Texts are
embedded by a scripted endpoint (``scripted_embedder``): no step loads an embedding model."""

import os
import subprocess
import sys

import pytest
from conftest import ragsweep_here
from real_llm import admin_document_set

from ragsweep.core.schemas import read_table

DOC = "configuration.md"
QUESTIONS = [  # short, about examples/docs/admin/configuration.md
    ("Which port does the web console listen on?", "8443"),
    ("Which port does the sync protocol use?", "7420"),
    ("How many days do deleted files stay in the trash?", "30 days"),
    ("What is the size of the PostgreSQL connection pool?", "40"),
    ("How many users does SQLite support at most?", "25 users"),
    ("What is the storage quota for new users?", "100 GB"),
    ("How many failed sign-ins lock an account?", "5"),
]  # 14 answers, then 14 verdicts: more than the 8 in flight, so requests queue
# at the lowest priority: it takes a core that would be idle, not one that the suite's other
# worker is using (which keeps it busy already); alone, it holds a core as before
BUSY = (
    "import os, time\nos.nice(19)\nend = time.monotonic() + 1800\n"
    "while time.monotonic() < end: pass"
)


@pytest.fixture(scope="module")
def busy_run(real_llm, tmp_path_factory, scripted_embedder):
    """The run (two configurations: the top 2 and the top 4 passages of 256 tokens, prompts
    long enough that eight of them queued take the server longer than the 40 s deadline),
    with a busy loop on one core for its length (the lowest priority; killed after, bounded
    at 30 minutes): the run folder."""
    work = tmp_path_factory.mktemp("real-busy")
    docs, testset = admin_document_set(work, DOC, QUESTIONS)
    env = {
        **os.environ,
        "RAGSWEEP_LLM_BASE_URL": real_llm.url,
        "RAGSWEEP_CACHE_DIR": str(work / "cache"),  # the replies: this run's own
        "RAGSWEEP_EMBEDDING_BASE_URL": scripted_embedder.url,
    }
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        result = ragsweep_here(
            "run", "--docs", str(docs), "--testset", str(testset),
            "--llm", real_llm.model, "--judge", real_llm.model,
            "--chunk-sizes", "256", "--top-k", "2,4", "--search-types", "similarity",
            "--embedding-models", "openai:embedder", "--output", str(work / "runs"),
            "--no-store", "--cache", str(work / "vectors"), "--patterns", "0",
            env=env,
        )  # fmt: skip
    finally:
        busy.kill()
        busy.wait()
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run] = (work / "runs").iterdir()
    return run


def test_a_busy_one_slot_server_answers_and_judges_at_the_default_options(busy_run):
    rows = read_table(busy_run / "results.arrow", "results").to_pylist()
    assert len(rows) == 2 * len(QUESTIONS)
    answered = [r for r in rows if r["answer_error"] is None]
    judged = [r for r in rows if r["correctness"] is not None and r["judge_error"] is None]
    print(f"{len(answered)} of {len(rows)} answered, {len(judged)} verdicts read")
    assert len(answered) >= 0.9 * len(rows), [r["answer_error"] for r in rows]
    assert len(judged) >= 0.8 * len(rows), [r["judge_error"] for r in rows]


def test_the_client_kept_to_the_servers_one_slot_and_says_so(busy_run, real_llm):
    log = (busy_run / "pipeline.log").read_text()
    settled = [line for line in log.splitlines() if f"{real_llm.model} at " in line]
    print(*settled, sep="\n")
    assert settled and all("1 in flight (asked 8; the server has 1 slot(s)" in s for s in settled)
