"""Stored test sets and their curation: delete a question, edit a question or its reference
answers while its reference context and metadata stay as they are. An edited question keeps
its ``question_id`` and gets a new ``question_version``: it is not compared with its old self.

A store holds named test sets behind ``Store``; ``FolderStore`` keeps each as an
Arrow artifact of kind testset in a folder (lossless: every reference answer and document,
gold spans, topics). The results database can implement the same interface later.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.errors import RagsweepError
from ragsweep.schemas import read_table, write_table
from ragsweep.testset import question_version

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class Store(Protocol):
    """Named test sets (TESTSET tables)."""

    def names(self) -> list[str]: ...

    def load(self, name: str) -> pa.Table: ...

    def save(self, name: str, table: pa.Table) -> None: ...


class FolderStore:
    """Test sets as ``<folder>/<name>.arrow``; by default ``$RAGSWEEP_TESTSETS`` or
    ``testsets`` in the working folder."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(os.environ.get("RAGSWEEP_TESTSETS", "testsets"))

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.arrow"))

    def load(self, name: str) -> pa.Table:
        path = self._path(name)
        if not path.is_file():
            raise RagsweepError(
                f"no test set {name!r} in {self.folder}; stored: {self.names() or 'none'} "
                "(`ragsweep testset add NAME FILE` stores one)"
            )
        return read_table(path, "testset")

    def save(self, name: str, table: pa.Table) -> None:
        path = self._path(name)
        partial = path.with_suffix(".arrow.partial")
        write_table(table, partial, "testset")
        partial.replace(path)  # readers never see half a file

    def _path(self, name: str) -> Path:
        if not _NAME.fullmatch(name):
            raise RagsweepError(
                f"test set name {name!r}: use letters, digits, '.', '_' and '-' "
                "(not starting with '.' or '-')"
            )
        return self.folder / f"{name}.arrow"


def row_of(testset: pa.Table, question_id: str) -> int:
    """The row number of ``question_id``."""
    found = pc.index(testset.column("question_id"), question_id).as_py()
    if found < 0:
        ids = testset.column("question_id").to_pylist()
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise RagsweepError(f"no question {question_id!r} in the test set (ids: {shown})")
    return found


def delete_question(testset: pa.Table, question_id: str) -> pa.Table:
    """The test set without ``question_id``."""
    row = row_of(testset, question_id)
    return pa.concat_tables([testset.slice(0, row), testset.slice(row + 1)])


def edit_question(
    testset: pa.Table,
    question_id: str,
    question: str | None = None,
    answers: list[str] | None = None,
) -> pa.Table:
    """The test set with a new question text and/or new reference answers for
    ``question_id``; its reference context, documents, spans, type and topic stay, and its
    ``question_version`` is that of the new content."""
    row = row_of(testset, question_id)
    if question is not None and not question.strip():
        raise RagsweepError("the new question is empty")
    if answers is not None and (not answers or not all(a.strip() for a in answers)):
        raise RagsweepError("a new reference answer is empty")
    rows = testset.to_pylist()
    old = dict(rows[row])
    if question is not None:
        rows[row]["question"] = question
    if answers is not None:
        rows[row]["reference_answers"] = list(answers)
    if rows[row] != old:  # an edit that changes nothing keeps the version
        rows[row]["question_version"] = question_version(rows[row])
    return pa.Table.from_pylist(rows, schema=testset.schema)
