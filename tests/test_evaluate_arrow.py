"""Evaluation on Arrow columns: contexts as ids, each distinct input scored once, document
metrics on whole columns (``ragsweep.answering.contexts``, ``ragsweep.evaluation.scoring``)."""

from __future__ import annotations

import random
from collections import Counter

import evaluation_case as case
import numpy as np
import pyarrow as pa
import pytest

from ragsweep.answering.contexts import Contexts
from ragsweep.core.text import words
from ragsweep.evaluation.metrics import Answered, Ranked, column_metrics, scored
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import evaluate

EXTRACTIVE = SearchSpace(**{**case.SPACE.__dict__, "answerers": ("extractive",)})

RETRIEVAL_METRICS = scored("retrieval")
METRICS = {**RETRIEVAL_METRICS, **scored("answer")}
COLUMN_METRICS = column_metrics()


def extractive_run() -> tuple[pa.Table, pa.Table]:
    retrievals = case.retrievals()
    keep = {c["config_id"] for c in EXTRACTIVE.all_configs()}
    retrievals = retrievals.filter(
        pa.array([c in keep for c in retrievals["config_id"].to_pylist()])
    )
    return evaluate(retrievals, case.testset(), EXTRACTIVE.all_configs(), "auto")


def test_a_context_is_its_passages_joined_and_equal_passages_share_one_id():
    retrievals = case.retrievals()
    contexts = Contexts.of_passages(retrievals["passages"])
    passages = [tuple(p) for p in retrievals["passages"].to_pylist()]
    assert contexts.column().to_pylist() == ["\n\n".join(p) for p in passages]
    by_id: dict[int, set] = {}
    for context, p in zip(contexts.of_row.tolist(), passages, strict=True):
        by_id.setdefault(context, set()).add(p)
    assert all(len(p) == 1 for p in by_id.values())  # one id: one list of passages
    assert len(by_id) == len(set(passages)) < len(passages)
    # the odd last sentence of a document is a chunk of both chunk sets: one text
    assert len(contexts.texts) < sum(len(case.chunk_set(n)) for n in case.CHUNK_SETS.values())


def test_a_context_s_words_are_its_passages_words_each_read_once():
    contexts = Contexts.of_passages(case.retrievals()["passages"])
    used = {int(i) for i in contexts.members.ravel() if i >= 0}
    for context in range(len(contexts.members)):
        text = "\n\n".join(contexts.passages(context))
        assert contexts.words(context) == Counter(words(text)), text  # other languages too
    assert sorted(contexts._tokens) == sorted(used)  # each passage tokenized once, for all


def test_column_metrics_equal_the_per_item_metrics_row_by_row():
    rng = random.Random(3)
    documents = [f"d{i}.md" for i in range(6)]
    items = []
    for _ in range(400):
        references = rng.sample(documents, rng.randint(0, 3))
        retrieved = [rng.choice(documents) for _ in range(rng.randint(0, 6))]  # repeats too
        kind = rng.choice(["simple", "out of scope", "Out_of-Scope", None])
        items.append(Answered(references and ["x"], references, retrieved, "", "", [], [], kind))
    code = {d: i for i, d in enumerate(documents)}
    row = np.repeat(np.arange(len(items)), [len(it.retrieved_doc_ids) for it in items])
    flat = [d for it in items for d in it.retrieved_doc_ids]
    ranked = Ranked(
        row=row,
        rank=np.array([r for it in items for r in range(1, len(it.retrieved_doc_ids) + 1)]),
        document=np.array([code[d] for d in flat], dtype=np.int64),
        relevant=np.array(
            [d in items[r].reference_doc_ids for r, d in zip(row, flat, strict=True)], bool
        ),
        wanted=np.array([len(set(it.reference_doc_ids)) for it in items], dtype=float),
        applies=np.array([bool(it.reference_doc_ids) and not it.out_of_scope for it in items]),
    )
    assert set(COLUMN_METRICS) <= set(RETRIEVAL_METRICS)
    for name, column in COLUMN_METRICS.items():
        expected = [METRICS[name](it) for it in items]
        got = column(ranked)
        assert [None if np.isnan(v) else v for v in got] == expected, name
        assert any(v not in (None, 0.0, 1.0) for v in expected), name  # not only the easy cases


def test_configurations_that_retrieved_the_same_chunks_score_the_same():
    answers, scores = extractive_run()
    chunk_set = {c["config_id"]: c["chunk_size"] for c in EXTRACTIVE.all_configs()}
    seen: dict[tuple, dict] = {}
    shared = 0
    for answer, score in zip(answers.to_pylist(), scores.to_pylist(), strict=True):
        key = (
            score["question_id"],
            chunk_set[score["config_id"]],
            tuple(answer["retrieved_chunk_ids"]),
        )
        values = {k: v for k, v in score.items() if k not in ("config_id",)}
        shared += key in seen
        assert seen.setdefault(key, values) == values, key
    # per chunk set: Top K 1 of similarity and MMR agree on all 10 questions, Top K 3 on the
    # 5 even ones
    assert shared == 2 * (10 + 5)


def test_scores_of_known_retrievals_are_the_hand_computed_ones():
    _, scores = extractive_run()
    wanted = (32, 1, "similarity")
    [sim_1] = [c["config_id"] for c in EXTRACTIVE.all_configs()
               if (c["chunk_size"], c["top_k"], c["search_type"]) == wanted]  # fmt: skip
    rows = {r["question_id"]: r for r in scores.to_pylist() if r["config_id"] == sim_1}
    # q01's best sentence is its gold sentence: every metric is 1
    assert [rows["q01"][m] for m in METRICS] == [1.0] * len(METRICS)
    # q09 names two documents, retrieves one sentence of security.md: half the documents,
    # one of its two gold sentences by characters
    tokens, rotate = case.DOCUMENTS["security.md"][:2]
    assert rows["q09"]["document_recall"] == 0.5 and rows["q09"]["context_correctness"] == 1.0
    assert rows["q09"]["span_recall"] in (len(tokens) / (len(tokens) + len(rotate)),
                                          len(rotate) / (len(tokens) + len(rotate)))  # fmt: skip
    assert rows["q09"]["span_precision"] == 1.0
    # out of scope and no reference document: no retrieval metric
    for question in ("q05", "q06"):
        assert [rows[question][m] for m in RETRIEVAL_METRICS] == [None] * len(RETRIEVAL_METRICS)
    assert rows["q05"]["answer_correctness"] == 0.0  # the extractive answerer never refuses


def test_plain_passages_without_spans_score_as_dictionary_encoded_ones():
    configs = case.SPACE.all_configs()
    extractive = [c for c in configs if c["answerer"] == "extractive"]
    ids = {c["config_id"] for c in extractive}

    def run(encoded: bool) -> tuple[pa.Table, pa.Table]:
        retrievals = case.retrievals(encoded)
        keep = pa.array([c in ids for c in retrievals["config_id"].to_pylist()])
        return evaluate(retrievals.filter(keep), case.testset(), extractive, "auto")

    (plain_answers, plain), (answers, scores) = run(False), run(True)
    assert plain_answers.drop_columns("retrieved_spans") == answers.drop_columns("retrieved_spans")
    spanless = ["span_recall", "span_precision"]
    assert plain.drop_columns(spanless) == scores.drop_columns(spanless)
    # no retrieved span: none of a gold span's characters counts as retrieved
    recall = scores["span_recall"].to_pylist()
    assert plain["span_recall"].to_pylist() == [None if v is None else 0.0 for v in recall]
    assert any(recall)


def test_retrievals_that_do_not_fit_the_test_set_are_refused():
    retrievals, testset, configs = case.retrievals(), case.testset(), case.SPACE.all_configs()
    with pytest.raises(ValueError, match=r"questions not in the test set: \['q10'\]"):
        evaluate(retrievals, testset.slice(0, 9), configs, "auto")
    twice = pa.concat_tables([retrievals, retrievals.slice(0, 1)])
    with pytest.raises(ValueError, match="configuration x question more than once"):
        evaluate(twice, testset, configs, "auto")


def test_scoring_the_answers_artifact_again_gives_the_same_scores(tmp_path):
    from ragsweep.core.schemas import read_table, write_table
    from ragsweep.evaluation.scoring import score_answers

    answers, scores = extractive_run()
    stored = read_table(write_table(answers, tmp_path / "answers", "answers"), "answers")
    rescored = score_answers(stored, case.testset())  # contexts read from the strings
    assert rescored.equals(scores.replace_schema_metadata(None))
