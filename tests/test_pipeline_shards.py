"""Split runs, by kfp.local: documents above the threshold are embedded by the shard loop's
steps, and the chunk sets' own step embeds nothing they embedded; retrieval split into
blocks of questions ranks as the whole run did; a corpus over the memory limit stops at
planning. The vectors come from the scripted OpenAI-compatible endpoint
(``openai:embedder``): the steps load no model, and where each text is embedded does not
depend on which model embeds it."""

import re
from pathlib import Path

import pytest
from test_pipeline import EXAMPLES, example_subset, ragsweep

from ragsweep.core.schemas import read_table


def step_logs(log: str, task: str) -> list[str]:
    """What each run of ``task`` wrote, from kfp.local's log of a run one task at a time."""
    pattern = rf"Executing task '{task}'(.*?)Task '{task}' finished"
    return re.findall(pattern, log, flags=re.S)


def chunk_embeddings(step_log: str) -> list[tuple[int, int]]:
    """(from the cache, new) of each chunk set's embeddings in a step's log (not the
    questions', which follow the first chunk set of each model)."""
    pattern = r"chunks from \d+ documents\n(?:.*\n)*?.*?embeddings: (\d+) from the cache, (\d+) new"
    return [(int(a), int(b)) for a, b in re.findall(pattern, step_log)]


def sweep(tmp_path: Path, docs: Path, testset: Path, name: str, *more: str) -> Path:
    output = tmp_path / name
    result = ragsweep(
        "run",
        *("--docs", str(docs), "--testset", str(testset), "--chunk-sizes", "64,128"),
        *("--top-k", "1,3", "--vector-stores", "memory", "--cache", "none", "--no-store"),
        *("--embedding-models", "openai:embedder", "--output", str(output), *more),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [run_dir] = output.iterdir()
    return run_dir


def assert_same_board(whole: Path, split: Path, exact: bool) -> None:
    """The split run's leaderboard is the whole run's: the same values when ``exact``, else
    within float rounding (vectors summed in another order)."""
    boards = [read_table(run / "leaderboard.arrow", "leaderboard") for run in (whole, split)]
    assert boards[0]["config_id"].to_pylist() == boards[1]["config_id"].to_pylist()
    for metric in ("context_correctness", "answer_correctness", "document_recall"):
        want = boards[0][metric].to_pylist()
        assert boards[1][metric].to_pylist() == (want if exact else pytest.approx(want))


def test_sharded_and_question_block_runs_rank_as_the_whole_run_and_embed_each_text_once(
    llm_server, tmp_path
):
    """One whole run against two split ones: documents in shards (embedded by the shard
    loop's steps), and retrieval in blocks of questions (a branch per block)."""
    llm_server.models.append("embedder")
    docs, testset = example_subset(tmp_path)
    whole = sweep(tmp_path, docs, testset, "whole")
    embedded_whole = sorted(llm_server.embedded)
    log = (whole / "pipeline.log").read_text()
    [placeholder] = step_logs(log, "embed-shard")  # the loop runs once, embedding nothing
    assert "ragsweep: embeddings:" not in placeholder
    [chunk_embed] = step_logs(log, "chunk-embed")  # one group: both chunk sets, one process
    embedded = chunk_embeddings(chunk_embed)
    assert len(embedded) == 2 and all(new > 0 for _, new in embedded)

    total = sum(len(p.read_text().encode()) for p in docs.rglob("*") if p.is_file())
    sharded = sweep(tmp_path, docs, testset, "sharded", "--embedding-shard-bytes", str(total // 2))
    log = (sharded / "pipeline.log").read_text()
    shards = step_logs(log, "embed-shard")
    assert len(shards) >= 2 * 2  # 2 chunk sets x at least 2 document shards
    assert all(new > 0 for s in shards for _, new in chunk_embeddings(s))
    [chunk_embed] = step_logs(log, "chunk-embed")
    embedded = chunk_embeddings(chunk_embed)
    assert len(embedded) == 2 and all(cached > 0 and new == 0 for cached, new in embedded)
    # the questions' vectors came with the chunks: retrieve embedded nothing, loaded no model
    [retrieve] = step_logs(log, "retrieve")
    assert re.search(r"embeddings: [1-9]\d* from the cache, 0 new", retrieve)
    assert not re.search(r"embeddings: \d+ from the cache, [1-9]\d* new", retrieve)
    assert_same_board(whole, sharded, exact=False)

    llm_server.embedded.clear()
    split = sweep(tmp_path, docs, testset, "blocks", "--retrieval-question-blocks", "2")
    # every chunk text and question went to the endpoint once, as in the whole run
    assert sorted(llm_server.embedded) == embedded_whole
    assert len(set(embedded_whole)) == len(embedded_whole)
    log = (split / "pipeline.log").read_text()
    shards = step_logs(log, "embed-shard")  # each chunk set embedded once, by its shard
    assert len(shards) == 2 and all(new > 0 for s in shards for _, new in chunk_embeddings(s))
    branches = step_logs(log, "chunk-embed")
    assert len(branches) == 2  # a (group, block) branch each: read the chunks, embed nothing
    assert all(new == 0 for b in branches for _, new in chunk_embeddings(b))
    assert len(step_logs(log, "retrieve")) == 2
    assert_same_board(whole, split, exact=True)


def test_a_corpus_over_the_memory_limit_stops_at_planning_naming_the_step_and_the_fix(tmp_path):
    output = tmp_path / "limited"
    result = ragsweep(
        "run",
        *("--docs", str(EXAMPLES / "docs"), "--testset", str(EXAMPLES / "testset.json")),
        *("--chunk-sizes", "64", "--top-k", "1", "--search-types", "similarity"),
        *("--no-store", "--output", str(output), "--memory-limit", "310MB"),
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    [line] = [line for line in result.stdout.splitlines() if "would need about" in line]
    assert re.search(r"error: step (chunk_embed|retrieve) would need about [\d,]+ MiB", line)
    assert "over its memory limit of 296 MiB (memory_limit, --memory-limit)" in line
    assert "choose larger chunk sizes" in line and "raise the limit" in line
    assert "[5/14] plan: failure" in result.stdout
    [run_dir] = output.iterdir()
    log = (run_dir / "pipeline.log").read_text()
    assert not step_logs(log, "embed-shard") and not step_logs(log, "chunk-embed")
