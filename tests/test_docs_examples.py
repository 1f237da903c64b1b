"""The docs' examples work: every fenced block of README.md and docs/*.md runs here as
written, is read by the code that reads such text, is an output `make docs-outputs` writes
and this checks, or says why not; a block not run still has its ``ragsweep`` options checked
against the commands' own. One whole run (make run's command) serves every example that
needs one. The marks and the parsing: docs/outputs.py."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import typer.main
import yaml

from ragsweep.answering.agents import parse_agent, retrieved
from ragsweep.cli import app
from ragsweep.kubeflow import openshift
from ragsweep.kubeflow.tasks import load_resources
from ragsweep.sweep.space import SearchSpace

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "docs" / "outputs.py")
outputs = sys.modules["docs_outputs"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(outputs)

BLOCKS = [block for page in outputs.pages() for block in outputs.blocks(page)]


def of_kind(kind: str) -> list:
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.kind == kind]


def test_every_fenced_block_is_run_checked_an_output_or_says_why_not():
    assert len(BLOCKS) > 40  # the parser finds the blocks (52 when this was written)
    unmarked = [b.where for b in BLOCKS if b.kind is None]
    assert not unmarked, f"blocks without a mark (docs/outputs.py lists them): {unmarked}"


# ---- options: every ragsweep command of the docs, run or not ------------------------------------


def ragsweep_commands() -> list[tuple[str, list[str]]]:
    return [
        (block.where, words)
        for block in BLOCKS
        if block.lang in outputs.SHELL
        for words in outputs.commands(block.text)
        if words[0] == "ragsweep"
    ]


def resolve(words: list[str]) -> tuple[object, list[str]]:
    """The click command a ``ragsweep ...`` command line calls, and the words after it."""
    command, rest = typer.main.get_command(app), words[1:]
    while rest and hasattr(command, "commands") and rest[0] in command.commands:
        command, rest = command.commands[rest[0]], rest[1:]
    return command, rest


def test_every_ragsweep_command_in_the_docs_uses_only_options_its_help_lists():
    problems = []
    for where, words in ragsweep_commands():
        command, rest = resolve(words)
        shown = [p for p in command.params if not getattr(p, "hidden", False)]  # as --help
        known = {o for p in shown for o in (*p.opts, *p.secondary_opts)} | {"--help"}
        group = getattr(command, "commands", None) and not command.invoke_without_command
        if group and rest != ["--help"]:
            problems.append(f"{where}: {' '.join(words)}: no such command")
            continue
        for word in rest:
            option = word.strip("[]").split("=")[0]
            if option.startswith("-") and option != "-" and option not in known:
                problems.append(f"{where}: ragsweep {command.name}: no option {option}")
    assert len(ragsweep_commands()) > 50
    assert not problems, "\n".join(problems)


def test_the_files_a_docs_command_names_are_shipped():
    """A path under examples/, or a search space, named by a command exists in the repository
    (docs/search.md named a big-space.yaml nobody shipped)."""
    missing = []
    for where, words in ragsweep_commands():
        named = [w for w in words if w.startswith("examples/")]
        spaces = [
            after for before, after in zip(words, words[1:], strict=False) if before == "--space"
        ]
        named += spaces
        missing += [f"{where}: {path}" for path in named if not (ROOT / path).exists()]
    assert not missing, missing


def test_the_search_spaces_the_docs_pass_as_parameters_pass_the_pipelines_checks():
    """Each inline ``search_space={...}`` parameter is what ``ragsweep submit`` would accept:
    checked as the pipeline's configure step checks it (docs/openshift.md once showed chunk
    sizes of 256 and 512, over the bundled model's 254 tokens)."""
    shown = [
        match
        for page in outputs.pages()
        for match in re.findall(r"'(search_space=\{.*?\})'", page.read_text(encoding="utf-8"))
    ]
    assert shown
    compiled = ROOT / "pipelines" / "sweep_pipeline.yaml"
    for param in shown:
        arguments = openshift.run_arguments("s3://b/kb/", "s3://b/t.json", "s3", "", [param])
        openshift.preflight(compiled, arguments)  # raises on a refused space


# ---- blocks read by the code that reads them ----------------------------------------------------


def holds(path: Path, block) -> None:
    assert block.text.strip() in path.read_text(encoding="utf-8"), f"{block.where} vs {path}"


def search_space(block, folder: Path) -> None:
    """Read as ``--space`` reads it; a model folder it names (yours: /models/...) made here."""
    text = block.text
    for path in set(re.findall(r"cross-encoder:(/[^\s\"',\]]+)", text)):
        (folder / Path(path).name).mkdir()
        text = text.replace(path, str(folder / Path(path).name))
    SearchSpace.from_dict(yaml.safe_load(text))


def step_resources(block, folder: Path) -> None:
    path = folder / "resources.yaml"
    path.write_text(block.text, encoding="utf-8")
    assert set(yaml.safe_load(block.text)) <= set(load_resources(str(path)))


def agent_reply(block) -> None:
    reply = json.loads(block.text)
    found = retrieved(parse_agent("mybot=https://assistant.example.com/v1"), reply["context"], {})
    assert found.doc_ids == tuple(c["doc_id"] for c in reply["context"])  # the shape is read


@pytest.mark.parametrize("block", of_kind("checked"))
def test_a_checked_block_reads_as_the_code_that_reads_it_reads_it(block, tmp_path):
    what = block.mark.removeprefix("checked: ")
    if what.endswith(" holds it"):
        holds(ROOT / what.removesuffix(" holds it"), block)
    elif what.startswith("a search space"):
        search_space(block, tmp_path)
    elif what.startswith("step resources"):
        step_resources(block, tmp_path)
    elif what.startswith("a reply's context"):
        agent_reply(block)
    else:
        pytest.fail(f"{block.where}: no check for {what!r}")


# ---- the examples that run, and the outputs they print -----------------------------------------


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, ragsweep_cache, embedding_cache) -> tuple[Path, dict[str, str]]:
    """A folder with examples/ in it, and the commands' environment: offline, the session's
    caches (the ONNX export; the embeddings of the examples' other sweeps, as a team shares
    one), a results database of its own."""
    folder = outputs.scratch(tmp_path_factory.mktemp("docs-examples"))
    env = outputs.environment(folder) | {
        "RAGSWEEP_CACHE_DIR": str(ragsweep_cache),
        "RAGSWEEP_EMBEDDING_CACHE": str(embedding_cache),
    }
    return folder, env


@pytest.fixture(scope="module")
def printed(scratch):
    """``printed(text)``: what the commands ``text`` print, run once for the module."""
    done: dict[str, str] = {}

    def run(text: str) -> str:
        if text not in done:
            result = outputs.run_block(text, *scratch)
            assert result.returncode == 0, (
                f"{text}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
            done[text] = result.stdout
        return done[text]

    return run


@pytest.fixture(scope="module")
def make_run(printed) -> str:
    """make run's output: the README's first block's first command."""
    return printed(outputs.first_command(BLOCKS[0]))


@pytest.mark.parametrize("block", of_kind("runs"))
def test_an_example_marked_run_runs_as_written(block, printed, make_run):
    """(make run's sweep first: the examples' chunks are then in the embedding cache.)"""
    assert printed(outputs.executable(block.text)).strip()


@pytest.mark.parametrize("block", of_kind("output"))
def test_an_output_the_docs_show_is_what_its_command_prints_now(block, printed, make_run):
    command = outputs.first_command(outputs.source_of(block))
    now = outputs.leaderboard_excerpt(printed(command))
    assert outputs.comparable(block.text) == outputs.comparable(now), "run `make docs-outputs`"


def test_the_step_line_usage_quotes_is_numbered_as_a_run_numbers_it(make_run):
    page = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    [quoted] = outputs.STEP.findall(page)
    assert outputs.comparable(quoted) == outputs.comparable(outputs.step_line(make_run))


def test_extending_lists_the_built_in_plugins_setup_cfg_registers():
    page = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    assert outputs.plugin_rows(page) == outputs.built_in_plugins()
    assert outputs.write_plugin_rows(page) == page, "run `make docs-outputs`"


def test_docs_outputs_writes_an_output_in_place_at_its_fences_indentation(tmp_path):
    """What `make docs-outputs` writes replaces the block's lines only, indented as its fence."""
    page = tmp_path / "page.md"
    page.write_text(
        "1. A run:\n   ```sh\n   make run\n   ```\n   <!-- output: make docs-outputs -->\n"
        "   ```text\n   old\n   lines\n   ```\n\nAfter.\n",
        encoding="utf-8",
    )
    [command, output] = outputs.blocks(page)
    assert outputs.first_command(command) == outputs.recipe("make run")
    assert outputs.source_of(output) == command and output.kind == "output"
    outputs.replace_block(output, "rank  new\n\n  ...")
    [_, written] = outputs.blocks(page)
    assert written.text == "rank  new\n\n  ..." and written.mark == output.mark
    assert page.read_text(encoding="utf-8").endswith("   ```\n\nAfter.\n")
