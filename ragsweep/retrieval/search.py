"""Search types over one chunk set in one vector store: each ranks every question's chunks.

A ranking is as deep as the largest Top K, and every Top K is a prefix of it, so one ranking
per (chunk set, store and index, search type, parameters) serves the whole Top K grid.
Similarity is the store's search; MMR re-ranks the store's ``mmr_fetch_k`` candidates here;
hybrid fuses the store's ``FUSION_DEPTH`` nearest chunks with as many from a keyword search
(the store's full-text search, else BM25 here) by reciprocal rank fusion. Nothing here holds
a questions x chunks matrix: memory is bounded by blocks of questions. A chunk set read
from its file (``chunk_sets``) is never held whole either: MMR reads its candidates' vectors
alone, and BM25 reads the texts a batch at a time, keeping the weights of the questions'
words only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ragsweep.core.text import words
from ragsweep.retrieval.chunk_sets import ChunkVectors, batches_of
from ragsweep.retrieval.vector_stores import Hits, VectorStore
from ragsweep.retrieval.vector_stores.memory import BLOCK_BYTES, top

if TYPE_CHECKING:  # imported where used: only hybrid search needs it
    from scipy import sparse

FUSION_DEPTH = 100  # candidates each ranking gives to hybrid's fusion
WEIGHED_AT_ONCE = 1 << 20  # BM25 weights computed this many at a time (its temporaries)


@dataclass
class Index:
    """What a search type may use: a store loaded with the chunk set, and the unit vectors
    and texts of the questions and the chunks (the chunks' in memory, or read from their
    file: ``chunk_sets.ChunkVectors``, ``chunk_sets.ChunkTexts``)."""

    store: VectorStore
    question_vectors: np.ndarray
    chunk_vectors: np.ndarray | ChunkVectors
    questions: list[str]
    chunk_texts: Sequence[str]
    # what does not depend on the store (BM25 and its rankings), kept by the copies made
    # for each store with ``dataclasses.replace(index, store=...)``
    shared: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def nearest(self, depth: int) -> Hits:
        """The store's ``depth`` nearest chunks of every question (cached per depth)."""
        if depth not in self._nearest:
            self._nearest[depth] = self.store.search(self.question_vectors, depth)
        return self._nearest[depth]

    def keywords(self, depth: int) -> Hits:
        """The ``depth`` best chunks of every question by keywords: the store's full-text
        search, else BM25 over ``text.words`` (built for these questions' words and ranked
        once for every store); chunks sharing no word are left out."""
        found = self.store.keyword_search(self.questions, depth)
        if found is not None:
            return found
        if depth not in self.shared:
            if "bm25" not in self.shared:
                self.shared["bm25"] = BM25(self.chunk_texts, queries=self.questions)
            self.shared[depth] = self.shared["bm25"].top(self.questions, depth)
        return self.shared[depth]

    @cached_property
    def _nearest(self) -> dict[int, Hits]:
        return {}


# (index, depth, **params) -> each question's chunk indices, best first, with the score
# each was ranked by
Ranker = Callable[..., Hits]


def similarity(index: Index, depth: int) -> Hits:
    """Chunks by similarity to the question, as the store finds them (its scores)."""
    return index.nearest(depth)


def mmr(index: Index, depth: int, mmr_lambda: float = 0.5, mmr_fetch_k: int = 20) -> Hits:
    """Maximal marginal relevance: from the store's ``mmr_fetch_k`` nearest chunks, greedily
    pick the one most similar to the question and least similar to those already picked;
    each scored by its marginal relevance when picked."""
    candidates = index.nearest(max(mmr_fetch_k, depth)).ids
    depth = min(depth, candidates.shape[1])
    out = Hits.empty(len(candidates), depth)
    held = np.unique(candidates[candidates >= 0])  # the only vectors read
    rows = index.chunk_vectors[held]
    for q, cand in enumerate(candidates):
        cand = cand[cand >= 0]
        vectors = rows[np.searchsorted(held, cand)]
        relevance = vectors @ index.question_vectors[q]
        redundancy = vectors @ vectors.T
        closest = np.zeros(len(cand))  # similarity to the nearest chunk picked so far
        picked = np.zeros(len(cand), dtype=bool)
        for rank in range(min(depth, len(cand))):
            score = mmr_lambda * relevance - (1 - mmr_lambda) * closest
            score[picked] = -np.inf
            best = int(np.argmax(score))
            picked[best] = True
            out.ids[q, rank], out.scores[q, rank] = cand[best], score[best]
            closest = np.maximum(closest, redundancy[best]) if rank else redundancy[best].copy()
    return out


def hybrid(index: Index, depth: int, rrf_k: int = 60) -> Hits:
    """The store's nearest chunks and the keyword search's best, ``FUSION_DEPTH`` of each,
    fused by reciprocal rank fusion: score = sum over the rankings holding the chunk of
    1 / (rrf_k + its rank there)."""
    depth = min(depth, len(index.chunk_vectors))
    pool = max(FUSION_DEPTH, depth)
    return fuse([index.nearest(pool).ids, index.keywords(pool).ids], depth, rrf_k)


def fuse(
    rankings: list[np.ndarray], depth: int, rrf_k: int = 60, used: np.ndarray | None = None
) -> Hits:
    """Reciprocal rank fusion of ``rankings`` (each questions x its depth, -1 padded): a
    chunk scores the sum over the rankings holding it of 1 / (rrf_k + its rank there);
    the ``depth`` best, equal scores in chunk order. ``used`` (rankings x questions, bool)
    leaves a ranking out for a question where it is False."""
    out = Hits.empty(len(rankings[0]), depth)
    for q in range(len(out.ids)):
        fused: dict[int, float] = {}
        for r, ranking in enumerate(rankings):
            if used is not None and not used[r, q]:
                continue
            for rank, chunk in enumerate(ranking[q].tolist(), start=1):
                if chunk >= 0:
                    fused[chunk] = fused.get(chunk, 0.0) + 1.0 / (rrf_k + rank)
        best = sorted(fused, key=lambda c: (-fused[c], c))[:depth]
        out.ids[q, : len(best)] = best
        out.scores[q, : len(best)] = [fused[c] for c in best]
    return out


class BM25:
    """Okapi BM25 over the content words of ``text.words``: a sparse words x chunks matrix
    of weights, scored against blocks of queries.

    The documents are read a batch at a time (a chunk file's record batches,
    ``chunk_sets.batches_of``), none held as strings beyond its batch. Given the ``queries``
    it will score, only their words' weights are kept (a chunk's length still counts every
    word): the same scores for those queries, in a fraction of the memory; ``scores`` of a
    query with another word is then an error."""

    def __init__(
        self,
        documents: Sequence[str],
        k1: float = 1.5,
        b: float = 0.75,
        queries: list[str] | None = None,
    ) -> None:
        from scipy import sparse

        self.kept = None if queries is None else {w for q in queries for w in words(q)}
        self.vocabulary: dict[str, int] = {}
        lengths: list[int] = []
        counts = []  # each batch's term counts, the words seen so far x its chunks
        for batch in batches_of(documents):
            rows, cols = [], []
            for d, text in enumerate(batch):
                found = words(text)
                lengths.append(len(found))
                for word in found if self.kept is None else filter(self.kept.__contains__, found):
                    rows.append(d)
                    cols.append(self.vocabulary.setdefault(word, len(self.vocabulary)))
            seen = (len(batch), max(len(self.vocabulary), 1))
            counted = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=seen)
            counts.append(counted.T.tocsr())
        # words x chunks, each word's chunks in order: the batches side by side
        shape = (max(len(self.vocabulary), 1), len(lengths))
        tf = _side_by_side(counts, shape)
        lengths = np.array(lengths, np.float64)
        df = np.diff(tf.indptr)
        idf = np.log(1 + (shape[1] - df + 0.5) / (df + 0.5))
        norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
        for start in range(0, tf.nnz, WEIGHED_AT_ONCE):  # in place, a slice at a time
            at = slice(start, min(start + WEIGHED_AT_ONCE, tf.nnz))
            word = np.searchsorted(tf.indptr, np.arange(at.start, at.stop), side="right") - 1
            count = tf.data[at]
            tf.data[at] = count * (k1 + 1) / (count + norm[tf.indices[at]]) * idf[word]
        self.weights_t = tf  # words x chunks

    def scores(self, queries: list[str]) -> sparse.csr_matrix:
        """BM25 score of every chunk for each query: a sparse queries x chunks matrix."""
        from scipy import sparse

        rows, cols = [], []
        for q, text in enumerate(queries):
            for word in set(words(text)):
                if self.kept is not None and word not in self.kept:
                    raise ValueError(f"BM25 built for other queries: {word!r} is not weighed")
                if word in self.vocabulary:
                    rows.append(q)
                    cols.append(self.vocabulary[word])
        shape = (len(queries), self.weights_t.shape[0])
        asked = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        return (asked @ self.weights_t).tocsr()

    def top(self, queries: list[str], k: int) -> Hits:
        """Each query's ``k`` best chunks with a positive score, by blocks of queries."""
        chunks = self.weights_t.shape[1]
        k = min(k, chunks)
        out = Hits.empty(len(queries), k)
        rows = max(1, BLOCK_BYTES // (4 * max(chunks, 1)))
        for start in range(0, len(queries), rows):
            block = self.scores(queries[start : start + rows]).toarray().astype(np.float32)
            ids = top(block, k)
            found = np.take_along_axis(block, ids, axis=1)
            positive = found > 0
            out.ids[start : start + len(block)] = np.where(positive, ids, -1)
            out.scores[start : start + len(block)] = np.where(positive, found, -np.inf)
        return out


def _side_by_side(parts: list[sparse.csr_matrix], shape: tuple[int, int]) -> sparse.csr_matrix:
    """The matrices of ``parts`` (each of at most ``shape[0]`` rows) side by side, as
    ``sparse.hstack`` makes them, but each part let go once copied: the entries are held
    about once, not twice. ``parts`` is emptied."""
    from scipy import sparse

    lengths = np.zeros(shape[0], np.int64)
    for part in parts:
        lengths[: part.shape[0]] += np.diff(part.indptr)
    wide = max(shape[1], int(lengths.sum())) >= 2**31
    indptr = np.r_[0, np.cumsum(lengths)].astype(np.int64 if wide else np.int32)
    indices = np.empty(indptr[-1], indptr.dtype)
    data = np.empty(indptr[-1], np.float64)
    filled, first = indptr[:-1].copy(), 0  # each row's next free place; the part's first column
    while parts:
        part = parts.pop(0)
        rows, counts = part.shape[0], np.diff(part.indptr)
        into = np.repeat(filled[:rows] - part.indptr[:-1], counts) + np.arange(part.nnz)
        indices[into], data[into] = part.indices + first, part.data
        filled[:rows] += counts
        first += part.shape[1]
    return sparse.csr_matrix((data, indices, indptr), shape)


SEARCH_TYPES: dict[str, Ranker] = {"similarity": similarity, "mmr": mmr, "hybrid": hybrid}


def rank(index: Index, search_type: str, depth: int, **params: Any) -> Hits:
    """Rank chunks for every question with ``search_type``: chunk indices and the scores
    they were ranked by (the store's similarity, MMR's marginal relevance, the fused
    reciprocal-rank score), shape (questions, depth), -1 where the store found fewer."""
    return SEARCH_TYPES[search_type](index, depth, **params)


def rank_chunks(index: Index, search_type: str, depth: int, **params: Any) -> np.ndarray:
    """``rank``'s chunk indices alone."""
    return rank(index, search_type, depth, **params).ids
