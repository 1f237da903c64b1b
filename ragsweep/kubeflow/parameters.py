"""The pipeline's parameters (Red Hat AutoRAG's names among them) as ``RunSettings``: what
the pipeline's first step, ``configure``, writes as the settings artifact every later step
reads, and what ``ragsweep submit`` checks before it starts a run there."""

from __future__ import annotations

from typing import Any

from ragsweep.documents.sources import locations
from ragsweep.documents.testsets import test_data_location
from ragsweep.sweep.options import SHAPERS, build_settings, pipeline_options
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace

# the parameters configure reads besides the options': locations, and the nests' dicts
LOCATIONS = (
    "input_data_bucket_name",
    "input_data_key",
    "input_data_keys",
    "test_data_bucket_name",
    "test_data_key",
)
NESTS = ("search_space", "llm", "qa_generation")


def configure_parameters() -> dict[str, type]:
    """The parameters of the pipeline's first step, ``configure``, and their types: the
    locations, the nests' dicts, AutoRAG's preset and store, and each option's own."""
    out: dict[str, type] = {name: str for name in LOCATIONS}
    out["input_data_keys"] = list
    out.update({name: dict for name in NESTS})
    out.update({shaper.name: str for shaper in SHAPERS})
    out.update({o.parameter: o.kind for o in pipeline_options()})
    return out


def run_settings(parameters: dict[str, Any]) -> RunSettings:
    """The settings of a run of the pipeline with ``parameters`` (every one that defines
    the run; the Secrets' names and the side steps' own are not among them), validated:
    a mistake fails the run's first step, before any data is read."""
    p = parameters
    space = SearchSpace.data_of_parameters(
        p["search_space"], p["embedding_models"], p["generation_models"]
    )
    given = {o.name: p[o.parameter] for o in pipeline_options() if o.nest != "space"}
    # older runs' settings.json hold no preset nor store: their space has them applied
    given.update({shaper.name: p.get(shaper.name, "") for shaper in SHAPERS})
    docs, *more_docs = locations(
        p["input_data_bucket_name"], p["input_data_key"], p["input_data_keys"]
    )
    given.update(
        docs=docs, testset=test_data_location(p["test_data_bucket_name"], p["test_data_key"])
    )
    return build_settings(
        given,
        "pipeline parameters",
        space,
        p["llm"],
        p["qa_generation"],
        tuple(more_docs),
        {"llm": "llm", "qa_generation": "qa_generation"},  # the dict parameters' names
    )
