"""The search space: which configurations to evaluate, each with a stable id and a label.

A configuration is one chunk config (chunker, size, overlap, embedding model) crossed with
one retrieval/answer setting (Top K, search type and its parameters, answerer). Chunk
configs are the expensive part (they need embeddings), so the pipeline fans out over them
and evaluates every retrieval/answer setting of a chunk config in one pass.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from ragsweep.errors import RagsweepError

log = logging.getLogger("ragsweep")

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MAX_CONFIGS = 100

# field -> type of its values; every field but mmr_fetch_k is a list of values to sweep
FIELD_TYPES: dict[str, type] = {
    "chunkers": str,
    "chunk_sizes": int,
    "chunk_overlaps": float,  # tokens (a whole number) or a fraction of the size (below 1)
    "embedding_models": str,
    "top_ks": int,
    "search_types": str,
    "mmr_lambdas": float,
    "mmr_fetch_k": int,
    "answerers": str,
}
SCALARS = {"mmr_fetch_k"}


@dataclass(frozen=True)
class SearchSpace:
    """Lists of values to sweep; every combination that makes sense is one configuration."""

    chunkers: tuple[str, ...] = ("sentence",)
    chunk_sizes: tuple[int, ...] = (64, 128, 192)
    chunk_overlaps: tuple[float, ...] = (16,)
    embedding_models: tuple[str, ...] = (DEFAULT_EMBEDDING_MODEL,)
    top_ks: tuple[int, ...] = (1, 3, 5)
    search_types: tuple[str, ...] = ("similarity", "mmr")
    mmr_lambdas: tuple[float, ...] = (0.5,)
    mmr_fetch_k: int = 20
    answerers: tuple[str, ...] = ("extractive",)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "search space") -> SearchSpace:
        """Build and validate a space from plain data (pipeline parameters, YAML, CLI flags)."""
        if not isinstance(data, dict):
            raise RagsweepError(
                f"{source}: expected a mapping of fields, got {type(data).__name__}"
            )
        unknown = sorted(set(data) - set(FIELD_TYPES))
        if unknown:
            raise RagsweepError(f"{source}: unknown field(s) {unknown}; known: {list(FIELD_TYPES)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is None:
                continue
            checked = [_value(source, name, v) for v in _as_list(source, name, value)]
            values[name] = checked[0] if name in SCALARS else tuple(dict.fromkeys(checked))
        space = cls(**values)
        space.validate(source)
        return space

    @classmethod
    def from_yaml(cls, path: str | Path) -> SearchSpace:
        """Read a search-space YAML file: a mapping of the fields of ``SearchSpace``."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise RagsweepError(f"{path}: cannot read the search space ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise RagsweepError(f"{path}: malformed YAML{where}") from None
        return cls.from_dict(data or {}, source=str(path))

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> SearchSpace:
        """The space that holds exactly ``config`` (a configuration or a leaderboard row)."""
        values: dict[str, Any] = {
            f"{name}s": (config[name],)
            for name in ("chunker", "chunk_size", "chunk_overlap", "embedding_model", "answerer")
        }
        values.update(top_ks=(config["top_k"],), search_types=(config["search_type"],))
        if config.get("mmr_lambda") is not None:
            values.update(mmr_lambdas=(config["mmr_lambda"],), mmr_fetch_k=config["mmr_fetch_k"])
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {k: v if k in SCALARS else list(v) for k, v in asdict(self).items()}

    @classmethod
    def from_parameters(
        cls, search_space: dict[str, Any], embedding_models: list[str]
    ) -> SearchSpace:
        """The space of the pipeline's parameters: ``embedding_models`` (Red Hat AutoRAG's
        name) and ``search_space``, every other field."""
        if "embedding_models" in search_space:
            raise RagsweepError(
                "search_space: give the embedding models as the embedding_models parameter"
            )
        return cls.from_dict(
            {**search_space, "embedding_models": embedding_models}, "pipeline parameters"
        )

    def to_parameters(self) -> dict[str, Any]:
        """The pipeline's ``search_space`` and ``embedding_models`` parameters."""
        space = self.to_dict()
        return {"embedding_models": space.pop("embedding_models"), "search_space": space}

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
            if value < 0 or (value > 1 and not float(value).is_integer()):
                raise RagsweepError(
                    f"{source}: field 'chunk_overlaps': {value} is neither a number of tokens "
                    "nor a fraction of the chunk size below 1"
                )
        for value in self.mmr_lambdas:
            if not 0 <= value <= 1:
                raise RagsweepError(f"{source}: field 'mmr_lambdas': {value} is not in [0, 1]")
        if self.mmr_fetch_k < 1:
            raise RagsweepError(f"{source}: field 'mmr_fetch_k': {self.mmr_fetch_k} < 1")
        if not self.chunk_configs():
            raise RagsweepError(
                f"{source}: no valid chunk configuration: " + "; ".join(self.pruned())
            )

    def _chunk_candidates(self) -> list[tuple[dict[str, Any], str | None]]:
        """Every (chunk config, reason it is pruned or None), without repeats."""
        from ragsweep.embedding import max_input_tokens

        seen, out = set(), []
        for chunker, size, overlap, model in itertools.product(
            self.chunkers, self.chunk_sizes, self.chunk_overlaps, self.embedding_models
        ):
            tokens = round(overlap * size) if 0 < overlap < 1 else int(overlap)
            config = {
                "chunker": chunker,
                "chunk_size": size,
                "chunk_overlap": tokens,
                "embedding_model": model,
            }
            key = config_id(config)
            if key in seen:
                continue
            seen.add(key)
            limit = max_input_tokens(model)
            reason = None
            if 2 * tokens >= size:
                reason = (
                    f"chunk size {size} with overlap {tokens}: overlap is half the size or more"
                )
            elif limit is not None and size > limit:
                reason = f"chunk size {size} exceeds {model}'s maximum input of {limit} tokens"
            out.append(({"chunk_config_id": key, **config}, reason))
        return out

    def chunk_configs(self) -> list[dict[str, Any]]:
        """Every valid chunk configuration, the unit the pipeline fans out over."""
        return [config for config, reason in self._chunk_candidates() if reason is None]

    def pruned(self) -> list[str]:
        """Why each combination that is not evaluated was left out."""
        return [reason for _, reason in self._chunk_candidates() if reason is not None]

    def configs(self, chunk_config: dict[str, Any]) -> list[dict[str, Any]]:
        """The full configurations that share ``chunk_config``, each with id and label."""
        base = {k: v for k, v in chunk_config.items() if k != "chunk_config_id"}
        out = []
        for top_k, search_type, answerer in itertools.product(
            self.top_ks, self.search_types, self.answerers
        ):
            for params in self.search_params(search_type):
                config = {
                    **base,
                    "top_k": top_k,
                    "search_type": search_type,
                    **params,
                    "answerer": answerer,
                }
                out.append({"config_id": config_id(config), "label": label(config), **config})
        return out

    def search_params(self, search_type: str) -> list[dict[str, Any]]:
        """The parameter settings swept for ``search_type`` (one empty one if it has none)."""
        if search_type == "mmr":
            return [
                {"mmr_lambda": lam, "mmr_fetch_k": self.mmr_fetch_k} for lam in self.mmr_lambdas
            ]
        return [{}]

    def all_configs(self) -> list[dict[str, Any]]:
        return [c for chunk in self.chunk_configs() for c in self.configs(chunk)]

    def check_budget(self, max_configs: int) -> None:
        """Refuse a grid of more than ``max_configs`` configurations (0: no limit).

        The budget is Red Hat AutoRAG's ``optimization_max_rag_patterns``; ragsweep evaluates
        its grid exhaustively, so a larger grid is a mistake to fix, not one to sample from.
        """
        n = len(self.all_configs())
        if max_configs < 0:
            raise RagsweepError(f"the configuration budget must be 0 or more, got {max_configs}")
        if max_configs and n > max_configs:
            raise RagsweepError(
                f"the search space holds {n} configurations, more than the budget of "
                f"{max_configs} (optimization_max_rag_patterns): narrow the lists or raise it"
            )


def _as_list(source: str, name: str, value: Any) -> list:
    if name in SCALARS:
        return [value]
    if not isinstance(value, (list, tuple)):
        value = [value]
    if not value:
        raise RagsweepError(f"{source}: field '{name}': expected a non-empty list")
    return list(value)


def _value(source: str, name: str, value: Any) -> Any:
    """One value of field ``name``, type-checked; JSON numbers are coerced (64.0 means 64)."""
    want = FIELD_TYPES[name]
    if want is str and isinstance(value, str) and value.strip():
        return value.strip()
    if want in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        if float(value).is_integer():
            return int(value)
        if want is float:
            return float(value)
    kind = {str: "text", int: "whole number", float: "number"}[want]
    raise RagsweepError(f"{source}: field '{name}': expected {kind} values, got {value!r}")


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
    """A short readable name, e.g. ``sentence-256/16 all-MiniLM-L6-v2 k=5 mmr:0.5 extractive``."""
    model = config["embedding_model"].rstrip("/").rsplit("/", 1)[-1]
    search = config["search_type"]
    if "mmr_lambda" in config:
        search += f":{config['mmr_lambda']:g}"
    return (
        f"{config['chunker']}-{config['chunk_size']}/{config['chunk_overlap']} {model} "
        f"k={config['top_k']} {search} {config['answerer']}"
    )
