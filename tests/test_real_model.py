"""A real model in the suite: SmolLM2-135M behind llama.cpp's OpenAI-compatible server (the
session fixture ``real_llm``) answers and judges a sweep end to end through ``ragsweep run``.
A 135M model is a test of the plumbing, not of quality: its verdicts are about chance, so
the test asserts that every answer, token count, latency and verdict was recorded and read
(verdicts through the JSON schema), not what they say."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragsweep.core.schemas import read_table, settings_of

ROOT = Path(__file__).resolve().parent.parent
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
QUESTIONS = [  # about examples/docs/guides/quickstart.txt
    ("Which ports does the quickstart container publish?", "8443 and 7420"),
    ("How long does the setup token keep working?", "30 minutes after the server first starts"),
    ("How many characters must the Owner's password have?", "at least 12 characters"),
]


@pytest.fixture(scope="module")
def real_run(real_llm, tmp_path_factory, embedding_cache):
    """One sweep answered and judged by the real model, ranked by AutoRAG's
    answer_relevance: the run folder and the command's output, shared by the tests here.
    One thread on a busy machine can take minutes per request: the deadlines are long, so
    a rating is missing only when it could not be read."""
    work = tmp_path_factory.mktemp("real-model")
    docs = work / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "examples" / "docs" / "guides" / "quickstart.txt", docs)
    testset = work / "testset.json"
    testset.write_text(json.dumps([
        {"question": q, "correct_answers": [a], "correct_answer_document_ids": ["quickstart.txt"]}
        for q, a in QUESTIONS
    ]))  # fmt: skip
    env = {
        **os.environ,
        "RAGSWEEP_LLM_BASE_URL": real_llm.url,
        "RAGSWEEP_CACHE_DIR": str(work / "cache"),
    }
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(docs), "--testset", str(testset), "--llm", real_llm.model,
         "--judge", real_llm.model, "--optimization-metric", "answer_relevance",
         "--max-tokens", "80", "--concurrency", "1", "--llm-timeout", "600",
         "--judge-timeout", "600", "--chunk-sizes", "64", "--top-k", "1",
         "--search-types", "similarity", "--output", str(work / "runs"), "--no-store",
         "--cache", str(embedding_cache), "--patterns", "0"],
        capture_output=True, text=True, timeout=1800, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run] = (work / "runs").iterdir()
    return run, result


def test_the_real_model_answers_every_question_with_its_tokens_and_latency(real_run):
    run, _ = real_run
    answers = read_table(run / "results.arrow", "results").to_pylist()
    assert len(answers) == len(QUESTIONS)
    for row in answers:
        assert row["answer_error"] is None and row["answer"].strip(), row
        assert row["prompt_tokens"] > 0 and 0 < row["completion_tokens"] <= 80
        assert row["latency_s"] > 0 and row["llm_calls"] >= 1
    board = read_table(run / "leaderboard.arrow", "leaderboard")
    assert board["answerer"].to_pylist() == ["llm:smollm2"]
    assert board["latency_p50_s"][0].as_py() > 0


def test_its_verdicts_and_ratings_are_read_through_the_json_schema(real_run):
    run, result = real_run
    results = read_table(run / "results.arrow", "results").to_pylist()
    # SmolLM2 writes parseable JSON only when constrained: every verdict and rating was read
    assert [r["judge_error"] for r in results] == [None] * len(QUESTIONS)
    assert all(r["correctness"] in (0.0, 1.0) for r in results)
    # ratings have no corrective retry (as ai4rag): one of the three, unread, is null
    rated = [r["answer_relevance"] for r in results if r["answer_relevance"] is not None]
    assert len(rated) >= 2 and set(rated) <= {0.0, 0.25, 0.5, 0.75, 1.0}, rated
    settings = settings_of(read_table(run / "leaderboard.arrow", "leaderboard"))
    assert settings["optimization_metric"] == "answer_relevance"
    assert settings["judge"]["model"] == "smollm2"
    assert settings["judge_unreadable"] == {"answers": len(QUESTIONS), "unreadable": 0}
    assert "ranked by answer_relevance" in result.stdout
