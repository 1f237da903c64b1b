"""The evaluation reproduces its recorded results on a complete case (``evaluation_case``).

``tests/golden/evaluate.json.gz`` was recorded by the evaluation that turned every retrieval
into Python rows (commit 4028de6, before evaluation worked on Arrow columns), with
``python tests/test_evaluate_golden.py`` from the repository root, and recorded again when an
unreadable verdict became null instead of 0, after two corrective retries instead of one
(issue 22): the full grid then differed from the first recording in exactly those (17
verdicts, their reasons, 4 judge calls), and successive halving, which now promotes by the
readable verdicts, in 16 of its answered rows. Every later evaluation must give the same
answers and scores (floats to 1e-12; latencies, which are measured, only
where they are null). The recorded file is the only thing read from disk: the case, the
model and the judge (the scripted server) are rebuilt by the test.
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

import pyarrow as pa
import pytest

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "evaluate.json.gz"
CONTEXT_WINDOW = 75  # words: the answering model refuses (HTTP 400) the longest prompts
UNREADABLE = "8443"  # the judge answers prose, twice, to an answer that says this


def model_adds(request: dict) -> str:
    """The scripted model's answer from the context, and words of its own (so that
    faithfulness is not all or nothing)."""
    from scripted_llm import default_responder

    return default_responder(request) + " Viel Glück, hope this helps!"


def judge_mumbles(request: dict) -> str:
    """The scripted server's replies, except a verdict it cannot give in JSON."""
    from scripted_llm import default_responder

    messages = request["messages"]
    grading = messages[0]["content"].startswith("You grade the answers")
    if grading and UNREADABLE in messages[1]["content"]:
        return "I would say it is mostly right."
    return default_responder(request)


def run(model, judge, budget: int) -> dict[str, list[dict]]:
    """The case evaluated with the model on server ``model`` and the judge on server
    ``judge`` (``RAGSWEEP_LLM_BASE_URL`` and ``RAGSWEEP_JUDGE_BASE_URL`` point at them),
    within ``budget`` LLM calls (0: the full grid); answers and scores as rows, with their
    metadata."""
    import evaluation_case as case

    from ragsweep.models.llm import LLMSettings
    from ragsweep.sweep.steps import evaluate

    model.context_window = CONTEXT_WINDOW
    model.responder = model_adds
    judge.responder = judge_mumbles
    settings = LLMSettings(judge="judge", backoff_s=0.01, concurrency=4)
    answers, scores = evaluate(
        case.retrievals(), case.testset(), case.SPACE.all_configs(), "auto", settings, budget, 7
    )
    meta = {
        "answers": {k.decode(): json.loads(v) for k, v in answers.schema.metadata.items()},
        "scores": {k.decode(): json.loads(v) for k, v in scores.schema.metadata.items()},
    }
    meta["scores"]["ragsweep.judge"].pop("endpoint")  # the scripted server's port
    return {
        "answers": answers.to_pylist(),
        "scores": scores.to_pylist(),
        "metadata": meta,
        "schemas": {"answers": answers.schema.names, "scores": scores.schema.names},
    }


def same(recorded, got, where: str) -> None:
    if isinstance(recorded, float) and isinstance(got, float):
        assert math.isclose(recorded, got, rel_tol=0, abs_tol=1e-12), where
    elif isinstance(recorded, dict) and isinstance(got, dict):
        assert recorded.keys() == got.keys(), where
        for key in recorded:
            same(recorded[key], got[key], f"{where}.{key}")
    elif isinstance(recorded, list) and isinstance(got, list):
        assert len(recorded) == len(got), where
        for i, (a, b) in enumerate(zip(recorded, got, strict=True)):
            same(a, b, f"{where}[{i}]")
    else:
        assert recorded == got, where


# columns added since the recording (vector stores, rerankers, query transformations,
# AutoRAG's metrics, the retrieved chunks' scores): the case's retrievals come from exact
# search without timing, scores, reranker or transformation, and it ranks by no AutoRAG
# metric, so they are null, and then set aside
ADDED = {
    "answers": (
        "recall_vs_exact",
        "query_latency_ms",
        "index_build_s",
        "rerank_latency_ms",
        "searched_query",
        "retrieved_scores",
    ),
    "scores": ("recall_vs_exact", "answer_relevance", "overall_score"),
}


def comparable(result: dict) -> dict:
    """``result`` with each measured latency replaced by whether there is one, and the
    columns added since the recording checked null and left out."""
    for row in result["answers"]:
        row["latency_s"] = row["latency_s"] is not None
    for kind, names in ADDED.items():
        for row in result[kind]:
            assert all(row.pop(name) is None for name in names), kind
        result["schemas"][kind] = [n for n in result["schemas"][kind] if n not in names]
    return json.loads(json.dumps(result))  # as the recording stores it: tuples become lists


@pytest.mark.parametrize("budget", [0, 260], ids=["full grid", "successive halving"])
def test_the_evaluation_reproduces_its_recorded_answers_and_scores(llm_server, budget):
    from scripted_llm import ScriptedLLM

    recorded = json.loads(gzip.decompress(GOLDEN.read_bytes()))[str(budget)]
    judge = ScriptedLLM().start()
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("RAGSWEEP_JUDGE_BASE_URL", judge.url)
            got = comparable(run(llm_server, judge, budget))
    finally:
        judge.stop()
    same(recorded, got, f"budget {budget}")


def record() -> None:
    """Write the golden file from the evaluation of this checkout."""
    import os
    import tempfile

    from scripted_llm import ScriptedLLM

    results = {}
    for budget in (0, 260):
        model, judge = ScriptedLLM().start(), ScriptedLLM().start()
        os.environ.update(
            RAGSWEEP_LLM_BASE_URL=model.url,
            RAGSWEEP_JUDGE_BASE_URL=judge.url,
            RAGSWEEP_LLM_API_KEY="sk-test",
            RAGSWEEP_CACHE_DIR=tempfile.mkdtemp(prefix="ragsweep-golden-"),
        )
        try:
            results[str(budget)] = comparable(run(model, judge, budget))
        finally:
            model.stop()
            judge.stop()
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_bytes(gzip.compress(json.dumps(results, indent=0).encode(), mtime=0))
    for budget, result in results.items():
        answers = pa.Table.from_pylist(result["answers"])
        print(budget, answers.num_rows, "rows,", answers["answer_error"].null_count, "no error")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    record()
