"""Score every answer with the registered metrics, one row per configuration x question, and
with the LLM judge when the run names one. A row left unanswered (null answer: its
configuration was dropped by successive halving) gets only the retrieval metrics. A metric
that does not apply to a question (``ragsweep.evaluation.metrics``) is null.

A failed answer counts against its configuration, so that failing never raises a mean: an
answer whose request failed after its retries (``answer_error``) scores 0 on every answer
metric and, under a judge, ``correctness`` 0 with the reason ``answer failed: <error>``.
A verdict the judge could not give (``judge_error``: its reply unreadable after the
corrective retries, or its request failed) is the judge's failure, not the configuration's:
``correctness`` is null there, with the reason ``verdict unreadable: <error>``, so the
question is left out of that configuration's mean and of every comparison with it (the
tests pair questions on which both sides have a value). Retrieval metrics stay as computed.
``judge_error`` is null exactly when ``correctness`` is the judge's verdict.

Scoring works on the table's columns: document metrics are computed on whole columns
(a metric's ``column``); every other metric once per distinct input (a
question and what was retrieved for it; a question, an answer and its context), however
many configurations share it; the judge sees each distinct (question, answer) once."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.answering.contexts import SEPARATOR, Contexts, codes, flat_lists, group_rows, padded
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import SCORES
from ragsweep.evaluation.metrics import Answered, Ranked, column_metrics, is_out_of_scope, scored
from ragsweep.models.llm import LLMSettings

JUDGE_COLUMNS = ("correctness", "correctness_reason", "judge_error", "judge_llm_calls")
# Red Hat AutoRAG's metrics, scored when a run ranks by one of them (ai4rag's evaluator):
# answer_relevance, the judge's 1-5 rating of how well the answer addresses the question,
# scaled to [0, 1]; overall_score, each question's mean of the OVERALL_PARTS it has
AUTORAG_METRICS = ("answer_relevance", "overall_score")
OVERALL_PARTS = ("faithfulness", "answer_correctness", "context_correctness", "answer_relevance")


def score_answers(
    answers: pa.Table,
    testset: pa.Table,
    settings: LLMSettings | None = None,
    contexts: Contexts | None = None,
    autorag: bool = False,
) -> pa.Table:
    """Join answers to their questions' references and apply every metric; with a judge in
    ``settings``, add its verdicts (``correctness``, ``correctness_reason``, ``judge_error``)
    and record the judge and its prompt in the table's metadata (``ragsweep.evaluation.judge``).
    ``autorag``: also AutoRAG's ``AUTORAG_METRICS`` (answer_relevance only with a judge).

    ``contexts``: the rows' contexts as ids (``ragsweep.answering.contexts``), when the caller has
    them; otherwise they are read from the ``context`` column."""
    refs = _References(testset)
    question = refs.index(answers["question_id"])
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "config_id": answers["config_id"],
        "question_id": answers["question_id"],
    }
    columns.update(_retrieval_scores(answers, question, refs))
    # a figure of the retrieval (the store against exact search), carried from the answers
    columns["recall_vs_exact"] = (
        answers["recall_vs_exact"]
        if "recall_vs_exact" in answers.column_names
        else pa.nulls(answers.num_rows, pa.float64())
    )
    contexts = contexts or Contexts.of_strings(answers["context"])
    columns.update(_answer_scores(answers, question, refs, contexts))
    if not (settings and settings.judge):
        for name in JUDGE_COLUMNS:
            columns[name] = pa.nulls(answers.num_rows, SCORES.field(name).type)
        if autorag:
            columns["overall_score"] = _overall(columns, answers)
        return _table(columns, answers.num_rows)
    judged, record = _judged(answers, question, refs, settings, autorag)
    columns.update(judged)
    if autorag:
        columns["overall_score"] = _overall(columns, answers)
    table = _table(columns, answers.num_rows)
    return table.replace_schema_metadata({"ragsweep.judge": json.dumps(record)})


def _overall(columns: dict, answers: pa.Table) -> pa.Array:
    """AutoRAG's overall_score: each answered row's mean of the ``OVERALL_PARTS`` it has
    (ai4rag's ``enrich_with_overall_score``); null where the row was not answered."""
    parts = [columns[name] for name in OVERALL_PARTS if name in columns]
    values = np.stack([p.to_numpy(zero_copy_only=False) for p in parts], axis=1).astype(float)
    known = ~np.isnan(values)
    with np.errstate(invalid="ignore"):
        mean = np.nansum(values, axis=1) / known.sum(axis=1)
    mean[answers["answer"].is_null().to_numpy(zero_copy_only=False)] = np.nan
    return _floats(mean)


class _References:
    """The test set's questions as the metrics read them, one Python row per question."""

    def __init__(self, testset: pa.Table) -> None:
        wanted = ["question_id", "question", "reference_answers", "reference_doc_ids"]
        optional = ["gold_spans", "question_type"]  # absent from a bare test set: none
        names = wanted + [name for name in optional if name in testset.column_names]
        self.ids = testset["question_id"].to_pylist()
        self.rows = testset.select(names).to_pylist()

    def index(self, question_ids: pa.ChunkedArray) -> np.ndarray:
        """Each of ``question_ids``' position in the test set; one not in it is an error."""
        found = codes(question_ids, self.ids)
        if (found < 0).any():
            missing = pc.unique(question_ids.filter(pa.array(found < 0))).to_pylist()
            raise ValueError(f"answers to questions not in the test set: {sorted(missing)[:5]}")
        return found

    def item(self, question: int, **retrieved) -> Answered:
        """What a metric sees of ``question``, with ``retrieved`` (and an answer)."""
        ref = self.rows[question]
        return Answered(
            reference_answers=ref["reference_answers"],
            reference_doc_ids=ref["reference_doc_ids"],
            gold_spans=_spans(ref.get("gold_spans")),
            question_type=ref.get("question_type"),
            **retrieved,
        )


def _spans(spans: list[dict] | None) -> list[tuple[str, int, int]]:
    return [(s["doc_id"], s["start"], s["end"]) for s in spans or []]


def _floats(values: np.ndarray) -> pa.Array:
    """Scores as a float column, NaN as null (not applicable)."""
    return pa.array(values, type=pa.float64(), mask=np.isnan(values))


def _table(columns: dict, rows: int) -> pa.Table:
    """``columns`` as a scores table; null where a metric is recorded by no step here."""
    return pa.table(
        [columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in SCORES],
        schema=SCORES,
    )


def _retrieval_scores(
    answers: pa.Table, question: np.ndarray, refs: _References
) -> dict[str, pa.Array]:
    """The retrieval metrics of every row: on whole columns where they can be, otherwise
    once per distinct (question, retrieved chunks)."""
    docs, offsets = flat_lists(answers["retrieved_doc_ids"])
    encoded = pc.dictionary_encode(docs)
    document = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    row = np.repeat(np.arange(answers.num_rows), np.diff(offsets))
    reference = [set(r["reference_doc_ids"] or ()) for r in refs.rows]
    known = {d: i for i, d in enumerate(encoded.dictionary.to_pylist())}
    pairs = [q * len(known) + known[d] for q, ds in enumerate(reference) for d in ds if d in known]
    applies = np.array(
        [bool(ds) and not is_out_of_scope(r.get("question_type")) for ds, r in
         zip(reference, refs.rows, strict=True)], dtype=bool,
    )  # fmt: skip
    ranked = Ranked(
        row=row,
        rank=np.arange(len(document)) - offsets[row] + 1,
        document=document,
        relevant=np.isin(question[row] * len(known) + document, np.array(pairs, np.int64)),
        wanted=np.array([len(ds) for ds in reference], dtype=float)[question],
        applies=applies[question],
    )
    columns, retrieval = column_metrics(), scored("retrieval")
    scores = {name: _floats(columns[name](ranked)) for name in columns if name in retrieval}
    rest = [name for name in retrieval if name not in scores]
    if rest:
        # a chunk is its document and where it lies in it: rows with equal keys score alike
        where = _chunk_places(answers, offsets, known)
        chunk, _ = group_rows(np.concatenate([document[:, None], where], axis=1))
        keys = np.concatenate([question[:, None], padded(chunk, offsets)], axis=1)
        groups, first = group_rows(keys)
        names = ["retrieved_doc_ids"] + [
            n for n in ("retrieved_spans",) if n in answers.column_names
        ]
        picked = answers.select(names)
        for name in rest:
            metric = retrieval[name]
            found = np.full(len(first), np.nan)
            for block in range(0, len(first), BLOCK):
                rows = first[block : block + BLOCK]
                for i, item in enumerate(picked.take(rows).to_pylist()):
                    value = metric(
                        refs.item(
                            int(question[rows[i]]),
                            retrieved_doc_ids=item["retrieved_doc_ids"],
                            retrieved_spans=_spans(item.get("retrieved_spans")),
                            context="",
                            answer="",
                        )
                    )
                    found[block + i] = np.nan if value is None else value
            scores[name] = _floats(found[groups])
    return scores


BLOCK = 4096  # rows turned into Python objects at a time


def _chunk_places(answers: pa.Table, offsets: np.ndarray, known: dict[str, int]) -> np.ndarray:
    """Where each retrieved chunk lies, (span document, start, end), aligned with the
    flattened ``retrieved_doc_ids``; -1 where a row has no spans."""
    places = np.full((offsets[-1], 3), -1, dtype=np.int64)
    if "retrieved_spans" not in answers.column_names:
        return places
    spans, starts = flat_lists(answers["retrieved_spans"])
    lengths = np.diff(starts)
    aligned = lengths == np.diff(offsets)  # a row's spans are its chunks', one each
    owner = np.repeat(np.arange(len(lengths)), lengths)
    keep = aligned[owner]
    position = (np.arange(len(owner)) - starts[owner] + offsets[owner])[keep]
    doc = pc.index_in(spans.field("doc_id"), value_set=pa.array(list(known), pa.string()))
    for column, values in enumerate(
        [pc.fill_null(doc, -2), spans.field("start"), spans.field("end")]
    ):
        places[position, column] = values.to_numpy(zero_copy_only=False)[keep]
    return places


def _failures(answers: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(not answered, answered with an error) of every row."""
    unanswered = answers["answer"].is_null().to_numpy(zero_copy_only=False)
    if "answer_error" not in answers.column_names:
        return unanswered, np.zeros_like(unanswered)
    failed = answers["answer_error"].is_valid().to_numpy(zero_copy_only=False)
    return unanswered, failed & ~unanswered


def _answer_ids(answers: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Each of ``rows``' answer as an id, and the distinct answers."""
    encoded = pc.dictionary_encode(answers["answer"].take(pa.array(rows, pa.int64())))
    encoded = encoded.unify_dictionaries().combine_chunks()
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def _answer_scores(
    answers: pa.Table, question: np.ndarray, refs: _References, contexts: Contexts
) -> dict[str, pa.Array]:
    """The answer metrics of every row, once per distinct (question, answer, context):
    null where not answered, 0 where the answer failed."""
    unanswered, failed = _failures(answers)
    live = np.flatnonzero(~unanswered & ~failed)
    answer, texts = _answer_ids(answers, live)
    context = contexts.of_row[live]
    groups, first = group_rows(np.stack([question[live], answer, context], axis=1))
    metrics = scored("answer")
    values_of = {name: np.full(len(first), np.nan) for name in metrics}
    for g, r in enumerate(first):
        c = int(context[r])
        item = refs.item(
            int(question[live[r]]),
            retrieved_doc_ids=[],
            context=SEPARATOR.join(contexts.passages(c)),
            context_words=contexts.words(c),
            answer=texts[int(answer[r])].as_py(),
        )
        for name, metric in metrics.items():
            value = metric(item)
            values_of[name][g] = np.nan if value is None else value
    columns = {}
    for name in metrics:
        values = np.where(failed, 0.0, np.nan)
        values[live] = values_of[name][groups]
        columns[name] = _floats(values)
    return columns


def _judged(
    answers: pa.Table,
    question: np.ndarray,
    refs: _References,
    settings: LLMSettings,
    relevance: bool = False,
) -> tuple[dict[str, pa.Array], dict[str, str]]:
    """The judge's columns, each distinct (question, answer) judged once, and the judge's
    record; identical items share one verdict, whose calls count on its first row. With
    ``relevance``, also ``answer_relevance`` (0 where the answer failed, null where the
    judge's rating could not be read)."""
    from ragsweep.evaluation.judge import Judge, Judged

    judge = Judge(settings.judge, settings)
    unanswered, failed = _failures(answers)
    todo = np.flatnonzero(~unanswered & ~failed)
    answer, texts = _answer_ids(answers, todo)
    groups, first = group_rows(np.stack([question[todo], answer], axis=1))
    items = []
    for r in first:
        ref = refs.rows[int(question[todo[r]])]
        said = texts[int(answer[r])].as_py()
        items.append(
            Judged(ref["question"], ref["reference_answers"], said, ref.get("question_type"))
        )
    verdicts = judge.judge(items)
    if verdicts and all(v.error for v in verdicts):
        raise RagsweepError(
            f"the judge {settings.judge} gave no verdict on any of {len(todo)} answers; "
            f"first: {verdicts[groups[0]].error}"
        )
    # one entry per verdict, then one per distinct failure; each row points at its entry
    errors = pc.unique(answers["answer_error"].filter(pa.array(failed))) if failed.any() else []
    errors = errors.to_pylist() if len(errors) else []
    correct = [None if v.error else float(v.correct) for v in verdicts] + [0.0] * len(errors)
    reasons = [f"verdict unreadable: {v.error}" if v.error else v.reason for v in verdicts]
    reasons += [f"answer failed: {e}" for e in errors]
    judge_errors = [v.error for v in verdicts] + ["not judged: the answer failed"] * len(errors)
    entry = np.full(answers.num_rows, -1, dtype=np.int64)
    entry[todo] = groups
    if errors:
        number = {e: len(verdicts) + i for i, e in enumerate(errors)}
        why = answers["answer_error"].take(pa.array(np.flatnonzero(failed))).to_pylist()
        entry[failed] = [number[e] for e in why]
    pick = pa.array(entry, mask=entry < 0)
    calls = np.zeros(answers.num_rows, dtype=np.int64)
    counted = np.array([0 if v.cached else v.llm_calls for v in verdicts], dtype=np.int64)
    columns = {}
    if relevance:
        rated = judge.relevance(items)
        scores = [v.score for v in rated] + [0.0] * len(errors)
        columns["answer_relevance"] = pa.array(scores, pa.float64()).take(pick)
        counted += np.array([0 if v.cached else v.llm_calls for v in rated], dtype=np.int64)
    calls[todo[first]] = counted
    columns |= {
        "correctness": pa.array(correct, pa.float64()).take(pick),
        "correctness_reason": pa.array(reasons, pa.string()).take(pick),
        "judge_error": pa.array(judge_errors, pa.string()).take(pick),
        "judge_llm_calls": pa.array(calls, mask=unanswered),
    }
    return columns, judge.record()
