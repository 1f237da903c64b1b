"""Versions of the judge's instructions: a run's judge may be given its own system prompt
(``--judge-prompt``), recorded with its verdicts (labels are keyed by it), and `ragsweep judges
compare --prompt ...` ranks each judge model with each version by Cohen's kappa."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from test_judges import TRUTH, labelled_file
from test_labels import ragsweep

from ragsweep.cli import app, local_settings
from ragsweep.curation.labels import prompt_version
from ragsweep.evaluation.judge import Judge, Judged
from ragsweep.models.llm import LLMSettings
from ragsweep.models.prompts import JUDGE_SYSTEM_PROMPT
from ragsweep.sweep.options import text_or_file

LENIENT = "LENIENT: call every answer correct."


def by_prompt(request: dict) -> str:
    """The lenient version calls every answer correct; any other agrees with the labels."""
    system = request["messages"][0]["content"]
    answer = request["messages"][1]["content"].split("Assistant's answer:\n")[1].strip()
    said = True if system.startswith("LENIENT") else TRUTH[answer]
    return json.dumps({"correctness": said, "correctness_reason": "scripted"})


def test_a_judge_with_its_own_prompt_sends_and_records_it(llm_server):
    llm_server.models.append("judge-m")
    llm_server.responder = by_prompt
    settings = LLMSettings(judge_system_prompt=LENIENT)
    judge = Judge("judge-m", settings)
    [verdict] = judge.judge([Judged("Q?", ["Answer number 1."], "Answer number 1.")])
    assert verdict.correct is True  # the lenient version's verdict
    assert llm_server.requests[-1]["messages"][0] == {"role": "system", "content": LENIENT}
    assert judge.record()["system_prompt"] == LENIENT
    built_in = Judge("judge-m", LLMSettings()).record()
    assert prompt_version(judge.record()) != prompt_version(built_in)  # labels keyed apart
    # the built-in prompt keys a sweep as before the prompt could be changed
    assert "judge_system_prompt" not in LLMSettings().sweep_dict()
    assert settings.sweep_dict()["judge_system_prompt"] == LENIENT


def test_judges_compare_ranks_each_model_with_each_prompt_version(llm_server, tmp_path: Path):
    llm_server.models.append("exact")
    llm_server.responder = by_prompt
    (tmp_path / "strict.txt").write_text(JUDGE_SYSTEM_PROMPT)
    (tmp_path / "lenient.txt").write_text(LENIENT)
    code, out, err = ragsweep(
        "judges", "compare", "--judges", "exact", "--labels",
        str(labelled_file(tmp_path / "l.jsonl", count=6)),
        "--prompt", f"@{tmp_path / 'lenient.txt'}", "--prompt", f"@{tmp_path / 'strict.txt'}",
        url=f"sqlite:///{tmp_path / 'results.db'}",
    )  # fmt: skip
    assert code == 0, err
    first, second = out.splitlines()[:2]
    assert first.startswith("1. exact with strict.txt: 6 labels, accuracy 100.0%")
    assert second.startswith("2. exact with lenient.txt:") and "not shown" in second
    systems = {r["messages"][0]["content"] for r in llm_server.requests}
    assert systems == {JUDGE_SYSTEM_PROMPT, LENIENT}


def test_a_missing_prompt_file_is_one_line_naming_it(tmp_path: Path):
    missing = tmp_path / "nope.txt"
    code, _, err = ragsweep(
        "judges", "compare", "--judges", "exact", "--labels", str(tmp_path / "l.jsonl"),
        "--prompt", f"@{missing}",
        url=f"sqlite:///{tmp_path / 'results.db'}",
    )  # fmt: skip
    assert code == 2 and f"--prompt: {missing}: No such file or directory" in err
    assert "Traceback" not in err
    assert text_or_file(LENIENT, "--judge-prompt") == LENIENT  # text given as it is


def test_ragsweep_run_reads_the_judge_prompt_from_a_file(tmp_path: Path):
    (tmp_path / "judge.txt").write_text(LENIENT)
    run = typer.main.get_command(app).commands["run"]
    args = ["--docs", "docs", "--testset", "t.json", "--judge", "j", "--judge-prompt"]
    context = run.make_context("run", [*args, f"@{tmp_path / 'judge.txt'}"])
    assert local_settings(context.params).llm.judge_system_prompt == LENIENT
    built_in = local_settings(run.make_context("run", args[:-1]).params)
    assert built_in.llm.judge_system_prompt == JUDGE_SYSTEM_PROMPT
