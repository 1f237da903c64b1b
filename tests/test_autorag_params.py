"""Red Hat AutoRAG's pipeline parameters: the compiled pipeline takes each one ragsweep maps,
the README's table is the one in ragsweep/autorag.py, and AutoRAG's values mean the same."""

from pathlib import Path

import pytest
import yaml

from ragsweep.autorag import PARAMETERS, README_BEGIN, README_END, readme_table
from ragsweep.errors import RagsweepError
from ragsweep.leaderboard import check_metric
from ragsweep.space import SearchSpace

REPO = Path(__file__).resolve().parent.parent


def compiled_parameters() -> set[str]:
    spec, *_ = yaml.safe_load_all((REPO / "pipelines/sweep_pipeline.yaml").read_text())
    return set(spec["root"]["inputDefinitions"]["parameters"])


def test_the_compiled_pipeline_has_every_ragsweep_parameter_of_the_table():
    compiled = compiled_parameters()
    named = {p.ragsweep for p in PARAMETERS if p.ragsweep}
    assert named <= compiled, sorted(named - compiled)
    same = {p.autorag for p in PARAMETERS if p.autorag == p.ragsweep}
    assert {"generation_models", "embedding_models", "optimization_metric"} <= same


def test_the_readme_table_is_the_one_generated_from_the_code():
    readme = (REPO / "README.md").read_text()
    assert readme.count(README_BEGIN) == 1 and readme.count(README_END) == 1
    assert readme_table() in readme, "README out of date: paste ragsweep.autorag.readme_table()"


def test_every_row_says_what_ragsweep_does_instead():
    assert len({p.autorag for p in PARAMETERS}) == len(PARAMETERS)
    for p in PARAMETERS:
        assert p.note.strip(), p.autorag
    assert [p.autorag for p in PARAMETERS if p.ragsweep is None] == ["preset"]


def test_generation_models_are_answered_through_the_llm_endpoint():
    space = SearchSpace.from_parameters({}, ["all-MiniLM-L6-v2"], ["granite-3.3", "extractive"])
    assert space.answerers == ("llm:granite-3.3", "extractive")
    parameters = space.to_parameters()
    assert parameters["generation_models"] == ["granite-3.3", "extractive"]
    assert "answerers" not in parameters["search_space"]
    again = SearchSpace.from_parameters(
        parameters["search_space"], parameters["embedding_models"], ["granite-3.3", "extractive"]
    )
    assert again == space


def test_search_space_answerers_still_work_when_generation_models_is_empty():
    old = SearchSpace.from_parameters({"answerers": ["llm:m1"]}, ["all-MiniLM-L6-v2"], [])
    assert old.answerers == ("llm:m1",)
    assert SearchSpace.from_parameters({}, ["all-MiniLM-L6-v2"], []).answerers == ("extractive",)


def test_answer_models_given_twice_are_refused():
    with pytest.raises(RagsweepError, match="once, as the generation_models parameter"):
        SearchSpace.from_parameters({"answerers": ["llm:m1"]}, ["all-MiniLM-L6-v2"], ["m2"])


@pytest.mark.parametrize("metric", ["faithfulness", "answer_correctness", "context_correctness"])
def test_autorag_optimization_metrics_are_ragsweep_metrics(metric):
    check_metric(metric)


@pytest.mark.parametrize("metric", ["answer_relevance", "overall_score"])
def test_autorag_only_metrics_are_refused_with_the_reason(metric):
    with pytest.raises(RagsweepError, match=f"metric '{metric}': AutoRAG's .* no counterpart"):
        check_metric(metric)


def test_generation_models_and_the_older_llm_option_are_one_option(tmp_path, monkeypatch):
    from test_cli import assert_user_error, ragsweep

    monkeypatch.delenv("RAGSWEEP_LLM_BASE_URL", raising=False)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Tidewater listens on port 8443.\n")
    testset = tmp_path / "t.json"
    testset.write_text(
        '[{"question": "Port?", "correct_answers": ["8443"], '
        '"correct_answer_document_ids": ["a.md"]}]'
    )
    base = ["run", "--docs", str(docs), "--testset", str(testset), "--no-store"]
    new = ragsweep(*base, "--generation-models", "extractive,granite")
    old = ragsweep(*base, "--llm", "extractive,granite")
    assert_user_error(new, "RAGSWEEP_LLM_BASE_URL")
    assert new.stderr == old.stderr
