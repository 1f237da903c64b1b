import pyarrow as pa

from ragsweep.documents.sampling import sample_documents, sample_questions

DOCS = pa.table(
    {
        "doc_id": [f"d{i}.md" for i in range(10)],
        "source": [f"d{i}.md" for i in range(10)],
        "format": ["md"] * 10,
        "text": ["x" * 100] * 10,
    }
)
QUESTIONS = pa.table(
    {
        "question_id": [f"q{i}" for i in range(6)],
        "question": [f"question {i}?" for i in range(6)],
        "reference_doc_ids": [["d7.md"], ["d8.md"], ["d9.md", "d7.md"], [], ["d8.md"], ["d9.md"]],
    }
)


def test_document_budget_keeps_every_cited_document_first_then_fills_up():
    sampled = sample_documents(DOCS, QUESTIONS, max_bytes=500, seed=1)
    kept = sampled.column("doc_id").to_pylist()
    assert {"d7.md", "d8.md", "d9.md"} <= set(kept)
    assert len(kept) == 5
    assert kept == sorted(kept)  # original order


def test_document_budget_is_reproducible_by_seed():
    runs = {
        tuple(sample_documents(DOCS, QUESTIONS, 600, seed=s)["doc_id"].to_pylist()) for s in (3, 3)
    }
    assert len(runs) == 1
    others = {
        tuple(sample_documents(DOCS, QUESTIONS, 600, seed=s)["doc_id"].to_pylist())
        for s in range(8)
    }
    assert len(others) > 1


def test_cited_documents_are_kept_even_over_the_budget():
    sampled = sample_documents(DOCS, QUESTIONS, max_bytes=150, seed=0)
    assert sampled.column("doc_id").to_pylist() == ["d7.md", "d8.md", "d9.md"]


def test_zero_budget_and_zero_sample_keep_everything():
    assert sample_documents(DOCS, QUESTIONS, 0, seed=0).num_rows == 10
    assert sample_questions(QUESTIONS, 0, seed=0).num_rows == 6


def test_question_sample_is_seeded_and_keeps_order():
    a = sample_questions(QUESTIONS, 3, seed=7)["question_id"].to_pylist()
    assert a == sample_questions(QUESTIONS, 3, seed=7)["question_id"].to_pylist()
    assert len(a) == 3 and a == sorted(a)
