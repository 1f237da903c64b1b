"""Everything a run is asked to do, in one place: what the pipeline receives as parameters,
what a run folder records in ``settings.json``, and what is stored with its results."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ragsweep import __version__, statistics
from ragsweep.leaderboard import DEFAULT_METRIC, check_metric
from ragsweep.space import SearchSpace, config_id

# what identifies a sweep: nightly runs with the same values are compared with each other
SWEEP_FIELDS = (
    "docs",
    "testset",
    "search_space",
    "optimization_metric",
    "max_document_bytes",
    "max_questions",
    "seed",
)


@dataclass(frozen=True)
class RunSettings:
    docs: str  # a folder or s3://bucket/prefix
    testset: str  # AutoRAG .json or Giskard .jsonl, a path or s3://bucket/key
    space: SearchSpace = field(default_factory=SearchSpace)
    optimization_metric: str = DEFAULT_METRIC
    max_document_bytes: int = 0  # 0: every document
    max_questions: int = 0  # 0: every question
    seed: int = 42  # for both samples
    embedding_cache: str = ""  # a folder or s3:// prefix; empty: embeddings are not kept
    baseline: str = ""  # a stored run id, or "latest", to compare against; empty: none

    def __post_init__(self) -> None:
        check_metric(self.optimization_metric)

    def pipeline_arguments(self) -> dict[str, Any]:
        """The pipeline's parameters for this run."""
        arguments = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "space"}
        return {**arguments, "search_space": self.space.to_dict()}

    def record(self) -> dict[str, Any]:
        """What the run evaluated, stored with its results. ``sweep_key`` identifies the
        sweep, so that nightly runs of it can be compared."""
        arguments = self.pipeline_arguments()
        sweep = {name: arguments[name] for name in SWEEP_FIELDS}
        return {
            **sweep,
            "sweep_key": config_id(sweep),
            "judge": "none (metrics computed without an LLM)",
            "statistics": {
                "interval": "95% cluster bootstrap, clusters = first reference document",
                "test": "paired one-sided sign-flip vs the leader, Holm-adjusted",
                "bootstrap_resamples": statistics.RESAMPLES,
                "seed": statistics.SEED,
            },
            "ragsweep_version": __version__,
        }
