"""Giskard generates questions with a real model: SmolLM2-135M (the session fixture
``real_llm``) writes the questions and answers of Giskard's simple generator through the
JSON schema ragsweep sends (``ragsweep.documents.qagen.reply_schema``); without it, two of
the three replies did not parse (measured once, in 5.5 minutes of unbounded replies: 146 s
with it). A 135M model's questions are a test of the plumbing, not of quality."""

import shutil
from pathlib import Path

from ragsweep.documents.qagen import QASettings, generate_testset
from ragsweep.documents.sources import read_documents
from ragsweep.models.llm import LLMSettings

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = 2  # each one parsed is what is asserted: their number does not matter


def test_the_real_model_writes_giskard_questions_through_the_json_schema(
    real_llm, monkeypatch, tmp_path
):
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", real_llm.url)
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "examples" / "docs" / "guides" / "quickstart.txt", docs)
    documents = read_documents(str(docs)).table
    settings = QASettings(
        model=real_llm.model, num_questions=QUESTIONS, question_types=("simple",), chunk_size=64
    )
    # one thread on a busy machine: long deadlines; short replies (each value is bounded)
    generated = generate_testset(
        documents, settings, LLMSettings(max_tokens=160, timeout_s=600, concurrency=1)
    )
    assert generated.num_rows == QUESTIONS  # every reply parsed: no question was lost
    text = documents["text"][0].as_py()
    for row in generated.to_pylist():
        assert row["question"].strip() and row["reference_answers"][0].strip(), row
        assert row["question_type"] == "simple" and row["topic"]
        assert row["reference_doc_ids"] == ["quickstart.txt"]
        # the seed chunk is located in the document, as a span
        span = row["gold_spans"][0]
        assert span["doc_id"] == "quickstart.txt" and 0 <= span["start"] < span["end"] <= len(text)
