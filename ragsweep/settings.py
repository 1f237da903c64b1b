"""Everything a run is asked to do, in one place: what the pipeline receives as parameters,
what a run folder records in ``settings.json``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ragsweep.leaderboard import DEFAULT_METRIC, check_metric
from ragsweep.space import SearchSpace


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

    def __post_init__(self) -> None:
        check_metric(self.optimization_metric)

    def pipeline_arguments(self) -> dict[str, Any]:
        """The pipeline's parameters for this run."""
        arguments = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "space"}
        return {**arguments, "search_space": self.space.to_dict()}
