"""Question types: out-of-scope questions are scored on refusal and left out of retrieval
metrics; questions without a reference document are left out of retrieval metrics."""

import pytest

from ragsweep.evaluation.metrics import Answered, answer_correctness, is_out_of_scope, scored
from ragsweep.evaluation.refusal import refuses

RETRIEVAL_METRICS = scored("retrieval")

# Giskard's reference answer for every out-of-scope question (giskard/rag/question_generators)
GISKARD_OOS_ANSWER = (
    "This question can not be answered by the context. No sufficient information is provided "
    "in the context to answer this question."
)


def item(answer: str, **kw) -> Answered:
    base = dict(
        reference_answers=[GISKARD_OOS_ANSWER],
        reference_doc_ids=["admin/backup.md"],  # the seed document: no reference for these
        retrieved_doc_ids=["admin/backup.md"],
        context="Backups are kept for 30 days.",
        answer=answer,
        gold_spans=[("admin/backup.md", 0, 29)],
        retrieved_spans=[("admin/backup.md", 0, 29)],
        question_type="out of scope",
    )
    return Answered(**{**base, **kw})


@pytest.mark.parametrize(
    "answer",
    [
        "I cannot answer that from the documentation.",
        "I can’t find that in the context.",
        "The documentation does not mention a discount for students.",
        "There is no information about student discounts.",
        GISKARD_OOS_ANSWER,
        "Diese Frage kann ich nicht beantworten.",
        "Dazu gibt es keine Informationen in der Dokumentation.",
        "Je ne peux pas répondre à partir du contexte.",
        "Le contexte ne mentionne pas de remise.",
        "No puedo responder con la información disponible.",
        "文档中没有提到学生折扣。",
        "无法回答这个问题。",
        "ドキュメントに記載がありません。",
    ],
)
def test_refusals_in_several_languages_are_recognised(answer):
    assert refuses(answer)
    assert answer_correctness(item(answer)) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        "Students get a 20% discount on the Pro plan.",
        "Backups are kept for 30 days.",
        "Tidewater does not support single sign-on on the Basic plan.",
        "The dashboard has no information panel.",
        "Die maximale Größe beträgt 30 MB.",
        "备份保留30天。",
        "",
    ],
)
def test_answers_that_answer_are_not_refusals_and_score_zero_out_of_scope(answer):
    assert not refuses(answer)
    assert answer_correctness(item(answer)) == 0.0


def test_out_of_scope_questions_are_left_out_of_every_retrieval_metric():
    for name, metric in RETRIEVAL_METRICS.items():
        assert metric(item("I cannot answer that.")) is None, name
        assert metric(item("x", question_type="simple")) is not None, name


def test_questions_without_a_reference_document_are_left_out_of_retrieval_metrics():
    bare = item("x", question_type="simple", reference_doc_ids=[], gold_spans=[])
    assert {name: metric(bare) for name, metric in RETRIEVAL_METRICS.items()} == dict.fromkeys(
        RETRIEVAL_METRICS
    )


def test_an_in_scope_refusal_is_still_scored_on_the_reference_words():
    simple = item("I cannot answer that.", question_type="simple", reference_answers=["30 days"])
    assert answer_correctness(simple) == 0.0


def test_out_of_scope_is_recognised_however_it_is_spelled():
    assert all(map(is_out_of_scope, ["out of scope", "Out-of-scope", "out_of_scope"]))
    assert not any(map(is_out_of_scope, [None, "", "simple", "conversational", "scope"]))
