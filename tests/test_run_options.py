"""Every run option declared once (``ragsweep.core.option_fields``, on the settings' fields) reaches
every place a user gives it: ``ragsweep run``, a ``--space`` file, the pipeline, ``submit``,
the web UI's start form and the docs' tables; AutoRAG's names and presets work in each."""

import re
from pathlib import Path

import pytest
import typer.main
import yaml
from test_cli import assert_user_error, ragsweep

from ragsweep.cli import app, local_settings
from ragsweep.cli.options_table import RUN_BEGIN, RUN_END, written
from ragsweep.core.errors import RagsweepError
from ragsweep.core.option_fields import NESTED, OWN
from ragsweep.kubeflow.openshift import run_arguments
from ragsweep.kubeflow.parameters import configure_parameters, run_settings
from ragsweep.sweep.options import (
    NEST_PARAMETERS,
    SHAPERS,
    by_name,
    pipeline_arguments,
    run_options,
)

ROOT = Path(__file__).resolve().parent.parent
USAGE = ROOT / "docs" / "usage.md"
EXAMPLES = ROOT / "examples"


def parsed(*args: str) -> dict:
    """``ragsweep run ARGS``'s options by name, as the CLI parses them (no run)."""
    command = typer.main.get_command(app).get_command(None, "run")
    with command.make_context("run", list(args)) as context:
        return context.params


def test_the_docs_tables_are_the_run_options_as_they_are_now():
    page = USAGE.read_text(encoding="utf-8")
    assert written(page) == page, "docs/usage.md's option tables are stale: make docs-outputs"


def test_every_option_ragsweep_run_help_shows_has_its_row_in_the_docs():
    result = ragsweep("run", "--help", env={"COLUMNS": "300", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    shown = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", result.stdout)) - {"--help"}
    page = USAGE.read_text(encoding="utf-8")
    table = page[page.index(RUN_BEGIN) : page.index(RUN_END)]
    rows = set(re.findall(r"`(--[a-z][a-z0-9-]+)`", table))
    assert len(shown) > 50  # every option and alias --help lists
    assert shown <= rows, f"options without a row in docs/usage.md: {sorted(shown - rows)}"


def test_each_option_is_a_flag_of_run_and_the_pipeline_has_the_pipelines_own():
    flags = {flag for p in typer.main.get_command(app).commands["run"].params for flag in p.opts}
    compiled, *_ = yaml.safe_load_all((ROOT / "pipelines" / "sweep_pipeline.yaml").read_text())
    parameters = set(compiled["root"]["inputDefinitions"]["parameters"])
    for option in run_options():
        assert set(option.flags) <= flags, option.name
        if option.declared.pipeline == OWN:
            assert option.parameter in parameters, option.parameter
            assert option.parameter in configure_parameters()
        if option.declared.pipeline == NESTED:
            assert NEST_PARAMETERS[option.nest] in parameters
    assert {s.name for s in SHAPERS} <= parameters


def test_a_settings_value_round_trips_through_the_pipelines_parameters_under_autorags_names():
    settings = local_settings(
        parsed(
            *("--docs", "d", "--testset", "t.json", "--cache", "none"),
            *("--optimization-max-rag-patterns", "50", "--chunk-sizes", "64,96"),
            *("--sweep-name", "nightly", "--trials-at-once", "2", "--strategy", "model"),
        )
    )
    assert settings.max_configs == 50 and settings.trials_at_once == 2
    arguments = pipeline_arguments(settings)
    assert arguments["optimization_max_rag_patterns"] == 50 and "max_configs" not in arguments
    again = run_settings(
        {
            **arguments,
            **{name: "" for name in ("input_data_bucket_name", "test_data_bucket_name")},
            "input_data_keys": [],
        }
    )
    assert again == settings


def test_the_space_file_takes_autorags_names_and_any_option_and_the_command_line_wins(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(
        "chunk_sizes: [64]\ngeneration_models: [granite]\noptimization_metric: "
        "answer_correctness\noptimization_max_rag_patterns: 40\nmax_questions: 9\n"
        "sweep_name: kb\n"
    )
    settings = local_settings(
        parsed("--docs", "d", "--testset", "t.json", "--space", str(space), "--max-questions", "3")
    )
    assert settings.space.answerers == ("llm:granite",)
    assert settings.optimization_metric == "answer_correctness" and settings.max_configs == 40
    assert settings.space.chunk_sizes == (64,) and settings.sweep_name == "kb"
    assert settings.max_questions == 3  # the command line over the file
    space.write_text("chunk_sizes: [64]\noutput: elsewhere\n")  # the CLI's own: not a run's
    with pytest.raises(RagsweepError, match=r"space.yaml: unknown field 'output'; known: "):
        local_settings(parsed("--docs", "d", "--testset", "t.json", "--space", str(space)))


def test_a_zero_given_on_the_command_line_is_that_value_not_the_default():
    """0 means something for many options (no limit, every question, seed 0): a 0 given is
    kept, not taken for an option left out."""
    settings = local_settings(
        parsed(
            *("--docs", "d", "--testset", "t.json", "--cache", "none"),
            *("--max-configs", "0", "--seed", "0", "--patterns", "0", "--temperature", "0"),
        )
    )
    assert (settings.max_configs, settings.seed, settings.patterns) == (0, 0, 0)
    with pytest.raises(RagsweepError, match=r"parallelism \(--parallelism\): must be 1 or more"):
        local_settings(parsed("--docs", "d", "--testset", "t.json", "--parallelism", "0"))


def test_submit_takes_an_options_name_or_alias_as_the_pipelines_parameter():
    arguments = run_arguments(
        "s3://b/docs/", "s3://b/t.json", "s", "", ["max_configs=5", "sweep=nightly", "seed=7"]
    )
    assert arguments["optimization_max_rag_patterns"] == 5
    assert arguments["sweep_name"] == "nightly" and arguments["seed"] == 7
    assert by_name()["metric"].parameter == "optimization_metric"


def test_the_start_forms_fields_are_the_declared_ones():
    from ragsweep.ui.jobs import FLAGS, OPTIONS

    declared = {o.name: o.flags[0] for o in run_options() if o.declared.form}
    assert {**OPTIONS, **{n: f for n, (f, _) in FLAGS.items()}} == declared
    assert OPTIONS["trials_at_once"] == "--trials-at-once"


@pytest.fixture(scope="module")
def preset_runs(tmp_path_factory, ragsweep_cache, embedding_cache):
    """``ragsweep run --preset speed`` and ``--preset balanced`` on the examples, with the
    bundled model (a sample of the questions, one Top K and search, to stay cheap)."""
    from conftest import own_cache

    out = {}
    for preset in ("speed", "balanced"):
        folder = tmp_path_factory.mktemp(preset)
        env = {
            "PATH": "/usr/bin:/bin",
            "HF_HUB_OFFLINE": "1",
            "RAGSWEEP_CACHE_DIR": own_cache(folder / "cache", ragsweep_cache),
            "XDG_DATA_HOME": str(folder / "data"),
        }
        out[preset] = ragsweep(
            *("run", "--docs", str(EXAMPLES / "docs"), "--testset", str(EXAMPLES / "testset.json")),
            *("--preset", preset, "--max-questions", "6", "--top-k", "3"),
            *("--search-types", "similarity", "--no-store", "--patterns", "0"),
            *("--cache", str(embedding_cache), "--output", str(folder / "runs")),
            env=env,
        )
    return out


@pytest.mark.parametrize(
    ("preset", "labels"),
    [
        ("speed", {"sentence-32/8", "sentence-64/16", "sentence-128/8"}),
        ("balanced", {"headings-128/0", "headings-128/32"}),
    ],
)
def test_a_preset_run_finishes_on_the_examples_with_the_bundled_model(preset_runs, preset, labels):
    result = preset_runs[preset]
    assert result.returncode == 0, result.stderr[-3000:]
    for label in labels:
        assert label in result.stdout, (label, result.stdout[-3000:])
    if preset == "balanced":  # 256 and 512 tokens are more than the model reads
        assert "chunk sizes 256, 512 exceed all-MiniLM-L6-v2's maximum input" in result.stderr


def test_an_unknown_preset_is_one_line():
    result = ragsweep(
        "run", "--docs", str(EXAMPLES / "docs"), "--testset", "t.json", "--preset", "fast"
    )
    assert_user_error(result, "preset 'fast': expected one of speed, balanced")
