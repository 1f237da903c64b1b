"""What the intervals and tests resample, said from the cluster ids used; and what they are
about when the documents are few (``ragsweep.evaluation.clusters``)."""

import sys
from html import unescape
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from builders import SPACE, make_answers, make_scores, make_testset
from scipy.stats import binom

from ragsweep.core.schemas import SPAN, settings_of
from ragsweep.evaluation import clusters
from ragsweep.evaluation.clusters import SECTION_CHARS, choose
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.reporting.regression import compare_runs, render
from ragsweep.reporting.report import render_html, render_markdown, statistics_lines
from ragsweep.sweep.space import configs_table

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import bench_clusters  # noqa: E402  (the simulation of benchmarks/README.md, a slice of it)


def mixed(questions: int = 48, documents: int = 6):
    """A test set of ``documents`` documents where question i has: no reference document
    (i % 12 == 11), a reference but no located span (i % 12 == 10), else a gold span in
    section i % 8 of its document (so a section holds several questions)."""
    refs, spans = [], []
    for i in range(questions):
        doc = f"doc{i % documents}.pdf"
        refs.append([] if i % 12 == 11 else [doc])
        start = (i % 8) * SECTION_CHARS + 100
        located = i % 12 < 10
        spans.append([{"doc_id": doc, "start": start, "end": start + 50}] if located else [])
    return refs, spans


def words_of(ids: np.ndarray, keys: list) -> tuple[int, int]:
    """(named clusters, questions alone), counted from the ids: a cluster of one question
    whose key is None is a question alone."""
    named = {int(i) for i, k in zip(ids, keys, strict=True) if k is not None}
    return len(named), len(ids) - sum(k is not None for k in keys)


def test_the_statement_of_a_mixed_located_set_counts_the_sections_and_the_questions_alone():
    refs, spans = mixed()
    chosen = choose(refs, spans)
    assert chosen.unit == "section"
    named, alone = words_of(chosen.ids, chosen.keys)
    assert chosen.count == named + alone  # every id is a section or a question alone
    assert (named, alone) == (
        len({(r[0], s[0]["start"]) for r, s in zip(refs, spans, strict=True) if s}),
        8,
    )
    assert (
        chosen.describe() == f"{named} document sections of 4000 characters and 8 questions alone"
    )
    assert chosen.statement() == (
        f"Intervals and tests resample {named} document sections of 4000 characters and 8 "
        "questions alone (48 questions in all): they describe these 6 documents only, for "
        "questions like these."
    )
    (warning,) = chosen.cautions()
    assert warning.startswith("warning: the questions come from 6 documents, too few")
    assert "sections (and 8 questions alone) that share a document are treated as" in warning


def test_the_statement_names_only_units_it_used():
    refs, spans = mixed(documents=16)  # 16 documents: the document unit
    by_document = choose(refs, spans)
    assert by_document.unit == "document" and words_of(by_document.ids, by_document.keys) == (16, 4)
    assert by_document.describe() == "16 documents and 4 questions alone"
    assert by_document.statement().endswith("they hold for documents like these.")
    assert by_document.cautions() == []
    alone = choose(mixed()[0], None)  # 6 documents, no located span: every question alone
    assert alone.unit == "question" and alone.count == 48
    assert alone.describe() == "48 questions, each alone"
    assert "section" not in alone.statement() and "document" not in alone.describe()
    assert "questions that share a document are treated as independent" in alone.cautions()[0]
    one = choose([["manual.pdf"]], None)
    assert one.describe() == "1 question alone" and "this document only" in one.statement()
    assert [c.split(":")[0] for c in one.cautions()] == ["warning"] * 2  # 1 question, 1 document


def board_of(refs, spans, values):
    questions = [f"q{i:03d}" for i in range(len(refs))]
    testset = make_testset(questions)
    for name, column in (
        ("reference_doc_ids", pa.array(refs, pa.list_(pa.string()))),
        ("gold_spans", pa.array(spans, pa.list_(SPAN))),
    ):
        testset = testset.set_column(testset.schema.get_field_index(name), name, column)
    configs = SPACE.all_configs()[: len(values)]
    ids = [c["config_id"] for c in configs]
    return build_board(
        make_scores(ids, questions, values),
        make_answers(ids, questions),
        testset,
        configs_table(configs),
    )


def test_every_output_says_what_the_run_resampled_from_its_cluster_ids():
    refs, spans = mixed()
    rng = np.random.default_rng(3)
    board = board_of(refs, spans, (rng.random((2, 48)) < 0.7).astype(float))
    keys = board.results["cluster"].to_pylist()[:48]  # the first configuration's questions
    named, alone = words_of(clusters.ids_of(keys), keys)
    said = f"{named} document sections of 4000 characters and {alone} questions alone"
    record = settings_of(board.leaderboard)["clusters"]
    assert (record["unit"], record["alone"], record["documents"]) == ("section", alone, 6)
    assert said in record["statement"]
    lines = statistics_lines(board.leaderboard)  # the terminal and the UI's run page
    assert lines[0] == record["statement"]
    assert lines[1].startswith("warning: the questions come from 6 documents")
    assert said in unescape(render_html(board)) and said in render_markdown(board)
    run = (board.leaderboard, board.results)
    text = render(compare_runs(run, run))  # compare: the candidate's clusters, shared questions
    assert said in text and "these 6 documents only" in text
    assert "warning: the questions come from 6 documents" in text


def test_a_run_recorded_before_the_statement_is_not_given_a_unit_it_may_not_have_used():
    old = {"unit": "document", "count": 12, "effective": 11.0, "questions": 48}
    assert clusters.statement_of(old) == (
        "Intervals and tests resample 12 clusters of the 48 questions (by document; a "
        "question without one, alone)."
    )
    assert clusters.cautions_of(old) == []


# ---- few documents, by principle: a slice of benchmarks/bench_clusters.py -----------------

RUNS, ALARM_RUNS = 1000, 300


@pytest.mark.parametrize(
    ("documents", "spans", "unit"),
    [(5, False, "question"), (1, True, "section"), (10, False, "document")],
)
def test_with_correlated_documents_intervals_cover_what_the_run_says_they_cover(
    documents, spans, unit
):
    out = bench_clusters.simulate(bench_clusters.Cell(documents, 0.3, spans), RUNS, ALARM_RUNS)
    assert out.unit == unit
    assert out.coverage >= 0.93, out.coverage
    most = binom.ppf(0.99, ALARM_RUNS, 0.05) / ALARM_RUNS
    assert out.regression_alarms <= most and out.tie_alarms <= most, out
    if unit == "document":
        assert out.claims == "documents like these" and out.cautions == []
    else:  # not documents like these: the words say so, with the document count
        assert out.claims == "these documents" and out.other < 0.9, out.other
        assert f"come from {documents} document" in out.cautions[0]
