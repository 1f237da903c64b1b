"""One settings object for a run: built once, from ``ragsweep run``'s options or from the
pipeline's parameters, written by the pipeline's first step and read by every later one."""

from dataclasses import fields, replace

import pytest
from builders import configured

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.qagen import QASettings
from ragsweep.kubeflow.parameters import run_settings
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.options import pipeline_arguments
from ragsweep.sweep.settings import RunSettings, read_settings, with_runtimes
from ragsweep.sweep.space import SearchSpace

# every field away from its default (parallelism aside: it is not a pipeline parameter; nor
# are the embedding runtimes and identities, which the first step fixes: with_runtimes)
EVERY_FIELD = RunSettings(
    docs="s3://kb/docs",
    more_docs=("s3://kb/more",),
    testset="s3://kb/eval/testset.json",
    space=SearchSpace(chunk_sizes=(64, 128), top_ks=(2,), search_types=("mmr",)),
    optimization_metric="context_correctness",
    max_configs=2,
    max_document_bytes=10_000,
    max_questions=7,
    max_llm_calls=90,
    seed=3,
    skip_unresolved=True,
    embedding_cache="s3://kb/cache",
    cache_max_gb=1.5,
    baseline="latest",
    keep_collections=True,
    llm=LLMSettings(judge="judge-m", temperature=0.3, timeout_s=7.0),
    qa_generation=QASettings(model="qa-m", num_questions=5),
    patterns=1,
    embedding_shard_bytes=1234,
    retrieval_question_blocks=2,
    memory_limit="4Gi",
    sweep_name="kb-nightly",
    strategy="halving",
    trials_at_once=3,
    agents=("mybot=http://bot.example:8080/v1",),
)
AUTORAG_DEFAULTS = {"preset": "", "vector_io_provider_id": ""}


def pipeline_parameters(settings: RunSettings) -> dict:
    """The pipeline's parameters for ``settings``, as ``ragsweep submit`` sends them."""
    arguments = pipeline_arguments(settings)
    return {
        **arguments,
        **AUTORAG_DEFAULTS,
        "input_data_bucket_name": "",
        "test_data_bucket_name": "",
        "input_data_keys": list(settings.more_docs),
    }


def test_every_field_is_set_away_from_its_default():
    defaults = RunSettings("d", "t")
    unchanged = [
        f.name
        for f in fields(RunSettings)
        if getattr(EVERY_FIELD, f.name) == getattr(defaults, f.name)
    ]
    assert unchanged == ["parallelism", "embedding_runtimes", "embedding_identities"]


def test_the_pipeline_parameters_give_back_the_same_settings():
    """A field the pipeline's parameters leave out would change what a run means on a
    cluster without a word: every one travels."""
    assert run_settings(pipeline_parameters(EVERY_FIELD)) == EVERY_FIELD


def test_the_settings_artifact_gives_back_the_same_settings(tmp_path):
    written = configured(tmp_path / "settings", **pipeline_parameters(EVERY_FIELD))
    fixed = with_runtimes(EVERY_FIELD)  # the runtimes and identities the first step fixes
    assert fixed.embedding_runtimes and fixed.embedding_identities
    assert read_settings(written.path) == fixed
    assert RunSettings.from_dict(fixed.to_dict()) == fixed
    local = replace(EVERY_FIELD, parallelism=4)  # a local run's own, kept in its folder
    assert RunSettings.from_dict(local.to_dict()) == local


def test_autorag_parameters_are_applied_once_in_the_settings():
    parameters = {**pipeline_parameters(EVERY_FIELD), "preset": "speed"}
    parameters["optimization_max_rag_patterns"] = 0  # the preset's grid is larger
    settings = run_settings(parameters)
    assert settings.space.chunkers == ("sentence",)
    assert settings.space.chunk_sizes != EVERY_FIELD.space.chunk_sizes


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"optimization_max_rag_patterns": 1}, "more than the budget of 1"),
        ({"sweep_name": "a b"}, "sweep_name (--sweep-name) 'a b': a sweep name is"),
        ({"patterns": -1}, "patterns (--patterns): must be 0 (none) or more, not -1"),
        ({"llm": {"temperature": 5}}, "llm: field 'temperature': must be between 0 and 2"),
        ({"optimization_metric": "nope"}, "nope"),
        ({"input_data_key": "", "input_data_keys": []}, "no documents: give input_data_key"),
    ],
)
def test_a_bad_parameter_is_refused_when_the_settings_are_built(change, message):
    with pytest.raises(RagsweepError) as error:
        run_settings({**pipeline_parameters(EVERY_FIELD), **change})
    assert message in str(error.value)
