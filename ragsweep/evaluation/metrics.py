"""Metrics, each declared by a ``Metric``: its kind, direction and range, and the function
that scores one answered question.

Metrics are plugins, registered under their names in the entry point group
``ragsweep.metrics`` (the built-ins in ragsweep's setup.cfg): ``retrieval`` metrics read only
what was retrieved, ``answer`` metrics need an answer, ``recorded`` ones are measured by a
step rather than scored here (the store's ``recall_vs_exact``, the judge's ``correctness``).
The built-ins are in [0, 1], higher is better, or None where they do not apply: retrieval
metrics are None for a question with no reference document (span metrics: with no gold
span) and for an out-of-scope question, whose seed document is no reference. An
out-of-scope question's ``answer_correctness`` is whether the answer refuses (``refuses``).

Retrieval metrics read the question's references and what was retrieved (documents and
spans); answer metrics read the references, the answer and the context. A metric's
``column`` computes it on whole columns at once (``Ranked``), with the same values.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ragsweep.core import plugins
from ragsweep.core.errors import RagsweepError
from ragsweep.core.text import words
from ragsweep.evaluation.refusal import refuses

OUT_OF_SCOPE = "out of scope"  # Giskard's question_type for a question the documents cannot answer

Span = tuple[str, int, int]  # (doc_id, start, end): characters [start, end) of a document


def is_out_of_scope(question_type: str | None) -> bool:
    """Whether ``question_type`` is Giskard's "out of scope" (any case, ``_`` or ``-``)."""
    kind = (question_type or "").strip().lower().replace("_", " ").replace("-", " ")
    return " ".join(kind.split()) == OUT_OF_SCOPE


@dataclass(frozen=True)
class Answered:
    """What the metrics see of one question answered by one configuration."""

    reference_answers: list[str]
    reference_doc_ids: list[str]
    retrieved_doc_ids: list[str]  # one per retrieved chunk, best first
    context: str
    answer: str
    gold_spans: list[Span] = field(default_factory=list)
    retrieved_spans: list[Span] = field(default_factory=list)  # one per retrieved chunk
    question_type: str | None = None
    # the context's tokens with their counts, when the caller has them (summed from its
    # passages'); None: read from ``context``
    context_words: Counter | None = field(default=None, compare=False)

    @property
    def out_of_scope(self) -> bool:
        return is_out_of_scope(self.question_type)


def context_correctness(item: Answered) -> float | None:
    """Reciprocal rank of the first retrieved chunk from a reference document (0 if none)."""
    if item.out_of_scope or not item.reference_doc_ids:
        return None
    wanted = set(item.reference_doc_ids)
    for rank, doc_id in enumerate(item.retrieved_doc_ids, start=1):
        if doc_id in wanted:
            return 1.0 / rank
    return 0.0


def document_recall(item: Answered) -> float | None:
    """Share of the reference documents among the retrieved chunks' documents."""
    if item.out_of_scope or not item.reference_doc_ids:
        return None
    wanted = set(item.reference_doc_ids)
    return len(wanted & set(item.retrieved_doc_ids)) / len(wanted)


def merged(spans: Iterable[Span]) -> dict[str, list[tuple[int, int]]]:
    """Each document's character intervals, sorted, with overlapping or touching ones merged."""
    by_doc: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for doc_id, start, end in sorted(spans):
        if end <= start:
            continue
        runs = by_doc[doc_id]
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((start, end))
    return dict(by_doc)


def _length(intervals: dict[str, list[tuple[int, int]]]) -> int:
    return sum(end - start for runs in intervals.values() for start, end in runs)


def _overlap(a: dict[str, list[tuple[int, int]]], b: dict[str, list[tuple[int, int]]]) -> int:
    """Characters in both merged interval sets: one linear sweep per shared document."""
    total = 0
    for doc_id in a.keys() & b.keys():
        x, y, i, j = a[doc_id], b[doc_id], 0, 0
        while i < len(x) and j < len(y):
            total += max(0, min(x[i][1], y[j][1]) - max(x[i][0], y[j][0]))
            if x[i][1] < y[j][1]:
                i += 1
            else:
                j += 1
    return total


def _span_shares(item: Answered) -> tuple[float, float] | None:
    """(recall, precision) of the retrieved characters against the gold spans."""
    if item.out_of_scope or not item.gold_spans:
        return None
    gold, retrieved = merged(item.gold_spans), merged(item.retrieved_spans)
    gold_chars, retrieved_chars = _length(gold), _length(retrieved)
    if not gold_chars:
        return None
    shared = _overlap(gold, retrieved)
    return shared / gold_chars, shared / retrieved_chars if retrieved_chars else 0.0


def span_recall(item: Answered) -> float | None:
    """Share of the gold spans' characters that lie in a retrieved chunk."""
    shares = _span_shares(item)
    return None if shares is None else shares[0]


def span_precision(item: Answered) -> float | None:
    """Share of the retrieved characters (each counted once where chunks overlap) that lie
    inside a gold span."""
    shares = _span_shares(item)
    return None if shares is None else shares[1]


@lru_cache(maxsize=4096)
def _bag(text: str) -> Counter:
    """``text``'s tokens with their counts; configurations that share a context or an
    answer tokenize it once. Read only."""
    return Counter(words(text))


def token_recall(reference: str, candidate: str | Counter) -> float:
    """Share of the reference's content tokens (with multiplicity) found in the candidate
    (a text, or its tokens with their counts)."""
    ref = _bag(reference)
    if not ref:
        return 0.0
    found = candidate if isinstance(candidate, Counter) else _bag(candidate)
    return sum((ref & found).values()) / sum(ref.values())


def answer_correctness(item: Answered) -> float:
    """Token recall of the answer against the best-matching reference answer; for an
    out-of-scope question, 1 when the answer refuses and 0 otherwise."""
    if item.out_of_scope:
        return float(refuses(item.answer))
    return max((token_recall(ref, item.answer) for ref in item.reference_answers), default=0.0)


def faithfulness(item: Answered) -> float:
    """Token precision of the answer against the retrieved context: how much of what it
    says comes from what was retrieved."""
    if not _bag(item.answer):
        return 0.0
    context = item.context if item.context_words is None else item.context_words
    return token_recall(item.answer, context)


@dataclass(frozen=True)
class Ranked:
    """What document-level retrieval metrics read of many rows at once, as arrays: per
    retrieved chunk (all rows' chunks, row after row) its ``row``, its ``rank`` in the row
    (1: best), its ``document`` (an integer id) and whether that is one of the row's
    reference documents (``relevant``); per row the number of distinct reference documents
    (``wanted``) and whether retrieval metrics apply (``applies``: some reference document,
    not out of scope)."""

    row: np.ndarray
    rank: np.ndarray
    document: np.ndarray
    relevant: np.ndarray
    wanted: np.ndarray
    applies: np.ndarray


def context_correctness_column(ranked: Ranked) -> np.ndarray:
    """``context_correctness`` of every row (NaN where it does not apply)."""
    first = np.full(len(ranked.wanted), np.inf)
    hit = ranked.relevant
    np.minimum.at(first, ranked.row[hit], ranked.rank[hit].astype(float))
    scores = np.where(np.isfinite(first), 1.0 / first, 0.0)
    return np.where(ranked.applies, scores, np.nan)


def document_recall_column(ranked: Ranked) -> np.ndarray:
    """``document_recall`` of every row (NaN where it does not apply)."""
    hit = ranked.relevant
    span = int(ranked.document.max(initial=0)) + 1
    pairs = np.unique(ranked.row[hit].astype(np.int64) * span + ranked.document[hit])
    found = np.bincount(pairs // span, minlength=len(ranked.wanted)).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ranked.applies, found / ranked.wanted, np.nan)


Score = Callable[[Answered], "float | None"]
KINDS = ("retrieval", "answer", "recorded")


@dataclass(frozen=True)
class Metric:
    """What a metric plugin declares. ``kind``: ``retrieval``, ``answer`` or ``recorded``
    (a step records it; no ``score``). ``higher_is_better``: its direction, which the
    leaderboard, successive halving and regression verdicts follow. ``low`` / ``high``: its
    range (None: unbounded on that side). ``column``: the same scores on whole columns.
    ``judged``: the judge gives it, and a verdict it could not give is missing (the
    leaderboard then ranks on the questions every configuration has one for).
    ``needs_model_answers``: it tells configurations apart only when a model writes some
    answers (faithfulness: an extractive answer copies its context, so it is 1 for all)."""

    kind: str
    score: Score | None = None
    higher_is_better: bool = True
    low: float | None = 0.0
    high: float | None = 1.0
    column: Callable[[Ranked], np.ndarray] | None = None
    judged: bool = False
    needs_model_answers: bool = False

    def sign(self) -> float:
        """1 for higher is better, -1 for lower: a score times its sign is higher-is-better."""
        return 1.0 if self.higher_is_better else -1.0


def registered_metrics() -> dict[str, Metric]:
    """Every registered metric by name, loaded (once: ``plugins.load``) and checked."""
    out = {}
    for name in plugins.names(plugins.METRICS):
        metric = plugins.load(plugins.METRICS, name)
        problem = (
            "is not a ragsweep.evaluation.metrics.Metric"
            if not isinstance(metric, Metric)
            else f"has kind {metric.kind!r}, not one of {list(KINDS)}"
            if metric.kind not in KINDS
            else "is scored here but has no score function"
            if metric.kind != "recorded" and metric.score is None
            else None
        )
        if problem:
            raise RagsweepError(
                f"metric {name!r} ({plugins.registered(plugins.METRICS)[name].value}) {problem}"
            )
        out[name] = metric
    return out


def metric(name: str) -> Metric:
    """The declaration of metric ``name``."""
    found = registered_metrics()
    if name not in found:
        raise RagsweepError(f"unknown metric {name!r}; choose from {sorted(found)}")
    return found[name]


def scored(kind: str) -> dict[str, Score]:
    """The score functions of the registered metrics of ``kind`` (retrieval or answer)."""
    return {n: m.score for n, m in registered_metrics().items() if m.kind == kind and m.score}


def column_metrics() -> dict[str, Callable[[Ranked], np.ndarray]]:
    """The retrieval metrics computed on whole columns at once, where they can be: equal,
    row by row, to their ``score``."""
    return {n: m.column for n, m in registered_metrics().items() if m.column is not None}


CONTEXT_CORRECTNESS = Metric("retrieval", context_correctness, column=context_correctness_column)
DOCUMENT_RECALL = Metric("retrieval", document_recall, column=document_recall_column)
SPAN_RECALL = Metric("retrieval", span_recall)
SPAN_PRECISION = Metric("retrieval", span_precision)
ANSWER_CORRECTNESS = Metric("answer", answer_correctness)
FAITHFULNESS = Metric("answer", faithfulness, needs_model_answers=True)
# the share of exact search's top k the store found, recorded by the retrieve step
RECALL_VS_EXACT = Metric("recorded")
# the LLM judge's verdict, 1 or 0, recorded by the judge
CORRECTNESS = Metric("recorded", judged=True)
# Red Hat AutoRAG's: the judge's 1-5 rating of the answer's relevance to the question, scaled
# to [0, 1]; and each question's mean of faithfulness, answer_correctness,
# context_correctness and answer_relevance (those it has). Scored when a run ranks by one
ANSWER_RELEVANCE = Metric("recorded", judged=True)
OVERALL_SCORE = Metric("recorded")
