"""Exact search in numpy: the default store and the reference for the others.

Queries are scored in blocks, so memory stays near ``BLOCK_BYTES`` whatever the number of
questions: one block's scores (block x chunks float32) and its top-k, never a full
questions x chunks matrix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragsweep.retrieval.vector_stores import Hits, IndexSpec

BLOCK_BYTES = 64 * 2**20  # one block of float32 scores


class MemoryStore:
    name = "memory"
    INDEXES: dict[str, dict[str, Any]] = {"exact": {}}
    CONNECTION_KEYS: tuple[str, ...] = ()  # in the step's own memory
    PATTERN_CODE = None  # the pattern scripts' own (ragsweep.patterns.SCRIPT_STORES)

    def __init__(self, collection: str, distance: str) -> None:
        self.distance = distance
        self.vectors = np.zeros((0, 0), np.float32)

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        queries = np.asarray(queries, dtype=np.float32)
        k = min(k, len(self.vectors))
        out = Hits.empty(len(queries), k)
        rows = max(1, BLOCK_BYTES // (4 * max(len(self.vectors), 1)))
        for start in range(0, len(queries), rows):
            block = self.scores(queries[start : start + rows])
            ids = top(block, k)
            out.ids[start : start + len(block)] = ids
            out.scores[start : start + len(block)] = np.take_along_axis(block, ids, axis=1)
        return out

    def scores(self, queries: np.ndarray) -> np.ndarray:
        """Higher is nearer: cosine and dot are the inner product (unit vectors), euclidean
        is the negated squared distance."""
        inner = queries @ self.vectors.T
        if self.distance != "euclidean":
            return inner
        norms = (self.vectors**2).sum(axis=1)
        return 2 * inner - norms[None, :] - (queries**2).sum(axis=1)[:, None]

    def keyword_search(self, queries: list[str], k: int) -> Hits | None:
        return None

    def drop(self) -> None:
        self.vectors = np.zeros((0, 0), np.float32)


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` highest scores of each row, best first; equal scores
    among those picked come in index order."""
    k = min(k, scores.shape[1])
    if k == 0:
        return np.zeros((len(scores), 0), np.int64)
    if k < scores.shape[1]:
        best = np.argpartition(scores, scores.shape[1] - k, axis=1)[:, -k:]
    else:
        best = np.broadcast_to(np.arange(scores.shape[1]), scores.shape).copy()
    best.sort(axis=1)
    order = np.argsort(-np.take_along_axis(scores, best, axis=1), axis=1, kind="stable")
    return np.take_along_axis(best, order, axis=1).astype(np.int64)
