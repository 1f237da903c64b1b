import pytest

from ragsweep.evaluation.metrics import (
    Answered,
    answer_correctness,
    context_correctness,
    document_recall,
    faithfulness,
)


def item(**kw):
    base = dict(
        reference_answers=["Backups are kept for 30 days."],
        reference_doc_ids=["admin/backup.md"],
        retrieved_doc_ids=["a.md", "admin/backup.md", "admin/backup.md"],
        context="Backups are kept for 30 days on the Basic plan.",
        answer="Kept for 30 days.",
    )
    return Answered(**{**base, **kw})


def test_context_correctness_is_reciprocal_rank_of_first_reference_chunk():
    assert context_correctness(item()) == pytest.approx(1 / 2)
    assert context_correctness(item(retrieved_doc_ids=["admin/backup.md"])) == 1.0
    assert context_correctness(item(retrieved_doc_ids=["x", "y", "z"])) == 0.0


def test_document_recall_counts_reference_documents_found():
    two = item(reference_doc_ids=["admin/backup.md", "policies/sla.md"])
    assert document_recall(two) == pytest.approx(0.5)
    assert document_recall(item()) == 1.0


def test_answer_correctness_is_token_recall_against_the_best_reference():
    # content words of the reference: backups, kept, 30, days -> answer has kept, 30, days
    assert answer_correctness(item()) == pytest.approx(3 / 4)
    both = item(reference_answers=["Backups are kept for 30 days.", "30 days"])
    assert answer_correctness(both) == 1.0
    assert answer_correctness(item(answer="I do not know.")) == 0.0


def test_faithfulness_is_token_precision_against_the_context():
    assert faithfulness(item()) == 1.0
    # answer words: kept, 90, days, pro -> 'pro' and '90' are not in the context
    assert faithfulness(item(answer="Kept 90 days on Pro.")) == pytest.approx(2 / 4)
    assert faithfulness(item(answer="")) == 0.0
