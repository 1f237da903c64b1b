"""A real model in the suite: SmolLM2-135M behind llama.cpp's OpenAI-compatible server (the
session fixture ``real_llm``) writes the passage each question is searched by (HyDE, over
heading-aware chunks), answers and judges a sweep end to end through ``ragsweep run``: one
run for every model call the suite makes of it outside the judge's labels. Its texts are
embedded by a scripted endpoint (``scripted_embedder``): no step loads an embedding model.
A 135M model is a test of the plumbing, not of quality: its passages are poor and its
verdicts are about chance, so the tests assert that every passage was written, searched,
counted and kept, and that every answer, token count, latency and verdict was recorded and
read (verdicts through the JSON schema), not what they say."""

import os

import pytest
from conftest import ragsweep_here
from real_llm import admin_document_set

from ragsweep.core.schemas import read_table, settings_of

DOC = "configuration.md"
QUESTIONS = [  # about examples/docs/admin/configuration.md, a Markdown file with sections
    ("Which port does the web console listen on by default?", "8443"),
    ("Where is the configuration file of a package installation?", "/etc/tidewater/tidewater.toml"),
    ("How many days do deleted files stay in the trash by default?", "30 days"),
]


@pytest.fixture(scope="module")
def real_run(real_llm, tmp_path_factory, scripted_embedder):
    """One sweep whose questions are searched by the passage the real model wrote, answered
    and judged by it, ranked by AutoRAG's answer_relevance: the run folder and the command's
    output, shared by the tests here. The command runs in this process (its steps are
    processes of their own); the texts are embedded by the scripted endpoint, so that no
    step loads an embedding model. One thread on a busy machine can take minutes per
    request: the deadlines are long, so a rating is missing only when it could not be
    read."""
    work = tmp_path_factory.mktemp("real-model")
    docs, testset = admin_document_set(work, DOC, QUESTIONS)
    space = work / "space.yaml"
    space.write_text(
        "chunkers: [headings]\nchunk_sizes: [64]\ntop_ks: [1]\nsearch_types: [similarity]\n"
        f"query_transforms: [hyde]\nquery_model: {real_llm.model}\n"
    )
    env = {
        **os.environ,
        "RAGSWEEP_LLM_BASE_URL": real_llm.url,
        "RAGSWEEP_CACHE_DIR": str(work / "cache"),  # the replies: this run's own
        "RAGSWEEP_EMBEDDING_BASE_URL": scripted_embedder.url,
    }
    result = ragsweep_here(
        "run", "--docs", str(docs), "--testset", str(testset), "--space", str(space),
        "--llm", real_llm.model, "--judge", real_llm.model,
        "--optimization-metric", "answer_relevance", "--max-tokens", "80",
        "--concurrency", "1", "--llm-timeout", "600", "--judge-timeout", "600",
        "--embedding-models", "openai:embedder", "--output", str(work / "runs"),
        "--no-store", "--cache", str(work / "vectors"), "--patterns", "0",
        env=env,
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
    # ratings have no corrective retry (as ai4rag): one of the three, unread, may be null
    rated = [r["answer_relevance"] for r in results if r["answer_relevance"] is not None]
    assert len(rated) >= 2 and set(rated) <= {0.0, 0.25, 0.5, 0.75, 1.0}, rated
    settings = settings_of(read_table(run / "leaderboard.arrow", "leaderboard"))
    assert settings["optimization_metric"] == "answer_relevance"
    assert settings["judge"]["model"] == "smollm2"
    assert settings["judge_unreadable"] == {"answers": len(QUESTIONS), "unreadable": 0}
    assert "ranked by answer_relevance" in result.stdout


def test_the_run_searches_the_passages_the_real_model_wrote_over_heading_chunks(real_run, real_llm):
    run, _ = real_run
    board = read_table(run / "leaderboard.arrow", "leaderboard")
    assert board["chunker"].to_pylist() == ["headings"]
    assert board["query_transform"].to_pylist() == ["hyde"]
    assert settings_of(board)["search_space"]["query_model"] == real_llm.model
    asked = read_table(run / "testset.arrow", "testset")
    ids, texts = asked["question_id"].to_pylist(), asked["question"].to_pylist()
    question = dict(zip(ids, texts, strict=True))
    results = read_table(run / "results.arrow", "results").to_pylist()
    assert len(results) == len(QUESTIONS)
    for row in results:
        searched = row["searched_query"]  # what the model wrote, kept for the drill-down
        assert searched and searched.strip() and searched != question[row["question_id"]], row
        assert row["retrieved_doc_ids"] == [DOC]
    log = (run / "pipeline.log").read_text()
    n = len(QUESTIONS)
    assert f"query transform hyde by {real_llm.model}: {n} questions, {n} calls" in log
