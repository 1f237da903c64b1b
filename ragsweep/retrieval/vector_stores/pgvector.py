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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo

from ragsweep.core.errors import RagsweepError, safe_url
from ragsweep.core.text import STOPWORDS
from ragsweep.retrieval.vector_stores import Hits, IndexSpec

ENV = "RAGSWEEP_PGVECTOR_URL"
CONNECT_TIMEOUT_S = 10

# distance -> (operator, operator class, distance -> higher-is-better score)
OPERATORS = {
    "cosine": ("<=>", "vector_cosine_ops", lambda d: 1 - d),
    "dot": ("<#>", "vector_ip_ops", lambda d: -d),
    "euclidean": ("<->", "vector_l2_ops", lambda d: -(d**2)),
}

# the statements, with {placeholders} filled by psycopg.sql (identifiers, operators, ints)
CREATE_TABLE = """
CREATE TABLE {table} (
    id integer PRIMARY KEY,
    embedding vector({dim}) NOT NULL,
    text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
)"""
COPY_ROWS = "COPY {table} (id, embedding, text) FROM STDIN (FORMAT BINARY)"
CREATE_TEXT_INDEX = "CREATE INDEX {name} ON {table} USING gin (tsv)"
CREATE_HNSW = (
    "CREATE INDEX {name} ON {table} USING hnsw (embedding {opclass}) "
    "WITH (m = {m}, ef_construction = {ef_construction})"
)
CREATE_IVF = (
    "CREATE INDEX {name} ON {table} USING ivfflat (embedding {opclass}) WITH (lists = {nlist})"
)
SET_HNSW = "SET hnsw.ef_search = {ef_search}"
SET_IVF = "SET ivfflat.probes = {nprobe}"
NEAREST = "SELECT id, embedding {op} %(q)s AS distance FROM {table} ORDER BY distance LIMIT %(k)s"
# OR of the question's words as PostgreSQL's 'simple' parser splits the texts, less the
# English stop words the library's BM25 drops too (each lexeme quoted for tsquery input:
# quotes doubled, backslashes escaped), ranked by ts_rank with normalization 1 (divided by
# 1 + log(length)): on the Click docs it agrees with BM25 better than ts_rank_cd
# (docs/vector-stores.md)
KEYWORDS = r"""
SELECT id, ts_rank(tsv, query, 1) AS score
FROM {table}, (
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')
           ::tsquery AS query
    FROM unnest(tsvector_to_array(to_tsvector('simple', %(q)s))) AS lexeme
    WHERE lexeme <> ALL (%(stop)s)
) AS asked
WHERE tsv @@ query
ORDER BY score DESC, id
LIMIT %(k)s"""
COMMENT = "COMMENT ON TABLE {table} IS {spec}"
READ_COMMENT = "SELECT obj_description(to_regclass(%s), 'pg_class')"
DROP_TABLE = "DROP TABLE IF EXISTS {table}"


class PgvectorStore:
    name = "pgvector"
    INDEXES: dict[str, dict[str, Any]] = {
        "exact": {},
        "hnsw": {"m": 16, "ef_construction": 64, "ef_search": 40},
        "ivf": {"nlist": 32, "nprobe": 16},
    }
    CONNECTION_KEYS = (ENV,)
    PATTERN_CODE = None  # the pattern scripts' own (ragsweep.results.patterns.SCRIPT_STORES)

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

    def create(self, vectors: np.ndarray, texts: list[str], index: IndexSpec) -> None:
        """A new table holding the chunks (any former one of the collection is replaced),
        its full-text index and ``index``."""
        params = {**self.INDEXES[check_kind(index.kind)], **index.params}
        vectors = np.asarray(vectors, dtype=np.float32)
        table = sql.Identifier(self.table)
        with self.connect() as conn:
            conn.execute(sql.SQL(DROP_TABLE).format(table=table))
            conn.execute(sql.SQL(CREATE_TABLE).format(table=table, dim=vectors.shape[1]))
            with conn.cursor().copy(sql.SQL(COPY_ROWS).format(table=table)) as copy:
                copy.set_types(["int4", "vector", "text"])
                for i, (vector, text) in enumerate(zip(vectors, texts, strict=True)):
                    copy.write_row((i, vector, text.replace("\x00", "")))  # text holds no NUL
            conn.execute(sql.SQL(CREATE_TEXT_INDEX).format(name=self._index("tsv"), table=table))
            if index.kind != "exact":
                _, opclass, _ = OPERATORS[self.distance]
                ddl = CREATE_HNSW if index.kind == "hnsw" else CREATE_IVF
                values = {key: sql.Literal(int(params[key])) for key in placeholders(ddl)}
                values.update(name=self._index(index.kind), table=table, opclass=sql.SQL(opclass))
                conn.execute(sql.SQL(ddl).format(**values))
            spec = json.dumps({"kind": index.kind, "params": params, "distance": self.distance})
            conn.execute(sql.SQL(COMMENT).format(table=table, spec=sql.Literal(spec)))
            conn.execute(sql.SQL("ANALYZE {table}").format(table=table))
        self.index = IndexSpec(index.kind, params)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        """Each query's ``k`` nearest chunks: one prepared statement per query, pipelined."""
        queries = np.asarray(queries, dtype=np.float32)
        op, _, to_score = OPERATORS[self.distance]
        statement = sql.SQL(NEAREST).format(op=sql.SQL(op), table=sql.Identifier(self.table))
        with self.connect() as conn:
            index = self._spec(conn)
            if index.kind == "hnsw":
                ef_search = max(int(index.params["ef_search"]), k)
                conn.execute(sql.SQL(SET_HNSW).format(ef_search=sql.Literal(min(ef_search, 1000))))
            elif index.kind == "ivf":
                conn.execute(
                    sql.SQL(SET_IVF).format(nprobe=sql.Literal(int(index.params["nprobe"])))
                )
            if index.kind != "exact":
                conn.execute("SET enable_seqscan = off")
            rows = fetch_each(conn, statement, [{"q": q, "k": k} for q in queries])
        return to_hits(rows, k, to_score)

    def keyword_search(self, queries: list[str], k: int) -> Hits:
        """Each query's ``k`` best chunks by PostgreSQL full text: the chunks holding any of
        its words (English stop words left out, as BM25 here does), ranked by ``ts_rank``
        over the chunk's length (unlike BM25, no inverse document frequency)."""
        statement = sql.SQL(KEYWORDS).format(table=sql.Identifier(self.table))
        with self.connect() as conn:
            stop = sorted(STOPWORDS)
            rows = fetch_each(conn, statement, [{"q": q, "k": k, "stop": stop} for q in queries])
        return to_hits(rows, k, lambda score: score)

    def drop(self) -> None:
        with self.connect() as conn:
            conn.execute(sql.SQL(DROP_TABLE).format(table=sql.Identifier(self.table)))

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
                f"{reason(exc, self.url)}"
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
                    f"{reason(exc, self.url)}"
                ) from None

    def _spec(self, conn: psycopg.Connection) -> IndexSpec:
        """The collection's index, as ``create`` recorded it in the table's comment."""
        if self.index is None:
            found = conn.execute(READ_COMMENT, [sql.Identifier(self.table).as_string(conn)])
            comment = found.fetchone()[0]
            if comment is None:
                raise RagsweepError(
                    f"vector store pgvector: no collection table {self.table} in "
                    f"{safe_url(self.url)}; create it first"
                )
            spec = json.loads(comment)
            if spec.get("distance", self.distance) != self.distance:
                raise RagsweepError(
                    f"vector store pgvector: collection table {self.table} was indexed for "
                    f"{spec['distance']} distance, not {self.distance}"
                )
            self.index = IndexSpec(spec["kind"], spec["params"])
        return self.index

    def _index(self, suffix: str) -> sql.Identifier:
        return sql.Identifier(table_name(f"{self.collection}_{suffix}"))


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


def placeholders(statement: str) -> list[str]:
    """The integer parameters a DDL statement takes (its placeholders but the names)."""
    return [p for p in re.findall(r"{(\w+)}", statement) if p not in ("name", "table", "opclass")]


class VectorDumper(Dumper):
    """A numpy vector in pgvector's binary form: dimensions and a zero (int16 each), then
    big-endian float32 values."""

    format = Format.BINARY

    def dump(self, obj: np.ndarray) -> bytes:
        values = np.asarray(obj, dtype=">f4")
        return struct.pack(">HH", len(values), 0) + values.tobytes()


def register_vector(conn: psycopg.Connection) -> None:
    info = TypeInfo.fetch(conn, "vector")
    info.register(conn)
    conn.adapters.register_dumper(np.ndarray, type("Vector", (VectorDumper,), {"oid": info.oid}))


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


def reason(exc: Exception, url: str) -> str:
    """The first line of a database error, without the URL's password."""
    from sqlalchemy import make_url

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    try:
        password = make_url(url).password
    except Exception:
        return text
    return text.replace(password, "***") if password else text
