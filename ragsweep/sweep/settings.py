"""Everything a run is asked to do, in one place: ``RunSettings``, built and validated once
(from ``ragsweep run``'s options, ``ragsweep.sweep.options``, or from the pipeline's
parameters, ``ragsweep.kubeflow.parameters``); the pipeline's parameters it starts; the
settings artifact the pipeline's first step writes and every later step reads; and what is
stored with its results."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ragsweep import __version__
from ragsweep.answering.agents import Agent, parse_agents
from ragsweep.core.errors import RagsweepError, check_at_least
from ragsweep.core.option_fields import BUDGET, NOT, SWEEP, declared, option
from ragsweep.core.schemas import config_id, read_table, settings_of, write_table
from ragsweep.documents.qagen import QASettings
from ragsweep.documents.testsets import NAME, NAME_RULE
from ragsweep.evaluation import statistics
from ragsweep.evaluation.leaderboard import AUTO_METRIC, check_metric, unmeasured
from ragsweep.models import embedding
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.fanout import DEFAULT_SHARD_BYTES, LOCAL_SHARD_BYTES
from ragsweep.sweep.sizing import parse_size
from ragsweep.sweep.space import DEFAULT_MAX_CONFIGS, SearchSpace, configs_table

DEFAULT_PATTERNS = 3  # the best configurations written as deployable patterns
DOCUMENT_HASH_CHARS = 16  # per document, enough to tell an edit
HASH_BATCH = 1000  # documents whose texts are hashed at a time


def check_sweep_name(name: str, source: str = "--sweep") -> str:
    """``name`` when it can name a sweep (empty: unnamed); else a clear error. A sweep's
    name follows the rule of a stored test set's (``testsets.NAME``)."""
    if name and not NAME.fullmatch(name):
        raise RagsweepError(f"{source} {name!r}: a sweep name is {NAME_RULE}")
    return name


GRID, HALVING, MODEL = "grid", "halving", "model"  # how the configurations are evaluated
STRATEGIES = (GRID, HALVING, MODEL)


def check_strategy(strategy: str, source: str = "strategy (--strategy)") -> str:
    """``strategy`` when it names a search strategy; else a clear error."""
    if strategy not in STRATEGIES:
        raise RagsweepError(f"{source} {strategy!r}: expected one of {', '.join(STRATEGIES)}")
    return strategy


def check_count(patterns: int, source: str = "--patterns") -> int:
    """``patterns`` when it is a count of patterns to write (0: none); else a clear error."""
    if isinstance(patterns, bool) or not isinstance(patterns, int):
        raise RagsweepError(f"{source}: expected a number of patterns, got {patterns!r}")
    return int(check_at_least(patterns, 0, source, " (none)"))


@dataclass(frozen=True)
class RunSettings:
    """Everything a run is asked to do. Each field that is a run option declares it
    (``ragsweep.core.option_fields``): its help, bounds and AutoRAG's name."""

    docs: str = option(  # a folder or s3://bucket/prefix
        help="Documents: a folder or s3://bucket/prefix (required unless --resume).",
        autorag="input_data_key",
        pipeline=NOT,  # the pipeline's: input_data_bucket_name, input_data_key(s)
    )
    testset: str = option(  # AutoRAG .json or Giskard .jsonl, a path or s3://bucket/key
        "",
        help="Test data: .json (Red Hat AutoRAG), .jsonl (Giskard) or .arrow (ragsweep's "
        "own), a path or s3://bucket/key; none: generate one with Giskard (--qa-llm).",
        autorag="test_data_key",
        pipeline=NOT,  # the pipeline's: test_data_bucket_name, test_data_key
    )
    space: SearchSpace = field(default_factory=SearchSpace)
    optimization_metric: str = option(
        AUTO_METRIC,
        help="Metric to rank by; auto: the judge's correctness with --judge, else "
        "answer_correctness. AutoRAG's answer_relevance (with --judge) and overall_score "
        "are scored when ranked by.",
        name="metric",
        autorag="optimization_metric",
        form=BUDGET,
    )
    max_configs: int = option(
        DEFAULT_MAX_CONFIGS,
        help="Refuse a larger grid (0: no limit); with --strategy model, the most "
        "configurations whose answers are evaluated.",
        autorag="optimization_max_rag_patterns",
        least=0,
        meaning=" (no limit)",
        form=BUDGET,
    )
    max_document_bytes: int = option(
        0,
        help="Document budget in bytes of text: every document the test set cites first, "
        "then others in a seeded order while they fit (0: every document).",
        least=0,
        meaning=" (every document)",
        form=BUDGET,
    )
    max_questions: int = option(
        0,
        help="Evaluate a seeded random sample of this many questions (0: every question).",
        least=0,
        meaning=" (every question)",
        form=BUDGET,
    )
    max_llm_calls: int = option(
        0,
        help="LLM calls (answers and judge verdicts) the evaluation may make; above it, "
        "successive halving (0: no limit, the full grid).",
        least=0,
        meaning=" (no limit)",
        form=BUDGET,
    )
    strategy: str = option(
        GRID,
        help="grid (every configuration; successive halving above --max-llm-calls), "
        "halving (successive halving even within the budget), or model (a surrogate of the "
        "free retrieval metrics picks which configurations answer, at most --max-configs: "
        "docs/search.md).",
        form=BUDGET,
    )
    trials_at_once: int = option(
        1,
        help="With --strategy model: configurations proposed at once and answered "
        "together (for an endpoint that serves many requests at once); 1: one at a time.",
        least=1,
        form=BUDGET,
    )
    seed: int = option(
        42, help="Seed of the samples and of successive halving.", least=0, form=BUDGET
    )
    skip_unresolved: bool = option(
        False,
        help="Leave out (with a warning) the questions whose reference documents or context "
        "match no document, instead of stopping.",
        form=SWEEP,
    )
    embedding_cache: str = option(  # empty: embeddings are not kept
        "",
        help="Embedding cache: a folder or s3://bucket/prefix ('none': off). A local run's "
        "default: RAGSWEEP_EMBEDDING_CACHE if set (one cache for a team), else "
        "~/.cache/ragsweep (RAGSWEEP_CACHE_DIR moves it); on the pipeline, an s3:// prefix "
        "read with the input data connection, empty: not kept.",
        flags=("--cache",),
    )
    cache_max_gb: float = option(
        0.0,
        help="Cap the embedding cache at this many GB; the least recently used shards are "
        "evicted (0: no cap).",
        least=0,
        meaning=" (no cap)",
    )
    baseline: str = option(
        "",
        help="Compare with this stored run id, or latest (the latest successful run of the "
        "same sweep name); empty: no comparison (docs/regression.md).",
        form=SWEEP,
    )
    keep_collections: bool = option(
        False,
        help="Keep the vector stores' collections after retrieval (their names are logged).",
    )
    llm: LLMSettings = field(default_factory=LLMSettings)  # answer prompt, judge, transport
    qa_generation: QASettings = field(default_factory=QASettings)  # when testset is ""
    parallelism: int = option(
        1,
        help="Chunk configurations processed at once, sharing this machine's cores "
        "(submit and schedule: their own --parallelism).",
        least=1,
        pipeline=NOT,
        form=BUDGET,
    )
    patterns: int = option(
        DEFAULT_PATTERNS,
        help="Write the best N configurations as runnable patterns (pattern.json, "
        "evaluation_results.json, indexing.py, inference.py) under patterns/ (0: none).",
        least=0,
        meaning=" (none)",
        form=SWEEP,
    )
    embedding_shard_bytes: int = option(
        DEFAULT_SHARD_BYTES,
        help="When the documents hold more bytes of text than this, embed each chunk set "
        "in shards of about this size, one step each (0: never). On one machine the "
        f"shards run one after another and only add time: `ragsweep run` defaults to "
        f"{LOCAL_SHARD_BYTES}.",
        least=0,
        meaning=" (never shard)",
    )
    retrieval_question_blocks: int = option(
        1,
        help="Split each group's retrieval into this many parallel steps, each on a block of "
        "the questions, so that a large chunk set's retrieval fits its memory (every chunk "
        "set is then embedded by the shard steps first, once); 1: one step per group.",
        least=1,
    )
    memory_limit: str = option(
        "",
        help="Refuse a corpus, before the sweep, when a step's estimated peak memory "
        "(chunk_embed, embed_shard, retrieve) exceeds this, e.g. 2GB, 1500MB or 4Gi; "
        "empty: no check (on a cluster: each of those steps' pod memory limit).",
    )
    more_docs: tuple[str, ...] = ()  # more locations (AutoRAG's input_data_keys)
    sweep_name: str = option(
        "",
        help="Name the sweep (letters, digits, . _ -): baseline latest then finds the last "
        "run of this name, whatever changed in the documents, test set or grid, and says "
        "what changed; unnamed: a hash of the documents, test set, space and metric.",
        flags=("--sweep",),
        form=SWEEP,
    )
    agents: tuple[str, ...] = option(
        (),
        help="A deployed RAG application to evaluate beside the sweep, NAME=URL (an "
        "OpenAI-compatible chat endpoint that retrieves on its own; its key, if it takes "
        "one: docs/agents.md): a leaderboard row agent:NAME. Repeatable.",
        flags=("--agent",),
        repeat=True,
    )
    # fixed by the pipeline's first step (with_runtimes), not parameters: each embedding
    # model's runtime, which every step embeds with, and its identity (files and runtime)
    embedding_runtimes: dict[str, str] = field(default_factory=dict)
    embedding_identities: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_metric(self.optimization_metric)
        missing = unmeasured(list(self.space.answerers)).get(self.optimization_metric)
        if missing:
            raise RagsweepError(
                f"optimization_metric (--metric) {self.optimization_metric}: cannot rank "
                f"these configurations: {missing}"
            )
        for data_field in fields(self):
            declared_as = declared(data_field)
            if declared_as is not None and declared_as.least is not None:
                name = data_field.name
                flag = "--" + name.replace("_", "-")
                value = getattr(self, name)
                check_at_least(value, declared_as.least, f"{name} ({flag})", declared_as.meaning)
        check_strategy(self.strategy)
        if self.strategy != MODEL:  # model: the most configurations answered, not a cap
            self.space.check_budget(self.max_configs, "--max-configs")
        check_count(self.patterns, "patterns (--patterns)")
        parse_size(self.memory_limit, "memory_limit (--memory-limit)")
        check_sweep_name(self.sweep_name, "sweep_name (--sweep-name)")
        self.deployed()  # each NAME=URL checked

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the settings artifact's), the inverse of ``from_dict``."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return {
            **data,
            "space": self.space.to_dict(),
            "llm": self.llm.to_dict(),
            "qa_generation": self.qa_generation.to_dict(),
            "more_docs": list(self.more_docs),
            "agents": list(self.agents),
        }

    def deployed(self) -> list[Agent]:
        """The deployed assistants evaluated beside the sweep (``--agent``)."""
        return parse_agents(self.agents, "agents (--agent)")

    def all_configs(self) -> list[dict[str, Any]]:
        """Every configuration of the space, then each deployed assistant's row."""
        return self.space.all_configs() + [agent.config() for agent in self.deployed()]

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "settings") -> RunSettings:
        """Settings from ``to_dict``'s data; the space was validated when they were built."""
        return cls(
            **{
                **data,
                "space": SearchSpace.from_dict(data["space"], source, check=False),
                "llm": LLMSettings.from_dict(data["llm"], source),
                "qa_generation": QASettings.from_dict(data["qa_generation"], source),
                "more_docs": tuple(data["more_docs"]),
                "agents": tuple(data.get("agents") or ()),  # absent from older settings
            }
        )

    def fix_runtimes(self) -> None:
        """Embed in this process with the runtimes the run fixed (``with_runtimes``)."""
        embedding.fix_runtimes(self.embedding_runtimes)

    def record(
        self, testset: pa.Table | None = None, documents: pa.Table | None = None
    ) -> dict[str, Any]:
        """What the run evaluated, stored with its results. ``sweep_key`` identifies the
        sweep, so that nightly runs of it can be compared: a hash of the settings that change
        what is measured and of the content of the ``testset`` (its questions' ids and
        versions) and of the ``documents`` (their texts): moving a file leaves it as it is,
        editing one changes it. Without those tables (a run that failed before reading
        them) their locations stand in for their content.

        ``sweep_name`` is what ``baseline=latest`` follows: the name given, else the sweep
        key (so an unnamed sweep changes with its content, as before names). With the
        documents, each one's content hash is kept (``document_hashes``), so a comparison
        can say which documents were added, removed or edited."""
        content = {"docs": self.docs, "testset": self.testset}
        hashes = {}
        if self.more_docs:
            content["more_docs"] = list(self.more_docs)
        if testset is not None and documents is not None:
            from ragsweep.documents.testsets import fingerprint

            digests = text_hashes(documents)  # one pass over the texts for both
            content = {"documents_content": _fingerprint(digests)}
            content["testset_content"] = fingerprint(testset)
            hashes = {"document_hashes": _by_id(digests)}
        sweep = {
            **content,
            "search_space": self.space.to_dict(),  # with its stores, unless memory alone
            "optimization_metric": self.optimization_metric,
            "max_document_bytes": self.max_document_bytes,
            "max_questions": self.max_questions,
            "seed": self.seed,
            "llm": self.llm.to_dict(),
        }
        if self.max_llm_calls:  # absent when 0, so the sweep keys of older runs still match
            sweep["max_llm_calls"] = self.max_llm_calls
        if not self.testset:
            sweep["qa_generation"] = self.qa_generation.to_dict()
        if self.agents:  # absent without, so the sweep keys of older runs still match
            sweep["agents"] = [agent.name for agent in self.deployed()]
        key = config_id({**sweep, "llm": self.llm.sweep_dict()})  # deadlines aside
        return {
            **sweep,
            "docs": self.docs,
            **({"more_docs": list(self.more_docs)} if self.more_docs else {}),
            "testset": self.testset,
            "sweep_key": key,
            "sweep_name": self.sweep_name or key,
            **hashes,
            "judge": self.llm.judge or "none (metrics computed without an LLM)",
            "statistics": {
                "interval": "95% cluster bootstrap, clusters = documents, sections or questions",
                "test": "step-down max-statistic vs the leader, null-imposed wild bootstrap",
                "bootstrap_resamples": statistics.RESAMPLES,
                "seed": statistics.SEED,
            },
            "ragsweep_version": __version__,
            # outside the sweep key: a nightly keeps its baseline, and the comparison says
            **self.embedding_record(),
        }

    def embedding_record(self) -> dict[str, Any]:
        """The models' runtimes and identities, when the run fixed them: ``[model, value]``
        pairs, by model, so that MLflow logs each as one parameter (a model's name, such as
        ``all-MiniLM-L6-v2@onnx``, is no valid parameter name)."""
        if not self.embedding_runtimes:
            return {}
        return {
            "embedding_runtimes": sorted(map(list, self.embedding_runtimes.items())),
            "embedding_identities": sorted(map(list, self.embedding_identities.items())),
        }


def with_runtimes(settings: RunSettings, gpus: int = 0) -> RunSettings:
    """``settings`` with each embedding model's runtime and identity fixed, once for the run
    (the pipeline's first step): its suffix's, else the default, PyTorch when the embedding
    steps have a GPU (``gpus``, compiled in by ``--gpu``; 0: they run where this does, so
    a GPU here counts). Every later step embeds with these (``fix_runtimes``): a GPU step and
    a CPU step never embed chunks and questions with two runtimes."""
    gpu = gpus > 0 or None  # None: whether torch sees a GPU here
    models = settings.space.embedding_models
    runtimes = {m: embedding.runtime(m, gpu) for m in models}
    identities = {m: embedding.identity(m, runtimes[m]) for m in models}
    return replace(settings, embedding_runtimes=runtimes, embedding_identities=identities)


def write_settings(settings: RunSettings, path: str | Path) -> None:
    """The settings artifact: every configuration of the space, one row each (kind
    ``settings``), with the whole ``settings`` in its metadata."""
    write_table(configs_table(settings.space.all_configs()), path, "settings", settings.to_dict())


def read_settings(path: str | Path) -> RunSettings:
    """The settings a settings artifact holds (``write_settings``)."""
    return RunSettings.from_dict(settings_of(read_table(path, "settings")), str(path))


def text_hashes(documents: pa.Table) -> list[tuple[str, str]]:
    """Each document's ``(doc_id, SHA-256 of its text's UTF-8)``, in the table's order. The
    texts are read ``HASH_BATCH`` documents at a time, as the bytes Arrow holds: never all
    of them as Python strings (at 100,000 documents that took 554 MB above the table)."""
    out = []
    for first in range(0, documents.num_rows, HASH_BATCH):
        batch = documents.slice(first, HASH_BATCH)
        texts = pc.cast(batch["text"], pa.binary()).to_pylist()
        ids = batch["doc_id"].to_pylist()
        out += [(i, hashlib.sha256(t).hexdigest()) for i, t in zip(ids, texts, strict=True)]
    return out


def documents_fingerprint(documents: pa.Table) -> str:
    """A hash of the documents' texts, whatever their ids or order."""
    return _fingerprint(text_hashes(documents))


def document_hashes(documents: pa.Table) -> list[list[str]]:
    """Each document's ``[doc_id, hash of its text]``, by id: a list, so that MLflow logs it
    as one parameter, not one per document."""
    return _by_id(text_hashes(documents))


def _fingerprint(digests: list[tuple[str, str]]) -> str:
    return hashlib.sha256("\n".join(sorted(d for _, d in digests)).encode()).hexdigest()


def _by_id(digests: list[tuple[str, str]]) -> list[list[str]]:
    return sorted([doc_id, digest[:DOCUMENT_HASH_CHARS]] for doc_id, digest in digests)
