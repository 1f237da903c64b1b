"""Each component called as a plain Python function, as the pipeline's steps would run it."""

import pyarrow as pa
import pytest
from kfp import dsl

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.evaluate import evaluate
from ragsweep.components.ingest import ingest
from ragsweep.components.judge import judge
from ragsweep.components.plan import plan
from ragsweep.components.rank import rank
from ragsweep.schemas import read_table
from ragsweep.space import SearchSpace


def artifact(tmp_path, name):
    return dsl.Dataset(uri=str(tmp_path / name))


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


def test_steps_chain_from_ingest_to_a_ranked_leaderboard(tmp_path, small_kb):
    docs, testset = small_kb
    space = SearchSpace(chunk_sizes=(16,), chunk_overlaps=(4,), top_ks=(1, 2)).to_dict()

    documents, questions = artifact(tmp_path, "documents"), artifact(tmp_path, "questions")
    ingest.python_func(
        docs=str(docs), testset=str(testset), documents=documents, questions=questions
    )
    assert read_table(documents.path, "documents").num_rows == 2
    resolved = read_table(questions.path, "testset").column("reference_doc_ids").to_pylist()
    assert resolved == [["admin/ports.md"], ["plans.txt"]]

    [chunk_config] = plan.python_func(search_space=space)
    chunks = artifact(tmp_path, "chunks")
    chunk_embed.python_func(documents=documents, chunk_config=chunk_config, chunks=chunks)
    assert read_table(chunks.path, "chunks").num_rows >= 3

    answers = artifact(tmp_path, "answers")
    evaluate.python_func(
        chunks=chunks,
        questions=questions,
        search_space=space,
        chunk_config=chunk_config,
        llm={},
        answers=answers,
    )
    assert read_table(answers.path, "answers").num_rows == 4 * 2  # 4 configs x 2 questions

    scores = artifact(tmp_path, "scores")
    judge.python_func(answers=answers, questions=questions, llm={}, scores=scores)

    leaderboard, all_scores = artifact(tmp_path, "leaderboard"), artifact(tmp_path, "all")
    rank.python_func(
        scores=[scores],
        search_space=space,
        optimization_metric="context_correctness",
        leaderboard=leaderboard,
        all_scores=all_scores,
    )
    board = read_table(leaderboard.path, "leaderboard")
    assert board.column("rank").to_pylist() == [1, 2, 3, 4]
    top = board.column("context_correctness").to_pylist()
    assert top == sorted(top, reverse=True)
    assert top[0] == 1.0


def test_plan_step_exits_with_a_message_on_a_bad_search_space(capsys):
    with pytest.raises(SystemExit) as exit_info:
        plan.python_func(search_space={"top_ks": [0]})
    assert exit_info.value.code == 2
    assert "field 'top_ks': 0 is not positive" in capsys.readouterr().err


def test_ingest_step_exits_with_a_message_on_an_unknown_document_id(tmp_path, small_kb):
    docs, _ = small_kb
    bad = tmp_path / "bad.json"
    bad.write_text(
        '[{"question": "Q?", "correct_answers": ["A"], "correct_answer_document_ids": ["nope.md"]}]'
    )
    with pytest.raises(SystemExit):
        ingest.python_func(
            docs=str(docs),
            testset=str(bad),
            documents=artifact(tmp_path, "d"),
            questions=artifact(tmp_path, "q"),
        )


def test_rank_step_concatenates_every_branch(tmp_path):
    space = SearchSpace(chunk_sizes=(64, 128), top_ks=(1,), search_types=("similarity",))
    configs = space.all_configs()
    from ragsweep.schemas import write_table

    branches = []
    for i, config in enumerate(configs):
        table = pa.table(
            {
                "config_id": [config["config_id"]],
                "question_id": ["q1"],
                "context_correctness": [float(i)],
                "document_recall": [0.0],
                "answer_correctness": [0.0],
                "faithfulness": [0.0],
                "correctness": [None],
                "correctness_reason": [None],
                "judge_error": [None],
            }
        )
        branches.append(artifact(tmp_path, f"s{i}"))
        write_table(table, branches[-1].path, "scores")
    leaderboard, all_scores = artifact(tmp_path, "lb"), artifact(tmp_path, "all")
    rank.python_func(
        scores=branches,
        search_space=space.to_dict(),
        optimization_metric="context_correctness",
        leaderboard=leaderboard,
        all_scores=all_scores,
    )
    board = read_table(leaderboard.path, "leaderboard")
    assert board.column("config_id").to_pylist() == [
        configs[1]["config_id"],
        configs[0]["config_id"],
    ]
    assert read_table(all_scores.path, "scores").num_rows == 2
