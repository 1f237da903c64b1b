"""Which questions the statistics treat as dependent (the cluster unit of a test set), what
the intervals are then about, and the words that say both.

Questions drawn from one document share its difficulty, so intervals and tests resample
clusters of questions, not questions. The unit is the coarsest of

- ``document``: the first reference document;
- ``section``: the ``SECTION_CHARS``-character window of that document where the first gold
  span starts (about two pages of a PDF): questions on one passage stay together;
- ``question``: every question its own cluster;

whose *effective* number of clusters (n² / Σ size², the count when the clusters are of equal
size, fewer when one cluster holds most questions) is at least ``MIN_CLUSTERS``. A question
without a reference document (or, for ``section``, without a gold span) is its own cluster.

What the intervals are about follows from the unit. Resampling documents, they hold for
*documents like these* (the documents a sample of a wider collection). With fewer than
``MIN_CLUSTERS`` effective documents no interval can: a 95% interval over 5 documents that
treats their questions as independent covers the mean of documents like these in 68% of
test sets (latent within-document correlation 0.3), and resampling the 5 documents leaves
the tie test unable to reach 5%. So below that the sections or the questions are
resampled, and the intervals and tests describe *these documents only*, for questions like
these about them: the question a sweep over one corpus asks ("which configuration is best
on my documents?"), and one they answer with their stated coverage
(``benchmarks/bench_clusters.py``). ``cautions`` says so, with the document count. The
threshold is also where the tests gain their power: an exact sign-flip test over G
clusters cannot go below p = 2^-G, and with 10 documents a 10-point drop is seen in 78% of
nights, with 5 in 39%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_CLUSTERS = 10
SECTION_CHARS = 4000
UNITS = ("document", "section", "question")


@dataclass(frozen=True)
class Clusters:
    """One cluster per question, the unit chosen, and the documents the questions come from."""

    ids: np.ndarray  # per question, an integer cluster
    keys: list[str | None]  # per question, its cluster's name; None: the question alone
    unit: str  # one of UNITS
    documents: int  # distinct first reference documents of the questions
    documents_effective: float  # their effective number (``effective``)

    @property
    def count(self) -> int:
        return int(len(np.unique(self.ids)))

    @property
    def alone(self) -> int:
        """Questions that are a cluster of their own."""
        return sum(key is None for key in self.keys)

    def describe(self) -> str:
        """What is resampled, counted from the clusters: ``6 documents``."""
        named = len({key for key in self.keys if key is not None})
        return describe(self.unit, named, self.alone)

    def statement(self) -> str:
        """The sentence every output prints: what is resampled, and what that is about."""
        return statement(self.describe(), len(self.keys), self.unit, self.documents)

    def cautions(self) -> list[str]:
        return cautions(
            len(self.keys), self.unit, self.documents, self.documents_effective, self.alone
        )

    def record(self) -> dict[str, Any]:
        """What a run records of its clusters (the leaderboard's settings)."""
        return {
            "unit": self.unit,
            "count": self.count,
            "effective": round(effective(self.ids), 1),
            "questions": len(self.keys),
            "alone": self.alone,
            "documents": self.documents,
            "documents_effective": round(self.documents_effective, 1),
            "statement": self.statement(),
        }


def describe(unit: str, named: int, alone: int) -> str:
    """What is resampled: ``6 documents``, ``31 document sections of 4000 characters and 9
    questions alone``, ``48 questions, each alone``; never a unit with no cluster."""
    parts = []
    if named:
        name = {"document": "document", "section": "document section"}[unit]
        parts.append(f"{named} {name}{'' if named == 1 else 's'}")
        if unit == "section":
            parts[-1] += f" of {SECTION_CHARS} characters"
    if alone:
        many = alone > 1
        parts.append(
            f"{alone} question{'s' if many else ''} alone"
            if named
            else f"{alone} question{'s, each' if many else ''} alone"
        )
    return " and ".join(parts) or "no questions"


def statement(resampled: str, questions: int, unit: str, documents: int) -> str:
    """``Intervals and tests resample 6 documents (48 questions in all): they hold for
    documents like these.`` or ``...: they describe these 6 documents only, ...``."""
    return f"Intervals and tests resample {resampled} ({questions} questions in all): " + (
        "they hold for documents like these."
        if unit == "document"
        else f"they describe {_these(documents)} only, for questions like these."
    )


def _these(documents: int) -> str:
    if documents == 0:
        return "the documents of these questions"  # none names a reference document
    return "this document" if documents == 1 else f"these {documents} documents"


def statement_of(record: dict[str, Any]) -> str:
    """The statement a leaderboard's settings recorded; for a run recorded before the
    statement was (no ``statement``), what its counts can still say truly."""
    if "statement" in record:
        return record["statement"]
    if record["unit"] == "question":
        return f"Intervals and tests resample {describe('question', 0, record['questions'])}."
    return (
        f"Intervals and tests resample {record['count']} clusters of the "
        f"{record['questions']} questions (by {record['unit']}; a question without one, alone)."
    )


def ids_of(keys: Sequence[str | None]) -> np.ndarray:
    """One integer per key; a None key is a cluster of its own."""
    labels: dict[str, int] = {}
    out = np.empty(len(keys), dtype=np.int64)
    for i, key in enumerate(keys):
        out[i] = labels.setdefault(f"key:{key}" if key is not None else f"alone:{i}", len(labels))
    return out


def effective(ids: np.ndarray) -> float:
    """n² / Σ size²: how many equal clusters carry as much information as these."""
    if not len(ids):
        return 0.0
    sizes = np.unique(ids, return_counts=True)[1].astype(np.float64)
    return float(sizes.sum() ** 2 / (sizes**2).sum())


def document_keys(reference_doc_ids: Sequence[Sequence[str] | None]) -> list[str | None]:
    return [refs[0] if refs else None for refs in reference_doc_ids]


def section_keys(gold_spans: Sequence[Sequence[dict] | None]) -> list[str | None]:
    """The window of the first gold span's start: ``guide.pdf@8000`` (characters 8000 on)."""
    out: list[str | None] = []
    for spans in gold_spans:
        if spans:
            span = spans[0]
            out.append(f"{span['doc_id']}@{span['start'] // SECTION_CHARS * SECTION_CHARS}")
        else:
            out.append(None)
    return out


def _documents(keys: Sequence[str | None]) -> tuple[int, float]:
    """How many documents the questions with one come from, and their effective number."""
    named = [key for key in keys if key is not None]
    return len(set(named)), effective(ids_of(named))


def choose(
    reference_doc_ids: Sequence[Sequence[str] | None],
    gold_spans: Sequence[Sequence[dict] | None] | None = None,
) -> Clusters:
    """The coarsest unit with at least ``MIN_CLUSTERS`` effective clusters (else questions)."""
    documents = document_keys(reference_doc_ids)
    count = _documents(documents)
    candidates = [("document", documents)]
    if gold_spans is not None:
        candidates.append(("section", section_keys(gold_spans)))
    for unit, keys in candidates:
        ids = ids_of(keys)
        if effective(ids) >= MIN_CLUSTERS:
            return Clusters(ids, keys, unit, *count)
    keys = [None] * len(reference_doc_ids)
    return Clusters(ids_of(keys), keys, "question", *count)


def of_testset(testset: Any) -> Clusters:
    """``choose`` on an Arrow test set (gold spans when it has the column)."""
    spans = testset["gold_spans"].to_pylist() if "gold_spans" in testset.column_names else None
    return choose(testset["reference_doc_ids"].to_pylist(), spans)


def of_keys(
    keys: Sequence[str | None], unit: str, documents: tuple[int, float] | None = None
) -> Clusters:
    """Clusters already named (a stored run's ``cluster`` column), kept while they give
    ``MIN_CLUSTERS`` effective clusters, else each question alone. The documents are read
    from the keys (``doc`` or ``doc@start``); a run that resampled questions alone kept no
    names, so its recorded ``documents`` (count, effective) stand in."""
    if unit in ("document", "section"):
        documents = _documents([k if unit == "document" else _document_of(k) for k in keys])
    documents = documents or (0, 0.0)
    ids = ids_of(keys)
    if any(k is not None for k in keys) and effective(ids) >= MIN_CLUSTERS:
        return Clusters(ids, list(keys), unit, *documents)
    alone = [None] * len(keys)
    return Clusters(ids_of(alone), alone, "question", *documents)


def _document_of(section: str | None) -> str | None:
    return section.rsplit("@", 1)[0] if section is not None else None


MIN_QUESTIONS = 20  # below this, a test set is too small for the tests to tell much apart


def cautions_of(record: dict[str, Any]) -> list[str]:
    """``cautions`` of the clusters a leaderboard's settings recorded (a run recorded before
    the document count was: its questions only)."""
    return cautions(
        record["questions"],
        record["unit"],
        record.get("documents", 0),
        record.get("documents_effective", 0.0),
        record.get("alone", 0),
    )


def cautions(
    questions: int, unit: str, documents: int, documents_effective: float, alone: int = 0
) -> list[str]:
    """What the intervals and ties of this test set cannot show, one line each: too few
    questions; questions that share a document treated as independent (too few documents
    for the ``document`` unit), with the document count; ``alone``: questions that are a
    cluster of their own."""
    out = []
    if questions < MIN_QUESTIONS:
        out.append(
            f"warning: only {questions} question{'' if questions == 1 else 's'}: the intervals "
            "are wide and a configuration can rarely be shown worse than the best, so 'tied' "
            f"means 'not told apart', not 'as good'; use at least {MIN_QUESTIONS} questions "
            f"over at least {MIN_CLUSTERS} documents"
        )
    if unit != "document" and documents and documents_effective < MIN_CLUSTERS:
        some = f"{documents} document{'' if documents == 1 else 's'}"
        if documents_effective < 0.75 * documents:
            some += f" ({documents_effective:.1f} effective: a few hold most questions)"
        independent = {"question": "questions", "section": "sections"}[unit]
        if unit == "section" and alone:
            independent += f" (and {alone} question{'s' if alone > 1 else ''} alone)"
        out.append(
            f"warning: the questions come from {some}, too few for intervals and tests that "
            f"hold for documents like these: {independent} that share a document are treated "
            f"as independent, so they describe {_these(documents)} only; for documents like "
            f"these, use questions from at least {MIN_CLUSTERS} documents"
        )
    return out
