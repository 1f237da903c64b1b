"""Exact search in numpy: the default store and the reference for the others.

Queries are scored in blocks, so memory stays near ``BLOCK_BYTES`` whatever the number of
questions: one block's scores (block x chunks float32) and its top-k, never a full
questions x chunks matrix. A chunk set given as a file (``chunk_sets.ChunkVectors``) is
kept as the file and scanned a block of chunks at a time, each block's best merged into
the best so far, so the store never holds every vector either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragsweep.retrieval.chunk_sets import ChunkVectors, blocks_of
from ragsweep.retrieval.vector_stores import Hits, IndexSpec

BLOCK_BYTES = 64 * 2**20  # one block of float32 scores


class MemoryStore:
    name = "memory"
    INDEXES: dict[str, dict[str, Any]] = {"exact": {}}
    CONNECTION_KEYS: tuple[str, ...] = ()  # in the step's own memory
    PATTERN_CODE = None  # the pattern scripts' own (ragsweep.patterns.SCRIPT_STORES)

    def __init__(self, collection: str, distance: str) -> None:
        self.distance = distance
        self.vectors: np.ndarray | ChunkVectors = np.zeros((0, 0), np.float32)

    def create(
        self, vectors: np.ndarray | ChunkVectors, texts: Sequence[str], index: IndexSpec
    ) -> None:
        if isinstance(vectors, ChunkVectors):
            self.vectors = vectors  # read a block at a time by each search
        else:
            self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        """Each query's ``k`` nearest chunks, best first, equal scores in chunk order."""
        queries = np.asarray(queries, dtype=np.float32)
        k = min(k, len(self.vectors))
        out = Hits.empty(len(queries), k)
        for first, chunks in blocks_of(self.vectors):
            rows = max(1, BLOCK_BYTES // (4 * max(len(chunks), 1)))
            for start in range(0, len(queries), rows):
                block = self.scores(queries[start : start + rows], chunks)
                ids = top(block, k)
                found = np.take_along_axis(block, ids, axis=1)
                at = slice(start, start + len(block))
                if first:  # the best of the blocks before, then this block's
                    ids, found = best(out.ids[at], out.scores[at], ids + first, found, k)
                out.ids[at, : ids.shape[1]] = ids
                out.scores[at, : ids.shape[1]] = found
        return out

    def scores(self, queries: np.ndarray, chunks: np.ndarray | None = None) -> np.ndarray:
        """Higher is nearer: cosine and dot are the inner product (unit vectors), euclidean
        is the negated squared distance; against ``chunks`` (a block), else every chunk."""
        chunks = np.asarray(self.vectors) if chunks is None else chunks
        inner = queries @ chunks.T
        if self.distance != "euclidean":
            return inner
        norms = (chunks**2).sum(axis=1)
        return 2 * inner - norms[None, :] - (queries**2).sum(axis=1)[:, None]

    def keyword_search(self, queries: list[str], k: int) -> Hits | None:
        return None

    def drop(self) -> None:
        self.vectors = np.zeros((0, 0), np.float32)


def best(
    ids: np.ndarray, scores: np.ndarray, more_ids: np.ndarray, more: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of two rankings per row, best first; equal scores keep the first
    ranking's before the second's (a later block's chunks come after an earlier's)."""
    ids, scores = np.hstack([ids, more_ids]), np.hstack([scores, more])
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(ids, order, axis=1), np.take_along_axis(scores, order, axis=1)


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
