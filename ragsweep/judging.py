"""Score every answer with the registered metrics, one row per configuration x question."""

from __future__ import annotations

import pyarrow as pa

from ragsweep.metrics import METRICS, Answered


def score_answers(answers: pa.Table, testset: pa.Table) -> pa.Table:
    """Join answers to their questions' references and apply every metric."""
    references = {
        row["question_id"]: row
        for row in testset.select(
            ["question_id", "reference_answers", "reference_doc_ids"]
        ).to_pylist()
    }
    rows: dict[str, list] = {"config_id": [], "question_id": []}
    rows.update({name: [] for name in METRICS})
    for row in answers.to_pylist():
        ref = references[row["question_id"]]
        item = Answered(
            reference_answers=ref["reference_answers"],
            reference_doc_ids=ref["reference_doc_ids"],
            retrieved_doc_ids=row["retrieved_doc_ids"],
            context=row["context"],
            answer=row["answer"],
        )
        rows["config_id"].append(row["config_id"])
        rows["question_id"].append(row["question_id"])
        for name, metric in METRICS.items():
            rows[name].append(metric(item))
    return pa.table(rows)
