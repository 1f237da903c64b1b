"""Test sets: load and validate, resolve reference documents, locate gold spans, export.

Two formats, chosen by suffix:

- ``.json``, Red Hat AutoRAG: a list of ``{"question", "correct_answers": [...],
  "correct_answer_document_ids": [...]}`` (ai4rag 0.25 names the last field
  ``correct_answer_document_keys``).
- ``.jsonl``, Giskard RAGET: one ``{"id", "question", "reference_answer", "reference_context",
  "conversation_history": [...], "metadata": {"question_type", "seed_document_id", "topic"}}``
  a line, as ragsweep or Giskard's ``QATestset.save`` writes it (there ``seed_document_id``
  is Giskard's knowledge-base index and the context reads ``Document <index>: <text>``).
  Giskard holds one answer and one document: ragsweep writes the others in ``metadata``
  (``other_reference_answers``, ``other_document_ids``) and reads them back.
- ``.arrow``, ragsweep's own test set artifact (lossless: every answer, document, gold span
  and version); ``ragsweep run --testset-name`` hands a stored test set to the pipeline so.

Test data may also be ``store:<name>``, a test set in the results database, read when the
pipeline's ``load_testset`` step runs (``ragsweep.curation.stored_sets.load_test_data``).

A question's identity: ``question_id`` is the source's id, else ``q-`` and a hash of the
question and its reference answers (so inserting a question moves no other id);
``question_version`` hashes everything it is scored against, so an edit is a new version.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from datetime import date
from itertools import accumulate
from pathlib import Path, PurePosixPath
from typing import Any, NoReturn

import pyarrow as pa

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import TESTSET
from ragsweep.core.text import Spaced, locate
from ragsweep.documents import locating
from ragsweep.documents.sources import location, read_bytes

# test data naming a test set in the results database: store:<name>
STORE_PREFIX = "store:"
# a stored test set's name: safe in a file name, a URL and a shell, never a path
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = "1 to 100 letters, digits, '.', '_' or '-', the first a letter or digit"

log = logging.getLogger("ragsweep")

_DOC_ID_FIELDS = ("correct_answer_document_ids", "correct_answer_document_keys")
_MISSING = object()

# The longest text, in characters, each field of a question may hold (docs/testsets.md):
# far above any real question or reference, and low enough that a wrong file (a document
# pasted into a question) is refused as it is read, before anything embeds or stores it.
LIMITS = {
    "question": 10_000,
    "reference_answers": 100_000,  # each answer
    "reference_context": 100_000,
    "conversation_history": 100_000,  # as JSON
}
# the fields' names in AutoRAG JSON and Giskard JSONL, where they differ from the columns'
_AUTORAG_FIELDS = {"reference_answers": "correct_answers"}
_GISKARD_FIELDS = {"reference_answers": "reference_answer"}
# where Giskard JSONL keeps the answers and document ids after its first
_MORE_ANSWERS, _MORE_DOC_IDS = "other_reference_answers", "other_document_ids"


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

    def scalar(self, field: str) -> str | None:
        """An optional JSON scalar (string, number, boolean) as text; null or '' is None."""
        value = self._get(field, False)
        if isinstance(value, (list, dict)):
            self.fail(field, f"expected a string or a number, got {_type_name(value)}")
        return None if value is None or value == "" else str(value)

    def texts(self, field: str, allow_empty: bool = False, required: bool = True) -> list[str]:
        """A list of non-empty strings; an optional field may be absent or null (no strings)."""
        value = self._get(field, required)
        if value is None and not required:
            return []
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


def check_limits(where: str, row: dict, fields: Mapping[str, str] | None = None) -> None:
    """Refuse a question with a field longer than its limit (``LIMITS``): one line naming
    ``where`` (the file and record), the question's id and the field as ``fields`` names it
    in the file."""
    for column, limit in LIMITS.items():
        value = row[column]
        for number, text in enumerate(value if isinstance(value, list) else [value], 1):
            if text and len(text) > limit:
                name = (fields or {}).get(column, column)
                item = f" item {number}" if isinstance(value, list) and len(value) > 1 else ""
                raise RagsweepError(
                    f"{where} (id {row['question_id']!r}): field '{name}'{item} is "
                    f"{len(text):,} characters; the limit is {limit:,}"
                )


def _digest(content: object) -> str:
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def content_id(question: str, answers: list[str]) -> str:
    """The id of a question its source gives none: ``q-`` and 12 hex of its content."""
    return "q-" + _digest({"question": question, "reference_answers": answers})[:12]


def question_version(row: dict) -> str:
    """16 hex of a hash over what a question is scored against: its text, reference answers,
    reference documents (as given), reference context and conversation history."""
    content = {
        "question": row["question"],
        "reference_answers": row["reference_answers"],
        "reference_doc_ids": row["reference_doc_ids"],
        "reference_context": row.get("reference_context") or None,
        "conversation_history": json.loads(row.get("conversation_history") or "[]"),
    }
    return _digest(content)[:16]


def fingerprint(testset: pa.Table) -> str:
    """A hash of the test set's content: its questions' ids and versions, in any order."""
    ids, versions = testset["question_id"].to_pylist(), testset["question_version"].to_pylist()
    return _digest(sorted(zip(ids, versions, strict=True), key=str))


def check_name(name: str | None, where: str = "test set name") -> str:
    """``name`` when it is a valid stored test set's name (``NAME``), else a clear error
    naming ``where`` it came from."""
    if name is None or not NAME.fullmatch(name):
        raise RagsweepError(f"{where}: a test set needs a name of {NAME_RULE}; got {name!r}")
    return name


def stored_set_name(uri: str) -> str | None:
    """The name of the stored test set that test data ``uri`` (``store:<name>``) names,
    checked; else None (a file)."""
    if not uri.startswith(STORE_PREFIX):
        return None
    name = uri.removeprefix(STORE_PREFIX)
    if not name.strip():
        raise RagsweepError(f"test_data_key {uri!r}: name the stored test set, store:<name>")
    return check_name(name, f"test_data_key {uri!r}")


def test_data_location(bucket: str, key: str) -> str:
    """The location of the pipeline's test data (``test_data_bucket_name``,
    ``test_data_key``): a file's (``sources.location``), ``store:<name>`` for a set stored
    in the results database, which no bucket holds; no key: '' (generate one)."""
    if not key:
        return ""
    if stored_set_name(key) is None:
        return location(bucket, key)
    if bucket:
        raise RagsweepError(
            f"test_data_key {key!r} names a test set in the results database: "
            f"leave test_data_bucket_name empty (it is {bucket!r})"
        )
    return key


def name_from_file(filename: str) -> str:
    """A valid test set name from a file's name: each run of other characters becomes
    '-' (``my set (2).json`` is ``my-set-2-.json``); '' when nothing is left."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", PurePosixPath(filename).name)
    return name.lstrip("._-")[:100]


def stored_name(uri: str, testset: pa.Table, day: date) -> str:
    """The name a test set is stored under: the name of a ``store:<name>`` location
    (checked), else its file name made a valid name (an ``.arrow`` one's without the
    suffix: the stored set ``--testset-name`` ran), or for a generated one (no ``uri``)
    ``generated-<YYYYMMDD>-<hash8>``, the hash of its content."""
    if uri.startswith(STORE_PREFIX):
        return check_name(uri.removeprefix(STORE_PREFIX), f"test data {uri!r}")
    name = name_from_file(uri.rstrip("/").removesuffix(".arrow")) if uri else ""
    return name or f"generated-{day:%Y%m%d}-{fingerprint(testset)[:8]}"


def _row(
    question_id: str | None, question: str, answers: list[str], doc_ids: list[str], **extra: Any
) -> dict:
    row = dict.fromkeys(TESTSET.names)
    row.update(question=question, gold_spans=[], **extra)
    row.update(reference_answers=answers, reference_doc_ids=doc_ids)
    row["question_id"] = question_id or content_id(question, answers)
    row["question_version"] = question_version(row)
    return row


class _Ids:
    """Each question id once in a file; a repeated one names both records. With ``contents``,
    each question too: the same question, reference answers, context and conversation under
    a second id would be counted twice."""

    def __init__(self, name: str, unit: str, contents: bool = False) -> None:
        self.name, self.unit, self.seen = name, unit, {}
        self.contents: dict[tuple, tuple[int, str]] | None = {} if contents else None

    def add(self, row: dict, number: int, given: bool) -> None:
        qid, unit = row["question_id"], self.unit
        first = self.seen.setdefault(qid, number)
        if first != number:
            if given:
                problem = f"duplicate id '{qid}' (first on {unit} {first})"
            else:
                problem = (
                    f"the same question and reference answers as {unit} {first}: remove one "
                    "(a question's id is derived from them)"
                )
            raise RagsweepError(f"{self.name}: {unit} {number}: {problem}")
        if self.contents is None:
            return
        content = tuple(row[k] for k in ("question", "reference_context", "conversation_history"))
        content += tuple(row["reference_answers"])
        first, first_id = self.contents.setdefault(content, (number, qid))
        if first != number:
            raise RagsweepError(
                f"{self.name}: {unit} {number}: id '{qid}' repeats the question, reference "
                f"answer, context and conversation of {unit} {first} (id '{first_id}'): "
                "remove one"
            )


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
    rows, ids = [], _Ids(name, "record")
    for number, item in enumerate(items, 1):
        record = _Record(f"{name}: record {number}", item)
        ids_field = next((f for f in _DOC_ID_FIELDS if f in record.data), _DOC_ID_FIELDS[0])
        question = record.text("question")
        answers = record.texts("correct_answers")
        doc_ids = record.texts(ids_field, allow_empty=True)
        rows.append(_row(None, question, answers, doc_ids))
        check_limits(record.where, rows[-1], _AUTORAG_FIELDS)
        ids.add(rows[-1], number, given=False)
    return rows


def _read_giskard(name: str, text: str) -> list[dict]:
    rows, ids = [], _Ids(name, "line", contents=True)
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
        question_id = record.scalar("id")
        question, answer = record.text("question"), record.text("reference_answer")
        context = record.text("reference_context", required=False)
        history = record.value("conversation_history", list, [])
        metadata = _Record(where, record.value("metadata", dict, {}), prefix="metadata.")
        seed = metadata.scalar("seed_document_id")  # Giskard's own: an index or a uuid
        more_answers = metadata.texts(_MORE_ANSWERS, allow_empty=True, required=False)
        more_doc_ids = metadata.texts(_MORE_DOC_IDS, allow_empty=True, required=False)
        if more_doc_ids and not seed:
            metadata.fail(_MORE_DOC_IDS, "given without a seed_document_id")
        rows.append(
            _row(
                question_id,
                question,
                [answer, *more_answers],
                [seed, *more_doc_ids] if seed else [],
                reference_context=context,
                question_type=metadata.text("question_type", required=False),
                topic=metadata.text("topic", required=False),
                conversation_history=json.dumps(history, ensure_ascii=False),
            )
        )
        check_limits(where, rows[-1], _GISKARD_FIELDS)
        ids.add(rows[-1], number, given=question_id is not None)
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
                **({_MORE_ANSWERS: answers[1:]} if answers[1:] else {}),
                **({_MORE_DOC_IDS: doc_ids[1:]} if doc_ids[1:] else {}),
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
    if suffix not in _READERS and suffix != ".arrow":
        raise RagsweepError(
            f"{name}: unknown test set format '{suffix}': use .json (Red Hat AutoRAG), "
            ".jsonl (Giskard RAGET) or .arrow (a ragsweep test set artifact)"
        )
    return suffix


def _read_arrow(uri: str, data: bytes) -> pa.Table:
    """A test set artifact of any schema version that has the TESTSET columns."""
    try:
        with pa.ipc.open_file(pa.BufferReader(data)) as reader:
            table = reader.read_all()
    except pa.ArrowInvalid as exc:
        raise RagsweepError(f"{uri}: not a readable Arrow file ({exc})") from None
    kind = (table.schema.metadata or {}).get(b"ragsweep.kind", b"").decode()
    if kind != "testset":
        raise RagsweepError(
            f"{uri}: expected a ragsweep testset artifact, found {kind or 'no kind'}"
        )
    missing = [n for n in TESTSET.names if n not in table.schema.names]
    if missing:
        raise RagsweepError(f"{uri}: the test set artifact lacks column(s) {', '.join(missing)}")
    try:
        table = table.select(TESTSET.names).cast(TESTSET)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise RagsweepError(
            f"{uri}: a column of the test set artifact has another type ({exc})"
        ) from None
    ids = _Ids(uri, "row")
    for number, row in enumerate(table.to_pylist(), 1):
        if not row["question_id"] or not (row["question"] or "").strip():
            raise RagsweepError(f"{uri}: row {number}: no question id or an empty question")
        check_limits(f"{uri}: row {number}", row)
        ids.add(row, number, given=True)
    return table


def load_testset(uri: str) -> pa.Table:
    """Read and validate a test set from a local file or S3 object (a TESTSET table)."""
    suffix = _format_of(uri)
    if suffix == ".arrow":
        table = _read_arrow(uri, read_bytes(uri))
        if not table.num_rows:
            raise RagsweepError(f"{uri}: the test set is empty")
        return table
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

    Giskard holds one answer and one seed document per item: the first of each is written
    there, the others in its ``metadata``; what a format has no field for is left out
    (``left_out`` says what); ``.arrow`` (ragsweep's test set artifact) keeps everything.
    """
    path = Path(path)
    if _format_of(str(path)) == ".arrow":
        from ragsweep.core.schemas import write_table

        return write_table(testset, path, "testset")
    text = _WRITERS[_format_of(str(path))](testset.to_pylist())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _has_history(row: dict) -> bool:
    return bool(json.loads(row["conversation_history"] or "[]"))


# what AutoRAG JSON has no field for, each with the test of a question that holds it; a
# question's id is written nowhere there, and read back as the id of its content
_AUTORAG_LACKS: dict[str, Callable[[dict], bool]] = {
    "id": lambda row: row["question_id"] != content_id(row["question"], row["reference_answers"]),
    "reference_context": lambda row: bool(row["reference_context"]),
    "question_type": lambda row: bool(row["question_type"]),
    "topic": lambda row: bool(row["topic"]),
    "conversation_history": _has_history,
}
_FORMAT_NAMES = {".json": "AutoRAG JSON", ".jsonl": "Giskard JSONL"}


def left_out(testset: pa.Table, path: str | Path) -> str | None:
    """One line saying which fields of ``testset`` the format of ``path`` cannot carry, and
    in how many questions; None when it carries everything. Gold spans are not counted: a
    run locates them again in the documents."""
    suffix = _format_of(str(path))
    lacks = _AUTORAG_LACKS if suffix == ".json" else {}
    rows = testset.to_pylist() if lacks else []
    counts = {field: sum(map(holds, rows)) for field, holds in lacks.items()}
    dropped = [f"{field} ({n} of {len(rows)})" for field, n in counts.items() if n]
    if not dropped:
        return None
    return f"{path}: {_FORMAT_NAMES[suffix]} has no field for {', '.join(dropped)}: left out"


# ---- document ids and gold spans -------------------------------------------------------------


class _Unresolved(Exception):
    pass


class _Texts(Mapping[str, str]):
    """The documents' texts by doc_id, each made a string when asked: a corpus is not held
    twice, as Arrow and as Python strings."""

    def __init__(self, ids: list[str], texts: pa.ChunkedArray) -> None:
        self.rows = {doc_id: row for row, doc_id in enumerate(ids)}
        self.column = texts

    def __getitem__(self, doc_id: str) -> str:
        return self.column[self.rows[doc_id]].as_py()

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def values(self) -> Iterator[str]:  # type: ignore[override]
        for chunk in self.column.chunks:
            yield from chunk.to_pylist()


class _Collection:
    """The documents' texts, found by doc_id or by a file name unique in the collection; and
    passages searched across all of them (one ``str.find`` over the joined texts)."""

    def __init__(self, documents: pa.Table, skipped: Mapping[str, list[str]] | None = None) -> None:
        self.ids = documents.column("doc_id").to_pylist()
        # the files read but skipped (reason -> doc_ids), so a reference to one says why
        self.skipped = {doc_id: why for why, ids in (skipped or {}).items() for doc_id in ids}
        self.texts = _Texts(self.ids, documents.column("text"))
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for doc_id in self.ids:
            self.by_name[PurePosixPath(doc_id).name].append(doc_id)
        self.example = min(self.ids, default="")
        self._joined: list[tuple[str, list[int]]] = []  # verbatim, then white space collapsed
        self._spaced: dict[str, Spaced] = {}  # white space collapsed, by doc_id
        self._indexes: dict[str, locating.Index] = {}  # for approximate location, by doc_id

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
        skipped = [d for d in self.skipped if ref in (d, PurePosixPath(d).name)]
        if len(skipped) == 1:
            raise _Unresolved(
                f"reference document '{ref}' was skipped when the documents were read "
                f"({self.skipped[skipped[0]]}: the warning above names {skipped[0]} and why)"
            )
        raise _Unresolved(
            f"reference document '{ref}' matches no document (ids are keys relative to the "
            f"docs folder, e.g. '{self.example}', or file names unique in it)"
        )

    def span(self, doc_id: str, passage: str, unique: bool = False) -> dict | None:
        """Where ``passage`` is in the document verbatim, or up to white space (the
        document's white-space-collapsed form made once: a long document is not scanned
        again for each passage)."""
        text, passage = self.texts[doc_id], passage.strip()
        found = locate(text, passage, unique) if passage in text else None
        if not found and passage:
            if doc_id not in self._spaced:
                self._spaced[doc_id] = Spaced(text)
            found = self._spaced[doc_id].find(passage, unique)
        if not found:
            return None
        return {"doc_id": doc_id, "start": found[0], "end": found[1], "found": "exact"}

    def approximate(self, doc_ids: list[str], passage: str) -> dict | None:
        """Where the ``doc_ids`` documents say what ``passage`` says in other words
        (``locating.best``); each document indexed once, when first asked."""
        for doc_id in doc_ids:
            if doc_id not in self._indexes:
                self._indexes[doc_id] = locating.Index(self.texts[doc_id])
        found = locating.best(((d, self._indexes[d]) for d in dict.fromkeys(doc_ids)), passage)
        if not found:
            return None
        doc_id, where = found
        return {
            "doc_id": doc_id,
            "start": where.start,
            "end": where.end,
            "found": "approximate",
            "score": where.score,
        }

    def find(self, passage: str, prefer: list[str]) -> dict | None:
        """Where ``passage`` lies: in the ``prefer`` documents first, else in any document;
        not verbatim anywhere, where the ``prefer`` documents say it in other words."""
        for doc_id in prefer:
            if span := self.span(doc_id, passage):
                return span
        doc_id = self._search(passage)
        return self.span(doc_id, passage) if doc_id else self.approximate(prefer, passage)

    def _search(self, passage: str) -> str | None:
        """The first document holding ``passage`` verbatim, else up to white space."""
        if not self._joined:
            for texts in (self.texts.values(), (" ".join(t.split()) for t in self.texts.values())):
                texts = list(texts)
                starts = list(accumulate((len(t) + 1 for t in texts[:-1]), initial=0))
                self._joined.append(("\0".join(texts), starts))
        for (joined, starts), target in zip(
            self._joined, (passage.strip(), " ".join(passage.split())), strict=True
        ):
            at = joined.find(target) if target else -1
            if at >= 0:
                return self.ids[bisect_right(starts, at) - 1]
        return None


def resolve_testset(
    testset: pa.Table,
    documents: pa.Table,
    skip_unresolved: bool = False,
    skipped: Mapping[str, list[str]] | None = None,
) -> pa.Table:
    """Resolve every reference document id to a doc_id of ``documents`` and locate gold spans.

    An id resolves to the document whose doc_id it is, else to the one document of that file
    name. A Giskard reference context is located block by block (``Document N:`` prefixes
    dropped), in the question's documents first, else in any: the documents it is found in
    are references too, so an id that resolves nowhere (Giskard's own knowledge-base index)
    is replaced by them. An AutoRAG correct answer gives a span where it occurs in one of its
    reference documents exactly once. A passage found verbatim nowhere is located where its
    reference documents say it in other words (``locating``): such a span is ``approximate``
    with its score, the others ``exact``. A question whose references are found nowhere is an
    error naming it, or with ``skip_unresolved`` is left out with a warning; one citing a file
    the reading skipped (``skipped``: reason -> doc_ids, as ``DocumentSet`` has them) says so.
    """
    collection = _Collection(documents, skipped)
    rows, kept, problems = testset.to_pylist(), [], []
    for number, row in enumerate(rows, 1):
        try:
            _resolve(row, collection)
        except _Unresolved as exc:
            problems.append(_problem(row, number, exc))
        else:
            kept.append(row)
    if problems and not skip_unresolved:
        _fail(problems)
    if problems:
        log.warning(
            "skipped %d of %d questions whose references match no document; the first: %s",
            len(problems),
            len(rows),
            problems[0],
        )
        if not kept:
            raise RagsweepError(f"no question left: all {len(rows)} are unresolved")
    return pa.Table.from_pylist(kept, schema=TESTSET)


def check_references(testset: pa.Table, doc_ids: list[str]) -> None:
    """Fail as ``resolve_testset`` would when a question's reference document id names none
    of ``doc_ids``: a check needing no document text, so a question with a reference context
    (which the texts may resolve) is left to ``resolve_testset``."""
    collection = _Collection(pa.table({"doc_id": doc_ids, "text": [""] * len(doc_ids)}))
    problems = []
    for number, row in enumerate(testset.to_pylist(), 1):
        if not row["reference_context"]:
            try:
                [collection.resolve(ref) for ref in row["reference_doc_ids"]]
            except _Unresolved as exc:
                problems.append(_problem(row, number, exc))
    if problems:
        _fail(problems)


def _problem(row: dict, number: int, exc: _Unresolved) -> str:
    head = row["question"] if len(row["question"]) <= 60 else row["question"][:57] + "..."
    return f"question {row['question_id']} (item {number}, {head!r}): {exc}"


def _fail(problems: list[str]) -> NoReturn:
    others = len(problems) - 1
    more = f" (and {others} more unresolved question{'s' * (others > 1)})" if others else ""
    raise RagsweepError(
        f"{problems[0]}{more}; `ragsweep run --skip-unresolved` leaves such questions out"
    )


def _resolve(row: dict, collection: _Collection) -> None:
    """Resolve ``row``'s reference documents and locate its gold spans, in place."""
    resolved, unresolved = [], []
    for ref in row["reference_doc_ids"]:
        try:
            resolved.append(collection.resolve(ref))
        except _Unresolved as exc:
            unresolved.append(exc)
    if row["reference_context"]:
        spans = []
        for named, block in _context_blocks(row["reference_context"]):
            prefer = resolved
            with suppress(_Unresolved):  # Giskard names its own index, not always our ids
                prefer = [collection.resolve(named), *resolved] if named else resolved
            spans.append(collection.find(block, prefer))
        located = [span for span in spans if span]
        if unresolved and not located:
            raise _Unresolved(f"{unresolved[0]}, and its reference context is in no document")
        resolved += [span["doc_id"] for span in located]
    elif unresolved:
        raise unresolved[0]
    else:
        spans = []
        for answer in row["reference_answers"]:
            exact = [collection.span(doc_id, answer, unique=True) for doc_id in resolved]
            spans += [s for s in exact if s] or [collection.approximate(resolved, answer)]
        located = [span for span in spans if span]
    if len(located) < len(spans):
        log.debug("question %s: %d passages not located", row["question_id"], spans.count(None))
    row["reference_doc_ids"] = list(dict.fromkeys(resolved))
    places: dict[tuple, dict] = {}  # one span a place, the strongest: exact, else best score
    for span in located:
        place = (span["doc_id"], span["start"], span["end"])
        if place not in places or _strength(span) > _strength(places[place]):
            places[place] = span
    row["gold_spans"] = list(places.values())


def _strength(span: dict) -> tuple[bool, float]:
    return span["found"] == "exact", span.get("score") or 0.0


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
