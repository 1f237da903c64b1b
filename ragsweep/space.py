"""The search space: which configurations to evaluate, each with a stable id and a label.

A configuration is one chunk config (chunker, size, overlap, embedding model) crossed with
one retrieval/answer setting (Top K, search type, answerer). Chunk configs are the expensive
part (they need embeddings), so the pipeline fans out over them and evaluates every
retrieval/answer setting of a chunk config in one pass.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from dataclasses import asdict, dataclass, fields
from typing import Any

from ragsweep.errors import RagsweepError

log = logging.getLogger("ragsweep")

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class SearchSpace:
    """Lists of values to sweep; every combination that makes sense is one configuration."""

    chunkers: tuple[str, ...] = ("sentence",)
    chunk_sizes: tuple[int, ...] = (64, 128, 256)
    chunk_overlaps: tuple[int, ...] = (16,)
    embedding_models: tuple[str, ...] = (DEFAULT_EMBEDDING_MODEL,)
    top_ks: tuple[int, ...] = (1, 3, 5)
    search_types: tuple[str, ...] = ("similarity", "mmr")
    answerers: tuple[str, ...] = ("extractive",)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "search space") -> SearchSpace:
        """Build and validate a space from plain data (pipeline parameters, YAML, CLI flags)."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise RagsweepError(f"{source}: unknown field(s) {unknown}; known: {sorted(known)}")
        values = {}
        for name, value in data.items():
            if value is None:
                continue
            if isinstance(value, (str, int)):
                value = [value]
            if not isinstance(value, (list, tuple)) or not value:
                raise RagsweepError(f"{source}: field '{name}': expected a non-empty list")
            want = int if name in ("chunk_sizes", "chunk_overlaps", "top_ks") else str
            if want is int:  # pipeline parameters arrive as JSON numbers: 64.0 means 64
                value = [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]
            for item in value:
                if not isinstance(item, want) or isinstance(item, bool):
                    raise RagsweepError(
                        f"{source}: field '{name}': expected {want.__name__} values, got {item!r}"
                    )
            values[name] = tuple(dict.fromkeys(value))  # keep order, drop repeats
        space = cls(**values)
        space.validate(source)
        return space

    def to_dict(self) -> dict[str, list]:
        return {name: list(value) for name, value in asdict(self).items()}

    def validate(self, source: str = "search space") -> None:
        from ragsweep.answering import check_answerer
        from ragsweep.chunking import CHUNKERS
        from ragsweep.retrieval import SEARCH_TYPES

        for name, registry in [
            ("chunkers", CHUNKERS),
            ("search_types", SEARCH_TYPES),
        ]:
            for value in getattr(self, name):
                if value not in registry:
                    raise RagsweepError(
                        f"{source}: field '{name}': unknown value {value!r}; "
                        f"choose from {sorted(registry)}"
                    )
        for value in self.answerers:
            try:
                check_answerer(value)
            except RagsweepError as exc:
                raise RagsweepError(f"{source}: field 'answerers': {exc}") from None
        for name in ("chunk_sizes", "top_ks"):
            for value in getattr(self, name):
                if value < 1:
                    raise RagsweepError(f"{source}: field '{name}': {value} is not positive")
        for value in self.chunk_overlaps:
            if value < 0:
                raise RagsweepError(f"{source}: field 'chunk_overlaps': {value} is negative")
        if not self.chunk_configs():
            raise RagsweepError(
                f"{source}: no valid chunk configuration: every overlap is at least half "
                "of every chunk size"
            )

    def chunk_configs(self) -> list[dict[str, Any]]:
        """Every valid (chunker, size, overlap, model); an overlap of half the size or more
        is pruned with a note, since consecutive chunks would then repeat most of each other."""
        configs = []
        for chunker, size, overlap, model in itertools.product(
            self.chunkers, self.chunk_sizes, self.chunk_overlaps, self.embedding_models
        ):
            if 2 * overlap >= size:
                log.info("pruned chunk size %d with overlap %d: overlap >= size / 2", size, overlap)
                continue
            config = {
                "chunker": chunker,
                "chunk_size": size,
                "chunk_overlap": overlap,
                "embedding_model": model,
            }
            configs.append({"chunk_config_id": config_id(config), **config})
        return configs

    def configs(self, chunk_config: dict[str, Any]) -> list[dict[str, Any]]:
        """The full configurations that share ``chunk_config``, each with id and label."""
        base = {k: v for k, v in chunk_config.items() if k != "chunk_config_id"}
        out = []
        for top_k, search_type, answerer in itertools.product(
            self.top_ks, self.search_types, self.answerers
        ):
            config = {**base, "top_k": top_k, "search_type": search_type, "answerer": answerer}
            out.append({"config_id": config_id(config), "label": label(config), **config})
        return out

    def all_configs(self) -> list[dict[str, Any]]:
        return [c for chunk in self.chunk_configs() for c in self.configs(chunk)]


def chunk_config_from(data: dict[str, Any]) -> dict[str, Any]:
    """A chunk config as a pipeline loop hands it over (JSON numbers come back as floats:
    64 arrives as 64.0), made canonical again so that configuration ids match."""
    config = {
        key: int(value) if isinstance(value, float) and value.is_integer() else value
        for key, value in data.items()
        if key != "chunk_config_id"
    }
    return {"chunk_config_id": config_id(config), **config}


def config_id(config: dict[str, Any]) -> str:
    """A stable id: the hash of the configuration's canonical JSON form."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def label(config: dict[str, Any]) -> str:
    """A short readable name, e.g. ``sentence-256/16 all-MiniLM-L6-v2 k=5 mmr extractive``."""
    model = config["embedding_model"].rstrip("/").rsplit("/", 1)[-1]
    return (
        f"{config['chunker']}-{config['chunk_size']}/{config['chunk_overlap']} {model} "
        f"k={config['top_k']} {config['search_type']} {config['answerer']}"
    )
