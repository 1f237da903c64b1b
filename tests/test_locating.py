"""Answers written in other words are located in their documents (and say so), answers no
document says are not; measured on tests/locating/ by benchmarks/bench_locate.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

from ragsweep.core.schemas import read_table, write_table
from ragsweep.documents.locating import keys
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.evaluation.leaderboard import gold_span_record
from ragsweep.reporting.report import gold_span_line

ROOT = Path(__file__).resolve().parent.parent
DOC = (
    "Returns. You may return any item within thirty days of purchase. Refunds go to the "
    "card you paid with. Shipping is free on orders over 50 dollars."
)


def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_locate", ROOT / "benchmarks" / "bench_locate.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def measured() -> dict:
    return bench().measure()["kinds"]


def resolved(tmp_path: Path, answers: list[str], text: str = DOC) -> pa.Table:
    path = tmp_path / "t.json"
    item = {"question": "q?", "correct_answers": answers, "correct_answer_document_ids": ["doc.md"]}
    path.write_text(json.dumps([item]), encoding="utf-8")
    docs = pa.table({"doc_id": ["doc.md"], "source": ["doc.md"], "format": ["md"], "text": [text]})
    return resolve_testset(load_testset(str(path)), docs)


def test_reworded_answers_are_located_on_the_sentence_they_restate(measured):
    reworded = measured["reworded"]
    assert reworded["answers"] >= 100
    assert reworded["located"] >= 0.85 * reworded["answers"]
    assert reworded["right"] >= 0.90 * reworded["located"]


def test_hand_paraphrased_answers_are_located_on_the_sentence_they_restate(measured):
    paraphrased = measured["paraphrased"]
    assert paraphrased["answers"] >= 20
    assert paraphrased["right"] >= 0.75 * paraphrased["answers"]


@pytest.mark.parametrize("kind", ["random", "elsewhere"])
def test_answers_no_document_says_stay_unlocated(measured, kind):
    unsaid = measured[kind]
    assert unsaid["answers"] >= 20
    assert unsaid["located"] <= 0.25 * unsaid["answers"]


def test_a_reworded_answer_gets_an_approximate_span_with_its_score(tmp_path):
    [span] = resolved(tmp_path, ["Items can be returned within 30 days"])["gold_spans"][0].as_py()

    assert (
        DOC[span["start"] : span["end"]]
        == "You may return any item within thirty days of purchase."
    )
    assert span["found"] == "approximate" and 0.4 <= span["score"] <= 1


def test_a_verbatim_answer_is_exact_and_an_unsaid_one_has_no_span(tmp_path):
    spans = resolved(tmp_path, ["Refunds go to the card", "Gift wrapping costs extra"])

    at = DOC.index("Refunds go to the card")
    assert spans["gold_spans"][0].as_py() == [
        {"doc_id": "doc.md", "start": at, "end": at + 22, "found": "exact", "score": None}
    ]


def test_an_answer_said_alike_in_two_places_is_not_located(tmp_path):
    text = "Backups run nightly at two. Logs rotate weekly. Backups run nightly at two."

    assert (
        resolved(tmp_path, ["backups are run every night at 2"], text)["gold_spans"][0].as_py()
        == []
    )


def test_number_words_and_word_endings_match_loosely():
    assert keys("Twenty-five returned items, thirty days") == keys("25 return item 30 day")


def test_how_a_span_was_found_survives_the_artifact(tmp_path):
    table = resolved(tmp_path, ["Items can be returned within 30 days"])

    again = read_table(write_table(table, tmp_path / "testset.arrow", "testset"), "testset")

    assert again["gold_spans"].to_pylist() == table["gold_spans"].to_pylist()
    assert again["gold_spans"][0][0]["found"].as_py() == "approximate"


def test_the_statistics_say_how_many_questions_spans_are_approximate(tmp_path):
    table = pa.concat_tables(
        [
            resolved(tmp_path, ["Items can be returned within 30 days"]),
            resolved(tmp_path, ["Refunds go to the card"]),
            resolved(tmp_path, ["Gift wrapping costs extra"]),
        ]
    )

    record = gold_span_record(table)

    assert record == {"questions": 3, "located": 2, "approximate": 1}
    assert gold_span_line(record) == (
        "Span recall and span precision rest on the 2 of 3 questions with a gold span; 1 of "
        "them located approximately (the answer is said in other words: the passage that best "
        "matches it, not a verbatim quote)."
    )
    assert gold_span_line({"questions": 3, "located": 3, "approximate": 0}) is None


def test_a_stored_test_set_keeps_and_shows_its_approximate_spans(tmp_path):
    from conftest import ragsweep_here

    env = {**os.environ, "RAGSWEEP_STORE_URL": f"sqlite:///{tmp_path / 'results.db'}"}
    testset, docs = ROOT / "examples" / "testset.json", ROOT / "examples" / "docs"
    added = ragsweep_here("testset", "add", "tw", str(testset), "--docs", str(docs), env=env)
    assert added.returncode == 0, added.stderr
    # "Above how many users does Tidewater require PostgreSQL ...": both answers reworded,
    # located on the same sentence: one span
    question_id = load_testset(str(testset))["question_id"][1].as_py()

    shown = ragsweep_here("testset", "show", "tw", question_id, env=env)

    assert shown.returncode == 0, shown.stderr
    spans = r"guides/installation\.md\[\d+:\d+\] \(approximate, [01]\.\d\d\)"
    assert re.search(rf"gold spans: {spans}\n", shown.stdout), shown.stdout


def test_the_test_set_page_says_which_spans_are_approximate(tmp_path):
    from starlette.testclient import TestClient

    from ragsweep.curation.stored_sets import DatabaseStore
    from ragsweep.store import database
    from ragsweep.ui import create_app

    engine = database.connect(f"sqlite:///{tmp_path / 'results.db'}")
    DatabaseStore(engine).save(
        "returns", resolved(tmp_path, ["Items can be returned within 30 days"])
    )
    question_id = DatabaseStore(engine).load("returns")["question_id"][0].as_py()

    page = TestClient(create_app(engine)).get(f"/testsets/returns/questions/{question_id}")

    assert page.status_code == 200
    assert re.search(r"<code>doc\.md</code> \d+–\d+ \(approximate, 1\.00\)", page.text), page.text


def test_a_reworded_giskard_context_is_located_in_its_document(tmp_path):
    path = tmp_path / "t.jsonl"
    item = {
        "id": "q1",
        "question": "How long do I have to return something?",
        "reference_answer": "30 days",
        "reference_context": "Document doc.md: items may be returned within 30 days of purchase",
        "conversation_history": [],
        "metadata": {"question_type": "simple", "seed_document_id": "doc.md", "topic": "Returns"},
    }
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    docs = pa.table({"doc_id": ["doc.md"], "source": ["doc.md"], "format": ["md"], "text": [DOC]})

    [span] = resolve_testset(load_testset(str(path)), docs)["gold_spans"][0].as_py()

    assert (
        DOC[span["start"] : span["end"]]
        == "You may return any item within thirty days of purchase."
    )
    assert span["found"] == "approximate"


def test_a_test_set_artifact_made_before_reads_with_how_its_spans_were_found_unknown(tmp_path):
    from ragsweep.core.schemas import SPAN, TESTSET

    old_schema = TESTSET.set(
        TESTSET.get_field_index("gold_spans"), pa.field("gold_spans", pa.list_(SPAN))
    ).with_metadata({b"ragsweep.kind": b"testset", b"ragsweep.schema_version": b"9"})
    row = {name: None for name in TESTSET.names}
    row |= {"question_id": "q1", "question": "Port?", "reference_answers": ["8443"]}
    row |= {
        "reference_doc_ids": ["doc.md"],
        "gold_spans": [{"doc_id": "doc.md", "start": 3, "end": 7}],
    }
    path = tmp_path / "old.arrow"
    with pa.ipc.new_file(path, old_schema) as writer:
        writer.write_table(pa.Table.from_pylist([row], schema=old_schema))

    [span] = load_testset(str(path))["gold_spans"][0].as_py()

    assert span == {"doc_id": "doc.md", "start": 3, "end": 7, "found": None, "score": None}
