"""Search types over one question x chunk similarity matrix.

Each search type returns, per question, a ranking of chunk indices of a given depth; Top K
is a prefix of that ranking, so one ranking per (chunk set, search type) serves every K.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Ranker = Callable[[np.ndarray, np.ndarray, int], np.ndarray]


def similarity(sims: np.ndarray, chunk_vectors: np.ndarray, depth: int) -> np.ndarray:
    """Chunks by cosine similarity, best first: shape (questions, depth)."""
    depth = min(depth, sims.shape[1])
    top = np.argpartition(-sims, depth - 1, axis=1)[:, :depth]
    order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def mmr(
    sims: np.ndarray,
    chunk_vectors: np.ndarray,
    depth: int,
    lambda_mult: float = 0.5,
    fetch_k: int = 20,
) -> np.ndarray:
    """Maximal marginal relevance: from the ``fetch_k`` most similar chunks, greedily pick
    the one most relevant to the question and least similar to those already picked."""
    depth = min(depth, sims.shape[1])
    candidates = similarity(sims, chunk_vectors, max(fetch_k, depth))
    out = np.empty((sims.shape[0], depth), dtype=np.int64)
    for q, cand in enumerate(candidates):
        relevance = sims[q, cand]
        redundancy = chunk_vectors[cand] @ chunk_vectors[cand].T
        picked: list[int] = []
        closest = np.full(len(cand), -np.inf)  # max similarity to anything picked so far
        for _ in range(depth):
            penalty = np.where(np.isinf(closest), 0.0, closest)
            score = lambda_mult * relevance - (1 - lambda_mult) * penalty
            score[picked] = -np.inf
            best = int(np.argmax(score))
            picked.append(best)
            closest = np.maximum(closest, redundancy[best])
        out[q] = cand[picked]
    return out


SEARCH_TYPES: dict[str, Ranker] = {"similarity": similarity, "mmr": mmr}


def rank_chunks(
    search_type: str, question_vectors: np.ndarray, chunk_vectors: np.ndarray, depth: int
) -> np.ndarray:
    """Rank chunks for every question with ``search_type``; unit vectors assumed."""
    sims = question_vectors @ chunk_vectors.T
    return SEARCH_TYPES[search_type](sims, chunk_vectors, depth)
