"""End to end (one local pipeline run): the structure-aware chunkers and the query
transformations swept over the examples with the scripted LLM, and the patterns' scripts,
run without ragsweep, chunking, transforming and retrieving as the sweep did."""

import json
from pathlib import Path

import pytest
from conftest import own_cache
from markupsafe import escape
from scripted_llm import ScriptedLLM
from test_patterns import EXAMPLES, assert_scripts_reproduce, patterns_of, questions, sweep

from ragsweep.core.schemas import read_table, settings_of

TRANSFORMS = ("none", "hyde", "multi_query:2")


@pytest.fixture(scope="module")
def writer():
    """The scripted LLM: it writes the HyDE passages and the paraphrases."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="module")
def endpoint(writer, tmp_path_factory, ragsweep_cache) -> dict[str, str]:
    cache = own_cache(tmp_path_factory.mktemp("replies") / "cache", ragsweep_cache)  # own replies
    return {"RAGSWEEP_LLM_BASE_URL": writer.url, "RAGSWEEP_CACHE_DIR": cache}


@pytest.fixture(scope="module")
def run(endpoint, tmp_path_factory, embedding_cache) -> Path:
    """headings and semantic chunks, each searched with every transformation: six
    configurations, six patterns."""
    root = tmp_path_factory.mktemp("structured")
    space = root / "space.yaml"
    space.write_text(f"query_transforms: {list(TRANSFORMS)}\nquery_model: writer\n")
    options = ["--space", str(space), "--chunkers", "headings,semantic"]
    options += ["--search-types", "similarity", "--patterns", "6"]
    return sweep(root / "runs", embedding_cache, *options, env=endpoint)


def test_the_sweep_searches_what_the_llm_wrote_and_counts_its_calls(run, writer):
    asked = len(questions())
    table = read_table(run / "leaderboard.arrow", "leaderboard")
    board = table.to_pylist()
    assert {(r["chunker"], r["query_transform"]) for r in board} == {
        (c, t) for c in ("headings", "semantic") for t in TRANSFORMS
    }
    assert {r["query_model"] for r in board if r["query_transform"] != "none"} == {"writer"}
    results = read_table(run / "results.arrow", "results").to_pylist()
    transform = {r["config_id"]: r["query_transform"] for r in board}
    for row in results:
        searched = row["searched_query"]
        kind = transform[row["config_id"]]
        assert (searched is None) == (kind == "none"), (kind, searched)
        if kind == "multi_query:2":
            assert len(searched.splitlines()) == 2
    # one request per question and transformation, whatever the chunk sets
    assert writer.chat_calls == 2 * asked
    record = settings_of(table)["evaluation"]  # the evaluation's tally: the answers' and these
    assert record["query_llm_calls"] == record["llm_calls"] == 2 * asked


@pytest.fixture(scope="module")
def indexes(run, tmp_path_factory, pattern_scripts) -> dict[str, Path]:
    """One index per chunk set, built by a pattern of it; pattern name -> its chunk set's."""
    root, built, by_chunker = tmp_path_factory.mktemp("indexes"), {}, {}
    for folder in patterns_of(run):
        settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
        chunker = settings["chunker"]
        assert (folder / "chunker.py").is_file()  # the chunker travels with the pattern
        if chunker not in by_chunker:
            index = root / chunker
            done = pattern_scripts.run(
                folder / "indexing.py", "--docs", str(EXAMPLES / "docs"), "--index", str(index)
            )
            assert done.returncode == 0, done.stderr[-3000:]
            by_chunker[chunker] = index
        built[folder.name] = by_chunker[chunker]
    return built


# each chunker and each transformation once (all six patterns would double the test's time)
CHECKED = {("headings", "hyde"), ("semantic", "multi_query:2")}


def test_pattern_scripts_chunk_transform_and_retrieve_as_the_sweep_did(
    run, indexes, endpoint, pattern_scripts
):
    """headings with hyde, semantic with multi_query:2, every question: the chunks
    inference.py prints (after asking the writer for the passage or the paraphrases) are
    the ones the sweep retrieved."""
    checked = {}
    for folder in patterns_of(run):
        settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
        if (settings["chunker"], settings.get("query_transform")) in CHECKED:
            checked[folder.name] = indexes[folder.name]
    assert len(checked) == len(CHECKED)
    llm = {"RAGSWEEP_LLM_BASE_URL": endpoint["RAGSWEEP_LLM_BASE_URL"]}
    assert_scripts_reproduce(pattern_scripts, run, checked, llm)


def test_a_transforming_pattern_without_an_endpoint_says_what_to_set(run, indexes, pattern_scripts):
    folder = next(
        f
        for f in patterns_of(run)
        if json.loads((f / "pattern.json").read_text())["ragsweep"].get("query_transform") == "hyde"
    )
    index = str(indexes[folder.name])
    asked = pattern_scripts.run(folder / "inference.py", "--index", index, "question?")
    assert asked.returncode != 0
    assert "query transform hyde: set RAGSWEEP_LLM_BASE_URL" in asked.stderr
    assert "Traceback" not in asked.stderr


def test_the_drill_down_shows_what_was_searched_in_the_questions_place(run, tmp_path):
    """The run stored (as `ragsweep run` stores it), then its HyDE and multi-query
    configurations' question pages."""
    from starlette.testclient import TestClient

    from ragsweep.store import database
    from ragsweep.ui import create_app

    engine = database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    tables = [read_table(run / f"{name}.arrow", name) for name in ("leaderboard", "results")]
    database.publish(engine, run.name, *tables, read_table(run / "testset.arrow", "testset"))
    client = TestClient(create_app(engine))
    board, results = (t.to_pylist() for t in tables)
    for transform in ("hyde", "multi_query:2"):
        config = next(r for r in board if r["query_transform"] == transform)
        result = next(r for r in results if r["config_id"] == config["config_id"])
        page = client.get(f"/runs/{run.name}/configs/{config['config_id']}/questions/"
                          f"{result['question_id']}").text  # fmt: skip
        assert f"({transform} by writer)" in page
        for line in result["searched_query"].splitlines():
            assert f'<li class="text">{escape(line)}</li>' in page
    plain = next(r for r in board if r["query_transform"] == "none")
    page = client.get(f"/runs/{run.name}/configs/{plain['config_id']}/questions/"
                      f"{result['question_id']}").text  # fmt: skip
    assert 'id="searched-query"' not in page
