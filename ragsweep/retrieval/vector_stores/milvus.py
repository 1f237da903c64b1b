"""Milvus through ``pymilvus``: an embedded Milvus Lite database by default, or a server.

Where: ``RAGSWEEP_MILVUS_URI`` (a server, e.g. ``http://milvus:19530``, with
``RAGSWEEP_MILVUS_TOKEN``; or a ``.db`` path for Milvus Lite), else the Milvus Lite database
``ragsweep_milvus.db`` in ``RAGSWEEP_MILVUS_LITE_DIR``, else in the working directory (a
pipeline step's workspace). One collection per chunk set and index: the chunk row as the
int64 primary key, the vector, the text (analyzed for Milvus's BM25 full-text search, which
hybrid search uses), and the BM25 sparse vector Milvus computes from the text.

Index kinds: ``exact`` = FLAT, ``ivf`` = IVF_FLAT (``nlist``, ``nprobe``), ``hnsw`` = HNSW
(``m``, ``ef_construction``, ``ef_search``; Milvus needs ``ef`` >= k, so a deeper search
raises it to k). Rows are inserted, flushed into a sealed segment, then indexed and loaded,
so the index (not a scan of unsealed rows) answers the searches. A handle on an existing
collection takes it up (size and search parameters in its ``ragsweep`` property).
Milvus Lite lets one process at a time open a database.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from hashlib import sha256
from typing import Any

import numpy as np

from ragsweep.core.errors import RagsweepError
from ragsweep.core.text import STOPWORDS
from ragsweep.retrieval.vector_stores import Hits, IndexSpec, milvus_collection
from ragsweep.retrieval.vector_stores.milvus_collection import (
    build_index,
    create_collection,
    cut,
)

# gRPC's INFO lines (fork_posix.cc ... "Other threads are currently calling into gRPC") on
# stderr whenever a process forks while Milvus Lite's in-process server runs
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

ENV_URI, ENV_TOKEN, ENV_LITE_DIR = (
    "RAGSWEEP_MILVUS_URI",
    "RAGSWEEP_MILVUS_TOKEN",
    "RAGSWEEP_MILVUS_LITE_DIR",
)
LITE_FILE = "ragsweep_milvus.db"
PROPERTY = "ragsweep"  # the collection property holding its size and search parameters
INDEX_TYPES = {"exact": "FLAT", "ivf": "IVF_FLAT", "hnsw": "HNSW"}
BUILD_PARAMS = {"nlist": "nlist", "m": "M", "ef_construction": "efConstruction"}
SEARCH_PARAMS = {"nprobe": "nprobe", "ef_search": "ef"}
METRICS = {"cosine": "COSINE", "dot": "IP", "euclidean": "L2"}
MAX_TOP_K = 16384  # Milvus's largest search limit
BATCH_ROWS, BATCH_BYTES = 1000, 16 * 2**20  # one insert request
QUERY_BATCH = 256  # query vectors per search request
TIMEOUT_S = 30.0
NAME = re.compile(r"[^A-Za-z0-9_]")
CREDENTIALS = re.compile(r"^([A-Za-z][\w+.-]*://)?[^/]*@")  # user:password@ of a URI
# Milvus's BM25 made as near the library's as its analyzer allows: the same stop words, k1, b
ANALYZER = {
    "tokenizer": "standard",
    "filter": ["lowercase", {"type": "stop", "stop_words": sorted(STOPWORDS)}],
}
BM25_PARAMS = {"bm25_k1": 1.5, "bm25_b": 0.75}


class MilvusStore:
    name = "milvus"
    REQUIRES = ("pymilvus",)
    INDEXES: dict[str, dict[str, Any]] = {
        "exact": {},
        "ivf": {"nlist": 128, "nprobe": 32},
        "hnsw": {"m": 16, "ef_construction": 200, "ef_search": 64},
    }
    CONNECTION_KEYS = (ENV_URI, ENV_TOKEN)  # none for Milvus Lite, embedded
    PATTERN_CODE = milvus_collection.__file__  # the same collections, standalone

    def __init__(self, collection: str, distance: str) -> None:
        self.collection = collection_name(collection)
        self.distance = distance
        self.metric = METRICS[distance]
        self.client = connect()
        self.lite = is_lite(os.environ.get(ENV_URI) or LITE_FILE)
        self.search_params: dict[str, Any] = {}
        self.rows = 0
        self.full_text = False
        with self.calls("open the collection"):
            if self.client.has_collection(self.collection):
                self.reopen()

    def reopen(self) -> None:
        """Take up a collection loaded before (by another step, or kept): its size and search
        parameters are in a property of the collection, its full-text search in its fields."""
        described = self.client.describe_collection(self.collection)
        try:
            saved = json.loads((described.get("properties") or {}).get(PROPERTY) or "{}")
        except ValueError:
            saved = {}
        self.rows = int(saved.get("rows", 0))
        self.search_params = dict(saved.get("search_params", {}))
        self.full_text = any(f.get("name") == "sparse" for f in described.get("fields", []))
        if self.rows:
            self.client.load_collection(self.collection)

    @classmethod
    def pattern_settings(cls, index: IndexSpec, distance: str) -> dict[str, Any]:
        """What a pattern's scripts need of ``index``: Milvus's index type, metric, build
        and search parameters, and the analyzer and BM25 parameters of the store's
        full-text search (hybrid's keyword side)."""
        build, search = index_params(index)
        spec = {"index_type": INDEX_TYPES[index.kind], "metric_type": METRICS[distance]}
        spec.update(build=build, search=search, analyzer=ANALYZER, bm25=BM25_PARAMS)
        return {"milvus_index": spec}

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        """Load the chunks (row ``i`` is chunk ``i``), seal them, build ``index`` and load it."""
        build, self.search_params = index_params(index)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self.calls("create the collection"):
            if self.client.has_collection(self.collection):
                self.client.drop_collection(self.collection)
            saved = {"rows": len(vectors), "search_params": self.search_params}
            self.full_text = create_collection(
                self.client,
                self.collection,
                vectors.shape[1],
                ANALYZER,
                properties={PROPERTY: json.dumps(saved)},
            )
            for batch in batches(vectors, [cut(t) for t in texts]):
                self.client.insert(self.collection, batch)
            spec = {
                "index_type": INDEX_TYPES[index.kind],
                "metric_type": self.metric,
                "build": build,
                "bm25": BM25_PARAMS,
            }
            # Milvus Lite builds in create_index; a server's build is awaited (by polling)
            build_index(self.client, self.collection, spec, self.full_text, sync=not self.lite)
        self.rows = len(vectors)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        queries = np.asarray(queries, dtype=np.float32)
        k = min(k, self.rows, MAX_TOP_K)
        params = dict(self.search_params)
        if "ef" in params:
            params["ef"] = max(params["ef"], k)
        found = self.ask(list(queries), "vector", k, {"metric_type": self.metric, "params": params})
        if self.distance == "euclidean":  # Milvus's L2 is the squared distance, lower is nearer
            found = Hits(
                found.ids, np.where(found.ids >= 0, -found.scores, -np.inf).astype(np.float32)
            )
        return found

    def keyword_search(self, queries: list[str], k: int) -> Hits | None:
        """Milvus's BM25 ranking of the chunks for each question (chunks sharing no term are
        left out), or None when the collection has no full-text search."""
        if not self.full_text:
            return None
        k = min(k, self.rows, MAX_TOP_K)
        asked = [q for q in range(len(queries)) if queries[q].strip()]
        out = Hits.empty(len(queries), k)
        if asked and k:
            found = self.ask([queries[q] for q in asked], "sparse", k, {"metric_type": "BM25"})
            out.ids[asked] = found.ids
            # Milvus Lite reports BM25 scores negated (best first either way)
            out.scores[asked] = np.where(found.ids >= 0, np.abs(found.scores), -np.inf)
        return out

    def ask(self, data: list, field: str, k: int, params: dict[str, Any]) -> Hits:
        """Search ``field`` for each of ``data``: ids and Milvus's distances, best first
        (equal distances in chunk order, as exact search gives them)."""
        out = Hits.empty(len(data), k)
        if k == 0 or not data:
            return out
        with self.calls("search"):
            for start in range(0, len(data), QUERY_BATCH):
                results = self.client.search(
                    self.collection,
                    data=data[start : start + QUERY_BATCH],
                    anns_field=field,
                    limit=k,
                    search_params=params,
                    output_fields=[],
                )
                for row, hits in enumerate(results, start=start):
                    ids = np.array([h["id"] for h in hits], np.int64)
                    scores = np.array([h["distance"] for h in hits], np.float32)
                    runs = np.cumsum(np.diff(scores, prepend=scores[:1]) != 0)
                    order = np.lexsort((ids, runs))  # Milvus's order, ties by chunk
                    out.ids[row, : len(ids)] = ids[order]
                    out.scores[row, : len(ids)] = scores[order]
        return out

    def drop(self) -> None:
        """Drop the collection and close the connection."""
        with self.calls("drop the collection"):
            if self.client.has_collection(self.collection):
                self.client.drop_collection(self.collection)
        self.client.close()

    @contextmanager
    def calls(self, what: str) -> Iterator[None]:
        """Milvus's errors as one line naming the collection (pymilvus's own error log,
        tracebacks included, silenced)."""
        from pymilvus import MilvusException

        with quiet():
            try:
                yield
            except MilvusException as exc:
                raise RagsweepError(
                    f"milvus: cannot {what} {self.collection!r} at {where()}: {scrub(exc)}"
                ) from None


def index_params(index: IndexSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """Milvus's build and search parameters of ``index``; a clear error for an index kind
    or parameter Milvus does not have."""
    if index.kind not in INDEX_TYPES:
        raise RagsweepError(
            f"milvus: unknown index {index.kind!r}; choose from {list(MilvusStore.INDEXES)}"
        )
    allowed = MilvusStore.INDEXES[index.kind]
    unknown = sorted(set(index.params) - set(allowed))
    if unknown:
        raise RagsweepError(
            f"milvus: index {index.kind!r} has no parameter {unknown[0]!r}; "
            f"its parameters: {sorted(allowed) or 'none'}"
        )
    params = {**allowed, **index.params}
    for key, value in params.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise RagsweepError(
                f"milvus: index {index.kind!r}: {key} must be a positive integer, got {value!r}"
            )
    build = {BUILD_PARAMS[k]: v for k, v in params.items() if k in BUILD_PARAMS}
    search = {SEARCH_PARAMS[k]: v for k, v in params.items() if k in SEARCH_PARAMS}
    return build, search


def collection_name(name: str) -> str:
    """``name`` as Milvus allows it: letters, digits and underscores, not starting with a
    digit, at most 255 characters (a long name keeps a hash of the whole for uniqueness)."""
    clean = NAME.sub("_", name) or "_"
    if clean[0].isdigit():
        clean = "c_" + clean
    if len(clean) > 255:
        clean = clean[:238] + "_" + sha256(name.encode()).hexdigest()[:16]
    return clean


def where() -> str:
    """The database in use, for messages: the variable that set it, never credentials."""
    uri = os.environ.get(ENV_URI)
    if not uri:
        return f"Milvus Lite {lite_path()}"
    if is_lite(uri):
        return f"Milvus Lite {uri} ({ENV_URI})"
    return f"{ENV_URI}=" + CREDENTIALS.sub(r"\1", uri)


def is_lite(uri: str) -> bool:
    return uri.endswith(".db")  # as pymilvus decides


def lite_path() -> str:
    return os.path.join(os.environ.get(ENV_LITE_DIR) or os.getcwd(), LITE_FILE)


def connect() -> Any:
    """A ``MilvusClient`` on ``RAGSWEEP_MILVUS_URI``, else on the Milvus Lite database."""
    from pymilvus import MilvusClient, MilvusException

    uri = os.environ.get(ENV_URI) or lite_path()
    with quiet():
        try:
            return MilvusClient(uri=uri, token=os.environ.get(ENV_TOKEN, ""), timeout=TIMEOUT_S)
        except MilvusException as exc:
            if not is_lite(uri):
                raise RagsweepError(
                    f"milvus: cannot connect to {where()} (set {ENV_URI} to a reachable Milvus "
                    f"server, or unset it for Milvus Lite): {scrub(exc)}"
                ) from None
            raise RagsweepError(
                f"milvus: cannot open {where()}: {scrub(exc)} (Milvus Lite needs a writable "
                f"folder that no other process has open: set "
                f"{ENV_URI if os.environ.get(ENV_URI) else ENV_LITE_DIR})"
            ) from None


def scrub(exc: Exception) -> str:
    """Milvus's message, without the token or the URI's credentials."""
    text = str(getattr(exc, "message", "") or exc)
    uri = os.environ.get(ENV_URI, "")
    if uri:
        text = text.replace(uri, CREDENTIALS.sub(r"\1", uri))
        userinfo = CREDENTIALS.match(uri)  # "scheme://user:password@", any part of it quoted
        for secret in userinfo.group(0).split("//")[-1][:-1].split(":") if userinfo else []:
            if len(secret) > 3:
                text = text.replace(secret, "***")
    token = os.environ.get(ENV_TOKEN, "")
    return text.replace(token, "***") if token else text


@contextmanager
def quiet() -> Iterator[None]:
    """pymilvus logs every failed call with its traceback (and Milvus Lite's gRPC server the
    calls it does not implement); the RagsweepError says it once."""
    logs = [logging.getLogger(name) for name in ("pymilvus", "grpc._server")]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.setLevel(level)


def batches(vectors: np.ndarray, texts: list[str]) -> Iterator[list[dict[str, Any]]]:
    """Rows for insert requests of at most ``BATCH_ROWS`` rows and about ``BATCH_BYTES``."""
    batch: list[dict[str, Any]] = []
    size = 0
    for i, (vector, text) in enumerate(zip(vectors, texts, strict=True)):
        batch.append({"id": i, "vector": vector, "text": text})
        size += vector.nbytes + len(text) * 4
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
