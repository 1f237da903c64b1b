"""The bundled example knowledge base and its test data stay consistent with each other."""

import importlib.util
import json
from pathlib import Path

import pytest

from ragsweep.documents.chunking import chunk_documents
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.models.embedding import load_tokenizer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def documents():
    return read_documents(str(EXAMPLES / "docs")).table


def test_knowledge_base_mixes_formats_folders_and_a_repeated_file_name(documents):
    doc_ids = documents.column("doc_id").to_pylist()
    assert 15 <= len(doc_ids) <= 25
    assert {"md", "txt", "html", "pdf"} <= set(documents.column("format").to_pylist())
    names = [d.rsplit("/", 1)[-1] for d in doc_ids]
    assert any(names.count(n) > 1 for n in names)
    assert all(len(t) > 1000 for t in documents.column("text").to_pylist())


def test_both_test_data_files_hold_the_same_questions_and_resolve(documents):
    autorag = resolve_testset(load_testset(str(EXAMPLES / "testset.json")), documents)
    giskard = resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), documents)
    assert autorag.num_rows == giskard.num_rows >= 40
    assert autorag.column("question").to_pylist() == giskard.column("question").to_pylist()
    for a, g in zip(autorag.to_pylist(), giskard.to_pylist(), strict=True):
        assert g["reference_answers"][0] == a["reference_answers"][0]
        assert set(g["reference_doc_ids"]) <= set(a["reference_doc_ids"])


def test_every_giskard_reference_context_is_exact_document_text(documents):
    texts = dict(zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True))
    giskard = resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), documents)
    for row in giskard.to_pylist():
        [span] = row["gold_spans"]
        assert texts[span["doc_id"]][span["start"] : span["end"]] == row["reference_context"]


def test_committed_pdf_is_what_the_script_writes():
    spec = importlib.util.spec_from_file_location("make_pdf", EXAMPLES / "make_pdf.py")
    make_pdf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_pdf)
    expected = make_pdf.build_pdf(make_pdf.SOURCE.read_text(encoding="utf-8"), make_pdf.TITLE)
    assert make_pdf.OUTPUT.read_bytes() == expected, "run `python examples/make_pdf.py`"


@pytest.mark.parametrize("chunker", ["sentence", "token"])
def test_chunk_spans_point_at_the_exact_document_text(documents, chunker):
    texts = dict(zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True))
    chunks = chunk_documents(documents, chunker, 64, 16, load_tokenizer("all-MiniLM-L6-v2"))
    assert chunks.num_rows > documents.num_rows
    for row in chunks.to_pylist():
        assert texts[row["doc_id"]][row["start"] : row["end"]] == row["text"]
    # chunks of one document advance through it
    starts = [r["start"] for r in chunks.to_pylist() if r["doc_id"] == chunks["doc_id"][0].as_py()]
    assert starts == sorted(starts)


def test_autorag_file_names_the_repeated_file_by_its_relative_key():
    records = json.loads((EXAMPLES / "testset.json").read_text())
    cited = {d for r in records for d in r["correct_answer_document_ids"]}
    assert "overview.md" not in cited
    assert {"admin/overview.md", "api/overview.md"} <= cited
