"""``ragsweep run``'s options as ``RunSettings``: the one place they are composed (a search
space file with the options given over it, answer models, prompts read from files, test set
generation) before ``RunSettings`` validates the whole."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.qagen import QASettings
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, answerer_of

# option -> search-space field; an option given overrides the --space file's field
SPACE_LISTS = {
    "chunkers": "chunkers",
    "chunk_sizes": "chunk_sizes",
    "chunk_overlaps": "chunk_overlaps",
    "embedding_models": "embedding_models",
    "top_k": "top_ks",
    "search_types": "search_types",
    "mmr_lambdas": "mmr_lambdas",
    "rerankers": "rerankers",
    "query_transforms": "query_transforms",
    "vector_stores": "vector_stores",
}
SPACE_TEXTS = ("query_prefix", "passage_prefix")


def run_settings(options: Mapping[str, Any]) -> RunSettings:
    """The settings of ``ragsweep run`` given ``options``, its parameters by name (the test
    data a file, or '' to generate one)."""
    from ragsweep.models.replies import cache_dir

    o = options
    answerers = [answerer_of(m) for m in o["llm"].split(",") if m.strip()]
    llm = LLMSettings.from_dict(
        {
            "temperature": o["temperature"],
            "max_tokens": o["max_tokens"],
            "system_prompt": text_or_file(o["system_prompt"], "--system-prompt"),
            "prompt_template": text_or_file(o["prompt_template"], "--prompt-template"),
            "judge": o["judge"],
            "judge_system_prompt": text_or_file(o["judge_prompt"], "--judge-prompt"),
            "concurrency": o["concurrency"],
            "timeout_s": o["llm_timeout"],
            "max_retries": o["llm_retries"],
            "judge_timeout_s": o["judge_timeout"],
            "judge_max_retries": o["judge_retries"],
        },
        source="options",
    )
    if o["metric"] in ("correctness", "answer_relevance") and not o["judge"]:
        raise RagsweepError(f"--metric {o['metric']}: needs a judge (--judge MODEL)")
    models = answer_models(answerers)
    qa_llm = o["qa_llm"] or (models[0] if models else "")
    if not o["testset"] and not qa_llm:
        raise RagsweepError("--testset: none given; to generate one, name a model (--qa-llm)")
    return RunSettings(
        docs=o["docs"],
        testset=o["testset"],
        space=search_space(o, answerers),
        optimization_metric=o["metric"],
        max_configs=o["max_configs"],
        max_document_bytes=o["max_document_bytes"],
        max_questions=o["max_questions"],
        max_llm_calls=o["max_llm_calls"],
        strategy=o["strategy"],
        trials_at_once=o["trials_at_once"],
        seed=o["seed"],
        skip_unresolved=o["skip_unresolved"],
        embedding_cache="" if o["cache"] == "none" else str(o["cache"] or cache_dir()),
        cache_max_gb=o["cache_max_gb"],
        baseline=o["baseline"],
        keep_collections=o["keep_collections"],
        llm=llm,
        qa_generation=QASettings.from_dict(
            {
                "model": qa_llm,
                "num_questions": o["num_questions"],
                "question_types": o["question_types"],
            },
            source="options",
        ),
        parallelism=o["parallelism"],
        patterns=o["patterns"],
        embedding_shard_bytes=o["embedding_shard_bytes"],
        sweep_name=o["sweep"],
        agents=tuple(o.get("agent") or ()),
    )


def search_space(options: Mapping[str, Any], answerers: list[str]) -> SearchSpace:
    """The ``--space`` file's space (else the default one) with the options given over it."""
    path = options["space"]
    data = SearchSpace.from_yaml(path).to_dict() if path else {}
    for option, name in SPACE_LISTS.items():
        if options[option] is not None:
            data[name] = values(options[option])
    data.update({name: options[name] for name in SPACE_TEXTS if options[name] is not None})
    if answerers:
        data["answerers"] = answerers
    return SearchSpace.from_dict(data, source=str(path or "options"))


def answer_models(answerers: list[str]) -> list[str]:
    """The models of ``answerers`` that are asked through an LLM endpoint."""
    from ragsweep.answering.answerers import uses_model

    return [a.partition(":")[2] for a in answerers if uses_model(a)]


def values(text: str) -> list:
    """Comma-separated values; numbers become numbers, for the search space to check."""
    out: list = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        try:
            out.append(int(item))
        except ValueError:
            try:
                out.append(float(item))
            except ValueError:
                out.append(item)
    return out


def text_or_file(value: str | None, flag: str) -> str | None:
    """The option's text, or the contents of the file it names as ``@path``."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except OSError as exc:
        raise RagsweepError(f"{flag}: {value[1:]}: {exc.strerror}") from None
