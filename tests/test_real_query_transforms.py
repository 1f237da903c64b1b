"""Query transformation and the headings chunker with the real model (SmolLM2 behind llama.cpp's
server, the session fixture ``real_llm``): one ``ragsweep run`` whose questions are searched
by the passage the model writes (HyDE), over heading-aware chunks, answered extractively so
that the model's only calls are the transformations. A 135M model writes poor passages: the
test asserts that each was written, searched, counted and kept, not what it says."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ragsweep.core.schemas import read_table, settings_of

ROOT = Path(__file__).resolve().parent.parent
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
DOC = "configuration.md"
QUESTIONS = [  # about examples/docs/admin/configuration.md, a Markdown file with sections
    ("Which port does the web console listen on by default?", "8443"),
    ("Where is the configuration file of a package installation?", "/etc/tidewater/tidewater.toml"),
]


def test_a_run_searches_the_passages_the_real_model_wrote_over_heading_chunks(
    real_llm, tmp_path, embedding_cache
):
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "examples" / "docs" / "admin" / DOC, docs)
    testset = tmp_path / "testset.json"
    testset.write_text(
        json.dumps(
            [
                {"question": q, "correct_answers": [a], "correct_answer_document_ids": [DOC]}
                for q, a in QUESTIONS
            ]
        )
    )
    space = tmp_path / "space.yaml"
    space.write_text(
        "chunkers: [headings]\nchunk_sizes: [128]\ntop_ks: [1]\nsearch_types: [similarity]\n"
        f"query_transforms: [hyde]\nquery_model: {real_llm.model}\n"
    )
    env = {**os.environ, "RAGSWEEP_LLM_BASE_URL": real_llm.url}
    env["RAGSWEEP_CACHE_DIR"] = str(tmp_path / "cache")  # the replies: this run's own
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(docs), "--testset", str(testset), "--space", str(space),
         "--llm-timeout", "600", "--output", str(tmp_path / "runs"), "--no-store",
         "--cache", str(embedding_cache), "--patterns", "0"],
        capture_output=True, text=True, timeout=1800, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run] = (tmp_path / "runs").iterdir()
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
