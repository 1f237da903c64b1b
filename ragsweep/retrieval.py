"""Search types over one chunk set: each ranks every question's chunks at once.

A ranking is as deep as the largest Top K, and every Top K is a prefix of it, so one ranking
per (chunk set, search type, parameters) serves the whole Top K grid. The question x chunk
similarity matrix is computed once per chunk set and shared by every search type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy import sparse

from ragsweep.text import words


@dataclass
class Index:
    """What a search type may use: unit vectors and texts of the questions and the chunks."""

    question_vectors: np.ndarray
    chunk_vectors: np.ndarray
    questions: list[str]
    chunk_texts: list[str]

    @cached_property
    def similarities(self) -> np.ndarray:
        """Cosine similarity of every question to every chunk."""
        return self.question_vectors @ self.chunk_vectors.T

    @cached_property
    def keyword_scores(self) -> np.ndarray:
        """BM25 score of every chunk for every question."""
        return bm25(self.questions, self.chunk_texts)


Ranker = Callable[..., np.ndarray]  # (index, depth, **params) -> chunk indices, best first


def top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` highest scores of each row, best first."""
    depth = min(depth, scores.shape[1])
    best = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    order = np.argsort(-np.take_along_axis(scores, best, axis=1), axis=1, kind="stable")
    return np.take_along_axis(best, order, axis=1)


def similarity(index: Index, depth: int) -> np.ndarray:
    """Chunks by cosine similarity to the question."""
    return top(index.similarities, depth)


def mmr(index: Index, depth: int, mmr_lambda: float = 0.5, mmr_fetch_k: int = 20) -> np.ndarray:
    """Maximal marginal relevance: from the ``mmr_fetch_k`` most similar chunks, greedily pick
    the one most relevant to the question and least similar to those already picked."""
    sims, vectors = index.similarities, index.chunk_vectors
    depth = min(depth, sims.shape[1])
    candidates = top(sims, max(mmr_fetch_k, depth))
    out = np.empty((sims.shape[0], depth), dtype=np.int64)
    for q, cand in enumerate(candidates):
        relevance = sims[q, cand]
        redundancy = vectors[cand] @ vectors[cand].T
        closest = np.zeros(len(cand))  # similarity to the nearest chunk picked so far
        picked = np.zeros(len(cand), dtype=bool)
        for rank in range(depth):
            score = mmr_lambda * relevance - (1 - mmr_lambda) * closest
            score[picked] = -np.inf
            best = int(np.argmax(score))
            picked[best] = True
            out[q, rank] = cand[best]
            closest = np.maximum(closest, redundancy[best]) if rank else redundancy[best].copy()
    return out


def hybrid(index: Index, depth: int, rrf_k: int = 60) -> np.ndarray:
    """Vector and BM25 keyword rankings fused by reciprocal rank fusion:
    score = 1 / (rrf_k + vector rank) + 1 / (rrf_k + keyword rank), where a chunk that
    shares no word with the question has no keyword rank."""
    keywords = index.keyword_scores
    fused = _rrf(index.similarities, rrf_k) + np.where(keywords > 0, _rrf(keywords, rrf_k), 0.0)
    return top(fused, depth)


def _rrf(scores: np.ndarray, rrf_k: int) -> np.ndarray:
    order = np.argsort(-scores, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, scores.shape[1] + 1)[None, :], axis=1)
    return 1.0 / (rrf_k + ranks)


def bm25(queries: list[str], documents: list[str], k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 scores, queries x documents, over the content words of ``text.words``."""
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for d, text in enumerate(documents):
        for word in words(text):
            rows.append(d)
            cols.append(vocabulary.setdefault(word, len(vocabulary)))
    shape = (len(documents), max(len(vocabulary), 1))
    tf = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
    tf.sum_duplicates()
    lengths = np.asarray(tf.sum(axis=1)).ravel()
    df = np.bincount(tf.indices, minlength=shape[1])
    idf = np.log(1 + (len(documents) - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
    weights = tf.copy()
    row_of = np.repeat(np.arange(shape[0]), np.diff(tf.indptr))
    weights.data = tf.data * (k1 + 1) / (tf.data + norm[row_of]) * idf[tf.indices]
    q_rows, q_cols = [], []
    for q, text in enumerate(queries):
        for word in set(words(text)):
            if word in vocabulary:
                q_rows.append(q)
                q_cols.append(vocabulary[word])
    asked = sparse.csr_matrix((np.ones(len(q_rows)), (q_rows, q_cols)), (len(queries), shape[1]))
    return np.asarray((asked @ weights.T).todense())


SEARCH_TYPES: dict[str, Ranker] = {"similarity": similarity, "mmr": mmr, "hybrid": hybrid}


def rank_chunks(index: Index, search_type: str, depth: int, **params: Any) -> np.ndarray:
    """Rank chunks for every question with ``search_type``: shape (questions, depth)."""
    return SEARCH_TYPES[search_type](index, depth, **params)
