"""Q&A generation with Giskard RAGET against the scripted server: a valid test set in both
formats with document IDs and spans, and Giskard's known failures as clear messages.

And with a real model: SmolLM2-135M (the session fixture ``real_llm``) writes the questions
and answers of Giskard's simple generator through the JSON schema ragsweep sends
(``ragsweep.documents.qagen.reply_schema``); without it, two of the three replies did not
parse (measured once, in 5.5 minutes of unbounded replies: 146 s with it). A 135M model's
questions are a test of the plumbing, not of quality. In the same module as the scripted
generations, so that one process pays Giskard's import, UMAP's numba compilation and the
embedding model's load once (~20 CPU s each time)."""

import json
import shutil
import socket
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import TEST_API_KEY
from test_labels import ragsweep

from ragsweep.core.errors import RagsweepError
from ragsweep.curation.stored_sets import DatabaseStore
from ragsweep.documents.qagen import QASettings, generate_testset
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.models.llm import LLMSettings
from ragsweep.store.database import connect

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "examples" / "docs"
REAL_QUESTIONS = 2  # each one parsed is what is asserted: their number does not matter


def test_ragsweep_generate_writes_a_test_set_usable_in_both_formats(llm_server, tmp_path):
    out = tmp_path / "generated.jsonl"
    url = f"sqlite:///{tmp_path / 'results.db'}"

    def cli(*args: str) -> tuple[int, str, str]:  # in this process: one Giskard import
        return ragsweep(*args, url=url)

    code, stdout, stderr = cli(
        "generate", "--docs", str(DOCS), "--out", str(out), "--llm", "writer",
        "--name", "gen", "--store", url,
        "--num-questions", "6", "--question-types", "simple,complex,double",
        "--agent-description", "Tidewater's support assistant",
    )  # fmt: skip
    assert code == 0, stderr[-3000:]
    assert "wrote 6 questions" in stdout and "topics: " in stdout
    assert "stored 6 questions as 'gen'" in stdout
    assert TEST_API_KEY not in stdout + stderr
    writer_calls = [r for r in llm_server.requests if r["model"] == "writer"]
    assert len(writer_calls) == llm_server.chat_calls >= 10  # topics, questions, rewrites
    assert any("Tidewater's support assistant" in r["messages"][0]["content"] for r in writer_calls)

    documents = read_documents(str(DOCS)).table
    texts = dict(zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True))
    generated = load_testset(str(out))
    assert generated.num_rows == 6
    stored = DatabaseStore(connect(url)).load("gen")
    for field in ("question_id", "question", "reference_context", "topic", "question_type"):
        assert stored[field].to_pylist() == generated[field].to_pylist(), field
    assert set(generated["question_type"].to_pylist()) == {"simple", "complex", "double"}
    assert all(generated["topic"].to_pylist())
    for row in generated.to_pylist():
        assert row["reference_doc_ids"][0] in texts  # Giskard's seed, as a ragsweep doc_id

    resolved = resolve_testset(generated, documents)
    for row in resolved.to_pylist():
        assert row["gold_spans"], row["question_id"]
        for span in row["gold_spans"]:
            assert span["doc_id"] in row["reference_doc_ids"]
            located = texts[span["doc_id"]][span["start"] : span["end"]]
            assert f"Document {span['doc_id']}: {located}" in row["reference_context"]

    autorag = tmp_path / "generated.json"
    code, _, stderr = cli("testset", "convert", str(out), str(autorag), "--docs", str(DOCS))
    assert code == 0, stderr
    again = resolve_testset(load_testset(str(autorag)), documents)
    assert again["question"].to_pylist() == resolved["question"].to_pylist()
    assert again["reference_doc_ids"].to_pylist() == resolved["reference_doc_ids"].to_pylist()
    first_answers = [answers[0] for answers in resolved["reference_answers"].to_pylist()]
    assert [a[0] for a in again["reference_answers"].to_pylist()] == first_answers


@pytest.fixture
def only_localhost(monkeypatch):
    """Every connection or name lookup for another host is refused and recorded."""
    elsewhere = []
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            elsewhere.append(address)
            raise OSError(f"test: no connection to {address}")
        return connect(self, address)

    def guarded_lookup(host, *args, **kwargs):
        if host not in ("127.0.0.1", "::1", "localhost", None):
            elsewhere.append(host)
            raise OSError(f"test: no lookup of {host}")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    return elsewhere


def giskard_without_question_key(request: dict) -> str:
    """Topic names as Giskard wants them, but Q&A JSON without its 'question' key."""
    if "define the topic" in request["messages"][-1]["content"]:
        return '"Storage"'
    return json.dumps({"query": "Which port?", "answer": "9000"})


def test_malformed_llm_json_is_reported_as_such(llm_server, only_localhost):
    llm_server.responder = giskard_without_question_key
    documents = read_documents(str(DOCS / "admin")).table
    with pytest.raises(RagsweepError) as error:
        generate_testset(documents, QASettings(model="writer", num_questions=3))
    message = str(error.value)
    assert message.startswith("Giskard generated no question: malformed LLM JSON")
    assert "(KeyError: 'question') in 3 attempt(s)" in message
    assert only_localhost == [] and llm_server.chat_calls >= 3  # no host but the endpoint


def test_a_knowledge_base_too_small_for_topic_clustering_is_reported_before_any_call(llm_server):
    documents = pa.table(
        {"doc_id": ["a.md"], "source": ["a.md"], "format": ["md"], "text": ["Port 9000."]}
    )
    with pytest.raises(RagsweepError, match="too small for Giskard's topic clustering \\(1 chunks"):
        generate_testset(documents, QASettings(model="writer"))
    assert llm_server.chat_calls == 0


def test_generation_needs_a_model():
    with pytest.raises(RagsweepError, match="no model to generate one"):
        generate_testset(pa.table({"doc_id": []}), QASettings())


def test_question_types_are_checked():
    settings = QASettings.from_dict({"question_types": "simple, double", "num_questions": 4.0})
    assert settings.question_types == ("simple", "double") and settings.num_questions == 4
    with pytest.raises(RagsweepError, match="unknown \\['trick'\\]; choose from"):
        QASettings.from_dict({"question_types": ["simple", "trick"]})


def test_the_real_model_writes_giskard_questions_through_the_json_schema(
    real_llm, monkeypatch, tmp_path
):
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", real_llm.url)
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(DOCS / "guides" / "quickstart.txt", docs)
    documents = read_documents(str(docs)).table
    settings = QASettings(
        model=real_llm.model,
        num_questions=REAL_QUESTIONS,
        question_types=("simple",),
        chunk_size=64,
    )
    # one thread on a busy machine: long deadlines; short replies (each value is bounded)
    generated = generate_testset(
        documents, settings, LLMSettings(max_tokens=160, timeout_s=600, concurrency=1)
    )
    assert generated.num_rows == REAL_QUESTIONS  # every reply parsed: no question was lost
    text = documents["text"][0].as_py()
    for row in generated.to_pylist():
        assert row["question"].strip() and row["reference_answers"][0].strip(), row
        assert row["question_type"] == "simple" and row["topic"]
        assert row["reference_doc_ids"] == ["quickstart.txt"]
        # the seed chunk is located in the document, as a span
        span = row["gold_spans"][0]
        assert span["doc_id"] == "quickstart.txt" and 0 <= span["start"] < span["end"] <= len(text)
