"""Test sets: AutoRAG and Giskard formats, validation, document-id resolution, gold spans."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import DOCUMENTS, TESTSET
from ragsweep.documents.testsets import (
    check_name,
    check_references,
    content_id,
    export_testset,
    left_out,
    load_testset,
    locate,
    name_from_file,
    resolve_testset,
    stored_name,
)

AUTORAG = [
    {
        "question": "How do I show defaults?",
        "correct_answers": ["Use show_default=True.", "Pass show_default."],
        "correct_answer_document_ids": ["options.rst"],
    },
    {
        "question": "What does clamp do?",
        "correct_answers": ["It clamps values to the range."],
        "correct_answer_document_ids": ["api/types.md", "options.rst"],
    },
]

GISKARD = [
    {
        "id": "a1b2",
        "question": "Which port does the server use?",
        "reference_answer": "Port 8080.",
        "reference_context": "The server listens on port 8080.",
        "conversation_history": [],
        "metadata": {"question_type": "simple", "seed_document_id": "server.md", "topic": "Ops"},
    },
    {
        "id": "c3d4",
        "question": "And with TLS?",
        "reference_answer": "Port 8443.",
        "reference_context": "With TLS enabled it uses 8443.",
        "conversation_history": [{"role": "user", "content": "Which port?"}],
        "metadata": {"question_type": "conversational", "seed_document_id": "server.md"},
    },
]


def write_json(path: Path, items: object) -> str:
    path.write_text(json.dumps(items), encoding="utf-8")
    return str(path)


def write_jsonl(path: Path, items: list[object]) -> str:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return str(path)


def documents(texts: dict[str, str]) -> pa.Table:
    rows = [
        {"doc_id": doc_id, "source": f"/docs/{doc_id}", "format": "md", "text": text}
        for doc_id, text in texts.items()
    ]
    return pa.Table.from_pylist(rows, schema=DOCUMENTS)


def autorag_item(answers: list[str], doc_ids: list[str]) -> dict:
    return {"question": "Q?", "correct_answers": answers, "correct_answer_document_ids": doc_ids}


def giskard_item(context: str, seed: str = "doc.md", **fields: object) -> dict:
    item = {"id": "g1", "question": "Q?", "reference_answer": "A.", "reference_context": context}
    return {**item, "metadata": {"seed_document_id": seed}, **fields}


# ---- loading ---------------------------------------------------------------------------------


def test_loads_autorag_json(tmp_path: Path) -> None:
    table = load_testset(write_json(tmp_path / "testset.json", AUTORAG))

    assert table.schema.equals(TESTSET)
    rows = table.to_pylist()
    assert [row["question_id"] for row in rows] == [
        content_id(item["question"], item["correct_answers"]) for item in AUTORAG
    ]
    assert all(len(row["question_id"]) == 14 and len(row["question_version"]) == 16 for row in rows)
    assert rows[0]["question"] == "How do I show defaults?"
    assert rows[0]["reference_answers"] == ["Use show_default=True.", "Pass show_default."]
    assert rows[1]["reference_doc_ids"] == ["api/types.md", "options.rst"]
    assert rows[0]["gold_spans"] == [] and rows[0]["reference_context"] is None


def test_loads_the_ai4rag_document_keys_variant(tmp_path: Path) -> None:
    items = [
        {"question": "Q?", "correct_answers": ["A."], "correct_answer_document_keys": ["a.md"]}
    ]

    table = load_testset(write_json(tmp_path / "ai4rag.json", items))

    assert table.column("reference_doc_ids").to_pylist() == [["a.md"]]


def test_loads_giskard_jsonl(tmp_path: Path) -> None:
    table = load_testset(write_jsonl(tmp_path / "testset.jsonl", GISKARD))

    first, second = table.to_pylist()
    assert first["question_id"] == "a1b2"
    assert first["reference_answers"] == ["Port 8080."]
    assert first["reference_doc_ids"] == ["server.md"]
    assert first["reference_context"] == "The server listens on port 8080."
    assert (first["question_type"], first["topic"]) == ("simple", "Ops")
    assert second["topic"] is None
    assert json.loads(second["conversation_history"]) == GISKARD[1]["conversation_history"]


def test_giskard_item_without_seed_document_has_no_reference_doc_ids(tmp_path: Path) -> None:
    item = {"id": "x", "question": "Q?", "reference_answer": "A.", "reference_context": "C"}

    table = load_testset(write_jsonl(tmp_path / "t.jsonl", [item]))

    assert table.column("reference_doc_ids").to_pylist() == [[]]


def test_loads_a_test_set_from_s3(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="data/testset.json", Body=json.dumps(AUTORAG).encode())

    table = load_testset(f"s3://{bucket}/data/testset.json")

    assert table.num_rows == 2


@pytest.mark.parametrize(("name", "items"), [("out.json", AUTORAG), ("out.jsonl", GISKARD)])
def test_export_then_load_gives_the_same_test_set(tmp_path: Path, name: str, items) -> None:
    write = write_json if name.endswith(".json") else write_jsonl
    loaded = load_testset(write(tmp_path / f"in{Path(name).suffix}", items))

    exported = export_testset(loaded, tmp_path / "sub" / name)

    assert exported == tmp_path / "sub" / name
    assert load_testset(str(exported)).equals(loaded)


def test_giskard_export_writes_the_first_answer_and_first_document(tmp_path: Path) -> None:
    loaded = load_testset(write_json(tmp_path / "in.json", AUTORAG))

    path = export_testset(loaded, tmp_path / "out.jsonl")

    second = json.loads(path.read_text().splitlines()[1])
    assert second["id"] == loaded["question_id"][1].as_py()
    assert second["reference_answer"] == "It clamps values to the range."
    assert second["metadata"]["seed_document_id"] == "api/types.md"


def test_autorag_to_giskard_to_autorag_keeps_every_answer_and_document(tmp_path: Path) -> None:
    loaded = load_testset(write_json(tmp_path / "in.json", AUTORAG))

    giskard = export_testset(loaded, tmp_path / "out.jsonl")
    back = export_testset(load_testset(str(giskard)), tmp_path / "back.json")

    first, second = (json.loads(line) for line in giskard.read_text().splitlines())
    assert first["reference_answer"] == "Use show_default=True."
    assert first["metadata"]["other_reference_answers"] == ["Pass show_default."]
    assert second["metadata"]["other_document_ids"] == ["options.rst"]
    assert json.loads(back.read_text()) == AUTORAG
    again = load_testset(str(giskard))
    for column in ("question_id", "reference_answers", "reference_doc_ids", "question_version"):
        assert again[column].equals(loaded[column])


def test_export_says_which_fields_autorag_json_cannot_carry(tmp_path: Path) -> None:
    loaded = load_testset(write_jsonl(tmp_path / "in.jsonl", GISKARD))
    autorag = load_testset(write_json(tmp_path / "in.json", AUTORAG))

    line = left_out(loaded, tmp_path / "out.json")

    assert line == (
        f"{tmp_path / 'out.json'}: AutoRAG JSON has no field for id (2 of 2), "
        "reference_context (2 of 2), question_type (2 of 2), topic (1 of 2), "
        "conversation_history (1 of 2): left out"
    )
    assert left_out(loaded, tmp_path / "out.jsonl") is None
    assert left_out(autorag, tmp_path / "out.json") is None


def test_giskard_metadata_with_other_answers_of_the_wrong_type_names_the_field(
    tmp_path: Path,
) -> None:
    item = dict(GISKARD[0], metadata={"seed_document_id": "a.md", "other_reference_answers": "B"})

    with pytest.raises(RagsweepError, match=r"line 1: field 'metadata.other_reference_answers'"):
        load_testset(write_jsonl(tmp_path / "t.jsonl", [item]))


def test_autorag_export_keeps_every_answer(tmp_path: Path) -> None:
    loaded = load_testset(write_json(tmp_path / "in.json", AUTORAG))

    path = export_testset(loaded, tmp_path / "out.json")

    assert json.loads(path.read_text()) == AUTORAG


BAD_AUTORAG = [
    (
        '[{"question": "Q?",\n "correct_answers": ["A"], }]',
        "t.json: malformed JSON at line 2, column 28",
    ),
    ('{"question": "Q?"}', "t.json: expected a JSON list of test items, got dict"),
    ("[]", "t.json: the test set is empty"),
    (
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": []}, 7]',
        "t.json: record 2: expected an object, got int",
    ),
    (
        '[{"correct_answers": ["A"], "correct_answer_document_ids": []}]',
        "t.json: record 1: missing field 'question'",
    ),
    (
        '[{"question": "Q?", "correct_answers": ["A"]}]',
        "t.json: record 1: missing field 'correct_answer_document_ids'",
    ),
    (
        '[{"question": 42, "correct_answers": ["A"], "correct_answer_document_ids": []}]',
        "t.json: record 1: field 'question': expected a string, got int",
    ),
    (
        '[{"question": "  ", "correct_answers": ["A"], "correct_answer_document_ids": []}]',
        "t.json: record 1: field 'question': is empty",
    ),
    (
        '[{"question": "Q?", "correct_answers": "A", "correct_answer_document_ids": []}]',
        "t.json: record 1: field 'correct_answers': expected a list of strings, got str",
    ),
    (
        '[{"question": "Q?", "correct_answers": [], "correct_answer_document_ids": []}]',
        "t.json: record 1: field 'correct_answers': is empty",
    ),
    (
        '[{"question": "Q?", "correct_answers": ["A", ""], "correct_answer_document_ids": []}]',
        "t.json: record 1: field 'correct_answers': item 2 is empty",
    ),
    (
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": [1]}]',
        "t.json: record 1: field 'correct_answer_document_ids': "
        "expected a list of strings, item 1 is int",
    ),
    (
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_keys": null}]',
        "t.json: record 1: field 'correct_answer_document_keys': "
        "expected a list of strings, got null",
    ),
    (
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": []},'
        ' {"question": "R?", "correct_answers": ["B"], "correct_answer_document_ids": []},'
        ' {"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": ["x"]}]',
        "t.json: record 3: the same question and reference answers as record 1: remove one",
    ),
]

BAD_GISKARD = [
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A"}\n{"id": "b",\n',
        "t.jsonl: line 2: malformed JSON at column 12",
    ),
    ("\n\n", "t.jsonl: the test set is empty"),
    ('["not", "an", "object"]', "t.jsonl: line 1: expected an object, got list"),
    (
        '{"id": ["a"], "question": "Q?", "reference_answer": "A"}',
        "t.jsonl: line 1: field 'id': expected a string or a number, got list",
    ),
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A", '
        '"metadata": {"seed_document_id": {"doc": 1}}}',
        "t.jsonl: line 1: field 'metadata.seed_document_id': expected a string or a number, "
        "got dict",
    ),
    ('{"id": "a", "reference_answer": "A"}', "t.jsonl: line 1: missing field 'question'"),
    (
        '{"id": "a", "question": "Q?", "reference_answer": ""}',
        "t.jsonl: line 1: field 'reference_answer': is empty",
    ),
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A", "reference_context": 3}',
        "t.jsonl: line 1: field 'reference_context': expected a string, got int",
    ),
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A", "conversation_history": "hi"}',
        "t.jsonl: line 1: field 'conversation_history': expected a list, got str",
    ),
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A", "metadata": []}',
        "t.jsonl: line 1: field 'metadata': expected an object, got list",
    ),
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A", "metadata": {"topic": 5}}',
        "t.jsonl: line 1: field 'metadata.topic': expected a string, got int",
    ),
    (
        '{"id": "a", "question": "Q?", "reference_answer": "A"}\n\n'
        '{"id": "a", "question": "R?", "reference_answer": "B"}',
        "t.jsonl: line 3: duplicate id 'a' (first on line 1)",
    ),
    (  # the same question under a new id would be counted twice
        '{"id": "a", "question": "Q?", "reference_answer": "A"}\n'
        '{"id": "b", "question": "Q?", "reference_answer": "A"}',
        "t.jsonl: line 2: id 'b' repeats the question, reference answer, context and "
        "conversation of line 1 (id 'a'): remove one",
    ),
]


def test_a_question_asked_again_in_another_conversation_is_two_questions(tmp_path: Path) -> None:
    lines = [
        '{"id": "a", "question": "And its price?", "reference_answer": "10 EUR", '
        '"conversation_history": [{"role": "user", "content": "Tell me about Ardent."}]}',
        '{"id": "b", "question": "And its price?", "reference_answer": "10 EUR", '
        '"conversation_history": [{"role": "user", "content": "Tell me about Brisk."}]}',
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(lines), encoding="utf-8")
    assert load_testset(str(tmp_path / "t.jsonl"))["question_id"].to_pylist() == ["a", "b"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [("t.json", *case) for case in BAD_AUTORAG] + [("t.jsonl", *case) for case in BAD_GISKARD],
)
def test_bad_test_set_names_the_file_record_and_field(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")

    with pytest.raises(RagsweepError) as error:
        load_testset(str(tmp_path / name))

    assert str(error.value).startswith(f"{tmp_path / name}: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_test_set_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_bytes(b'[{"question": "caf\xe9"}]')

    with pytest.raises(RagsweepError, match=r"t\.json: not UTF-8 text"):
        load_testset(str(tmp_path / "t.json"))


def test_unknown_test_set_format_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RagsweepError, match=r"t.csv: unknown test set format '.csv': use .json"):
        load_testset(str(tmp_path / "t.csv"))
    with pytest.raises(RagsweepError, match="unknown test set format"):
        export_testset(load_testset(write_json(tmp_path / "t.json", AUTORAG)), tmp_path / "t.txt")


def test_missing_test_set_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RagsweepError, match=r"missing\.json: no such file"):
        load_testset(str(tmp_path / "missing.json"))


# ---- document ids ----------------------------------------------------------------------------


def test_reference_ids_resolve_by_relative_key_and_by_unique_basename(tmp_path: Path) -> None:
    testset = load_testset(write_json(tmp_path / "t.json", AUTORAG))
    docs = documents({"guide/options.rst": "x", "api/types.md": "y", "other/types.md": "z"})

    resolved = resolve_testset(testset, docs)

    assert resolved.column("reference_doc_ids").to_pylist() == [
        ["guide/options.rst"],
        ["api/types.md", "guide/options.rst"],
    ]


def test_ambiguous_basename_is_an_error_listing_the_candidates(tmp_path: Path) -> None:
    testset = load_testset(write_json(tmp_path / "t.json", [autorag_item(["A"], ["types.md"])]))
    docs = documents({"api/types.md": "y", "other/types.md": "z"})

    with pytest.raises(RagsweepError) as error:
        resolve_testset(testset, docs)

    qid = testset["question_id"][0].as_py()
    assert str(error.value).startswith(
        f"question {qid} (item 1, 'Q?'): reference document 'types.md'"
    )
    assert "ambiguous" in str(error.value)
    assert "api/types.md, other/types.md" in str(error.value)


def test_unknown_reference_id_is_an_error_naming_question_and_id(tmp_path: Path) -> None:
    items = [autorag_item(["A"], ["a.md"]), autorag_item(["B"], ["gone.md", "also-gone.md"])]
    testset = load_testset(write_json(tmp_path / "t.json", items))

    with pytest.raises(RagsweepError) as error:
        resolve_testset(testset, documents({"docs/a.md": "text"}))

    message = str(error.value)
    qid = testset["question_id"][1].as_py()
    assert message.startswith(f"question {qid} (item 2, 'Q?'): reference document 'gone.md'")
    assert "matches no document" in message and "e.g. 'docs/a.md'" in message
    assert message.endswith("; `ragsweep run --skip-unresolved` leaves such questions out")


# ---- gold spans ------------------------------------------------------------------------------

DOC = "Intro.\n\nThe server listens on\n   port 8080 by default.\nWith TLS it uses 8443.\n"


def spans_of(tmp_path: Path, item: dict, texts: dict[str, str]) -> list[dict]:
    testset = load_testset(write_jsonl(tmp_path / "t.jsonl", [item]))
    return resolve_testset(testset, documents(texts)).column("gold_spans")[0].as_py()


def test_gold_span_of_a_verbatim_reference_context(tmp_path: Path) -> None:
    context = "With TLS it uses 8443."

    [span] = spans_of(tmp_path, giskard_item(context), {"doc.md": DOC})

    assert span["doc_id"] == "doc.md"
    assert DOC[span["start"] : span["end"]] == context


def test_gold_span_of_a_context_with_different_whitespace_maps_to_original_offsets(
    tmp_path: Path,
) -> None:
    context = "The server listens on port 8080 by default."

    [span] = spans_of(tmp_path, giskard_item(context), {"doc.md": DOC})

    assert DOC[span["start"] : span["end"]] == "The server listens on\n   port 8080 by default."


def test_gold_spans_of_giskard_document_blocks_strip_the_prefix(tmp_path: Path) -> None:
    other = "Logs go to stdout.\n\nSet LOG_LEVEL to debug."
    context = (
        "Document doc.md: The server listens on port 8080\n\n"
        "Document ops/other.md: Logs go to stdout.\n\nSet LOG_LEVEL to debug."
    )

    spans = spans_of(tmp_path, giskard_item(context), {"doc.md": DOC, "ops/other.md": other})

    texts = {"doc.md": DOC, "ops/other.md": other}
    assert [texts[s["doc_id"]][s["start"] : s["end"]] for s in spans] == [
        "The server listens on\n   port 8080",
        other,
    ]


def test_context_not_in_the_document_gives_no_span_and_no_error(tmp_path: Path) -> None:
    assert spans_of(tmp_path, giskard_item("Nowhere to be found."), {"doc.md": DOC}) == []


def test_gold_spans_of_autorag_answers_found_verbatim_once(tmp_path: Path) -> None:
    items = [autorag_item(["port 8080 by default", "8443", "it", "not in the text"], ["doc.md"])]
    testset = load_testset(write_json(tmp_path / "t.json", items))

    spans = resolve_testset(testset, documents({"doc.md": DOC})).column("gold_spans")[0].as_py()

    # "it" occurs twice, so where the answer lies is unknown: no span for it.
    assert [DOC[s["start"] : s["end"]] for s in spans] == ["port 8080 by default", "8443"]


def test_locate_maps_a_whitespace_insensitive_match_back_to_the_text() -> None:
    text = "a  b\n\tc d"

    assert locate(text, "b c") == (3, 7)
    assert locate(text, " d ") == (8, 9)
    assert locate(text, "x") is None
    assert locate("ab ab", "ab", unique=True) is None
    assert locate("ab ab", "ab") == (0, 2)


# ---- question identity -----------------------------------------------------------------------


def test_inserting_a_question_at_the_top_moves_no_other_id(tmp_path: Path) -> None:
    before = load_testset(write_json(tmp_path / "a.json", AUTORAG))
    new = autorag_item(["A new answer."], ["new.md"])

    after = load_testset(write_json(tmp_path / "b.json", [new, *AUTORAG]))

    ids = after["question_id"].to_pylist()
    assert ids[1:] == before["question_id"].to_pylist() and ids[0] not in ids[1:]
    assert after["question_version"].to_pylist()[1:] == before["question_version"].to_pylist()


def test_a_changed_reference_is_a_new_version_of_the_same_question(tmp_path: Path) -> None:
    moved = [AUTORAG[0], {**AUTORAG[1], "correct_answer_document_ids": ["api/types.md"]}]

    before = load_testset(write_json(tmp_path / "a.json", AUTORAG)).to_pylist()
    after = load_testset(write_json(tmp_path / "b.json", moved)).to_pylist()

    assert [r["question_id"] for r in after] == [r["question_id"] for r in before]
    assert after[0]["question_version"] == before[0]["question_version"]
    assert after[1]["question_version"] != before[1]["question_version"]


def test_giskard_ids_are_kept_and_context_or_history_change_the_version(tmp_path: Path) -> None:
    edited = [GISKARD[0], {**GISKARD[1], "conversation_history": []}]
    context = [{**GISKARD[0], "reference_context": "It listens on 8080."}, GISKARD[1]]

    versions = [
        load_testset(write_jsonl(tmp_path / f"{n}.jsonl", items))["question_version"].to_pylist()
        for n, items in enumerate([GISKARD, edited, context])
    ]

    assert versions[1][0] == versions[0][0] and versions[1][1] != versions[0][1]
    assert versions[2][0] != versions[0][0] and versions[2][1] == versions[0][1]


def test_giskard_item_without_an_id_gets_one_from_its_content(tmp_path: Path) -> None:
    item = {"question": "Q?", "reference_answer": "A.", "id": None}

    [row] = load_testset(write_jsonl(tmp_path / "t.jsonl", [item])).to_pylist()

    assert row["question_id"] == content_id("Q?", ["A."])


# ---- Giskard-native test sets (QATestset.save: knowledge-base indexes, Document N: blocks) ----

SERVER = "The server listens on port 8080.\n\nWith TLS enabled it uses 8443."
OPS = "Logs go to stdout.\n\nSet LOG_LEVEL to debug for more."


def native_item(qid: str, context: str, seed: object = 12) -> dict:
    return {
        "id": qid,
        "question": f"Question {qid}?",
        "reference_answer": "An answer.",
        "reference_context": context,
        "conversation_history": [],
        "metadata": {"question_type": "simple", "seed_document_id": seed, "topic": "Ops"},
    }


def test_integer_seed_resolves_to_the_document_holding_the_reference_context(
    tmp_path: Path,
) -> None:
    items = [
        native_item("a", "Document 12: With TLS enabled it uses 8443."),
        native_item("b", "Document 3: Set   LOG_LEVEL to\ndebug for more.", seed=3.0),
        native_item("c", "Document 7: Logs go to stdout.", seed="7b0e-uuid"),
    ]
    testset = load_testset(write_jsonl(tmp_path / "t.jsonl", items))
    assert testset["reference_doc_ids"].to_pylist() == [["12"], ["3.0"], ["7b0e-uuid"]]

    resolved = resolve_testset(testset, documents({"server.md": SERVER, "ops/logs.md": OPS}))

    assert resolved["reference_doc_ids"].to_pylist() == [
        ["server.md"],
        ["ops/logs.md"],
        ["ops/logs.md"],
    ]
    texts = {"server.md": SERVER, "ops/logs.md": OPS}
    spans = [s for row in resolved["gold_spans"].to_pylist() for s in row]
    assert [texts[s["doc_id"]][s["start"] : s["end"]] for s in spans] == [
        "With TLS enabled it uses 8443.",
        "Set LOG_LEVEL to debug for more.",
        "Logs go to stdout.",
    ]


def test_a_context_over_two_documents_gives_two_reference_documents(tmp_path: Path) -> None:
    context = "Document 4: The server listens on port 8080.\n\nDocument 9: Logs go to stdout."
    testset = load_testset(write_jsonl(tmp_path / "t.jsonl", [native_item("a", context, 4)]))

    resolved = resolve_testset(testset, documents({"server.md": SERVER, "ops/logs.md": OPS}))

    assert resolved["reference_doc_ids"].to_pylist() == [["server.md", "ops/logs.md"]]
    assert [s["doc_id"] for s in resolved["gold_spans"][0].as_py()] == ["server.md", "ops/logs.md"]


def test_a_context_found_nowhere_is_one_error_naming_the_question_and_counting_others(
    tmp_path: Path,
) -> None:
    items = [
        native_item("ok", "Document 1: Logs go to stdout."),
        native_item("lost", "Document 2: Not in any document."),
        native_item("gone", "Document 3: Nor this one."),
    ]
    testset = load_testset(write_jsonl(tmp_path / "t.jsonl", items))

    with pytest.raises(RagsweepError) as error:
        resolve_testset(testset, documents({"server.md": SERVER, "ops/logs.md": OPS}))

    message = str(error.value)
    assert message.startswith("question lost (item 2, 'Question lost?'): reference document '12'")
    assert "and its reference context is in no document" in message
    assert "(and 1 more unresolved question)" in message and "--skip-unresolved" in message


def test_skip_unresolved_leaves_those_questions_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    keyed = {**native_item("keyed", "", seed="server.md"), "reference_context": None}
    items = [
        native_item("ok", "Document 1: Logs go to stdout."),
        native_item("lost", "Document 2: Not in any document."),
        keyed,
    ]
    testset = load_testset(write_jsonl(tmp_path / "t.jsonl", items))
    docs = documents({"server.md": SERVER, "ops/logs.md": OPS})

    with caplog.at_level("WARNING", logger="ragsweep"):
        resolved = resolve_testset(testset, docs, skip_unresolved=True)

    assert resolved["question_id"].to_pylist() == ["ok", "keyed"]
    assert "skipped 1 of 3 questions whose references match no document" in caplog.text
    assert "question lost (item 2" in caplog.text
    with pytest.raises(RagsweepError, match="no question left: all 1 are unresolved"):
        resolve_testset(testset.slice(1, 1), docs, skip_unresolved=True)


def test_check_references_needs_only_the_keys_and_leaves_contexts_to_the_texts(
    tmp_path: Path,
) -> None:
    items = [native_item("native", "Document 1: Logs go to stdout.")]
    items.append({**native_item("keyed", ""), "reference_context": None})
    items[1]["metadata"]["seed_document_id"] = "logs.md"
    testset = load_testset(write_jsonl(tmp_path / "t.jsonl", items))

    check_references(testset, ["server.md", "ops/logs.md"])  # by basename; context unchecked
    with pytest.raises(RagsweepError, match=r"question keyed \(item 2.*'logs.md' matches no"):
        check_references(testset, ["server.md"])


def test_stored_names_come_from_the_file_or_the_generated_content(tmp_path: Path) -> None:
    testset = load_testset(write_json(tmp_path / "t.json", AUTORAG))
    day = date(2026, 11, 30)

    assert stored_name(str(tmp_path / "faq.json"), testset, day) == "faq.json"
    assert stored_name("s3://bucket/sets/faq.jsonl", testset, day) == "faq.jsonl"
    assert stored_name("/runs/testsets/0a1b/faq.arrow", testset, day) == "faq"  # --testset-name
    generated = stored_name("", testset, day)
    assert generated.startswith("generated-20261130-") and len(generated) == len("generated-") + 17
    assert stored_name("", testset.slice(0, 1), day) != generated


@pytest.mark.parametrize(
    "name",
    ["../../../../somewhere/x", "/tmp/x", "team/faq", ".hidden", "a b", "", " ", "x" * 101, "é"],
)
def test_a_test_set_name_that_could_be_a_path_or_is_not_plain_is_refused(name: str) -> None:
    with pytest.raises(RagsweepError, match=r"^NAME: a test set needs a name of 1 to 100"):
        check_name(name, "NAME")


@pytest.mark.parametrize("name", ["faq.json", "generated-20261130-0a1b2c3d", "T_1", "x" * 100])
def test_plain_test_set_names_are_accepted(name: str) -> None:
    assert check_name(name) == name


def test_a_name_made_from_a_file_name_is_always_valid(tmp_path: Path) -> None:
    testset = load_testset(write_json(tmp_path / "t.json", AUTORAG))
    day = date(2026, 11, 30)
    assert stored_name("/data/my set (2).json", testset, day) == "my-set-2-.json"
    assert stored_name("s3://b/k/..json", testset, day) == "json"
    assert stored_name("/data/.json", testset, day) == "json"
    assert name_from_file("../../../../somewhere/x") == "x"
    assert name_from_file("@@@") == ""
    assert stored_name("/data/@@@", testset, day).startswith("generated-20261130-")
    with pytest.raises(RagsweepError, match=r"test data 'store:../x': a test set needs a name"):
        stored_name("store:../x", testset, day)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_example_giskard_native_set_finds_the_documents_of_the_keyed_set(embedding_cache) -> None:
    """examples/testset-giskard-native.jsonl is what giskard's QATestset.save wrote for the
    example questions over another tool's paragraph chunks (examples/make_giskard_native.py):
    integer seeds, ``Document N:`` contexts, HTML and PDF text with white space collapsed."""
    from ragsweep.documents.sources import read_documents
    from ragsweep.embeddings.cache import EmbeddingCache
    from ragsweep.sweep.space import SearchSpace
    from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

    docs = read_documents(str(EXAMPLES / "docs")).table
    native_file = EXAMPLES / "testset-giskard-native.jsonl"
    assert '"seed_document_id":349' in native_file.read_text().splitlines()[0]
    native = resolve_testset(load_testset(str(native_file)), docs)
    keyed = resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), docs)
    references = {row["question"]: row["reference_doc_ids"] for row in keyed.to_pylist()}
    shared = [row for row in native.to_pylist() if row["question"] in references]
    assert len(shared) == keyed.num_rows == native.num_rows - 2
    assert all(row["reference_doc_ids"] == references[row["question"]] for row in shared)
    doubles = [row for row in native.to_pylist() if row["question_type"] == "double"]
    assert [len(row["reference_doc_ids"]) for row in doubles] == [2, 2]

    space = SearchSpace(chunk_sizes=(128,), top_ks=(3,), search_types=("similarity",))
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache(embedding_cache)  # the session's: other tests embed these chunks
    chunks = build_chunks(docs, chunk_config, cache)

    def context_correctness(testset: pa.Table) -> float:
        retrievals = retrieve(chunks, testset, space, chunk_config, cache)
        _, scores = evaluate(retrievals, testset, space.all_configs(), "context_correctness")
        values = scores["context_correctness"].to_pylist()
        return sum(values) / len(values)

    shared_ids = pa.array([row["question_id"] for row in shared])
    on_native = context_correctness(
        native.filter(pa.compute.is_in(native["question_id"], shared_ids))
    )
    on_keyed = context_correctness(keyed)
    on_all = context_correctness(native)
    print(f"context correctness: keyed {on_keyed:.3f}, native {on_native:.3f} ({on_all:.3f} all)")
    assert on_native == pytest.approx(on_keyed)
    assert abs(on_all - on_keyed) < 0.05


def test_a_reference_to_a_skipped_document_says_it_was_skipped_and_why(tmp_path: Path) -> None:
    from ragsweep.documents.sources import read_documents

    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "a.md").write_text("Tidewater listens on port 8443.\n", encoding="utf-8")
    (docs / "guide" / "b.md").write_bytes(b"caf\xe9 au lait\n")  # Latin-1: not UTF-8
    testset = tmp_path / "t.json"
    testset.write_text(
        '[{"question": "Milk?", "correct_answers": ["au lait"], '
        '"correct_answer_document_ids": ["b.md"]}]'
    )
    read = read_documents(str(docs))
    assert read.skipped["unreadable"] == ["guide/b.md"]

    with pytest.raises(RagsweepError) as error:
        resolve_testset(load_testset(str(testset)), read.table, skipped=read.skipped)
    message = str(error.value)
    assert (
        "reference document 'b.md' was skipped when the documents were read (unreadable" in message
    )
    assert "guide/b.md" in message and "matches no document" not in message
