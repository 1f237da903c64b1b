"""The pipeline's parameters (Red Hat AutoRAG's names among them) as ``RunSettings``: what
the pipeline's first step, ``configure``, writes as the settings artifact every later step
reads, and what ``ragsweep submit`` checks before it starts a run there."""

from __future__ import annotations

from typing import Any

from ragsweep.documents.qagen import QASettings
from ragsweep.documents.sources import locations
from ragsweep.documents.testsets import test_data_location
from ragsweep.kubeflow.autorag import apply
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.settings import RunSettings, check_sweep_name
from ragsweep.sweep.space import SearchSpace


def run_settings(parameters: dict[str, Any]) -> RunSettings:
    """The settings of a run of the pipeline with ``parameters`` (every one that defines
    the run; the Secrets' names and the side steps' own are not among them), validated:
    a mistake fails the run's first step, before any data is read."""
    p = parameters
    check_sweep_name(p["sweep_name"], "sweep_name")
    search_space = apply(p["search_space"], p["preset"], p["vector_io_provider_id"])
    docs, *more_docs = locations(
        p["input_data_bucket_name"], p["input_data_key"], p["input_data_keys"]
    )
    return RunSettings(
        docs=docs,
        more_docs=tuple(more_docs),
        testset=test_data_location(p["test_data_bucket_name"], p["test_data_key"]),
        space=SearchSpace.from_parameters(
            search_space, p["embedding_models"], p["generation_models"]
        ),
        optimization_metric=p["optimization_metric"],
        max_configs=p["optimization_max_rag_patterns"],
        max_document_bytes=p["max_document_bytes"],
        max_questions=p["max_questions"],
        max_llm_calls=p["max_llm_calls"],
        strategy=p["strategy"],
        trials_at_once=p["trials_at_once"],
        seed=p["seed"],
        skip_unresolved=p["skip_unresolved"],
        embedding_cache=p["embedding_cache"],
        cache_max_gb=p["cache_max_gb"],
        embedding_shard_bytes=p["embedding_shard_bytes"],
        baseline=p["baseline"],
        keep_collections=p["keep_collections"],
        llm=LLMSettings.from_dict(p["llm"], "llm"),
        qa_generation=QASettings.from_dict(p["qa_generation"], "qa_generation"),
        patterns=p["patterns"],
        sweep_name=p["sweep_name"],
        agents=tuple(p.get("agents") or ()),
    )
