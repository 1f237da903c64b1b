"""Which questions the statistics treat as dependent: the cluster unit of a test set.

Questions drawn from one document share its difficulty, so intervals and tests resample
clusters of questions, not questions. The natural cluster is the question's first reference
document, but a corpus of one PDF (or two, or three) gives one cluster (two, three): an
interval of zero width, tests that cannot reach 5%. So the unit is the coarsest of

- ``document``: the first reference document;
- ``section``: the ``SECTION_CHARS``-character window of that document where the first gold
  span starts (about two pages of a PDF): questions on one passage stay together;
- ``question``: every question its own cluster;

whose *effective* number of clusters (n² / Σ size², the count when the clusters are of equal
size, fewer when one cluster holds most questions) is at least ``MIN_CLUSTERS``. A question
without a reference document (or, for ``section``, without a gold span) is its own cluster.
``MIN_CLUSTERS`` comes from simulation (100 questions, 0/1 scores correlated within
clusters): the intervals keep about 93% coverage down to 3 clusters, but the paired test's
power to see a 10-point drop is 78% with 10 clusters, 71% with 8, 39% with 5 and nil with 3
(an exact sign-flip test over G clusters cannot go below p = 2^-G).
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
    """One cluster per question, the unit chosen and its effective number of clusters."""

    ids: np.ndarray  # per question, an integer cluster
    keys: list[str | None]  # per question, its cluster's name; None: the question alone
    unit: str  # one of UNITS

    @property
    def count(self) -> int:
        return int(len(np.unique(self.ids)))

    def describe(self) -> str:
        return describe(self.unit, self.count)

    def record(self) -> dict[str, Any]:
        """What a run records of its clusters (the leaderboard's settings)."""
        return {"unit": self.unit, "count": self.count, "effective": round(effective(self.ids), 1)}


def describe(unit: str, count: int) -> str:
    """``20 sections of the documents (4000 characters each)``, ``3 documents``."""
    text = f"{count} {unit}{'' if count == 1 else 's'}"
    if unit == "section":
        text += f" of the documents ({SECTION_CHARS} characters each)"
    return text


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


def choose(
    reference_doc_ids: Sequence[Sequence[str] | None],
    gold_spans: Sequence[Sequence[dict] | None] | None = None,
) -> Clusters:
    """The coarsest unit with at least ``MIN_CLUSTERS`` effective clusters (else questions)."""
    candidates = [("document", document_keys(reference_doc_ids))]
    if gold_spans is not None:
        candidates.append(("section", section_keys(gold_spans)))
    for unit, keys in candidates:
        ids = ids_of(keys)
        if effective(ids) >= MIN_CLUSTERS:
            return Clusters(ids, keys, unit)
    keys = [None] * len(reference_doc_ids)
    return Clusters(ids_of(keys), keys, "question")


def of_testset(testset: Any) -> Clusters:
    """``choose`` on an Arrow test set (gold spans when it has the column)."""
    spans = testset["gold_spans"].to_pylist() if "gold_spans" in testset.column_names else None
    return choose(testset["reference_doc_ids"].to_pylist(), spans)


def of_keys(keys: Sequence[str | None], unit: str) -> Clusters:
    """Clusters already named (a stored run's ``cluster`` column), kept while they give
    ``MIN_CLUSTERS`` effective clusters, else each question alone."""
    ids = ids_of(keys)
    if effective(ids) >= MIN_CLUSTERS or all(k is None for k in keys):
        return Clusters(ids, list(keys), unit if any(k is not None for k in keys) else "question")
    alone = [None] * len(keys)
    return Clusters(ids_of(alone), alone, "question")


MIN_QUESTIONS = 20  # below this, a test set is too small for the tests to tell much apart


def caution(questions: int, effective_clusters: float) -> str | None:
    """One line on what the intervals and ties of a small test set can show, or None."""
    if questions >= MIN_QUESTIONS and effective_clusters >= MIN_CLUSTERS:
        return None
    few = (
        f"only {questions} question{'' if questions == 1 else 's'}"
        if questions < MIN_QUESTIONS
        else f"only {effective_clusters:.0f} effective clusters"
    )
    return (
        f"warning: {few}: the intervals are wide and a configuration can rarely be shown "
        "worse than the best, so 'tied' means 'not told apart', not 'as good'; use at least "
        f"{MIN_QUESTIONS} questions over at least {MIN_CLUSTERS} documents or sections"
    )
