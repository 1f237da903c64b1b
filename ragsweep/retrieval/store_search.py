"""Search one chunk set in one vector store and index: load it, rank every search setting,
time the store's searches, drop the collection; and how the result compares with exact
search (``overlap``, the rows' ``recall_vs_exact``).

A chunk set read from its file (``chunk_sets.ChunkFile``) stays the file for the memory
store, which scans it by blocks; any other store is handed its vectors and texts whole (an
array and a list), as the ``VectorStore`` protocol has them, for its client to load.

A store's failure, whatever its client raises, becomes one ``RagsweepError`` naming the
store, the index and the collection, with any URL's credentials left out; the collection is
dropped all the same.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
import uuid
from dataclasses import dataclass, field, replace

import numpy as np

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import DEFAULT_STORE, config_id
from ragsweep.retrieval.search import Index, rank
from ragsweep.retrieval.vector_stores import Hits, IndexSpec, open_store
from ragsweep.retrieval.vector_stores.memory import MemoryStore

log = logging.getLogger("ragsweep")

LATENCY_SAMPLE = 100  # questions whose similarity search is timed alone, per store and index
RUN_ID_ENV = "RAGSWEEP_RUN_ID"  # ragsweep.store.database.RUN_ID_ENV, set by `ragsweep run`


@dataclass(frozen=True)
class Searched:
    """What one (store, index) gave: a ranking per query set and search setting (keyed
    (query set, (search type, params)); questions x depth, with scores), the seconds its
    index took to build, each question's search latency (NaN: not timed), and the
    candidates handed to a reranker per query set and search setting (questions x fetch_k)."""

    rankings: dict[tuple, Hits]
    build_s: float
    latency_ms: np.ndarray
    candidates: dict[tuple, Hits] = field(default_factory=dict)


def collection_name(chunk_config_id: str, store: str, index: IndexSpec, distance: str) -> str:
    """``rs_<chunk set>_<index hash>_<run>``: unique per run, chunk set and index; the run is
    ``RAGSWEEP_RUN_ID`` (made safe for every store's identifiers) or a short random id."""
    index_hash = config_id({"store": store, "index": index.label(), "distance": distance})[:8]
    run = re.sub(r"[^a-z0-9]", "_", os.environ.get(RUN_ID_ENV, "").lower())
    if len(run) > 24:
        run = config_id({"run": run})
    return f"rs_{chunk_config_id}_{index_hash}_{run or uuid.uuid4().hex[:8]}"


def search_store(
    name: str,
    spec: IndexSpec,
    collection: str,
    distance: str,
    inputs: dict[str, Index],
    searches: list[tuple],
    depth: int,
    keep: bool = False,
    reranked: tuple[tuple, ...] = (),
    fetch_k: int = 0,
) -> Searched:
    """Load the chunk set of ``inputs`` (query sets by name: the questions as asked, and
    as each query transformation searches them; one chunk set) into ``collection`` of store
    ``name`` with index ``spec``; for every query set, rank every search setting of
    ``searches`` (search type, params) ``depth`` deep, and those of ``reranked`` ``fetch_k``
    deep (a reranker's candidates); time the first query set's first ``LATENCY_SAMPLE``
    similarity searches, one question at a time; drop the collection unless ``keep`` (never
    kept after a failure)."""
    where = f"vector store {name} ({spec.label()}, collection {collection})"
    try:
        store = open_store(name, collection, distance)
    except RagsweepError:
        raise  # a store's own message: the variable to set
    except Exception as exc:
        raise _store_error(where, exc) from None
    failed = True
    try:
        first = next(iter(inputs.values()))
        vectors, texts = first.chunk_vectors, first.chunk_texts
        if not isinstance(store, MemoryStore):  # handed whole, as the protocol has it
            vectors, texts = np.asarray(vectors, dtype=np.float32), list(texts)
        start = time.perf_counter()
        store.create(vectors, texts, spec)
        build_s = time.perf_counter() - start
        rankings, candidates = {}, {}
        for asked, queries in inputs.items():
            index = replace(queries, store=store)
            for search in searches:
                ranking = rank(index, search[0], depth, **dict(search[1]))
                rankings[asked, search] = ranking
            for search in reranked:
                candidates[asked, search] = (
                    rankings[asked, search]
                    if fetch_k == depth and search in searches
                    else rank(index, search[0], fetch_k, **dict(search[1]))
                )
        latency = np.full(len(first.questions), np.nan)
        for q in range(min(LATENCY_SAMPLE, len(latency))):
            start = time.perf_counter()
            store.search(first.question_vectors[q : q + 1], depth)
            latency[q] = (time.perf_counter() - start) * 1000
        failed = False
    except RagsweepError as exc:
        raise RagsweepError(f"{where}: {exc}") from None
    except Exception as exc:
        raise _store_error(where, exc) from None
    finally:
        if failed or not keep:
            try:
                store.drop()
            except Exception as exc:  # the error that stopped the search matters more
                log.warning("%s: could not drop the collection: %s", where, _scrub(str(exc)))
        else:
            log.info("kept collection %s in %s (%s)", collection, name, spec.label())
    if name != DEFAULT_STORE:
        log.info(
            "%s %s: index built in %.2f s, median similarity search %.2f ms",
            name,
            spec.label(),
            build_s,
            float(np.nanmedian(latency)) if len(latency) else float("nan"),
        )
    return Searched(rankings, build_s, latency, candidates)


def _store_error(where: str, exc: Exception) -> RagsweepError:
    log.debug("%s failed", where, exc_info=exc)
    return RagsweepError(f"{where} failed: {type(exc).__name__}: {_scrub(str(exc))}")


def _scrub(text: str) -> str:
    """``text`` without the credentials of any URL in it (``scheme://user:password@``)."""
    return re.sub(r"://[^/\s@]+@", "://***@", text)


def overlap(found: np.ndarray, exact: np.ndarray) -> list[float | None]:
    """Per question, the share of exact search's chunks (``exact``, -1 padded) that
    ``found`` holds: 1.0 when the store found the same top k; None when exact found none."""
    out: list[float | None] = []
    for mine, truth in zip(found.tolist(), exact.tolist(), strict=True):
        truth = {i for i in truth if i >= 0}
        out.append(len(truth.intersection(mine)) / len(truth) if truth else None)
    return out


def chunk_scores(ids: np.ndarray, scores: np.ndarray) -> list[list[float | None]]:
    """Per question, the score of each chunk found (``ids`` >= 0), best first, as the
    ranking scored it; None where it gave none (a non-finite score)."""
    out: list[list[float | None]] = []
    for found, scored in zip(ids.tolist(), scores.astype(np.float64).tolist(), strict=True):
        pairs = zip(found, scored, strict=True)
        out.append([s if math.isfinite(s) else None for i, s in pairs if i >= 0])
    return out
