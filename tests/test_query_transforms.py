"""Query transformations as a swept dimension: hyde searches a passage the LLM writes,
multi_query:N the question and N paraphrases fused by reciprocal rank; their calls are
cached, counted and taken from the LLM budget, and what was searched is kept."""

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scripted_llm import hypothetical_passage

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models.llm import LLMSettings
from ragsweep.retrieval import queries
from ragsweep.retrieval.search import fuse
from ragsweep.sweep.space import SearchSpace, label
from ragsweep.sweep.steps import (
    build_chunks,
    check_transforms,
    plan_evaluation,
    retrieve,
    transform_questions,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPACE = {
    "chunk_sizes": [128],
    "top_ks": [3],
    "search_types": ["similarity"],
    "query_transforms": ["none", "hyde", "multi_query:2"],
    "query_model": "writer",
}


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("none", "none"),
        ("hyde", "hyde"),
        ("multi_query", "multi_query:3"),
        ("multi_query:5", "multi_query:5"),
    ],
)
def test_transform_spellings_are_made_canonical(given, canonical):
    assert queries.canonical(given) == canonical


@pytest.mark.parametrize(
    "bad", ["rewrite", "multi_query:0", "multi_query:11", "hyde:2", "multi_query:x"]
)
def test_an_unknown_transform_is_refused_naming_the_field(bad):
    with pytest.raises(RagsweepError, match=r"field 'query_transforms': unknown query transform"):
        SearchSpace.from_dict({**SPACE, "query_transforms": [bad]})


def test_configurations_without_a_transform_keep_their_ids():
    plain = SearchSpace.from_dict({k: v for k, v in SPACE.items() if not k.startswith("query")})
    swept = SearchSpace.from_dict(SPACE)
    ids = {c["config_id"] for c in swept.all_configs()}
    assert {c["config_id"] for c in plain.all_configs()} < ids
    assert len(ids) == 3
    hyde = next(c for c in swept.all_configs() if c.get("query_transform") == "hyde")
    assert hyde["query_model"] == "writer" and "query=hyde" in label(hyde)
    assert SearchSpace.of_config(hyde).all_configs() == [hyde]
    assert "query_transforms" not in plain.to_dict()


def test_the_transforming_model_defaults_to_the_first_llm_answerer():
    space = {k: v for k, v in SPACE.items() if k != "query_model"}
    assert SearchSpace.from_dict({**space, "answerers": ["llm:answerer"]}).transforming_model() == (
        "answerer"
    )
    with pytest.raises(RagsweepError, match="needs a model: give query_model"):
        SearchSpace.from_dict(space)


def test_without_an_llm_endpoint_a_transforming_space_fails_before_any_embedding(monkeypatch):
    monkeypatch.delenv("RAGSWEEP_LLM_BASE_URL", raising=False)
    with pytest.raises(
        RagsweepError, match=r"query_transforms hyde, multi_query:2: .*RAGSWEEP_LLM_BASE_URL"
    ):
        check_transforms(SearchSpace.from_dict(SPACE), 10)
    assert check_transforms(SearchSpace.from_dict({"chunk_sizes": [128]}), 10) == 0


def test_the_transformations_calls_come_out_of_the_llm_budget():
    configs = SearchSpace.from_dict({**SPACE, "answerers": ["llm:answerer"]}).all_configs()
    rounds, planned = plan_evaluation(configs, 10, LLMSettings(), 0, reserved=20)
    assert planned == 3 * 10 + 20
    with pytest.raises(RagsweepError, match="query transformations take 20 LLM calls"):
        plan_evaluation(configs, 10, LLMSettings(), 20, reserved=20)
    with pytest.raises(RagsweepError, match=r"what is left of max_llm_calls=40 after the query"):
        plan_evaluation(configs, 10, LLMSettings(), 40, reserved=20)
    rounds, planned = plan_evaluation(configs, 10, LLMSettings(), 45, reserved=20)
    assert len(rounds) > 1 and planned <= 45  # halving within what is left


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The chunk set (MiniLM, 128 tokens) of the example guides and 12 questions."""
    documents = read_documents(str(EXAMPLES / "docs")).table
    testset = resolve_testset(load_testset(str(EXAMPLES / "testset.json")), documents)
    guides = pa.compute.starts_with(documents["doc_id"], "guides/")
    cache = EmbeddingCache(tmp_path_factory.mktemp("embeddings"))
    [config] = SearchSpace.from_dict(SPACE).chunk_configs()
    chunks = build_chunks(documents.filter(guides), config, cache)
    return chunks, testset.slice(0, 12), config, cache


def test_hyde_and_multi_query_search_what_the_llm_wrote_and_are_cached(corpus, llm_server):
    chunks, testset, config, cache = corpus
    space = SearchSpace.from_dict(SPACE)
    table = retrieve(chunks, testset, space, config, cache)
    by = {c["config_id"]: c.get("query_transform", "none") for c in space.configs(config)}
    rows = [{**r, "transform": by[r["config_id"]]} for r in table.to_pylist()]
    questions = testset["question"].to_pylist()
    hyde = [r for r in rows if r["transform"] == "hyde"]
    assert [r["searched_query"] for r in hyde] == [hypothetical_passage(q) for q in questions]
    multi = [r for r in rows if r["transform"] == "multi_query:2"]
    assert all(len(r["searched_query"].splitlines()) == 2 for r in multi)
    assert all(r["searched_query"] is None for r in rows if r["transform"] == "none")
    # one request per question and transformation, counted once
    assert len(llm_server.requests) == 2 * len(questions)
    assert sum(r["query_llm_calls"] for r in rows) == 2 * len(questions)
    assert {r["query_llm_calls"] for r in hyde} == {1}
    assert all(r["query_llm_calls"] == 0 for r in rows if r["transform"] == "none")
    # the transformed searches retrieve differently from the question as asked
    plain = [r["retrieved_chunk_ids"] for r in rows if r["transform"] == "none"]
    assert [r["retrieved_chunk_ids"] for r in hyde] != plain

    again = retrieve(chunks, testset, space, config, cache)  # the reply cache answers
    assert len(llm_server.requests) == 2 * len(questions)
    assert sum(again["query_llm_calls"].to_pylist()) == 0
    for column in ("retrieved_chunk_ids", "searched_query"):
        assert again[column].equals(table[column])


def test_multi_query_fuses_the_rankings_of_the_question_and_its_paraphrases(corpus, llm_server):
    chunks, testset, config, cache = corpus
    space = SearchSpace.from_dict(SPACE)
    transformed = transform_questions(space, testset)
    table = retrieve(chunks, testset, space, config, cache, transformed=transformed)
    multi = next(c for c in space.configs(config) if c.get("query_transform") == "multi_query:2")
    got = table.filter(pa.compute.equal(table["config_id"], multi["config_id"]))
    questions = testset["question"].to_pylist()
    vectors = np.stack(chunks["embedding"].to_numpy(zero_copy_only=False))
    rankings = []
    for j in range(3):  # the question, then each paraphrase: exact cosine search, 3 deep
        texts = [
            queries.searched_texts("multi_query:2", q, t.reply)[j]
            for q, t in zip(questions, transformed["multi_query:2"], strict=True)
        ]
        scores = cache.embed(config["embedding_model"], texts) @ vectors.T
        rankings.append(np.argsort(-scores, axis=1, kind="stable")[:, :3])
    assert got["retrieved_chunk_ids"].to_pylist() == fuse(rankings, 3).ids.tolist()


def test_a_failing_transformation_stops_the_step_naming_the_question(corpus, llm_server):
    from scripted_llm import Step

    chunks, testset, config, cache = corpus
    llm_server.then(*[Step(status=500)] * 3)
    space = SearchSpace.from_dict({**SPACE, "query_transforms": ["hyde"]})
    with pytest.raises(
        RagsweepError, match=r"query transform hyde by writer at .* failed for the question"
    ):
        retrieve(chunks, testset.slice(0, 1), space, config, cache)


def test_the_pattern_scripts_copy_the_transformations_constants():
    """(Their prompts are ragsweep's prompts.py, copied beside them: test_patterns.py.)"""
    from test_patterns import template_constants

    inference = template_constants("inference.py")
    assert inference["QUERY_MAX_TOKENS"] == queries.MAX_TOKENS
    assert inference["QUERY_RRF_K"] == inspect.signature(fuse).parameters["rrf_k"].default


def test_ragsweep_run_without_an_llm_endpoint_refuses_a_transforming_space(tmp_path):
    """One line naming the model and the variable, before the pipeline starts."""
    space = tmp_path / "space.yaml"
    space.write_text("query_model: writer\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSWEEP_LLM")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ragsweep"), "run", "--docs", str(EXAMPLES / "docs")]
        + ["--testset", str(EXAMPLES / "testset.json"), "--space", str(space)]
        + ["--query-transforms", "none,hyde", "--output", str(tmp_path / "runs"), "--no-store"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "model 'writer': no endpoint; set RAGSWEEP_LLM_BASE_URL" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
