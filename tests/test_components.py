"""Each component called as a plain Python function, as the pipeline's steps would run it."""

from html import escape
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from builders import configured, make_board, make_testset
from kfp import dsl

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.compare import compare
from ragsweep.components.evaluate import evaluate
from ragsweep.components.ingest import ingest
from ragsweep.components.load_testset import load_testset
from ragsweep.components.merge_shards import merge_shards
from ragsweep.components.plan import plan
from ragsweep.components.plan_shards import plan_shards
from ragsweep.components.publish import publish
from ragsweep.components.rank import rank
from ragsweep.components.retrieve import retrieve
from ragsweep.core.schemas import read_table, settings_of, write_table
from ragsweep.reporting.regression import alarm_line, compare_runs
from ragsweep.reporting.report import COMPARISON_SLOT
from ragsweep.store import database
from ragsweep.sweep.fanout import NO_SHARD, read_chunk_set
from ragsweep.sweep.settings import read_settings
from ragsweep.sweep.space import SearchSpace


def artifact(tmp_path, name):
    return dsl.Dataset(uri=str(tmp_path / name))


def unread(tmp_path):
    """A documents artifact ``plan`` reads only to size them against a memory limit."""
    return artifact(tmp_path, "unread-documents")


@pytest.fixture
def small_kb(tmp_path):
    docs = tmp_path / "docs"
    (docs / "admin").mkdir(parents=True)
    (docs / "admin" / "ports.md").write_text(
        "# Ports\n\nTidewater listens on port 8443 by default. The admin console uses port 9000.\n"
    )
    (docs / "plans.txt").write_text(
        "The Basic plan keeps backups for 30 days. The Pro plan keeps backups for 90 days.\n"
    )
    testset = tmp_path / "testset.json"
    testset.write_text(
        '[{"question": "Which port does the admin console use?",'
        ' "correct_answers": ["Port 9000."], "correct_answer_document_ids": ["ports.md"]},'
        ' {"question": "How long does Pro keep backups?",'
        ' "correct_answers": ["90 days"], "correct_answer_document_ids": ["plans.txt"]}]'
    )
    return docs, testset


def test_steps_chain_from_settings_to_a_ranked_leaderboard(tmp_path, small_kb):
    docs, testset = small_kb
    space = SearchSpace(chunk_sizes=(16,), chunk_overlaps=(4,), top_ks=(1, 2))
    settings = configured(
        tmp_path / "settings",
        **space.to_parameters(),
        input_data_key=str(docs),
        test_data_key=str(testset),
        optimization_metric="context_correctness",
        optimization_max_rag_patterns=4,
        seed=1,
        embedding_cache=str(tmp_path / "cache"),
        sweep_name="kb-nightly",
    )
    assert read_table(settings.path, "settings").num_rows == 4  # every configuration
    assert read_settings(settings.path).space == space

    loaded = artifact(tmp_path, "loaded")
    load_testset.python_func(settings=settings, testset=loaded)
    as_given = read_table(loaded.path, "testset").column("reference_doc_ids").to_pylist()
    assert as_given == [["ports.md"], ["plans.txt"]]

    documents, questions = artifact(tmp_path, "documents"), artifact(tmp_path, "questions")
    ingest.python_func(settings=settings, testset=loaded, documents=documents, questions=questions)
    assert read_table(documents.path, "documents").num_rows == 2
    resolved = read_table(questions.path, "testset").column("reference_doc_ids").to_pylist()
    assert resolved == [["admin/ports.md"], ["plans.txt"]]

    [group] = plan.python_func(
        settings=settings, questions=questions, documents=documents, groups=1
    )
    [chunk_config] = group["chunk_configs"]
    assert plan_shards.python_func(settings=settings, documents=documents) == [NO_SHARD]
    sharded = artifact(tmp_path, "sharded")
    merge_shards.python_func(shards=[], embeddings=sharded)
    chunks = artifact(tmp_path, "chunks")
    chunk_embed.python_func(settings, documents, group, sharded, questions, chunks)
    assert read_chunk_set(chunks.path, chunk_config["chunk_config_id"]).num_rows >= 3

    retrievals = artifact(tmp_path, "retrievals")
    retrieve.python_func(settings, chunks, questions, group, retrievals)
    assert read_table(retrievals.path, "retrievals").num_rows == 4 * 2  # 4 configs x 2 questions

    answers, scores = artifact(tmp_path, "answers"), artifact(tmp_path, "scores")
    evaluate.python_func(
        settings=settings,
        retrievals=[retrievals],
        questions=questions,
        documents=documents,
        answers=answers,
        scores=scores,
    )
    assert read_table(answers.path, "answers").num_rows == 4 * 2
    assert read_table(scores.path, "scores").num_rows == 4 * 2

    outputs = rank_outputs(tmp_path)
    rank.python_func(
        settings=settings,
        scores=scores,
        answers=answers,
        questions=questions,
        documents=documents,
        **outputs,
    )
    board = read_table(outputs["leaderboard"].path, "leaderboard")
    assert board.column("rank").to_pylist() == [1, 2, 3, 4]
    top = board.column("context_correctness").to_pylist()
    assert top == sorted(top, reverse=True)
    assert top[0] == 1.0
    assert settings_of(board)["docs"] == str(docs)
    # the sweep key is the one the same settings give before the run (a local run's marker)
    run = read_settings(settings.path)
    testset_table = read_table(questions.path, "testset")
    expected = run.record(testset_table, read_table(documents.path, "documents"))
    assert settings_of(board)["sweep_key"] == expected["sweep_key"]
    # what a later run's baseline=latest follows, and what its comparison tells apart
    assert settings_of(board)["sweep_name"] == "kb-nightly"
    hashes = settings_of(board)["document_hashes"]
    assert [doc_id for doc_id, _ in hashes] == read_table(documents.path, "documents")[
        "doc_id"
    ].to_pylist()
    assert all(len(h) == 16 for _, h in hashes)
    assert read_table(outputs["results"].path, "results").num_rows == 4 * 2
    assert '<table id="leaderboard">' in Path(outputs["report"].path).read_text()
    assert "context_correctness" in Path(outputs["summary"].path).read_text()
    assert outputs["best"].metadata["context_correctness"] == 1.0
    # the three best as runnable patterns, named by rank and configuration
    ids = board.column("config_id").to_pylist()
    named = [f"{rank}-{config_id}" for rank, config_id in enumerate(ids[:3], start=1)]
    assert outputs["rag_patterns"].metadata["patterns"] == named
    assert sorted(p.name for p in Path(outputs["rag_patterns"].path).iterdir()) == named


def rank_outputs(tmp_path):
    datasets = {
        n: artifact(tmp_path, n) for n in ("leaderboard", "results", "breakdown", "failures")
    }
    return {
        **datasets,
        "report": dsl.HTML(uri=str(tmp_path / "report.html")),
        "summary": dsl.Markdown(uri=str(tmp_path / "summary.md")),
        "best": dsl.Metrics(uri=str(tmp_path / "metrics")),
        "rag_patterns": dsl.Artifact(uri=str(tmp_path / "rag_patterns")),
    }


def test_configure_step_exits_with_a_message_on_a_bad_search_space(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        configured(tmp_path / "settings", input_data_key="docs", search_space={"top_ks": [0]})
    assert exit_info.value.code == 2
    assert "field 'top_ks': 0 is not positive" in capsys.readouterr().err


def test_plan_step_refuses_a_budget_too_small_for_the_test_set(tmp_path, capsys):
    questions = artifact(tmp_path, "questions")
    write_table(make_testset([f"q{i}" for i in range(40)]), questions.path, "testset")
    space = SearchSpace(
        chunk_sizes=(64, 128), top_ks=(1, 3), search_types=("similarity",), answerers=("llm:m",)
    )
    settings = configured(
        tmp_path / "big", **space.to_parameters(), input_data_key="docs", max_llm_calls=50
    )
    with pytest.raises(SystemExit) as exit_info:
        plan.python_func(settings=settings, questions=questions, documents=unread(tmp_path))
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "max_llm_calls=50 is too few for 4 configurations x 40 questions" in message
    assert "the full grid needs 160 LLM calls" in message
    # the same budget fits when the space is small enough
    small = SearchSpace(
        chunk_sizes=(64,), top_ks=(1,), search_types=("similarity",), answerers=("llm:m",)
    )
    settings = configured(
        tmp_path / "small", **small.to_parameters(), input_data_key="docs", max_llm_calls=50
    )
    assert plan.python_func(settings=settings, questions=questions, documents=unread(tmp_path))


def test_plan_step_counts_the_relevance_ratings_of_an_autorag_metric(tmp_path, capsys):
    questions = artifact(tmp_path, "questions")
    write_table(make_testset([f"q{i}" for i in range(10)]), questions.path, "testset")
    space = SearchSpace(chunk_sizes=(64,), top_ks=(1,), search_types=("similarity",))
    judged = {"input_data_key": "docs", "llm": {"judge": "j"}, "max_llm_calls": 15}
    settings = configured(tmp_path / "verdicts", **space.to_parameters(), **judged)
    assert plan.python_func(
        settings=settings, questions=questions, documents=unread(tmp_path)
    )  # 10 verdicts fit
    rated = configured(
        tmp_path / "rated", **space.to_parameters(), **judged, optimization_metric="overall_score"
    )
    with pytest.raises(SystemExit):  # and 10 ratings beside them do not
        plan.python_func(settings=rated, questions=questions, documents=unread(tmp_path))
    assert "max_llm_calls=15 is too few" in capsys.readouterr().err


def test_configure_step_refuses_a_grid_larger_than_the_budget(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:  # 18 configs
        configured(tmp_path / "s", input_data_key="docs", optimization_max_rag_patterns=17)
    assert exit_info.value.code == 2
    assert "holds 18 configurations, more than the budget of 17" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["night ly", "-nightly", "n" * 101, "a/b"])
def test_configure_step_refuses_a_sweep_name_that_cannot_name_a_sweep(tmp_path, capsys, name):
    with pytest.raises(SystemExit) as exit_info:
        configured(tmp_path / "s", input_data_key="docs", sweep_name=name)
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        f"sweep_name (--sweep-name) {name!r}: a sweep name is 1 to 100 letters, digits" in message
    )


def test_configure_step_refuses_a_stored_test_set_in_a_bucket(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        configured(
            tmp_path / "s",
            input_data_key="docs",
            test_data_key="store:faq",
            test_data_bucket_name="eval",
        )
    assert exit_info.value.code == 2
    assert "leave test_data_bucket_name empty (it is 'eval')" in capsys.readouterr().err


def test_test_data_in_a_bucket_is_read_from_s3(tmp_path, s3, bucket):
    s3.put_object(
        Bucket=bucket,
        Key="eval/testset.json",
        Body=b'[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": []}]',
    )
    loaded = artifact(tmp_path, "loaded")
    settings = configured(
        tmp_path / "settings",
        input_data_key="docs",
        test_data_bucket_name=bucket,
        test_data_key="eval/testset.json",
    )
    load_testset.python_func(settings=settings, testset=loaded)
    assert read_table(loaded.path, "testset").column("question").to_pylist() == ["Q?"]


def test_ingest_step_exits_with_a_message_on_an_unknown_document_id(tmp_path, small_kb):
    docs, _ = small_kb
    bad = tmp_path / "bad.json"
    bad.write_text(
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": ["nope.md"]}]'
    )
    loaded = artifact(tmp_path, "loaded")
    settings = configured(tmp_path / "s", input_data_key=str(docs), test_data_key=str(bad))
    load_testset.python_func(settings=settings, testset=loaded)
    with pytest.raises(SystemExit):
        ingest.python_func(
            settings=settings,
            testset=loaded,
            documents=artifact(tmp_path, "d"),
            questions=artifact(tmp_path, "q"),
        )


def test_evaluate_step_reads_every_branch(tmp_path):
    space = SearchSpace(chunk_sizes=(64, 128), top_ks=(1,), search_types=("similarity",))
    configs = space.all_configs()
    questions = artifact(tmp_path, "questions")
    write_table(make_testset(["q1"]), questions.path, "testset")
    branches = []
    for i, config in enumerate(configs):  # the second retrieves the reference document
        table = pa.table(
            {
                "config_id": [config["config_id"]],
                "question_id": ["q1"],
                "retrieved_chunk_ids": [[0]],
                "retrieved_doc_ids": [[f"doc{1 - i}.md"]],
                "passages": [["the answer to q1"]],
                "retrieved_spans": [[{"doc_id": f"doc{1 - i}.md", "start": 0, "end": 16}]],
                "retrieved_scores": [[0.75]],
                "recall_vs_exact": [1.0],
                "query_latency_ms": [0.05],
                "index_build_s": [0.0],
                "rerank_latency_ms": pa.nulls(1, pa.float64()),
                "searched_query": pa.nulls(1, pa.string()),
                "query_llm_calls": [0],
            }
        )
        branches.append(artifact(tmp_path, f"r{i}"))
        write_table(table, branches[-1].path, "retrievals")
    documents = artifact(tmp_path, "documents")
    texts = [f"the answer to q1 in doc{i}" for i in range(2)]
    write_table(
        pa.table(
            {
                "doc_id": ["doc0.md", "doc1.md"],
                "source": ["docs/doc0.md", "docs/doc1.md"],
                "format": ["md", "md"],
                "text": texts,
            }
        ),
        documents.path,
        "documents",
    )
    answers, scores = artifact(tmp_path, "answers"), artifact(tmp_path, "scores")
    evaluate.python_func(
        settings=configured(tmp_path / "s", **space.to_parameters(), input_data_key="docs"),
        retrievals=branches,
        questions=questions,
        documents=documents,
        answers=answers,
        scores=scores,
    )
    scored = read_table(scores.path, "scores")
    by_config = dict(
        zip(scored["config_id"].to_pylist(), scored["context_correctness"].to_pylist(), strict=True)
    )
    assert by_config == {configs[0]["config_id"]: 0.0, configs[1]["config_id"]: 1.0}
    assert read_table(answers.path, "answers")["answer"].to_pylist() == ["the answer to q1"] * 2


def compare_outputs(tmp_path):
    """The compare step's outputs, and the rank step's report it reads."""
    run_report = dsl.HTML(uri=str(tmp_path / "run-report.html"))
    Path(run_report.path).write_text(f"<h1>report</h1>\n{COMPARISON_SLOT}\n<h2>Leaderboard</h2>")
    return {
        "run_report": run_report,
        "comparison": artifact(tmp_path, "comparison"),
        "summary": dsl.Markdown(uri=str(tmp_path / "c.md")),
        "report": dsl.HTML(uri=str(tmp_path / "report.html")),
        "verdict": dsl.Metrics(uri=str(tmp_path / "verdict")),
    }


def board_artifacts(tmp_path, seed):
    """A ranked run's leaderboard and results as artifacts, and its test set."""
    rng = np.random.default_rng(seed)
    board = make_board((rng.random((3, 30)) < 0.7).astype(float))
    paths = {name: artifact(tmp_path, f"{name}-{seed}") for name in ("leaderboard", "results")}
    for name, a in paths.items():
        write_table(getattr(board, name), a.path, name)
    questions = artifact(tmp_path, f"questions-{seed}")
    write_table(
        make_testset(board.results["question_id"].unique().to_pylist()), questions.path, "testset"
    )
    return paths, questions


def test_publish_step_skips_without_a_store_and_stores_with_one(tmp_path, monkeypatch):
    paths, questions = board_artifacts(tmp_path, 0)
    assert publish.python_func(**paths, questions=questions, pipeline_run_id="k1") == ""
    url = f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv("RAGSWEEP_STORE_URL", url)
    assert publish.python_func(**paths, questions=questions, pipeline_run_id="k1") == "k1"
    assert [r["run_id"] for r in database.list_runs(database.connect(url))] == ["k1"]


def test_compare_step_compares_with_the_latest_stored_run_and_logs_the_verdict(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("RAGSWEEP_STORE_URL", f"sqlite:///{tmp_path / 'results.db'}")
    for seed, run_id in [(0, "night-1"), (1, "night-2")]:
        paths, questions = board_artifacts(tmp_path, seed)
        publish.python_func(**paths, questions=questions, pipeline_run_id=run_id)
    outputs = compare_outputs(tmp_path)
    compare.python_func(**paths, baseline="latest", pipeline_run_id="night-2", **outputs)
    table = read_table(outputs["comparison"].path, "comparison")
    current = tuple(read_table(paths[n].path, n) for n in ("leaderboard", "results"))
    expected = compare_runs(database.open_run("night-1"), current)  # the latest other run
    assert table.equals(expected.table.replace_schema_metadata(table.schema.metadata))
    verdict = outputs["verdict"]
    assert verdict.metadata["best_regressed"] == float(expected.best_regressed)
    assert verdict.metadata["baseline_found"] == 1.0
    summary = Path(outputs["summary"].path).read_text()
    assert summary.startswith("| verdict |")
    assert "since the baseline:" in summary and alarm_line(expected) in summary
    # the run's report, with the comparison in its place
    report = Path(outputs["report"].path).read_text()
    assert report.index('id="comparison"') < report.index("<h2>Leaderboard</h2>")
    assert COMPARISON_SLOT not in report and escape(alarm_line(expected)) in report


def test_compare_steps_latest_on_a_sweeps_first_run_says_so_and_does_not_fail(
    tmp_path, monkeypatch
):
    """A nightly schedule's first night (or the night after its test set changed) has no
    earlier run of its sweep: nothing to compare, and the run still succeeds."""
    monkeypatch.setenv("RAGSWEEP_STORE_URL", f"sqlite:///{tmp_path / 'results.db'}")
    paths, questions = board_artifacts(tmp_path, 0)
    publish.python_func(**paths, questions=questions, pipeline_run_id="night-1")
    outputs = compare_outputs(tmp_path)
    # the only run of the sweep is this one
    compare.python_func(**paths, baseline="latest", pipeline_run_id="night-1", **outputs)
    assert read_table(outputs["comparison"].path, "comparison").num_rows == 0
    summary = Path(outputs["summary"].path).read_text()
    assert summary.startswith("No earlier successful run of this sweep (unnamed, key ")
    assert escape(summary.strip()) in Path(outputs["report"].path).read_text()
    assert outputs["verdict"].metadata == {"baseline_found": 0.0}


def test_compare_step_without_a_store_exits_with_a_message(tmp_path, capsys):
    paths, _ = board_artifacts(tmp_path, 0)
    with pytest.raises(SystemExit) as exit_info:
        compare.python_func(
            **paths, baseline="latest", pipeline_run_id="k", **compare_outputs(tmp_path)
        )
    assert exit_info.value.code == 2
    assert "RAGSWEEP_STORE_URL is unset" in capsys.readouterr().err
