"""Vector stores: where a chunk set's embeddings are searched.

A store holds one collection per (chunk set, index): the chunks' unit vectors and texts,
searched for the ``k`` nearest of a batch of query vectors. The search types
(``ragsweep.retrieval.search``) compose on top: similarity is the store's search, MMR re-ranks its
``fetch_k`` candidates in the library, hybrid fuses its search with a keyword search (the
store's own full-text search when it has one, else the library's BM25).

``memory`` (exact search in numpy) is the default and the reference the others are measured
against (``recall_vs_exact``). Stores are plugins: a class that follows ``VectorStore``,
registered under its name in the entry point group ``ragsweep.vector_stores`` (the built-in
ones in ragsweep's setup.cfg, another package's in its own).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragsweep.core import plugins
from ragsweep.core.errors import RagsweepError, missing_extra
from ragsweep.core.schemas import DEFAULT_DISTANCE, DEFAULT_INDEX

log = logging.getLogger("ragsweep")
DISTANCES = ("cosine", "dot", "euclidean")


@dataclass(frozen=True)
class Hits:
    """The ``k`` best chunks of each query, best first: row indices into the chunk set
    (-1 where a store found fewer) and scores, higher is better (-inf where missing)."""

    ids: np.ndarray  # (queries, k) int64
    scores: np.ndarray  # (queries, k) float32

    @classmethod
    def empty(cls, queries: int, k: int) -> Hits:
        return cls(np.full((queries, k), -1, np.int64), np.full((queries, k), -np.inf, np.float32))


@dataclass(frozen=True)
class IndexSpec:
    """An index type and its parameters, e.g. ``hnsw`` with ``m=16, ef_search=64``;
    ``exact`` is a full scan."""

    kind: str = DEFAULT_INDEX
    params: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        """``exact``, ``hnsw(m=16,ef_search=64)``."""
        inner = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.kind}({inner})" if inner else self.kind


class VectorStore(Protocol):
    """One collection of a chunk set in one store, with one index.

    ``create`` loads the chunks (row ``i`` of ``vectors`` is chunk ``i``) and builds the
    index; ``search`` returns each query's ``k`` nearest chunks; ``keyword_search`` the
    store's full-text ranking, or None when the store has none (the library's BM25 is used);
    ``drop`` deletes the collection.

    ``CONNECTION_KEYS``: the keys of the vector-store Secret the store reads, each into the
    environment variable of its name (the pipeline mounts them on the retrieve step; none
    for an embedded store). ``PATTERN_CODE``: the path of a standalone Python file (no
    ragsweep import) that builds and searches the store's index in a pattern
    (``write_index``, ``open_index``: docs/extending.md), copied beside the pattern's
    scripts; None when the store has none, and its patterns are not written.
    """

    name: str
    INDEXES: dict[str, dict[str, Any]]  # index kind -> default parameters
    CONNECTION_KEYS: tuple[str, ...]
    PATTERN_CODE: str | None
    REQUIRES: tuple[str, ...]  # the packages its client needs, when it imports them late

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> Hits: ...

    def keyword_search(self, queries: list[str], k: int) -> Hits | None: ...

    def drop(self) -> None: ...


def recorded_index(
    spec: dict[str, Any] | None, store: str, table: str, where: str, distance: str
) -> IndexSpec:
    """The index a collection's table records (``spec``: kind, params and distance, as read
    back from the table; None when there is no table), checked against the ``distance``
    asked for; a clear error when there is no table or it was indexed for another."""
    if spec is None:
        raise RagsweepError(
            f"vector store {store}: no collection table {table} in {where}; create it first"
        )
    if spec.get("distance", distance) != distance:
        raise RagsweepError(
            f"vector store {store}: collection table {table} was indexed for "
            f"{spec['distance']} distance, not {distance}"
        )
    return IndexSpec(spec["kind"], spec["params"])


def store_names() -> list[str]:
    """The registered stores, sorted (their modules not imported)."""
    return plugins.names(plugins.VECTOR_STORES)


def store_class(name: str) -> type:
    """The class of store ``name``, imported when first asked for (each store has its own
    client); a clear error for an unknown one, and for a built-in store whose client is
    not installed, the extra that installs it."""
    try:
        store = plugins.load(plugins.VECTOR_STORES, name)
    except RagsweepError as exc:
        missing = exc.__cause__
        point = plugins.registered(plugins.VECTOR_STORES).get(name)
        builtin = point is not None and point.value.startswith("ragsweep.")
        client = isinstance(missing, ModuleNotFoundError) and not (missing.name or "").startswith(
            "ragsweep"
        )
        if builtin and client:  # a built-in store's client: the extra that installs it
            raise missing_extra(missing.name, name, f"the {name} vector store") from None
        raise
    # found, not imported: a client's import can take seconds
    for package in getattr(store, "REQUIRES", ()):
        if importlib.util.find_spec(package) is None:
            raise missing_extra(package, name, f"the {name} vector store")
    return store


def connection_keys() -> list[str]:
    """The Secret keys every registered store reads, in store order, each once. A store
    whose module cannot be imported here adds none, with a warning: the pipeline compiled
    here does not mount its keys."""
    keys: dict[str, None] = {}
    for name in store_names():
        try:
            keys.update(dict.fromkeys(plugins.load(plugins.VECTOR_STORES, name).CONNECTION_KEYS))
        except (RagsweepError, AttributeError) as exc:
            log.warning("vector store %s: its Secret keys are not mounted: %s", name, exc)
    return list(keys)


def open_store(name: str, collection: str, distance: str = DEFAULT_DISTANCE) -> VectorStore:
    """A handle on ``collection`` in store ``name``, its connection taken from the
    environment (``RAGSWEEP_<STORE>_...``)."""
    if distance not in DISTANCES:
        raise RagsweepError(f"unknown distance {distance!r}; choose from {list(DISTANCES)}")
    return store_class(name)(collection, distance)
