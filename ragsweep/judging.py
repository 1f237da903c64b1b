"""Score every answer with the registered metrics, one row per configuration x question, and
with the LLM judge when the run names one. A row left unanswered (null answer: its
configuration was dropped by successive halving) gets only the retrieval metrics. A metric
that does not apply to a question (``ragsweep.metrics``) is null.

A failure counts against its configuration, so that failing never raises a mean: an answer
whose request failed after its retries (``answer_error``) scores 0 on every answer metric
and, under a judge, ``correctness`` 0 with the reason ``answer failed: <error>``; an answer
the judge gave no verdict on (``judge_error``) gets ``correctness`` 0 with the reason
``verdict unreadable: <error>``. Its retrieval metrics stay as computed. ``judge_error`` is
null exactly when ``correctness`` is the judge's verdict."""

from __future__ import annotations

import json

import pyarrow as pa

from ragsweep.errors import RagsweepError
from ragsweep.llm import LLMSettings
from ragsweep.metrics import ANSWER_METRICS, METRICS, Answered


def score_answers(
    answers: pa.Table, testset: pa.Table, settings: LLMSettings | None = None
) -> pa.Table:
    """Join answers to their questions' references and apply every metric; with a judge in
    ``settings``, add its verdicts (``correctness``, ``correctness_reason``, ``judge_error``)
    and record the judge and its prompt in the table's metadata (``ragsweep.judge``)."""
    wanted = ["question_id", "question", "reference_answers", "reference_doc_ids"]
    optional = ["gold_spans", "question_type"]  # absent from a bare test set: none
    references = {
        row["question_id"]: row
        for row in testset.select(
            wanted + [name for name in optional if name in testset.column_names]
        ).to_pylist()
    }
    rows: dict[str, list] = {"config_id": [], "question_id": []}
    rows.update({name: [] for name in METRICS})
    answered = answers.to_pylist()
    for row in answered:
        ref = references[row["question_id"]]
        item = Answered(
            reference_answers=ref["reference_answers"],
            reference_doc_ids=ref["reference_doc_ids"],
            retrieved_doc_ids=row["retrieved_doc_ids"],
            context=row["context"],
            answer=row["answer"] or "",
            gold_spans=_spans(ref.get("gold_spans")),
            retrieved_spans=_spans(row.get("retrieved_spans")),
            question_type=ref.get("question_type"),
        )
        rows["config_id"].append(row["config_id"])
        rows["question_id"].append(row["question_id"])
        unanswered, failed = row["answer"] is None, row.get("answer_error") is not None
        for name, metric in METRICS.items():
            if name in ANSWER_METRICS and (unanswered or failed):
                rows[name].append(None if unanswered else 0.0)
            else:
                rows[name].append(metric(item))
    # storesweep: recall_vs_exact is a figure of the retrieval, carried from the answers
    rows["recall_vs_exact"] = [row.get("recall_vs_exact") for row in answered]
    if not (settings and settings.judge):
        for name in ("correctness", "correctness_reason", "judge_error", "judge_llm_calls"):
            rows[name] = [None] * len(answered)
        return pa.table(rows)
    return _judged(rows, answered, references, settings)


def _spans(spans: list[dict] | None) -> list[tuple[str, int, int]]:
    return [(s["doc_id"], s["start"], s["end"]) for s in spans or []]


def _judged(rows: dict, answered: list[dict], references: dict, settings: LLMSettings) -> pa.Table:
    from ragsweep.judge import Judge, Judged

    judge = Judge(settings.judge, settings)
    todo = [
        i
        for i, row in enumerate(answered)
        if row["answer"] is not None and row["answer_error"] is None
    ]
    items = []
    for i in todo:
        ref = references[answered[i]["question_id"]]
        answer = answered[i]["answer"]
        kind = ref.get("question_type")
        items.append(Judged(ref["question"], ref["reference_answers"], answer, kind))
    verdicts = dict(zip(todo, judge.judge(items), strict=True))
    if verdicts and all(v.error for v in verdicts.values()):
        first = next(iter(verdicts.values())).error
        raise RagsweepError(
            f"the judge {settings.judge} gave no verdict on any of {len(verdicts)} answers; "
            f"first: {first}"
        )
    for name in ("correctness", "correctness_reason", "judge_error", "judge_llm_calls"):
        rows[name] = []
    asked = set()  # identical items share one verdict: its calls count once
    for i, row in enumerate(answered):
        verdict = verdicts.get(i)
        if verdict is None and row["answer"] is None:  # not answered: not judged either
            correct, reason, error, calls = None, None, None, None
        elif verdict is None:
            correct, reason = False, f"answer failed: {row['answer_error']}"
            error, calls = "not judged: the answer failed", 0
        else:
            correct, reason, error = verdict.correct, verdict.reason, verdict.error
            if error is not None:
                correct, reason = False, f"verdict unreadable: {error}"
            key = (row["question_id"], row["answer"])
            calls = 0 if verdict.cached or key in asked else verdict.llm_calls
            asked.add(key)
        rows["correctness"].append(None if correct is None else float(correct))
        rows["correctness_reason"].append(reason)
        rows["judge_error"].append(error)
        rows["judge_llm_calls"].append(calls)
    table = pa.table(rows)
    return table.replace_schema_metadata({"ragsweep.judge": json.dumps(judge.record())})
