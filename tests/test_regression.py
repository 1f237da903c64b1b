"""Regression verdicts between two runs, from run folders and from the store."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from builders import SPACE, make_answers, make_board, make_scores, make_testset, one_pdf_board
from conftest import ragsweep_here

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import write_table
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.reporting.changes import lines as change_lines
from ragsweep.reporting.exports import best_spec
from ragsweep.reporting.regression import compare_runs, render, resolve_deployed, verdict_metrics
from ragsweep.store import database
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table

RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")


def baseline_values(questions=60, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((3, questions)) < 0.75).astype(float)


def runs(candidate_values, baseline=None):
    before = make_board(baseline_values() if baseline is None else baseline)
    after = make_board(candidate_values)
    return (before.leaderboard, before.results), (after.leaderboard, after.results)


def test_an_identical_rerun_is_unchanged_everywhere():
    values = baseline_values()
    result = compare_runs(*runs(values))
    assert set(result.table["verdict"].to_pylist()) == {"unchanged"}
    assert not result.best_regressed
    assert result.alarm.difference == 0.0
    assert result.flips.num_rows == 0
    assert verdict_metrics(result)["best_regressed"] == 0.0


def test_a_drop_of_the_deployed_configuration_raises_its_alarm_and_lists_flips():
    values = baseline_values()
    configs = [c["config_id"] for c in SPACE.all_configs()]
    deployed = make_board(values).leaderboard["config_id"][1].as_py()  # not the best
    row = configs.index(deployed)
    passing = np.flatnonzero(values[row] == 1)[:15]
    worse = values.copy()
    worse[row, passing] = 0.0  # 15 questions the deployed configuration answered now fail
    result = compare_runs(*runs(worse, values), deployed=deployed)
    assert result.deployed["config_id"] == deployed
    assert result.deployed["verdict"] == "regressed" and result.best_regressed
    assert result.deployed["difference"] == pytest.approx(-15 / 60)
    assert result.deployed["difference_high"] < 0
    assert result.deployed["flipped_to_wrong"] == 15
    flipped = result.flips.filter(pc.equal(result.flips["config_id"], deployed))
    assert sorted(flipped["question_id"].to_pylist()) == [f"q{i:03d}" for i in passing]
    others = [r["verdict"] for r in result.table.to_pylist() if not r["deployed"]]
    assert others == ["unchanged", "unchanged"]
    text = render(result)
    assert "REGRESSED" in text and "deployed configuration now fails (15)" in text
    assert verdict_metrics(result)["best_regressed"] == 1.0
    # the sweep's best did not move: without a deployed configuration, no alarm
    unpinned = compare_runs(*runs(worse, values))
    assert unpinned.alarm.difference == 0.0 and not unpinned.best_regressed


def test_a_drop_of_every_configuration_raises_the_best_of_sweep_alarm():
    values = baseline_values()
    worse = values.copy()
    worse[:, :20] = 0.0
    result = compare_runs(*runs(worse, values))
    assert result.alarm.hypothesis == "best of sweep"
    assert result.alarm.candidate < result.alarm.baseline and result.best_regressed
    assert "alarm, best of sweep" in render(result) and "REGRESSED" in render(result)


def test_an_improvement_is_called_improved_not_an_alarm():
    values = baseline_values()
    better = np.ones_like(values)
    result = compare_runs(*runs(better, values))
    assert set(result.table["verdict"].to_pylist()) == {"improved"}
    assert not result.best_regressed


def test_runs_without_shared_questions_are_a_clear_error():
    (bl, br), cand = runs(baseline_values())
    renamed = br.set_column(
        1, "question_id", pc.binary_join_element_wise("x", br["question_id"], "")
    )
    with pytest.raises(RagsweepError, match="share 3 configurations and 0 questions"):
        compare_runs((bl, renamed), cand)


def board(values, question_ids, space=SPACE, metric="answer_correctness"):
    """A run's (leaderboard, results) on these questions, in this order."""
    configs = space.all_configs()[: len(values)]
    ids = [c["config_id"] for c in configs]
    b = build_board(
        make_scores(ids, question_ids, values),
        make_answers(ids, question_ids),
        make_testset(question_ids),
        configs_table(configs),
        metric,
        settings=RunSettings("docs", "testset.json", space, metric).record(),
    )
    return b.leaderboard, b.results


def outcomes(space, question_ids, failing=()):
    """Each configuration's pass (1) or fail (0) per question, a function of the question
    and the configuration only (so the same in every run); ``failing`` questions fail."""
    rows = [
        [
            0.0 if q in failing else float((int(q[1:]) * 7 + c["top_k"] * 3) % 4 != 0)
            for q in question_ids
        ]
        for c in space.all_configs()
    ]
    return np.array(rows)


def with_versions(run, versions):
    """``run`` with each question's version set to ``versions(question_id)`` (None: none
    recorded, as in an older store)."""
    leaderboard, results = run
    column = pa.array([versions(q) for q in results["question_id"].to_pylist()], pa.string())
    at = results.schema.get_field_index("question_version")
    if at < 0:
        return leaderboard, results.append_column("question_version", column)
    return leaderboard, results.set_column(at, "question_version", column)


def test_reordered_questions_are_paired_by_identity_not_position():
    ids = [f"q{i:03d}" for i in range(40)]
    before = board(outcomes(SPACE, ids), ids)
    shuffled = list(np.random.default_rng(1).permutation(ids))
    after = board(outcomes(SPACE, shuffled), shuffled)
    result = compare_runs(before, after)
    assert result.table["difference"].to_pylist() == [0.0] * 4
    assert result.flips.num_rows == 0 and result.overlap.questions_added == []


def test_an_edited_question_is_reported_and_not_compared_with_its_old_self():
    ids = [f"q{i:03d}" for i in range(40)]
    values = outcomes(SPACE, ids)
    before = with_versions(board(values, ids), lambda q: "v1")
    changed = values.copy()
    changed[:, 5] = 1.0 - changed[:, 5]  # q005's outcome differs: it is a new question
    after = with_versions(board(changed, ids), lambda q: "v2" if q == "q005" else "v1")
    result = compare_runs(before, after)
    assert result.overlap.questions_edited == ["q005"]
    assert len(result.overlap.questions) == 39
    assert result.table["questions"].to_pylist() == [39] * 4
    assert result.flips.num_rows == 0
    assert "edited (same id, new version; not compared): 1 question: q005" in render(result)
    assert verdict_metrics(result)["questions_edited"] == 1.0
    # a run that records no versions (an older store) pairs by question id only
    legacy = compare_runs(with_versions(board(values, ids), lambda q: None), after)
    assert legacy.overlap.questions_edited == [] and legacy.flips.num_rows == 4


def test_the_baselines_best_missing_from_the_candidate_is_said_never_replaced():
    ids = [f"q{i:03d}" for i in range(40)]
    before = board(outcomes(SPACE, ids), ids)
    best = before[0]["config_id"][0].as_py()
    after = board(outcomes(SPACE, ids), ids)
    after = tuple(t.filter(pc.not_equal(t["config_id"], best)) for t in after)
    result = compare_runs(before, after)
    assert result.best is None and not any(result.table["is_best"].to_pylist())
    text = render(result)
    label = before[0]["label"][0].as_py()
    assert f"the baseline's best configuration, {label}, is not in the candidate run" in text
    assert "baseline best:" not in text
    assert result.alarm.hypothesis == "best of sweep" and not result.best_regressed
    assert verdict_metrics(result)["baseline_best_missing"] == 1.0
    with pytest.raises(RagsweepError, match=f"deployed configuration {best} is not in the cand"):
        compare_runs(before, after, deployed=best)


def test_the_yaml_ragsweep_best_prints_names_the_deployed_configuration(tmp_path):
    ids = [f"q{i:03d}" for i in range(20)]
    leaderboard, _ = board(outcomes(SPACE, ids), ids)
    spec = tmp_path / "best.yaml"
    spec.write_text(best_spec(leaderboard))
    assert resolve_deployed(str(spec)) == leaderboard["config_id"][0].as_py()
    assert resolve_deployed(spec.read_text()) == leaderboard["config_id"][0].as_py()
    assert resolve_deployed("abc123") == "abc123"
    with pytest.raises(RagsweepError, match="no such file"):
        resolve_deployed(str(tmp_path / "missing.yaml"))
    space = tmp_path / "space.yaml"
    space.write_text("top_ks: [1, 3]\n")
    with pytest.raises(
        RagsweepError, match=r"names \d+ configurations; the deployed one must be exactly one"
    ):
        resolve_deployed(str(space))


def write_run(folder: Path, run) -> Path:
    folder.mkdir()
    write_table(run[0], folder / "leaderboard.arrow", "leaderboard")
    write_table(run[1], folder / "results.arrow", "results")
    return folder


def test_two_runs_on_overlapping_questions_and_grids_compare_what_they_share(tmp_path):
    """Run 1: questions 1-30, Top K 3 and 5; run 2: questions 11-40, Top K 3, 5 and 10."""
    small = SearchSpace(chunk_sizes=(128,), top_ks=(3, 5), search_types=("similarity",))
    large = SearchSpace(chunk_sizes=(128,), top_ks=(3, 5, 10), search_types=("similarity",))
    first, second = [f"q{i:03d}" for i in range(1, 31)], [f"q{i:03d}" for i in range(11, 41)]
    run1 = write_run(tmp_path / "run1", board(outcomes(small, first), first, small))
    same = write_run(tmp_path / "same", board(outcomes(large, second), second, large))
    shared = second[:20]
    failing = outcomes(large, second, failing=shared)
    worse = write_run(tmp_path / "worse", board(failing, second, large))

    result = ragsweep_here("compare", str(run1), str(same))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert "compared on what both runs share: 2 configurations, 20 questions" in out
    assert "only in the baseline: 10 questions: q001, q002" in out
    assert "only in the candidate: 1 configuration: sentence-128/" in out and "k=10" in out
    assert "only in the candidate: 10 questions: q031" in out
    assert out.lower().count("unchanged") == 2 and "not regressed" in out

    result = ragsweep_here("compare", str(run1), str(worse))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "alarm, best of sweep" in result.stdout and "REGRESSED" in result.stdout


def test_a_metric_without_values_in_one_run_is_a_usage_error(tmp_path):
    ids = [f"q{i:03d}" for i in range(30)]
    leaderboard, results = board(outcomes(SPACE, ids), ids)
    at = results.schema.get_field_index("correctness")
    judged = results.set_column(at, "correctness", results["answer_correctness"])
    base = write_run(tmp_path / "judged", (leaderboard, judged))
    cand = write_run(tmp_path / "unjudged", (leaderboard, results))
    result = ragsweep_here("compare", str(base), str(cand), "--metric", "correctness")
    assert result.returncode == 2
    assert "the candidate run has no values of correctness" in result.stderr
    assert "Traceback" not in result.stderr
    assert ragsweep_here("compare", str(base), str(base), "--metric", "correctness").returncode == 0


def test_compare_command_exits_1_on_a_regression_0_otherwise_2_on_a_mistake(tmp_path):
    ids = [f"q{i:03d}" for i in range(60)]
    values = baseline_values()
    worse = values.copy()
    worse[:, :20] = 0.0
    base = write_run(tmp_path / "base", board(values, ids))
    same = write_run(tmp_path / "same", board(values, ids))
    bad = write_run(tmp_path / "bad", board(worse, ids))
    assert ragsweep_here("compare", str(base), str(same)).returncode == 0
    result = ragsweep_here("compare", str(base), str(bad))
    assert result.returncode == 1, result.stderr
    assert "REGRESSED" in result.stdout
    missing = ragsweep_here(
        "compare", str(base), "no-such-run", "--store", f"sqlite:///{tmp_path}/r.db"
    )
    assert missing.returncode == 2 and "no run 'no-such-run'" in missing.stderr
    unknown = ragsweep_here("compare", str(base), str(same), "--deployed", "0123456789ab")
    assert unknown.returncode == 2 and "deployed configuration 0123456789ab" in unknown.stderr
    spec = tmp_path / "best.yaml"
    spec.write_text(ragsweep_here("best", str(base)).stdout)
    pinned = ragsweep_here("compare", str(base), str(bad), "--deployed", str(spec))
    assert pinned.returncode == 1 and "alarm, deployed configuration" in pinned.stdout


def test_compare_reads_stored_runs_by_id(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    engine = database.connect(url)
    values = baseline_values()
    for run_id, night in [("a", values), ("b", values), ("c", np.zeros_like(values))]:
        b = make_board(night)
        questions = make_testset(b.results["question_id"].unique().to_pylist())
        database.publish(engine, run_id, b.leaderboard, b.results, questions)
    result = ragsweep_here("compare", "a", "b", "--store", url, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("| verdict |")
    assert ragsweep_here("compare", "a", "c", "--store", url).returncode == 1


def test_matrix_leaves_out_rows_of_unlisted_configurations_and_questions():
    from ragsweep.evaluation.leaderboard import matrix

    ids = [f"q{i:03d}" for i in range(10)]
    _, results = board(outcomes(SPACE, ids), ids)
    config = results["config_id"][0].as_py()
    got = matrix(results, "answer_correctness", [config, "absent"], ["q003", "q001", "q999"])
    expected = outcomes(SPACE, ids)[[c["config_id"] for c in SPACE.all_configs()].index(config)]
    assert got[0, :2].tolist() == [expected[3], expected[1]]
    assert np.isnan(got[0, 2]) and np.isnan(got[1]).all()


# ---- what changed since the baseline ---------------------------------------------------------


def documents(texts):
    from ragsweep.core.schemas import DOCUMENTS

    rows = [{"doc_id": k, "source": k, "format": "md", "text": v} for k, v in texts.items()]
    return pa.Table.from_pylist(rows, schema=DOCUMENTS)


def recorded(run, settings):
    """``run`` with these settings in its leaderboard's metadata, as the rank step records."""
    from ragsweep.core.schemas import SETTINGS_KEY

    leaderboard, results = run
    return leaderboard.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings)}), results


def test_the_comparison_says_which_documents_were_added_removed_and_edited_and_what_else_changed():
    ids = [f"q{i:03d}" for i in range(30)]
    small = SearchSpace(chunk_sizes=(64, 128), top_ks=(1,), search_types=("similarity",))
    large = SearchSpace(chunk_sizes=(64, 128), top_ks=(1, 3), search_types=("similarity",))
    before_docs = {f"doc{i}.md": f"Text {i}." for i in range(10)}
    after_docs = {**before_docs, "doc3.md": "Text 3, edited."}
    del after_docs["doc9.md"]
    after_docs.update({f"new/n{i}.md": f"New {i}." for i in range(12)})
    questions = make_testset(ids)
    edited = pa.Table.from_pylist(
        [{**r, "question_version": "q001-v2"} if r["question_id"] == "q001" else r
         for r in questions.to_pylist()],
        schema=questions.schema,
    )  # fmt: skip

    def night(space, testset, texts):
        settings = RunSettings("docs", "t.json", space, "answer_correctness", sweep_name="kb")
        return recorded(board(outcomes(space, ids), ids, space), settings.record(testset, texts))

    base = night(small, questions, documents(before_docs))
    cand = night(large, edited, documents(after_docs))

    result = compare_runs(base, cand)

    assert result.changes.documents_added == sorted(f"new/n{i}.md" for i in range(12))
    assert result.changes.documents_removed == ["doc9.md"]
    assert result.changes.documents_edited == ["doc3.md"]
    out = render(result)
    assert "documents: 10 -> 21 (12 added, 1 removed, 1 edited)" in out
    assert "documents added (12): new/n0.md, new/n1.md, new/n10.md" in out and "... 2 more" in out
    assert "documents removed (1): doc9.md" in out and "documents edited (1): doc3.md" in out
    assert "test set: changed" in out
    assert "grid: top_ks: [1] -> [1, 3]" in out
    assert "only in the candidate: 2 configurations" in out  # the grid's new Top K
    metrics = verdict_metrics(result)
    assert (metrics["documents_added"], metrics["documents_removed"]) == (12.0, 1.0)
    assert (metrics["documents_edited"], metrics["testset_changed"]) == (1.0, 1.0)
    assert metrics["grid_changed"] == 1.0
    # the same documents, test set and grid: nothing changed, and it says so
    same = compare_runs(base, base)
    assert change_lines(same.changes) == ["documents: unchanged (10)"]
    assert verdict_metrics(same)["documents_added"] == 0.0


def test_the_comparison_lists_an_embedding_runtime_or_model_identity_change():
    """The nightly after the default moved from PyTorch to ONNX: same sweep, same questions,
    another runtime; then the same runtime with the model's files changed."""
    ids = [f"q{i:03d}" for i in range(30)]
    model = SPACE.embedding_models[0]
    settings = RunSettings("docs", "t.json", SPACE, "answer_correctness", sweep_name="kb")

    def night(runtime, identity):
        fixed = replace(
            settings, embedding_runtimes={model: runtime}, embedding_identities={model: identity}
        )
        return recorded(board(outcomes(SPACE, ids), ids), fixed.record())

    torch_night, onnx_night = night("torch", "torch:aaaa"), night("onnx", "onnx:aaaa")
    retrained = night("onnx", "onnx:bbbb")

    result = compare_runs(torch_night, onnx_night)
    assert result.changes.models == [f"{model}: runtime torch -> onnx"]
    assert f"embedding model {model}: runtime torch -> onnx" in render(result)
    assert verdict_metrics(result)["embedding_models_changed"] == 1.0
    files = change_lines(compare_runs(onnx_night, retrained).changes)
    assert f"embedding model {model}: identity onnx:aaaa -> onnx:bbbb" in files[-1]
    # a baseline made before runs recorded their runtimes: it says so
    before = recorded(board(outcomes(SPACE, ids), ids), settings.record())
    assert compare_runs(before, onnx_night).changes.models == [
        f"{model}: runtime not recorded -> onnx"
    ]
    assert compare_runs(onnx_night, onnx_night).changes.models == []


def test_runs_recorded_before_document_hashes_compare_and_say_the_documents_cannot_be_told():
    ids = [f"q{i:03d}" for i in range(30)]
    result = compare_runs(board(outcomes(SPACE, ids), ids), board(outcomes(SPACE, ids), ids))
    assert change_lines(result.changes) == [
        "documents: not compared (a run made before ragsweep kept each document's hash)"
    ]
    metrics = verdict_metrics(result)
    assert "documents_added" not in metrics and metrics["grid_changed"] == 0.0


def test_the_document_hashes_follow_each_documents_text_not_its_place_in_the_table():
    from ragsweep.sweep.settings import document_hashes

    texts = {"b.md": "Beta.", "a.md": "Alpha."}
    hashes = document_hashes(documents(texts))
    assert [d for d, _ in hashes] == ["a.md", "b.md"]
    assert hashes == document_hashes(documents(dict(reversed(texts.items()))))
    assert document_hashes(documents({**texts, "a.md": "Alpha!"}))[0][1] != hashes[0][1]


def test_the_documents_are_hashed_in_batches_as_their_texts_utf8_always_was():
    """Read a batch at a time as Arrow's bytes, the hashes and the fingerprint are those of
    each text's UTF-8 (what an earlier run recorded): its sweep key stays the same."""
    import hashlib

    from ragsweep.sweep.settings import (
        DOCUMENT_HASH_CHARS,
        HASH_BATCH,
        document_hashes,
        documents_fingerprint,
    )

    texts = {f"d{i:05d}.md": f"Größe {i} — naïve café ✓ {'x' * (i % 7)}" for i in range(2500)}
    assert len(texts) > 2 * HASH_BATCH
    table = documents(texts)
    digests = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in texts.items()}
    assert document_hashes(table) == sorted(
        [k, d[:DOCUMENT_HASH_CHARS]] for k, d in digests.items()
    )
    joined = "\n".join(sorted(digests.values())).encode()
    assert documents_fingerprint(table) == hashlib.sha256(joined).hexdigest()


# ---- one document, missing verdicts -----------------------------------------------------------


def one_pdf_nights(drop_points):
    """Two nights of 4 configurations on one PDF, 48 questions over 12 sections: the
    second night loses ``drop_points`` of the best configuration's correct answers."""
    rng = np.random.default_rng(8)
    before = (rng.random((4, 48)) < [[0.9], [0.8], [0.7], [0.6]]).astype(float)
    after = before.copy()
    passing = np.flatnonzero(before[0] == 1)
    lost = rng.choice(passing, round(drop_points / 100 * 48), replace=False)
    after[:, lost] = 0.0  # every configuration now fails them (a broken document, say)
    nights = [one_pdf_board(v) for v in (before, after)]
    return [(b.leaderboard, b.results) for b in nights]


def test_one_pdf_a_30_point_drop_raises_the_alarm_and_an_unchanged_night_does_not():
    baseline, candidate = one_pdf_nights(30)
    result = compare_runs(baseline, candidate)
    assert result.alarm.difference == pytest.approx(-0.3, abs=0.02)
    assert result.best_regressed and result.alarm_can_fire
    assert result.clusters.unit == "section" and result.clusters.count == 12
    text = render(result)
    assert "resample 12 document sections of 4000 characters (48 questions in all)" in text
    assert "REGRESSED" in text
    unchanged = compare_runs(baseline, one_pdf_nights(0)[1])
    assert not unchanged.best_regressed and unchanged.alarm.difference == 0.0


def test_with_too_few_clusters_the_alarm_says_it_cannot_fire_instead_of_a_p_value():
    values = np.ones((2, 4))
    before, after = make_board(values), make_board(np.zeros((2, 4)))
    result = compare_runs((before.leaderboard, before.results), (after.leaderboard, after.results))
    assert not result.alarm_can_fire and not result.best_regressed
    assert result.clusters.unit == "question" and result.clusters.count == 4
    text = render(result)
    assert "with 4 clusters (4 questions, each alone) this alarm cannot fire at 5%" in text
    assert "p = " not in text
    assert "warning: only 4 questions" in text
    assert verdict_metrics(result)["alarm_can_fire"] == 0.0


def test_a_question_without_a_verdict_on_one_night_is_left_out_of_that_configurations_pair():
    values = baseline_values()
    (bl, br), (cl, cr) = runs(values, values)
    unread = pc.equal(cr["question_id"], "q000")  # the judge failed on q000 in the candidate
    cr = cr.set_column(
        cr.schema.get_field_index("answer_correctness"),
        "answer_correctness",
        pc.if_else(unread, pa.scalar(None, pa.float64()), cr["answer_correctness"]),
    )
    result = compare_runs((bl, br), (cl, cr))
    assert set(result.table["questions"].to_pylist()) == {59}
    assert result.table["baseline"].to_pylist() == result.table["candidate"].to_pylist()
    assert set(result.table["verdict"].to_pylist()) == {"unchanged"}
