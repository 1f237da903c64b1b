"""Test-only vector stores, registered as plugins (entry points) by the tests that use them
(``register``): real classes that follow the ``VectorStore`` protocol.

``approximate``: exact search in numpy, except that its ``hnsw`` index has lost every chunk
whose row is a multiple of ``m`` (what an approximate index does, made deterministic), so
its recall against exact search is below 1 by an amount a test can compute. ``broken``:
a store whose index build fails with a client error that quotes a URL with a password.
Both record the collections they created and dropped in ``EVENTS``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragsweep.retrieval.vector_stores import Hits, IndexSpec
from ragsweep.retrieval.vector_stores.memory import MemoryStore

EVENTS: list[tuple[str, str]] = []  # (created | dropped, collection)
SECRET = "hunter2"


class ApproximateStore:
    name = "approximate"
    INDEXES: dict[str, dict[str, Any]] = {"exact": {}, "hnsw": {"m": 16, "ef_search": 64}}
    CONNECTION_KEYS = ("APPROXIMATE_URL",)
    PATTERN_CODE = None  # a pattern of it is not written

    def __init__(self, collection: str, distance: str) -> None:
        self.collection = collection
        self.exact = MemoryStore(collection, distance)
        self.kept = np.zeros(0, np.int64)  # rows of the chunk set the index holds

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        EVENTS.append(("created", self.collection))
        rows = np.arange(len(vectors))
        self.kept = rows[rows % index.params["m"] != 0] if index.kind == "hnsw" else rows
        self.exact.create(vectors[self.kept], [texts[i] for i in self.kept], IndexSpec())

    def search(self, queries: np.ndarray, k: int) -> Hits:
        found = self.exact.search(queries, k)
        ids = np.where(found.ids >= 0, self.kept[np.maximum(found.ids, 0)], -1)
        return Hits(ids.astype(np.int64), found.scores)

    def keyword_search(self, queries: list[str], k: int) -> Hits | None:
        return None

    def drop(self) -> None:
        EVENTS.append(("dropped", self.collection))


class BrokenStore(ApproximateStore):
    name = "broken"

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        EVENTS.append(("created", self.collection))
        raise ConnectionError(f"cannot reach http://admin:{SECRET}@127.0.0.1:1/ (refused)")


def register(plugins) -> None:
    """Register both stores for one test (``plugins``: the fixture of conftest)."""
    EVENTS.clear()
    plugins(
        {
            "ragsweep.vector_stores": {
                "approximate": "approximate_store:ApproximateStore",
                "broken": "approximate_store:BrokenStore",
            }
        }
    )
