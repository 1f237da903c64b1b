"""The whole pipeline with a model, a judge and a generated test set, through kfp.local,
against the scripted OpenAI-compatible server; and a dead endpoint failing fast."""

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from builders import configured, make_testset, units_testset
from conftest import TEST_API_KEY
from kfp import dsl
from scripted_llm import default_responder, free_port
from test_labels import ragsweep as in_process

from ragsweep.cli import finish
from ragsweep.components.evaluate import evaluate
from ragsweep.components.plan import plan
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table, settings_of, write_table
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models.llm import LLMSettings
from ragsweep.reporting.exports import render
from ragsweep.reporting.report import render_html
from ragsweep.runner.closing import Outcome
from ragsweep.sweep import steps
from ragsweep.sweep.settings import read_settings
from ragsweep.sweep.space import SearchSpace, configs_table

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "examples" / "docs"
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
SMALL_GRID = ["--chunk-sizes", "128", "--top-k", "1,3", "--search-types", "similarity"]
LEAN = ["--no-store", "--patterns", "0"]  # where neither is what the test is about


def ragsweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, timeout=1200)


def artifact(path: Path) -> dsl.Dataset:
    """A step's input or output at ``path``, as kfp.local hands it to the step."""
    return dsl.Dataset(uri=str(path))


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_a_run_generates_its_test_set_answers_with_the_llm_and_ranks_by_the_judge(
    llm_server, tmp_path
):
    runs, docs = tmp_path / "runs", DOCS / "admin"  # a few documents: Giskard embeds them all
    result = ragsweep(
        "run", "--docs", str(docs), "--llm", "answerer", "--judge", "judge",
        "--qa-llm", "writer", "--num-questions", "4", "--output", str(runs), *SMALL_GRID,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run_dir] = runs.iterdir()
    assert f"ranked by correctness; judged by judge at {llm_server.url}" in result.stdout

    testset = read_table(run_dir / "testset.arrow", "testset")
    assert testset.num_rows == 4 and all(testset["gold_spans"].to_pylist())
    assert (run_dir / "testset.jsonl").read_text().count("\n") == 4

    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    settings = settings_of(board)
    assert settings["optimization_metric"] == "correctness"
    assert board.num_rows == 2 and board["answerer"].to_pylist() == ["llm:answerer"] * 2
    ranked = board["correctness"].to_pylist()
    assert ranked == sorted(ranked, reverse=True) and None not in ranked
    results = read_table(run_dir / "results.arrow", "results")
    assert results.num_rows == 2 * 4 and results["correctness"].null_count == 0
    assert all(results["correctness_reason"].to_pylist())
    judge = settings["judge"]
    assert judge["model"] == "judge" and "You grade the answers" in judge["system_prompt"]

    models = [r["model"] for r in llm_server.requests]
    assert {"writer", "answerer", "judge"} == set(models)
    answered = [r for r in llm_server.requests if r["model"] == "answerer"]
    assert all(r["messages"][1]["content"].startswith("Context:\n") for r in answered)
    parameters = json.loads((run_dir / "settings.json").read_text())
    assert parameters["llm"]["judge"] == "judge" and parameters["test_data_key"] == ""
    assert parameters["qa_generation"]["model"] == "writer"

    # the key reached the server, and nothing the run wrote or printed
    assert set(llm_server.authorizations) == {f"Bearer {TEST_API_KEY}"}
    assert TEST_API_KEY not in result.stdout + result.stderr
    leaks = [p for p in files_under(run_dir) if TEST_API_KEY.encode() in p.read_bytes()]
    assert leaks == []

    # the generated test set is usable by the next run: read as --testset reads it, it asks
    # the same questions, so it retrieves what this run retrieved; evaluated from that by the
    # evaluate step in this process (a second run's steps before it add nothing to check),
    # it finds every reply cached and ranks the configurations alike
    [root] = (run_dir / "pipeline").glob("ragsweep-*")  # beside it: kfp.local's cache
    documents = artifact(root / "ingest" / "documents")
    again = resolve_testset(
        load_testset(str(run_dir / "testset.jsonl")), read_table(documents.path, "documents")
    )
    for field in ("question_id", "question", "reference_answers", "gold_spans"):
        assert again[field].to_pylist() == testset[field].to_pylist(), field
    questions, answers, scores = (artifact(tmp_path / n) for n in ("q", "answers", "scores"))
    write_table(again, questions.path, "testset")
    calls = llm_server.chat_calls
    evaluate.python_func(
        settings=artifact(root / "configure" / "settings"),
        retrievals=[artifact(p) for p in root.glob("for-loop-*/retrieve/retrievals")],
        questions=questions, documents=documents, answers=answers, scores=scores,
    )  # fmt: skip
    assert llm_server.chat_calls == calls  # zero calls
    configs = read_settings(root / "configure" / "settings").space.all_configs()
    rebuilt = build_board(
        read_table(scores.path, "scores"), read_table(answers.path, "answers"), again,
        configs_table(configs), "correctness",
    )  # fmt: skip
    assert rebuilt.leaderboard["correctness"].to_pylist() == ranked


def admin_testset(path: Path, questions: int = 64) -> Path:
    """A test set (Red Hat AutoRAG's .json) of ``questions`` questions on the admin
    documents, each answered by a line of one, spread over all five: for a run whose plan
    depends on how many questions it has, not on which."""
    lines = [
        (source.relative_to(DOCS / "admin").as_posix(), line.strip())
        for source in sorted((DOCS / "admin").rglob("*"))
        if source.suffix in (".md", ".txt")
        for line in source.read_text().splitlines()
        if len(line.split()) >= 8
    ]
    picked = [lines[i * len(lines) // questions] for i in range(questions)]
    records = [
        {
            "question": f"Question {i}: what do the docs say about {line[:60]}?",
            "correct_answers": [line],
            "correct_answer_document_ids": [doc_id],
        }
        for i, (doc_id, line) in enumerate(picked)
    ]
    assert len(records) == questions
    path.write_text(json.dumps(records))
    return path


def test_a_budgeted_run_halves_the_grid_within_its_llm_calls(llm_server, tmp_path):
    """Six configurations of one chunk set (one chunk-embed step, one retrieve step), over
    the admin documents, whose chunks the session's embedding cache holds once the run
    above has run."""
    runs, testset = tmp_path / "runs", admin_testset(tmp_path / "testset.json")
    result = ragsweep(
        "run", "--docs", str(DOCS / "admin"), "--testset", str(testset),
        "--llm", "answerer", "--judge", "judge", "--max-llm-calls", "300", "--output", str(runs),
        "--chunk-sizes", "128", "--top-k", "1,2,3,4,5,6", "--search-types", "similarity",
        *LEAN,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    # the full grid would take 6 x 64 answers + 6 x 64 verdicts = 768 calls
    rounds = "6 × 9 → 3 × 18 → 2 × 36 → 1 × 64 (configurations × questions)"
    assert f"Successive halving under max_llm_calls=300: {rounds}" in result.stdout
    assert llm_server.chat_calls <= 300
    [run_dir] = runs.iterdir()
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    assert board["round"].to_pylist() == [3, 2, 1, 0, 0, 0]
    assert board["questions"].to_pylist()[0] == 64
    assert settings_of(board)["evaluation"]["llm_calls"] == llm_server.chat_calls
    results = read_table(run_dir / "results.arrow", "results")
    assert results.num_rows == 6 * 64 and results["context_correctness"].null_count == 0
    assert results["correctness"].null_count == 6 * 64 - (6 * 9 + 3 * 9 + 2 * 18 + 28)
    assert 'id="evaluation"' in (run_dir / "report.html").read_text()
    code, shown, err = in_process(
        "leaderboard", str(run_dir),
        url=f"sqlite:///{tmp_path / 'results.db'}",
    )  # fmt: skip
    assert code == 0, err
    assert f"Successive halving under max_llm_calls=300: {rounds}" in shown
    # every dropped configuration is marked, and compared with the best on what both answered
    assert board["eliminated"].to_pylist() == [False] + [True] * 5
    assert shown.count("out after round 1") == 3
    assert "5 configurations were eliminated by successive halving" in shown


def test_a_judge_unreadable_on_many_answers_is_said_in_the_runs_last_line(
    llm_server, tmp_path, capsys
):
    """Evaluated and ranked in this process, then ended as ``ragsweep run`` ends a run
    (``finish``). That the pipeline carries the judge's unreadable share into the run's
    leaderboard: tests/test_real_model.py (``judge_unreadable``)."""

    def responder(request: dict) -> str:
        messages = request["messages"]
        judging = messages[0]["content"].startswith("You grade the answers")
        if judging and zlib.crc32(messages[1]["content"].encode()) % 5 == 0:
            return "I would say it is fine."  # never JSON, however often asked
        return default_responder(request)

    llm_server.responder = responder
    retrievals, testset, configs = overflowing_sweep()  # the scripted model's window: no limit
    judge = LLMSettings(judge="judge", backoff_s=0.01)
    answers, scores = steps.evaluate(retrievals, testset, configs, "auto", judge)
    board = build_board(scores, answers, testset, configs_table(configs), "auto")
    run_dir = tmp_path / "run"
    write_table(board.leaderboard, run_dir / "leaderboard.arrow", "leaderboard")
    capsys.readouterr()
    finish(Outcome(run_dir, "succeeded"), top=20, patterns=0)
    stdout = capsys.readouterr().out
    unread = sum(board.leaderboard["judge_errors"].to_pylist())
    results = board.results
    assert unread == results["correctness"].null_count > 0.05 * results.num_rows
    last = stdout.strip().splitlines()[-1]
    share = unread / results.num_rows
    assert last.startswith(f"warning: the judge's verdict could not be read on {share:.1%}")
    assert stdout.count("the judge's verdict could not be read") == 1


def test_a_budget_too_small_stops_the_run_at_planning_before_any_embedding(tmp_path, capsys):
    """The plan step refuses a budget that the answers and the judge's verdicts overrun, and
    nothing that embeds chunks or calls a model runs before it. (That a failing step stops a
    local run with its message: tests/test_progress.py's failing run, on a budget too small.)"""
    questions = dsl.Dataset(uri=str(tmp_path / "questions"))
    write_table(make_testset([f"q{i}" for i in range(64)]), questions.path, "testset")
    settings = configured(
        tmp_path / "settings", input_data_key="docs", max_llm_calls=50,
        **SearchSpace(
            chunk_sizes=(128,), top_ks=(1, 3), search_types=("similarity",),
            answerers=("llm:answerer",),
        ).to_parameters(),
        llm=LLMSettings(judge="judge").to_dict(),
    )  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        plan.python_func(
            settings=settings,
            questions=questions,
            documents=dsl.Dataset(uri=str(tmp_path / "docs")),
        )
    assert stopped.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "max_llm_calls=50 is too few for 2 configurations x 64 questions" in message
    assert "the full grid needs 256 LLM calls" in message  # an answer and a verdict each
    # the pipeline's graph: chunks are embedded (and models asked) only once it has planned
    spec, _ = yaml.safe_load_all((ROOT / "pipelines" / "sweep_pipeline.yaml").read_text())
    tasks = spec["root"]["dag"]["tasks"]

    def holds(task: dict, step: str) -> bool:
        return step in spec["components"][task["componentRef"]["name"]].get("dag", {}).get(
            "tasks", {}
        )

    [branches] = [name for name, task in tasks.items() if holds(task, "chunk-embed")]
    assert "plan" in tasks[branches]["dependentTasks"]  # chunk-embed, retrieve: after plan
    assert branches in tasks["evaluate"]["dependentTasks"]  # the answers and verdicts: after


def test_a_dead_endpoint_stops_the_run_before_it_starts_with_one_message(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", TEST_API_KEY)
    code, _, stderr = in_process(
        "run", "--docs", str(DOCS), "--testset", str(ROOT / "examples" / "testset.json"),
        "--llm", "answerer", "--output", str(tmp_path / "runs"),
        url=f"sqlite:///{tmp_path / 'results.db'}",
    )  # fmt: skip
    assert code == 2
    assert "Traceback" not in stderr and TEST_API_KEY not in stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert "llm endpoint http://127.0.0.1:" in line and "unreachable" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], "--testset: none given; to generate one, name a model (--qa-llm)"),
        (["--testset", "t.json", "--metric", "correctness"], "needs a judge (--judge MODEL)"),
        (["--testset", "t.json", "--llm", "m", "--prompt-template", "{question}"], "{context}"),
    ],
)
def test_model_option_mistakes_are_one_line(options, message, tmp_path):
    code, _, stderr = in_process(
        "run", "--docs", str(DOCS), *options,
        url=f"sqlite:///{tmp_path / 'results.db'}",
    )  # fmt: skip
    assert code == 2 and "Traceback" not in stderr
    assert message in stderr.strip().splitlines()[-1]


FILLER = " ".join(f"filler{i}" for i in range(600)) + "."  # past the server's window


def overflowing_sweep() -> tuple[pa.Table, pa.Table, list[dict]]:
    """Three configurations over 20 questions. ``steady`` retrieves the answer for 16 and
    answers all; ``overflow`` retrieves what ``steady`` does, plus a long passage on six of
    the questions (four of them ``steady``'s misses), whose prompts the model refuses;
    ``sharp`` retrieves every answer but overflows on one question."""
    n = 20
    testset = units_testset(n)
    space = SearchSpace(
        chunk_sizes=(64,), top_ks=(1, 3, 5), search_types=("similarity",), answerers=("llm:x",)
    )
    configs = space.all_configs()
    for config, name in zip(configs, ("steady", "overflow", "sharp"), strict=True):
        config.update(label=name, answerer="llm:answerer")
    rows = []
    for i in range(n):
        right = (f"unit{i}.md", f"The code of unit {i} is zeta{i}.")
        steady = [right if i < 16 else ("other.md", "Nothing is said about that here.")]
        picks = {
            "steady": steady,
            "overflow": steady + ([("filler.md", FILLER)] if i >= 14 else []),
            "sharp": [right] + ([("filler.md", FILLER)] if i == 0 else []),
        }
        for config in configs:
            docs, passages = zip(*picks[config["label"]], strict=True)
            rows.append(
                {
                    "config_id": config["config_id"],
                    "question_id": f"q{i:02}",
                    "retrieved_chunk_ids": list(range(len(docs))),
                    "retrieved_doc_ids": list(docs),
                    "passages": list(passages),
                }
            )
    return pa.Table.from_pylist(rows), testset, configs


def test_answers_the_model_refuses_count_against_their_configuration(llm_server):
    """A configuration whose long contexts overflow the model's window (HTTP 400, not
    retried) is scored on every question, not on the easy ones it could answer: it ranks
    below the one that answered everything, and its errors are counted, flagged and shown."""
    llm_server.context_window = 400
    retrievals, testset, configs = overflowing_sweep()
    judge = LLMSettings(judge="judge", backoff_s=0.01)
    answers, scores = steps.evaluate(retrievals, testset, configs, "auto", judge)
    board = build_board(scores, answers, testset, configs_table(configs), "auto")
    ranked = board.leaderboard.to_pylist()
    assert [r["label"] for r in ranked] == ["sharp", "steady", "overflow"]
    by_label = {r["label"]: r for r in ranked}
    assert [by_label[x]["correctness"] for x in ("sharp", "steady", "overflow")] == [
        0.95,
        0.8,
        0.7,
    ]  # dropping the failed questions would give overflow 14/14 = 1.0, first place
    assert all(r["questions"] == 20 for r in ranked)
    assert [by_label[x]["errors"] for x in ("sharp", "steady", "overflow")] == [1, 0, 6]
    assert [r["errors_flagged"] for r in ranked] == [False, False, True]

    results = board.results.to_pylist()
    failed = [r for r in results if r["answer_error"]]
    assert len(failed) == 7 and all("HTTP 400 after 1 call(s)" in r["answer_error"] for r in failed)
    assert all("maximum context length is 400" in r["answer_error"] for r in failed)
    assert all(r["correctness"] == 0 and r["answer_correctness"] == 0 for r in failed)
    assert all(r["correctness_reason"] == f"answer failed: {r['answer_error']}" for r in failed)
    assert all(r["context_correctness"] == 1 for r in failed if r["question_id"] < "q16")
    asked = [r for r in llm_server.requests if r["model"] == "answerer"]
    assert sum("filler0" in r["messages"][-1]["content"] for r in asked) == 7  # none retried

    [first] = board.failures.to_pylist()  # sharp's only failure
    assert first["question_id"] == "q00" and first["reason"].startswith("answer failed: HTTP 400")
    assert first["answer_error"] and first["judge_error"] == "not judged: the answer failed"

    html = render_html(board)
    assert html.count('class="error-row"') == 7 and "<th>errors</th>" in html
    assert '<td class="num errors">6 !</td>' in html
    table = render(board.leaderboard)
    assert "errors  latency" in table.splitlines()[0] and "6 !" in table


def test_evaluation_fails_fast_on_a_dead_endpoint(monkeypatch):
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    questions = pa.table({"question_id": ["q1"], "question": ["Which port?"]})
    space = SearchSpace(chunk_sizes=(64,), answerers=("llm:answerer",))
    configs = space.all_configs()
    retrievals = pa.Table.from_pylist(  # what retrieval found: no embedding model needed
        [
            {
                "config_id": config["config_id"],
                "question_id": "q1",
                "retrieved_chunk_ids": [0],
                "retrieved_doc_ids": ["a.md"],
                "passages": ["Port 9000."],
            }
            for config in configs
        ]
    )
    with pytest.raises(RagsweepError, match="llm endpoint .* is unreachable"):
        steps.evaluate(retrievals, questions, configs, "auto")


def test_the_pipeline_takes_model_settings_as_parameters_and_no_secret():
    spec, platform = yaml.safe_load_all((ROOT / "pipelines" / "sweep_pipeline.yaml").read_text())
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert {"llm", "qa_generation", "llm_secret_name"} <= set(parameters)
    assert parameters["test_data_key"]["defaultValue"] == ""
    assert parameters["optimization_metric"]["defaultValue"] == "auto"
    llm = parameters["llm"]["defaultValue"]
    assert llm["judge"] == "" and "{context}" in llm["prompt_template"]
    names = json.dumps(spec).lower()
    assert "api_key" not in names and "RAGSWEEP_LLM" not in json.dumps(spec)
    # the endpoint and key reach the model steps only as a secret's keys, never as values
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step in ("exec-generate-qa", "exec-evaluate"):
        keys = [k["envVar"] for s in executors[step]["secretAsEnv"] for k in s["keyToEnv"]]
        assert "RAGSWEEP_LLM_API_KEY" in keys, step
