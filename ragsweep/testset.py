"""Test sets: load and validate, resolve reference documents, locate gold spans, export.

Two formats, chosen by suffix:

- ``.json``, Red Hat AutoRAG: a list of ``{"question", "correct_answers": [...],
  "correct_answer_document_ids": [...]}`` (ai4rag 0.25 names the last field
  ``correct_answer_document_keys``).
- ``.jsonl``, Giskard RAGET: one ``{"id", "question", "reference_answer", "reference_context",
  "conversation_history": [...], "metadata": {"question_type", "seed_document_id", "topic"}}``
  a line.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

import pyarrow as pa

from ragsweep.errors import RagsweepError
from ragsweep.schemas import TESTSET
from ragsweep.sources import read_bytes
from ragsweep.text import locate

log = logging.getLogger("ragsweep")

_DOC_ID_FIELDS = ("correct_answer_document_ids", "correct_answer_document_keys")
_MISSING = object()


# ---- validation ------------------------------------------------------------------------------


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


class _Record:
    """One JSON object under validation; errors name the file, the record and the field."""

    def __init__(self, where: str, data: object, prefix: str = "") -> None:
        if not isinstance(data, dict):
            raise RagsweepError(f"{where}: expected an object, got {_type_name(data)}")
        self.where, self.data, self.prefix = where, data, prefix

    def fail(self, field: str, problem: str) -> NoReturn:
        raise RagsweepError(f"{self.where}: field '{self.prefix}{field}': {problem}")

    def _get(self, field: str, required: bool) -> Any:
        value = self.data.get(field, _MISSING)
        if value is _MISSING and required:
            raise RagsweepError(f"{self.where}: missing field '{self.prefix}{field}'")
        return None if value is _MISSING else value

    def text(self, field: str, required: bool = True) -> str | None:
        """A non-empty string; an optional field may be absent or null."""
        value = self._get(field, required)
        if value is None and not required:
            return None
        if not isinstance(value, str):
            self.fail(field, f"expected a string, got {_type_name(value)}")
        if required and not value.strip():
            self.fail(field, "is empty")
        return value

    def texts(self, field: str, allow_empty: bool = False) -> list[str]:
        """A list of non-empty strings."""
        value = self._get(field, True)
        if not isinstance(value, list):
            self.fail(field, f"expected a list of strings, got {_type_name(value)}")
        for number, item in enumerate(value, 1):
            if not isinstance(item, str):
                self.fail(field, f"expected a list of strings, item {number} is {_type_name(item)}")
            if not item.strip():
                self.fail(field, f"item {number} is empty")
        if not value and not allow_empty:
            self.fail(field, "is empty")
        return value

    def value(self, field: str, kind: type, default: Any) -> Any:
        """An optional field of JSON type ``kind`` (list or dict)."""
        value = self._get(field, False)
        if value is None:
            return default
        if not isinstance(value, kind):
            expected = "a list" if kind is list else "an object"
            self.fail(field, f"expected {expected}, got {_type_name(value)}")
        return value


def _row(
    question_id: str, question: str, answers: list[str], doc_ids: list[str], **extra: Any
) -> dict:
    row = dict.fromkeys(TESTSET.names)
    row.update(question_id=question_id, question=question, gold_spans=[], **extra)
    row.update(reference_answers=answers, reference_doc_ids=doc_ids)
    return row


# ---- formats ---------------------------------------------------------------------------------


def _read_autorag(name: str, text: str) -> list[dict]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RagsweepError(
            f"{name}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    if not isinstance(items, list):
        raise RagsweepError(f"{name}: expected a JSON list of test items, got {_type_name(items)}")
    rows = []
    for number, item in enumerate(items, 1):
        record = _Record(f"{name}: record {number}", item)
        ids_field = next((f for f in _DOC_ID_FIELDS if f in record.data), _DOC_ID_FIELDS[0])
        question = record.text("question")
        answers = record.texts("correct_answers")
        doc_ids = record.texts(ids_field, allow_empty=True)
        rows.append(_row(f"q{number:04d}", question, answers, doc_ids))
    return rows


def _read_giskard(name: str, text: str) -> list[dict]:
    rows, first_seen = [], {}
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines: JSON may hold U+2028
        if not line.strip():
            continue
        where = f"{name}: line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RagsweepError(
                f"{where}: malformed JSON at column {exc.colno}: {exc.msg}"
            ) from None
        record = _Record(where, item)
        question_id = record.text("id")
        if question_id in first_seen:
            raise RagsweepError(
                f"{where}: duplicate id '{question_id}' (first on line {first_seen[question_id]})"
            )
        first_seen[question_id] = number
        question, answer = record.text("question"), record.text("reference_answer")
        context = record.text("reference_context", required=False)
        history = record.value("conversation_history", list, [])
        metadata = _Record(where, record.value("metadata", dict, {}), prefix="metadata.")
        seed = metadata.text("seed_document_id", required=False)
        rows.append(
            _row(
                question_id,
                question,
                [answer],
                [seed] if seed else [],
                reference_context=context,
                question_type=metadata.text("question_type", required=False),
                topic=metadata.text("topic", required=False),
                conversation_history=json.dumps(history, ensure_ascii=False),
            )
        )
    return rows


def _autorag_text(rows: list[dict]) -> str:
    items = [
        {
            "question": row["question"],
            "correct_answers": row["reference_answers"],
            "correct_answer_document_ids": row["reference_doc_ids"],
        }
        for row in rows
    ]
    return json.dumps(items, indent=2, ensure_ascii=False) + "\n"


def _giskard_text(rows: list[dict]) -> str:
    def item(row: dict) -> dict:
        answers, doc_ids = row["reference_answers"], row["reference_doc_ids"]
        return {
            "id": row["question_id"],
            "question": row["question"],
            "reference_answer": answers[0] if answers else "",
            "reference_context": row["reference_context"],
            "conversation_history": json.loads(row["conversation_history"] or "[]"),
            "metadata": {
                "question_type": row["question_type"],
                "seed_document_id": doc_ids[0] if doc_ids else None,
                "topic": row["topic"],
            },
        }

    return "".join(json.dumps(item(row), ensure_ascii=False) + "\n" for row in rows)


_READERS: dict[str, Callable[[str, str], list[dict]]] = {
    ".json": _read_autorag,
    ".jsonl": _read_giskard,
}
_WRITERS: dict[str, Callable[[list[dict]], str]] = {".json": _autorag_text, ".jsonl": _giskard_text}


def _format_of(name: str) -> str:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in _READERS:
        raise RagsweepError(
            f"{name}: unknown test set format '{suffix}': use .json (Red Hat AutoRAG) "
            "or .jsonl (Giskard RAGET)"
        )
    return suffix


def load_testset(uri: str) -> pa.Table:
    """Read and validate a test set from a local file or S3 object (a TESTSET table)."""
    suffix = _format_of(uri)
    try:
        text = read_bytes(uri).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RagsweepError(f"{uri}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    rows = _READERS[suffix](uri, text)
    if not rows:
        raise RagsweepError(f"{uri}: the test set is empty")
    return pa.Table.from_pylist(rows, schema=TESTSET)


def export_testset(testset: pa.Table, path: str | Path) -> Path:
    """Write ``testset`` as AutoRAG ``.json`` or Giskard ``.jsonl``, by the suffix of ``path``.

    Giskard holds one answer and one seed document per item: the first of each is written.
    """
    path = Path(path)
    text = _WRITERS[_format_of(str(path))](testset.to_pylist())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---- document ids and gold spans -------------------------------------------------------------


class _Unresolved(Exception):
    pass


class _Collection:
    """The documents' texts, found by doc_id or by a file name unique in the collection."""

    def __init__(self, documents: pa.Table) -> None:
        ids = documents.column("doc_id").to_pylist()
        self.texts = dict(zip(ids, documents.column("text").to_pylist(), strict=True))
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for doc_id in ids:
            self.by_name[PurePosixPath(doc_id).name].append(doc_id)
        self.example = min(ids, default="")

    def resolve(self, ref: str) -> str:
        if ref in self.texts:
            return ref
        matches = self.by_name.get(ref, [])
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise _Unresolved(
                f"reference document '{ref}' is ambiguous, it names {', '.join(sorted(matches))}: "
                "give the key relative to the docs folder"
            )
        raise _Unresolved(
            f"reference document '{ref}' matches no document (ids are keys relative to the "
            f"docs folder, e.g. '{self.example}', or file names unique in it)"
        )


def resolve_testset(testset: pa.Table, documents: pa.Table) -> pa.Table:
    """Resolve every reference document id to a doc_id of ``documents`` and locate gold spans.

    An id resolves to the document whose doc_id it is, else to the one document of that file
    name. Gold spans are where a Giskard item's reference context lies in its documents, or
    where an AutoRAG correct answer occurs in one of its reference documents exactly once; an
    item that cannot be located simply has no span.
    """
    collection = _Collection(documents)
    rows, problems = testset.to_pylist(), []
    for number, row in enumerate(rows, 1):
        resolved = []
        for ref in row["reference_doc_ids"]:
            try:
                resolved.append(collection.resolve(ref))
            except _Unresolved as exc:
                problems.append(f"question {row['question_id']} (item {number}): {exc}")
        row["reference_doc_ids"] = list(dict.fromkeys(resolved))
        row["gold_spans"] = _gold_spans(row, collection)
    if problems:
        more = f" (and {len(problems) - 1} more unresolved)" if len(problems) > 1 else ""
        raise RagsweepError(problems[0] + more)
    return pa.Table.from_pylist(rows, schema=TESTSET)


# Giskard writes a reference context as "Document <id>: <text>" blocks joined by blank lines.
_DOCUMENT_PREFIX = re.compile(r"(?:\A|\n\n)Document (\S+?): ")


def _context_blocks(context: str) -> list[tuple[str | None, str]]:
    """(document id named in the prefix, text) for each block of a reference context."""
    marks = list(_DOCUMENT_PREFIX.finditer(context))
    if not marks or marks[0].start() != 0:
        return [(None, context)]
    ends = [mark.start() for mark in marks[1:]] + [len(context)]
    return [
        (mark.group(1), context[mark.end() : end]) for mark, end in zip(marks, ends, strict=True)
    ]


def _gold_spans(row: dict, collection: _Collection) -> list[dict]:
    doc_ids = row["reference_doc_ids"]
    spans = []
    if row["reference_context"]:
        for named, block in _context_blocks(row["reference_context"]):
            candidates = doc_ids
            with suppress(_Unresolved):  # Giskard names its own chunk ids, not always ours
                candidates = [collection.resolve(named), *doc_ids] if named else doc_ids
            span = next(
                (s for d in candidates if (s := _span(collection, d, block, unique=False))), None
            )
            spans.append(span)
    else:
        spans = [
            _span(collection, doc_id, answer, unique=True)
            for answer in row["reference_answers"]
            for doc_id in doc_ids
        ]
    located = [span for span in spans if span]
    if len(located) < len(spans):
        log.debug("question %s: %d passages not located", row["question_id"], spans.count(None))
    return list({tuple(span.values()): span for span in located}.values())


def _span(collection: _Collection, doc_id: str, passage: str, unique: bool) -> dict | None:
    found = locate(collection.texts[doc_id], passage, unique)
    return {"doc_id": doc_id, "start": found[0], "end": found[1]} if found else None
