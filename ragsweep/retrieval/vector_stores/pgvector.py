"""PostgreSQL with the pgvector extension, through psycopg 3.

The server is ``RAGSWEEP_PGVECTOR_URL`` (``postgresql://user:pw@host:5432/db``; a
SQLAlchemy-style ``postgresql+psycopg://`` works too). A collection is one table
``ragsweep_<collection>``: ``id`` (the chunk's row in the chunk set), ``embedding
vector(dim)``, ``text`` and a generated ``tsv`` (``to_tsvector('simple', text)``, GIN
indexed) for the full-text search hybrid uses. Rows are loaded by binary ``COPY``.

Index kinds: ``exact`` (no index: a sequential scan), ``hnsw`` (``m``, ``ef_construction``;
``ef_search`` per query, raised to ``k`` since an HNSW scan returns at most ``ef_search``
rows) and ``ivf`` (ivfflat with ``nlist`` lists, ``nprobe`` probes per query). Under an
approximate index the session disables sequential scans, so the index is what is measured
even where the planner would scan a small table. The index kind and parameters are kept in
the table's comment, so another process can search a collection it did not create.

Scores are higher-is-better and on the memory store's scale: cosine similarity for
``cosine`` (1 - ``<=>``), the inner product for ``dot`` (``<#>`` is its negation) and the
negated squared distance for ``euclidean`` (``<->`` is the distance).

The statements, and building and searching a table, are in ``pgvector_sql`` (standalone: it
is also the store's pattern code); this module adds the collection's naming, connection
errors and batched searches.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from ragsweep.core.errors import RagsweepError, safe_url
from ragsweep.core.text import STOPWORDS
from ragsweep.retrieval.vector_stores import Hits, IndexSpec, pgvector_sql, recorded_index
from ragsweep.retrieval.vector_stores.pgvector_sql import (
    OPERATORS,
    create_table,
    hidden,
    keywords_statement,
    nearest_statement,
    read_index,
    register_vector,
    tune,
)

ENV = "RAGSWEEP_PGVECTOR_URL"
CONNECT_TIMEOUT_S = 10


class PgvectorStore:
    name = "pgvector"
    INDEXES: dict[str, dict[str, Any]] = {
        "exact": {},
        "hnsw": {"m": 16, "ef_construction": 64, "ef_search": 40},
        "ivf": {"nlist": 32, "nprobe": 16},
    }
    CONNECTION_KEYS = (ENV,)
    PATTERN_CODE = pgvector_sql.__file__  # the same statements, standalone

    def __init__(self, collection: str, distance: str) -> None:
        self.url = os.environ.get(ENV, "")
        if not self.url:
            raise RagsweepError(
                f"vector store pgvector: set {ENV} to the server's URL, e.g. "
                "postgresql://user:password@host:5432/database"
            )
        self.url = re.sub(r"^postgresql\+psycopg://", "postgresql://", self.url)
        self.collection = collection
        self.table = table_name(collection)
        self.distance = distance
        self.index: IndexSpec | None = None

    @classmethod
    def pattern_settings(cls, index: IndexSpec, distance: str) -> dict[str, Any]:
        """What a pattern's scripts need of ``index``: its kind and parameters, the store's
        defaults filled in (build: ``m``, ``ef_construction``, ``nlist``; search:
        ``ef_search``, ``nprobe``)."""
        params = {**cls.INDEXES[check_kind(index.kind)], **index.params}
        return {"pgvector_index": {"kind": index.kind, "params": params}}

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        """A new table holding the chunks (any former one of the collection is replaced),
        its full-text index and ``index``."""
        params = {**self.INDEXES[check_kind(index.kind)], **index.params}
        spec = {"kind": index.kind, "params": params, "distance": self.distance}
        with self.connect() as conn:
            create_table(
                conn,
                self.table,
                np.asarray(vectors, dtype=np.float32),
                texts,
                spec,
                lambda suffix: table_name(f"{self.collection}_{suffix}"),
            )
        self.index = IndexSpec(index.kind, params)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        """Each query's ``k`` nearest chunks: one prepared statement per query, pipelined."""
        queries = np.asarray(queries, dtype=np.float32)
        statement = nearest_statement(self.table, self.distance)
        with self.connect() as conn:
            index = self._spec(conn)
            tune(conn, {"kind": index.kind, "params": index.params}, k)
            rows = fetch_each(conn, statement, [{"q": q, "k": k} for q in queries])
        return to_hits(rows, k, OPERATORS[self.distance][2])

    def keyword_search(self, queries: list[str], k: int) -> Hits:
        """Each query's ``k`` best chunks by PostgreSQL full text: the chunks holding any of
        its words (English stop words left out, as BM25 here does), ranked by ``ts_rank``
        over the chunk's length (unlike BM25, no inverse document frequency)."""
        statement = keywords_statement(self.table)
        with self.connect() as conn:
            stop = sorted(STOPWORDS)
            rows = fetch_each(conn, statement, [{"q": q, "k": k, "stop": stop} for q in queries])
        return to_hits(rows, k, lambda score: score)

    def drop(self) -> None:
        with self.connect() as conn:
            conn.execute(sql.SQL(pgvector_sql.DROP_TABLE).format(table=sql.Identifier(self.table)))

    @contextmanager
    def connect(self) -> Iterator[psycopg.Connection]:
        """A connection (committed on leaving) able to send numpy vectors as ``vector``; a
        database error is a clear one naming the server, its password hidden."""
        where = safe_url(self.url)
        try:
            conn = psycopg.connect(self.url, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise RagsweepError(
                f"vector store pgvector: cannot connect to {where} (from {ENV}): "
                f"{hidden(exc, self.url)}"
            ) from None
        with conn:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile):
                raise RagsweepError(
                    f"vector store pgvector: the pgvector extension is not installed in {where}; "
                    "install it on the server (https://github.com/pgvector/pgvector#installation)"
                ) from None
            except psycopg.errors.InsufficientPrivilege:
                raise RagsweepError(
                    f"vector store pgvector: cannot create the vector extension in {where}: "
                    "ask the database owner to run CREATE EXTENSION vector"
                ) from None
            register_vector(conn)
            try:
                yield conn
            except psycopg.Error as exc:
                raise RagsweepError(
                    f"vector store pgvector: collection table {self.table} in {where}: "
                    f"{hidden(exc, self.url)}"
                ) from None

    def _spec(self, conn: psycopg.Connection) -> IndexSpec:
        """The collection's index, as ``create`` recorded it in the table's comment."""
        if self.index is None:
            spec = read_index(conn, self.table)
            where = safe_url(self.url)
            self.index = recorded_index(spec, "pgvector", self.table, where, self.distance)
        return self.index


def table_name(collection: str) -> str:
    """``ragsweep_<collection>`` as a plain lower-case identifier of at most 63 bytes (a
    longer one ends with a hash of the collection's name, so names stay distinct)."""
    name = "ragsweep_" + re.sub(r"[^a-z0-9_]", "_", collection.lower())
    if len(name) > 63:
        name = name[:54] + "_" + hashlib.sha1(collection.encode()).hexdigest()[:8]
    return name


def check_kind(kind: str) -> str:
    if kind not in PgvectorStore.INDEXES:
        raise RagsweepError(
            f"vector store pgvector: unknown index {kind!r}; "
            f"choose from {list(PgvectorStore.INDEXES)}"
        )
    return kind


def fetch_each(
    conn: psycopg.Connection, statement: sql.Composed, params: list[dict[str, Any]]
) -> list[list[tuple]]:
    """The rows of ``statement`` for each set of parameters: one prepared statement sent in
    pipeline mode, so queries are not one round trip each."""
    if not params:
        return []
    with conn.cursor() as cur:
        cur.executemany(statement, params, returning=True)
        return [cur.fetchall() for _ in cur.results()]


def to_hits(rows: list[list[tuple]], k: int, to_score: Any) -> Hits:
    out = Hits.empty(len(rows), k)
    for q, found in enumerate(rows):
        if found:
            ids, values = zip(*found, strict=True)
            out.ids[q, : len(ids)] = ids
            out.scores[q, : len(ids)] = to_score(np.asarray(values, dtype=np.float64))
    return out
