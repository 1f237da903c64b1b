"""The progress ``ragsweep run`` shows: the steps' counters through the progress file, their
rate and time left, the steps done of total, and what reaches the terminal (a line per step
on a pipe, a live display on a terminal, kfp.local's lines only in pipeline.log or with
--verbose, a failed step's output whole)."""

import io
import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import TEST_API_KEY
from scripted_llm import ScriptedLLM, Step
from test_pipeline import example_subset

from ragsweep.core import progress
from ragsweep.pipelines.sweep_pipeline import sweep_pipeline
from ragsweep.runner.terminal import (
    Counter,
    LineView,
    Monitor,
    StepTotal,
    Tail,
    count_steps,
    format_eta,
    format_rate,
)

ROOT = Path(__file__).resolve().parent.parent
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
SMALL_GRID = ["--chunk-sizes", "128", "--top-k", "3", "--search-types", "similarity"]


@pytest.mark.parametrize(
    ("per_s", "shown"),
    [(None, ""), (0.05, "3.0/min"), (2.345, "2.3/s"), (99.96, "100.0/s"), (1234.4, "1,234/s")],
)
def test_rates_read_per_second_or_per_minute_below_one(per_s, shown):
    assert format_rate(per_s) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"), [(None, ""), (0.4, "ETA 0:00"), (65, "ETA 1:05"), (3725, "ETA 1:02:05")]
)
def test_time_left_reads_as_a_clock(seconds, shown):
    assert format_eta(seconds) == shown


def test_a_counter_rates_its_recent_progress_and_says_the_time_left():
    counter = Counter("LLM calls")
    counter.set(0, 100, now=0.0)
    assert counter.describe(0.0) == "LLM calls 0/100"  # no rate yet, so no time left
    counter.set(50, 100, now=10.0)
    assert counter.describe(10.0) == "LLM calls 50/100 (5.0/s, ETA 0:10)"
    counter.set(60, 100, now=40.0)  # the rate covers the last 30 s: 10 calls in 30 s
    assert counter.rate(40.0) == pytest.approx(10 / 30)
    assert counter.describe(40.0) == "LLM calls 60/100 (20.0/min, ETA 2:00)"
    counter.set(100, 100, now=41.0)
    assert counter.eta(41.0) is None and "ETA" not in counter.describe(41.0)


STEP = """
import sys
from ragsweep.core import progress
progress.plan(progress.LLM_CALLS, 10)
progress.expect(progress.LLM_CALLS, 4)
progress.advance(progress.LLM_CALLS, 3)
if sys.argv[1] == "settle":
    progress.settle()
progress.expect(progress.EMBEDDED, 0)  # nothing: no line
"""


def step(tmp_path: Path, how: str, channel: Path | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != progress.ENV}
    if channel:
        env[progress.ENV] = str(channel)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-c", STEP, how], env=env, check=True, cwd=tmp_path)


def test_steps_append_their_running_totals_and_the_terminal_sums_the_steps(tmp_path):
    channel = tmp_path / "progress.jsonl"
    step(tmp_path, "settle", channel)
    step(tmp_path, "keep going", channel)
    records = Tail(channel).read()
    assert [(r["counter"], r["done"], r["total"]) for r in records] == [
        ("LLM calls", 0, 10),  # planned: at most 10
        ("LLM calls", 0, 10),  # 4 expected, within the plan
        ("LLM calls", 3, 10),
        ("LLM calls", 3, 3),  # settled: the step did 3
        ("LLM calls", 0, 10),  # the second step, a process of its own
        ("LLM calls", 0, 10),
        ("LLM calls", 3, 10),
    ]
    assert len({r["source"] for r in records[:4]} | {r["source"] for r in records[4:]}) == 2
    out = io.StringIO()
    monitor = Monitor(LineView(out), 3, channel, tmp_path / "pipeline.log", clock=lambda: 5.0)
    monitor.update(force=True)
    assert monitor.counters["LLM calls"].done == 6 and monitor.counters["LLM calls"].total == 13
    assert out.getvalue() == "  LLM calls 6/13\n"


def test_the_reporting_does_nothing_without_a_channel(tmp_path):
    step(tmp_path, "settle", None)
    assert list(tmp_path.iterdir()) == []


def test_a_tail_reads_only_complete_lines_once(tmp_path):
    channel = tmp_path / "progress.jsonl"
    tail = Tail(channel)
    assert tail.read() == []  # no file yet
    channel.write_text('{"a": 1}\n{"b"')
    assert tail.read() == [{"a": 1}]
    with channel.open("a") as f:
        f.write(": 2}\n")
    assert tail.read() == [{"b": 2}] and tail.read() == []


def test_the_steps_counted_from_the_pipeline_are_the_steps_a_run_executes():
    spec = sweep_pipeline.pipeline_spec
    # configure, load-testset, ingest, generate-qa, plan, plan-shards, merge-shards,
    # evaluate, rank, track, publish; embed-shard for each shard; chunk-embed and retrieve
    # for each group of chunk configurations; compare with a baseline
    [shards, groups] = sorted(n for n, t in spec.root.dag.tasks.items() if n.startswith("for-"))
    assert count_steps(spec, {}, conditions=False) == 14
    assert count_steps(spec, {groups: 3}, conditions=False) == 18
    assert count_steps(spec, {shards: 4, groups: 3}, conditions=True) == 22


def test_the_total_follows_the_items_the_loop_was_given(tmp_path):
    steps = StepTotal(sweep_pipeline.pipeline_spec, tmp_path, {"plan": 2}, conditions=False)
    assert steps.total == 11 + 1 + 2 * 2  # one shard until plan-shards lists them
    run = tmp_path / "ragsweep-2026-12-01"
    for step, items in [("plan", 5), ("plan-shards", 3)]:
        (run / step).mkdir(parents=True)
        (run / step / "executor_output.json").write_text(
            json.dumps({"parameterValues": {"Output": [{"item": i} for i in range(items)]}})
        )
    assert steps.finished("ingest") == 16
    assert steps.finished("plan") == 11 + 1 + 2 * 5  # chunk-embed and retrieve for each group
    assert steps.finished("plan-shards") == 11 + 3 + 2 * 5  # embed-shard for each shard


def lines_of_a_run(failure: str | None = None) -> list[str]:
    """kfp.local's output for two steps, the second failing with ``failure`` if given."""
    lines = [
        "Running pipeline: 'ragsweep'",
        "Executing task 'ingest'",
        "Streamed logs:",
        "[KFP Executor 2026-12-01 02:34:51,555 INFO]: Got executor_input:",
        "{",
        '    "inputs": {}',
        "}",
        "ragsweep: read 21 documents, skipped 0",
        "ragsweep: warning: skipped notes.bin: no text could be extracted",
        "ragsweep: step ingest: peak memory 143 MB, 0.5 s (0.7 s starting)",
        "Task 'ingest' finished with status SUCCESS",
        "Executing task 'evaluate'",
        "ragsweep: 12 answers",
    ]
    if failure:
        lines += [
            "Traceback (most recent call last):",
            '  File "evaluate.py", line 3, in evaluate',
            failure,
            "ragsweep: step evaluate: peak memory 175 MB, 0.7 s",
            "Task 'evaluate' finished with status FAILURE",
        ]
    else:
        lines += [
            "ragsweep: step evaluate: peak memory 175 MB, 0.7 s",
            "Task 'evaluate' finished with status SUCCESS",
        ]
    return lines + ["Pipeline 'ragsweep' finished with status SUCCESS"]


def monitored(tmp_path: Path, lines: list[str], verbose: bool = False) -> str:
    out = io.StringIO()
    log = tmp_path / "pipeline.log"
    monitor = Monitor(LineView(out), 2, tmp_path / "progress.jsonl", log, verbose=verbose)
    for line in lines:
        monitor.line(line)
    return out.getvalue()


def test_a_line_per_finished_step_with_its_cost_and_the_steps_warnings(tmp_path):
    shown = monitored(tmp_path, lines_of_a_run())
    assert shown.splitlines() == [
        "  ragsweep: warning: skipped notes.bin: no text could be extracted",
        "[1/2] ingest: peak memory 143 MB, 0.5 s (0.7 s starting)",
        "[2/2] evaluate: peak memory 175 MB, 0.7 s",
    ]


def test_a_step_reused_by_a_resumed_run_is_counted_as_reused(tmp_path):
    out = io.StringIO()
    monitor = Monitor(LineView(out), 2, tmp_path / "progress.jsonl", tmp_path / "pipeline.log")
    # kfp.local's line for a step whose outputs its cache holds (it runs no process)
    monitor.line("Task ingest cache hit (key=0f3a9c2b81de); skipping execution.")
    for line in lines_of_a_run()[-5:-1]:  # then the evaluate step runs
        monitor.line(line)
    assert out.getvalue().splitlines() == [
        "[1/2] ingest: reused",
        "[2/2] evaluate: peak memory 175 MB, 0.7 s",
    ]
    assert monitor.reused == 1


def test_verbose_shows_every_line_as_well(tmp_path):
    shown = monitored(tmp_path, lines_of_a_run(), verbose=True)
    assert "  Executing task 'ingest'" in shown and "  ragsweep: 12 answers" in shown
    assert "[2/2] evaluate: peak memory 175 MB, 0.7 s" in shown


def test_a_failed_step_shows_its_output_whole_and_where_the_log_is(tmp_path):
    shown = monitored(tmp_path, lines_of_a_run("ValueError: no retrieval of question q3"))
    assert shown.split("[2/2] evaluate: failure\n", 1)[1].splitlines() == [
        f"  its output (all of it in {tmp_path / 'pipeline.log'}):",
        "    ragsweep: 12 answers",
        "    Traceback (most recent call last):",
        '      File "evaluate.py", line 3, in evaluate',
        "    ValueError: no retrieval of question q3",
        "    ragsweep: step evaluate: peak memory 175 MB, 0.7 s",
    ]
    assert "read 21 documents" not in shown and "executor_input" not in shown


def ragsweep(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, timeout=1200, env=env)


@dataclass
class Sweep:
    """The module's sweep of the example subset, answered and judged by a scripted server
    (which embeds too, as ``openai:embedder``); each run is a ``ragsweep run`` process."""

    server: ScriptedLLM
    args: list[str]
    env: dict[str, str]
    folder: Path

    def run(self, output: str, *more: str) -> subprocess.CompletedProcess:
        """A run answered and judged by the server's models."""
        args = [*self.args, "--llm", "answerer", "--judge", "judge"]
        args += ["--output", str(self.folder / output), *more]
        return ragsweep(*args, env=self.env)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Iterator[Sweep]:
    folder = tmp_path_factory.mktemp("sweep")
    docs, testset = example_subset(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGSWEEP_", "MLFLOW_"))}
    with ScriptedLLM() as server:
        server.models.append("embedder")
        env |= {
            "RAGSWEEP_LLM_BASE_URL": server.url,
            "RAGSWEEP_LLM_API_KEY": TEST_API_KEY,
            "RAGSWEEP_CACHE_DIR": str(folder / "replies"),
            "XDG_DATA_HOME": str(folder / "data-home"),
        }
        args = ["run", "--docs", str(docs), "--testset", str(testset), "--no-store", *SMALL_GRID]
        args += ["--embedding-models", "openai:embedder"]  # no step loads a model
        yield Sweep(server, args, env, folder)


@dataclass
class Failed:
    result: subprocess.CompletedProcess
    run_dir: Path
    log: str  # its pipeline.log when it stopped


@pytest.fixture(scope="module")
def failed(sweep: Sweep) -> Failed:
    """A run on a pipe (and a cold embedding cache) whose endpoint fails every request: it
    stops at evaluate, after the steps before it."""
    sweep.server.then(*[Step(status=500, headers={"Retry-After": "0"})] * 100)
    result = sweep.run("runs", "--cache", str(sweep.folder / "embeddings"))
    with sweep.server.lock:
        sweep.server.script.clear()  # the endpoint answers again
    [run_dir] = (sweep.folder / "runs").iterdir()
    return Failed(result, run_dir, (run_dir / "pipeline.log").read_text())


def test_a_run_on_a_pipe_prints_progress_lines_and_keeps_kfp_lines_in_its_log(failed):
    stdout = failed.result.stdout
    steps = re.findall(r"^\[(\d+)/(\d+)\] ([\w-]+): peak memory", stdout, re.M)
    assert [(int(d), int(n)) for d, n, _ in steps] == [(i, 14) for i in range(1, len(steps) + 1)]
    assert {"ingest", "chunk-embed", "retrieve"} <= {name for _, _, name in steps}
    assert f"[{len(steps) + 1}/14] evaluate: failure\n" in stdout  # the steps before it ran
    chunks = re.search(r"ragsweep: (\d+) chunks from", failed.log)
    embedded = re.findall(r"^  texts embedded (\d+)/(\d+)", stdout, re.M)
    assert embedded and embedded[-1][0] == embedded[-1][1]  # all done at the end
    assert int(embedded[-1][1]) == int(chunks[1]) + 6  # the chunks, then the 6 questions
    assert "Executing task" not in stdout and "KFP Executor" not in stdout
    assert failed.log.count("Executing task") == len(steps) + 1 and "KFP Executor" in failed.log


def test_a_failing_endpoint_prints_the_steps_error_whole_and_where_its_log_is(failed):
    result, run_dir = failed.result, failed.run_dir
    assert result.returncode == 2 and "Traceback" not in result.stderr + result.stdout
    shown = result.stdout.split("] evaluate: failure\n", 1)[1]
    assert shown.startswith(f"  its output (all of it in {run_dir / 'pipeline.log'}):\n")
    assert re.search(
        r"^    error: model 'answerer' at \S+ answered none of 6 questions; "
        r"first error: HTTP 500 after 3 call\(s\): .*scripted 500",  # the default 2 retries
        shown,
        re.M,
    )
    assert f"the pipeline failed: see the message above and {run_dir}/pipeline.log" in (
        result.stderr
    )


@pytest.fixture(scope="module")
def resumed(sweep: Sweep, failed: Failed) -> tuple[subprocess.CompletedProcess, int]:
    """The failed run resumed with --verbose, the endpoint answering: its output, and the
    LLM calls it made."""
    calls = sweep.server.chat_calls
    result = ragsweep(
        "run", "--resume", failed.run_dir.name, "--output", str(failed.run_dir.parent),
        "--no-store", "--verbose", env=sweep.env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return result, sweep.server.chat_calls - calls


def test_a_resumed_run_counts_its_reused_steps_and_verbose_shows_kfp_lines_too(resumed):
    stdout = resumed[0].stdout
    reused = re.findall(r"^\[(\d+)/14\] ([\w-]+): reused$", stdout, re.M)
    ran = re.findall(r"^\[(\d+)/14\] ([\w-]+): peak memory", stdout, re.M)
    assert "chunk-embed" in {name for _, name in reused}  # finished before evaluate failed
    assert {"evaluate", "rank", "publish"} <= {name for _, name in ran}
    assert sorted(int(done) for done, _ in reused + ran) == list(range(1, 15))
    # --verbose: kfp.local's own lines too, of a step run or of a step its cache held
    assert stdout.count("Executing task") == len(ran)
    assert len(re.findall(r"^  Task '?[\w-]+'? cache hit", stdout, re.M)) == len(reused)


def test_llm_calls_are_counted(resumed):
    result, made = resumed
    calls = re.findall(r"^  LLM calls (\d+)/(\d+)", result.stdout, re.M)
    assert calls[-1] == (str(made),) * 2 == ("12", "12")  # 6 answers, 6 verdicts


def run_in_terminal(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its stdin, stdout and stderr; its output."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 1 << 16)
        except OSError:  # the terminal closed: the process ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    return process.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def test_a_run_in_a_terminal_renders_a_live_display(sweep, tmp_path):
    """A cold cache, embedded by the scripted endpoint: no model to load."""
    code, shown = run_in_terminal(
        [RAGSWEEP, *sweep.args, "--output", str(tmp_path / "runs"),
         "--cache", str(tmp_path / "cache")],
        sweep.env,
    )  # fmt: skip
    assert code == 0, shown[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)  # colours and cursor moves
    assert "\x1b[" in shown and "━" in text  # drawn, not printed
    assert re.search(r"steps +[━╺╸]+ +\d/14 ingest", text)  # the running step named
    assert re.search(r"texts embedded +[━╺╸]+ +\d+/\d+", text)
    assert re.search(r"steps +━+ +14/14", text) and "[14/14] " in text
    assert "Executing task" not in text
