"""Vector stores: where a chunk set's embeddings are searched.

A store holds one collection per (chunk set, index): the chunks' unit vectors and texts,
searched for the ``k`` nearest of a batch of query vectors. The search types
(``ragsweep.retrieval.search``) compose on top: similarity is the store's search, MMR re-ranks its
``fetch_k`` candidates in the library, hybrid fuses its search with a keyword search (the
store's own full-text search when it has one, else the library's BM25).

``memory`` (exact search in numpy) is the default and the reference the others are measured
against (``recall_vs_exact``). Adding a store is one module here with a class that follows
``VectorStore``, and its name in ``STORES``.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragsweep.core.errors import RagsweepError, missing_extra
from ragsweep.core.schemas import DEFAULT_DISTANCE, DEFAULT_INDEX

# store name -> "module:class", imported only when used (each store has its own client)
STORES = {
    "memory": "ragsweep.retrieval.vector_stores.memory:MemoryStore",
    "milvus": "ragsweep.retrieval.vector_stores.milvus:MilvusStore",
    "pgvector": "ragsweep.retrieval.vector_stores.pgvector:PgvectorStore",
    "oracle": "ragsweep.retrieval.vector_stores.oracle:OracleStore",
}
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
    """

    name: str
    INDEXES: dict[str, dict[str, Any]]  # index kind -> default parameters
    REQUIRES: tuple[str, ...]  # the packages its client needs, when it imports them late

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> Hits: ...

    def keyword_search(self, queries: list[str], k: int) -> Hits | None: ...

    def drop(self) -> None: ...


def store_class(name: str) -> type:
    """The class of store ``name``; a clear error for an unknown one."""
    if name not in STORES:
        raise RagsweepError(f"unknown vector store {name!r}; choose from {sorted(STORES)}")
    module, cls = STORES[name].split(":")
    try:
        store = getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("ragsweep"):
            raise
        raise missing_extra(exc.name, name, f"the {name} vector store") from None
    # found, not imported: a client's import can take seconds
    for package in getattr(store, "REQUIRES", ()):
        if importlib.util.find_spec(package) is None:
            raise missing_extra(package, name, f"the {name} vector store")
    return store


def open_store(name: str, collection: str, distance: str = DEFAULT_DISTANCE) -> VectorStore:
    """A handle on ``collection`` in store ``name``, its connection taken from the
    environment (``RAGSWEEP_<STORE>_...``)."""
    if distance not in DISTANCES:
        raise RagsweepError(f"unknown distance {distance!r}; choose from {list(DISTANCES)}")
    return store_class(name)(collection, distance)
