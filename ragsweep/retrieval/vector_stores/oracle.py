"""Oracle AI Database 26ai vector search, through python-oracledb in thin mode.

The server is ``RAGSWEEP_ORACLE_DSN`` (an Easy Connect string such as
``dbhost:1521/FREEPDB1``, or a TNS alias), logged into as ``RAGSWEEP_ORACLE_USER`` with
``RAGSWEEP_ORACLE_PASSWORD``; ``RAGSWEEP_ORACLE_WALLET_DIR`` (and
``RAGSWEEP_ORACLE_WALLET_PASSWORD``) name a wallet folder for TLS (mTLS) connections, e.g.
an Autonomous Database's. A collection is one table ``RAGSWEEP_<COLLECTION>``: ``ID`` (the
chunk's row in the chunk set), ``EMBEDDING VECTOR(dim, FLOAT32)`` and ``CHUNK_TEXT`` (a CLOB
with an Oracle Text search index for the full-text search hybrid uses). Rows are inserted by
``executemany`` binding ``array('f')`` vectors.

Index kinds: ``exact`` (no vector index: ``FETCH FIRST`` scans every row), ``hnsw`` (an
in-memory neighbor graph: ``m`` neighbors, ``ef_construction``; ``ef_search`` per query,
raised to ``k``) and ``ivf`` (neighbor partitions: ``nlist`` partitions, ``nprobe`` probed
per query); both approximate kinds are built ``WITH TARGET ACCURACY target_accuracy`` and
queried with ``FETCH APPROX FIRST``. The index kind and parameters are kept in the table's
comment, so another process can search a collection it did not create.

Scores are higher-is-better and on the memory store's scale: cosine similarity for
``cosine`` (1 - the COSINE distance), the inner product for ``dot`` (DOT is its negation)
and the negated squared distance for ``euclidean``.

The statements (each checked against the Oracle documentation cited beside it), and
building and searching a table, are in ``oracle_sql`` (standalone: it is also the store's
pattern code); this module adds the collection's naming, settings, errors and batches.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import oracledb

from ragsweep.core.errors import RagsweepError
from ragsweep.core.text import words
from ragsweep.retrieval.vector_stores import Hits, IndexSpec, oracle_sql, recorded_index
from ragsweep.retrieval.vector_stores.oracle_sql import (
    METRICS,
    contains,
    create_table,
    create_vector_index,
    nearest,
    nearest_statement,
    read_index,
    render,
    scrub,
    text_query,
    write_comment,
)

log = logging.getLogger(__name__)

ENV_DSN, ENV_USER, ENV_PASSWORD = (
    "RAGSWEEP_ORACLE_DSN",
    "RAGSWEEP_ORACLE_USER",
    "RAGSWEEP_ORACLE_PASSWORD",
)
ENV_WALLET, ENV_WALLET_PASSWORD = "RAGSWEEP_ORACLE_WALLET_DIR", "RAGSWEEP_ORACLE_WALLET_PASSWORD"


class OracleStore:
    name = "oracle"
    INDEXES: dict[str, dict[str, Any]] = {
        "exact": {},
        "hnsw": {"m": 16, "ef_construction": 64, "ef_search": 40, "target_accuracy": 95},
        "ivf": {"nlist": 32, "nprobe": 16, "target_accuracy": 95},
    }
    CONNECTION_KEYS = (ENV_DSN, ENV_USER, ENV_PASSWORD, ENV_WALLET, ENV_WALLET_PASSWORD)
    PATTERN_CODE = oracle_sql.__file__  # the same statements, standalone

    def __init__(self, collection: str, distance: str) -> None:
        self.settings = connection_settings()
        self.collection = collection
        self.table = table_name(collection)
        self.distance = distance
        self.index: IndexSpec | None = None
        self.text_index = False

    @classmethod
    def pattern_settings(cls, index: IndexSpec, distance: str) -> dict[str, Any]:
        """What a pattern's scripts need of ``index``: its kind and parameters, the store's
        defaults filled in (build: ``m``, ``ef_construction``, ``nlist``,
        ``target_accuracy``; search: ``ef_search``, ``nprobe``)."""
        params = {**cls.INDEXES[index.kind], **index.params}
        return {"oracle_index": {"kind": index.kind, "params": params}}

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        """A new table holding the chunks (any former one of the collection is replaced),
        its vector index and its Oracle Text index."""
        if index.kind not in self.INDEXES:
            raise RagsweepError(
                f"vector store oracle: unknown index {index.kind!r}; "
                f"choose from {list(self.INDEXES)}"
            )
        params = {**self.INDEXES[index.kind], **index.params}
        vectors = np.asarray(vectors, dtype=np.float32)
        with self.connect() as conn, conn.cursor() as cur:
            create_table(cur, self.table, vectors, texts)
            conn.commit()
            if index.kind != "exact":
                self._create_vector_index(cur, index.kind, params)
            self.text_index = self._create_text_index(cur)
            spec = {"kind": index.kind, "params": params, "distance": self.distance}
            write_comment(cur, self.table, {**spec, "text_index": self.text_index})
        self.index = IndexSpec(index.kind, params)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        """Each query's ``k`` nearest chunks, one statement (parsed once) per query."""
        queries = np.asarray(queries, dtype=np.float32)
        metric, to_score = METRICS[self.distance]
        with self.connect() as conn, conn.cursor() as cur:
            index = self._spec(cur)
            statement = nearest_statement(self.table, metric, index.kind, index.params, k)
            rows = [nearest(cur, statement, q, k) for q in queries]
        return to_hits(rows, k, to_score)

    def keyword_search(self, queries: list[str], k: int) -> Hits | None:
        """Each query's ``k`` best chunks by Oracle Text (the chunks holding any of its
        words, ranked by SCORE); None when the collection has no text index."""
        with self.connect() as conn, conn.cursor() as cur:
            self._spec(cur)
            if not self.text_index:
                return None
            rows = [contains(cur, self.table, text_query(q, words), k) for q in queries]
        return to_hits(rows, k, lambda score: score)

    def drop(self) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(render("drop", table=self.table))

    @contextmanager
    def connect(self) -> Iterator[oracledb.Connection]:
        """A connection; a database error is a clear one naming the server, without the
        password."""
        settings = self.settings
        try:
            conn = oracledb.connect(**settings)
        except oracledb.Error as exc:
            raise RagsweepError(
                f"vector store oracle: cannot connect to {settings['dsn']} as "
                f"{settings['user']} (from {ENV_DSN}, {ENV_USER}, {ENV_PASSWORD}): "
                f"{scrub(exc, settings)}"
            ) from None
        with conn:
            try:
                yield conn
            except oracledb.DatabaseError as exc:
                raise RagsweepError(
                    f"vector store oracle: collection table {self.table} in {settings['dsn']}: "
                    f"{scrub(exc, settings)}"
                ) from None

    def _create_vector_index(self, cur: oracledb.Cursor, kind: str, params: dict) -> None:
        name = index_name(self.collection, kind)
        try:
            create_vector_index(
                cur, self.table, name, {"kind": kind, "params": params}, self.distance
            )
        except oracledb.DatabaseError as exc:
            hint = (
                "; an HNSW index lives in the vector pool: ask the DBA to size VECTOR_MEMORY_SIZE"
                " (see docs/vector-stores.md, Oracle: For the DBA)"
                if kind == "hnsw"
                else ""
            )
            raise RagsweepError(
                f"vector store oracle: cannot create the {kind} index on {self.table}: "
                f"{scrub(exc, self.settings)}{hint}"
            ) from None

    def _create_text_index(self, cur: oracledb.Cursor) -> bool:
        """The Oracle Text index for keyword search; False (the library's BM25 is used) when
        the database refuses it, e.g. Oracle Text is not installed."""
        statement = render(
            "create_text_index", index=index_name(self.collection, "txt"), table=self.table
        )
        try:
            cur.execute(statement)
        except oracledb.DatabaseError as exc:
            log.warning(
                "vector store oracle: no Oracle Text index on %s (%s); hybrid search uses BM25",
                self.table,
                scrub(exc, self.settings),
            )
            return False
        return True

    def _spec(self, cur: oracledb.Cursor) -> IndexSpec:
        """The collection's index, as ``create`` recorded it in the table's comment."""
        if self.index is None:
            spec = read_index(cur, self.table)
            where = self.settings["dsn"]
            self.index = recorded_index(spec, "oracle", self.table, where, self.distance)
            self.text_index = bool(spec and spec.get("text_index"))
        return self.index


def connection_settings() -> dict[str, Any]:
    """``oracledb.connect`` arguments from the environment; a clear error naming what is
    missing."""
    missing = [name for name in (ENV_DSN, ENV_USER, ENV_PASSWORD) if not os.environ.get(name)]
    if missing:
        raise RagsweepError(
            f"vector store oracle: set {', '.join(missing)} (the database's connect string, "
            "e.g. dbhost:1521/FREEPDB1, a user and its password)"
        )
    return oracle_sql.connection_settings(lambda n: os.environ.get(f"RAGSWEEP_ORACLE_{n}", ""))


def table_name(collection: str) -> str:
    """``RAGSWEEP_<COLLECTION>`` as a plain upper-case identifier of at most 128 bytes (a
    longer one ends with a hash of the collection's name, so names stay distinct)."""
    name = "RAGSWEEP_" + re.sub(r"[^A-Z0-9_]", "_", collection.upper())
    if len(name) > 128:
        name = name[:119] + "_" + hashlib.sha1(collection.encode()).hexdigest()[:8].upper()
    return name


def index_name(collection: str, suffix: str) -> str:
    return table_name(f"{collection}_{suffix}")


def to_hits(rows: list[list[tuple]], k: int, to_score: Any) -> Hits:
    out = Hits.empty(len(rows), k)
    for q, found in enumerate(rows):
        found = found[:k]
        if found:
            ids, values = zip(*found, strict=True)
            out.ids[q, : len(ids)] = ids
            out.scores[q, : len(ids)] = to_score(np.asarray(values, dtype=np.float64))
    return out
