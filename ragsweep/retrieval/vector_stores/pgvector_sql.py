"""pgvector's tables and searches, standalone (numpy and psycopg; no ragsweep import).

One source for both sides: the sweep's store (``ragsweep.retrieval.vector_stores.pgvector``)
builds and searches its tables with ``create_table``, ``tune``, ``nearest_statement`` and
``keywords_statement``; and this file is the store's pattern code (``PATTERN_CODE``), copied
beside a pattern's scripts as ``vector_store.py``, whose ``write_index`` and ``open_index``
build and search the pattern's table with the same functions.

A table: ``id`` (the chunk's row in the chunk set), ``embedding vector(dim)``, ``text`` and a
generated ``tsv`` (``to_tsvector('simple', text)``, GIN indexed) for the full-text search
hybrid uses; a pattern's table has the ``document_id`` too. Rows are loaded by binary
``COPY``. The index kind and parameters are kept in the table's comment.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

# distance -> (operator, operator class, distance -> higher-is-better score on the memory
# store's scale: cosine similarity, the inner product, the negated squared distance)
OPERATORS: dict[str, tuple[str, str, Callable[[Any], Any]]] = {
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
ADD_DOCUMENT_ID = "ALTER TABLE {table} ADD COLUMN document_id text NOT NULL"
COPY_ROWS = "COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"
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
READ_ROWS = "SELECT id, document_id, text, embedding FROM {table} WHERE id = ANY(%s)"
DROP_TABLE = "DROP TABLE IF EXISTS {table}"


def create_table(
    conn: psycopg.Connection,
    table: str,
    vectors: np.ndarray,
    texts: Sequence[str],
    index: dict[str, Any],
    index_name: Callable[[str], str],
    document_ids: Sequence[str] | None = None,
) -> None:
    """Table ``table`` holding the chunks (row ``i`` is chunk ``i``; a former table of that
    name is replaced), its full-text index and the vector index ``index`` (its ``kind``,
    its ``params`` complete, its ``distance``; none for ``exact``), recorded in the table's
    comment. ``index_name(suffix)`` names the table's indexes."""
    name = sql.Identifier(table)
    conn.execute(sql.SQL(DROP_TABLE).format(table=name))
    conn.execute(sql.SQL(CREATE_TABLE).format(table=name, dim=vectors.shape[1]))
    columns, types = ["id", "embedding", "text"], ["int4", "vector", "text"]
    rows: list[tuple] = [  # text holds no NUL
        (i, v, t.replace("\x00", "")) for i, (v, t) in enumerate(zip(vectors, texts, strict=True))
    ]
    if document_ids is not None:
        conn.execute(sql.SQL(ADD_DOCUMENT_ID).format(table=name))
        columns, types = [*columns, "document_id"], [*types, "text"]
        rows = [(*row, d) for row, d in zip(rows, document_ids, strict=True)]
    listed = sql.SQL(", ").join(map(sql.Identifier, columns))
    with conn.cursor().copy(sql.SQL(COPY_ROWS).format(table=name, columns=listed)) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)
    text_index = sql.Identifier(index_name("tsv"))
    conn.execute(sql.SQL(CREATE_TEXT_INDEX).format(name=text_index, table=name))
    kind, params = index["kind"], index["params"]
    if kind != "exact":
        ddl = CREATE_HNSW if kind == "hnsw" else CREATE_IVF
        values = {key: sql.Literal(int(params[key])) for key in placeholders(ddl)}
        opclass = sql.SQL(OPERATORS[index["distance"]][1])
        vector_index = sql.Identifier(index_name(kind))
        conn.execute(sql.SQL(ddl).format(name=vector_index, table=name, opclass=opclass, **values))
    spec = sql.Literal(json.dumps(index))
    conn.execute(sql.SQL(COMMENT).format(table=name, spec=spec))
    conn.execute(sql.SQL("ANALYZE {table}").format(table=name))


def placeholders(statement: str) -> list[str]:
    """The integer parameters a DDL statement takes (its placeholders but the names)."""
    return [p for p in re.findall(r"{(\w+)}", statement) if p not in ("name", "table", "opclass")]


def read_index(conn: psycopg.Connection, table: str) -> dict[str, Any] | None:
    """The index ``create_table`` recorded in the table's comment; None: no such table."""
    found = conn.execute(READ_COMMENT, [sql.Identifier(table).as_string(conn)]).fetchone()
    return None if found[0] is None else json.loads(found[0])


def tune(conn: psycopg.Connection, index: dict[str, Any], k: int) -> None:
    """The session's settings for a search of ``k`` through ``index``: HNSW's
    ``ef_search`` raised to ``k`` (an HNSW scan returns at most ``ef_search`` rows; at most
    1000), IVF's probes; under an approximate index no sequential scan, so the index is
    what is measured even where the planner would scan a small table."""
    kind, params = index["kind"], index["params"]
    if kind == "hnsw":
        ef_search = min(max(int(params["ef_search"]), k), 1000)
        conn.execute(sql.SQL(SET_HNSW).format(ef_search=sql.Literal(ef_search)))
    elif kind == "ivf":
        conn.execute(sql.SQL(SET_IVF).format(nprobe=sql.Literal(int(params["nprobe"]))))
    if kind != "exact":
        conn.execute("SET enable_seqscan = off")


def nearest_statement(table: str, distance: str) -> sql.Composed:
    """The ``k`` (``%(k)s``) nearest rows to ``%(q)s``: id and distance."""
    operator = sql.SQL(OPERATORS[distance][0])
    return sql.SQL(NEAREST).format(op=operator, table=sql.Identifier(table))


def keywords_statement(table: str) -> sql.Composed:
    """The ``k`` best rows by full text for ``%(q)s`` (less the words in ``%(stop)s``): id
    and ``ts_rank`` score."""
    return sql.SQL(KEYWORDS).format(table=sql.Identifier(table))


def register_vector(conn: psycopg.Connection) -> None:
    """numpy vectors sent as pgvector's binary ``vector`` (dimensions and a zero, int16
    each, then big-endian float32 values) and read back as float32 arrays."""
    info = TypeInfo.fetch(conn, "vector")
    info.register(conn)

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: np.ndarray) -> bytes:
            values = np.asarray(obj, dtype=">f4")
            return struct.pack(">HH", len(values), 0) + values.tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            dim, _ = struct.unpack_from(">HH", data)
            return np.frombuffer(data, ">f4", count=dim, offset=4).astype(np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)


def hidden(exc: Exception, url: str) -> str:
    """The first line of a database error, without the URL's password."""
    from urllib.parse import unquote, urlsplit

    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    try:
        password = urlsplit(url).password
    except ValueError:
        return text
    for secret in {password, unquote(password)} if password else ():
        text = text.replace(secret, "***")
    return text


# ---- a pattern's side: indexing.py and inference.py call these -------------------------------

URL_ENV = ("PGVECTOR_URL", "RAGSWEEP_PGVECTOR_URL")
TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_index(where: str, settings: dict) -> None:
    """Before the documents are embedded: a table name, and a server that answers."""
    check_table(where)
    connect().close()


def write_index(where: str, chunks: list[dict], vectors: np.ndarray, settings: dict) -> None:
    """Table ``where`` as the sweep made its collection, with the document id, and the
    pattern's vector index (``settings["pgvector_index"]``)."""
    index = {**settings["pgvector_index"], "distance": settings["distance"]}
    with connect() as conn:
        create_table(
            conn,
            check_table(where),
            vectors,
            [c["text"] for c in chunks],
            index,
            lambda suffix: f"{where}_{suffix}",
            [c["document_id"] for c in chunks],
        )


def open_index(where: str, settings: dict, index_class: type) -> Any:
    """Table ``where``, searched with the sweep's statements: the distance operator's
    nearest rows under the pattern's index, and, for hybrid, PostgreSQL's full-text search;
    rows read by id when first needed. None when there is no such table."""
    conn = connect()
    table = check_table(where)
    found = conn.execute("SELECT to_regclass(%s)", [sql.Identifier(table).as_string(conn)])
    if found.fetchone()[0] is None:
        return None
    index, distance = settings["pgvector_index"], settings["distance"]
    to_score = OPERATORS[distance][2]
    rows = sql.SQL(READ_ROWS).format(table=sql.Identifier(table))

    class PgvectorIndex(index_class):
        def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
            tune(conn, index, k)
            found = conn.execute(nearest_statement(table, distance), {"q": vector, "k": k})
            return [(row, float(to_score(d))) for row, d in found.fetchall()]

        def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
            asked = {"q": question, "k": k, "stop": sorted(self.STOPWORDS)}
            found = conn.execute(keywords_statement(table), asked)
            return [(row, float(score)) for row, score in found]

    return PgvectorIndex.lazy(lambda ids: conn.execute(rows, [ids], binary=True))


def check_table(table: str) -> str:
    if not TABLE.fullmatch(table):
        fail(f"--index {table}: a table name of letters, digits and _ (at most 63)")
    return table


def connect() -> psycopg.Connection:
    """A connection to the server in ``PGVECTOR_URL`` (else ``RAGSWEEP_PGVECTOR_URL``), able
    to send and read vectors; a clear error (its password hidden) when there is none."""
    variable = next((name for name in URL_ENV if os.environ.get(name)), None)
    if variable is None:
        fail(
            "pgvector: set PGVECTOR_URL to the PostgreSQL server's URL, e.g. "
            "postgresql://user:password@host:5432/database"
        )
    url = re.sub(r"^postgresql\+psycopg://", "postgresql://", os.environ[variable])
    try:
        conn = psycopg.connect(url, connect_timeout=10)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.commit()  # no transaction left open while the chunks are embedded
    except psycopg.Error as exc:
        fail(f"pgvector: the server in {variable}: {hidden(exc, url)}")
    return conn


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
