"""The model-based search starts from what earlier runs of the same named sweep measured,
when they measured it on the same questions and documents; otherwise it starts cold and
the report says why. In process: the evaluate step's library calls and a SQLite store."""

import json
import zlib

import pyarrow as pa
import pyarrow.compute as pc
from builders import complete, unit_retrieval, units_testset

from ragsweep.core.schemas import TESTSET
from ragsweep.documents.testsets import question_version
from ragsweep.evaluation import surrogate
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.reporting.exports import best_spec
from ragsweep.reporting.report import render_markdown
from ragsweep.store import database
from ragsweep.store.warmstart import warm_start
from ragsweep.sweep import steps
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table

QUESTIONS = 8
METRIC = "answer_correctness"
SPACE = SearchSpace(  # 8 Top K x (similarity + 3 MMR) = 32 configurations, extractive answers
    chunk_sizes=(64,),
    top_ks=tuple(range(1, 9)),
    search_types=("similarity", "mmr"),
    mmr_lambdas=(0.25, 0.5, 0.75),
)
RUN = RunSettings(
    docs="docs",
    testset="units.jsonl",
    space=SPACE,
    optimization_metric=METRIC,
    strategy="model",
    max_configs=6,
    sweep_name="units-nightly",
)


def versioned(testset: pa.Table) -> pa.Table:
    """``testset`` as the pipeline's test set artifact holds it: every column, versioned."""
    rows = complete(testset, TESTSET).select(TESTSET.names).to_pylist()
    for row in rows:
        row["question_version"] = question_version(row)
    return pa.Table.from_pylist(rows, schema=TESTSET)


TESTSET_NOW = versioned(units_testset(QUESTIONS))
DOCUMENTS = pa.table(
    {
        "doc_id": [f"unit{i}.md" for i in range(QUESTIONS)],
        "source": [f"docs/unit{i}.md" for i in range(QUESTIONS)],
        "format": ["md"] * QUESTIONS,
        "text": [f"The code of unit {i} is zeta{i}." for i in range(QUESTIONS)],
    }
)


def retrievals() -> pa.Table:
    """Each configuration retrieves the answering passage for the first few questions (how
    many: by its id), a passage of another document for the rest."""
    rows = []
    for config in SPACE.all_configs():
        found = zlib.crc32(config["config_id"].encode()) % (QUESTIONS + 1)
        for i in range(QUESTIONS):
            doc, passage = (
                (f"unit{i}.md", f"The code of unit {i} is zeta{i}.")
                if i < found
                else ("other.md", "Nothing is said about that here.")
            )
            rows.append(unit_retrieval(config["config_id"], i, doc, passage))
    return pa.Table.from_pylist(rows)


def evaluated(testset: pa.Table, known=None, seed: int = 1):
    """The evaluate step's answers and scores for ``RUN``, and their evaluation record."""
    answers, scores = steps.evaluate(
        retrievals(), testset, SPACE.all_configs(), METRIC, strategy="model",
        max_configs=RUN.max_configs, seed=seed, known=known,
    )  # fmt: skip
    return answers, scores, json.loads(scores.schema.metadata[b"ragsweep.evaluation"])


def answered(answers: pa.Table) -> set[str]:
    return set(answers.filter(pc.is_valid(answers["answer"]))["config_id"].to_pylist())


def store_earlier_run(url: str, run_id: str = "night-1") -> set[str]:
    """A run of the sweep stored as the pipeline's publish step stores it; the
    configurations it answered."""
    answers, scores, _ = evaluated(TESTSET_NOW)
    board = build_board(
        scores, answers, TESTSET_NOW, configs_table(SPACE.all_configs()), METRIC,
        settings=RUN.record(TESTSET_NOW, DOCUMENTS),
    )  # fmt: skip
    database.publish(database.connect(url), run_id, board.leaderboard, board.results, TESTSET_NOW)
    return answered(answers)


def test_the_search_starts_from_an_earlier_run_of_the_sweep_on_the_same_data(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    before = store_earlier_run(url)
    assert len(before) == RUN.max_configs
    warm = warm_start(RUN, TESTSET_NOW, DOCUMENTS, METRIC, url)
    assert set(warm.scores) == before and warm.runs == ("night-1",) and not warm.note
    answers, scores, record = evaluated(TESTSET_NOW, warm, seed=2)
    started = record["warm_start"]
    assert (started["configurations"], started["runs"]) == (len(before), ["night-1"])
    again = set(started["answered_again"])
    assert again <= before and len(again) <= steps.RECHECKED
    now = answered(answers)
    assert len(now) == RUN.max_configs and not (now - again) & before  # the budget kept
    # six known scores: the surrogate is fitted from the first trial, no random draw
    searched = [t for t in record["trials"] if "answered again" not in t["reason"]]
    assert all(t["predicted"] is not None for t in searched)
    board = build_board(scores, answers, TESTSET_NOW, configs_table(SPACE.all_configs()), METRIC)
    # the sweep's best known score is this run's to rank: none that could win is left out
    assert started["not_answered_again"] == []
    assert board.leaderboard[METRIC][0].as_py() >= max(warm.scores.values())
    assert (
        f"Warm start: {len(before)} configurations scored by earlier runs of the sweep "
        f"(night-1); {len(again)} of them, scored by an earlier run at least as high as this "
        "run's best, answered again in this run" in render_markdown(board)
    )


def test_warm_started_configurations_that_could_win_are_answered_again_or_named():
    """Five configurations an earlier run scored 1.0: no answer of this run can beat them,
    so three (``steps.RECHECKED``) are answered again, and the two left are named in the
    summary and in ``ragsweep best``'s output, never silently left out."""
    ids = [c["config_id"] for c in SPACE.all_configs()[:5]]
    known = surrogate.WarmStart({c: 1.0 for c in ids}, ("night-0",))
    answers, scores, record = evaluated(TESTSET_NOW, known, seed=3)
    started = record["warm_start"]
    assert len(started["answered_again"]) == steps.RECHECKED
    assert (
        set(started["answered_again"])
        <= set(ids)
        <= answered(answers) | {w["config_id"] for w in started["not_answered_again"]}
    )
    left = [w["config_id"] for w in started["not_answered_again"]]
    assert len(left) == 2 and not set(left) & answered(answers)
    board = build_board(scores, answers, TESTSET_NOW, configs_table(SPACE.all_configs()), METRIC)
    summary = render_markdown(board)
    assert "Not answered again, though an earlier run of the sweep (night-0) scored them" in summary
    assert all(f"{w['label']} (1.000)" in summary for w in started["not_answered_again"])
    assert "# note: 2 configurations an earlier run of the sweep scored at least as high" in (
        best_spec(board.leaderboard)
    )


def test_a_changed_test_set_starts_cold_and_says_why(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store_earlier_run(url)
    edited = units_testset(QUESTIONS).to_pylist()
    edited[3]["reference_answers"] = ["The code of unit 3 is omega3."]
    changed = versioned(pa.Table.from_pylist(edited))
    warm = warm_start(RUN, changed, DOCUMENTS, METRIC, url)
    assert not warm.scores and not warm.runs
    assert warm.note == (
        "cold start: run night-1: its questions or their versions differ from this run's test set"
    )
    answers, scores, record = evaluated(changed, warm)
    assert record["warm_start"] == {"configurations": 0, "runs": [], "note": warm.note}
    assert record["trials"][0]["predicted"] is None  # the initial random design
    board = build_board(scores, answers, changed, configs_table(SPACE.all_configs()), METRIC)
    assert "Cold start: run night-1: its questions or their versions differ" in render_markdown(
        board
    )


def test_edited_documents_start_cold_naming_how_many_changed(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store_earlier_run(url)
    texts = DOCUMENTS["text"].to_pylist()
    texts[0] = "The code of unit 0 was retired."
    edited = DOCUMENTS.set_column(3, "text", pa.array(texts))
    warm = warm_start(RUN, TESTSET_NOW, edited, METRIC, url)
    assert not warm.scores
    assert warm.note == "cold start: run night-1: its documents differ (1 added, removed or edited)"


def test_without_a_store_a_name_or_an_earlier_run_the_search_starts_cold(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    assert warm_start(RUN, TESTSET_NOW, DOCUMENTS, METRIC, None).note == (
        "cold start: no results store given to this step (--no-store, or no results-store "
        "Secret with RAGSWEEP_STORE_URL)"
    )
    assert warm_start(RUN, TESTSET_NOW, DOCUMENTS, METRIC, url).note == (
        "cold start: no earlier run of sweep 'units-nightly' stored"
    )
    unnamed = RunSettings(**{**RUN.__dict__, "sweep_name": ""})
    assert "has no name" in warm_start(unnamed, TESTSET_NOW, DOCUMENTS, METRIC, url).note
    dead = "postgresql+psycopg://u:secret@127.0.0.1:1/db"
    note = warm_start(RUN, TESTSET_NOW, DOCUMENTS, METRIC, dead).note
    assert note.startswith("cold start: results store ") and "secret" not in note


def test_a_step_reads_the_store_a_local_run_names_without_turning_publishing_on(monkeypatch):
    monkeypatch.setenv(database.ENV, "sqlite:///cluster.db")
    assert database.reading_url() == "sqlite:///cluster.db"  # the results-store Secret's
    monkeypatch.setenv(database.ENV, "")  # a local run's steps publish nothing
    monkeypatch.setenv(database.READ_ENV, "sqlite:///local.db")
    assert database.reading_url() == "sqlite:///local.db"
