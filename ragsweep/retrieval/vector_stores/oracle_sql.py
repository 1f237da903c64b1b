"""Oracle AI Database 26ai's tables and searches, standalone (numpy and python-oracledb in
thin mode; no ragsweep import).

One source for both sides: the sweep's store (``ragsweep.retrieval.vector_stores.oracle``)
builds and searches its tables with the statements and functions here; and this file is the
store's pattern code (``PATTERN_CODE``), copied beside a pattern's scripts as
``vector_store.py``, whose ``write_index`` and ``open_index`` build and search the pattern's
table with the same ones.

Every statement below was checked against the Oracle AI Database 26ai documentation (the
page is cited above each); none has been run against an Oracle server from this project's
test suite unless ``RAGSWEEP_TEST_ORACLE_DSN`` was set.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from array import array
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import oracledb

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
INSERT_BATCH = 1000
QUERY_TEXT_MAX = 3000  # characters of an Oracle Text query built from a question's words

# distance -> (VECTOR_DISTANCE metric, distance -> higher-is-better score)
METRICS = {
    "cosine": ("COSINE", lambda d: 1 - d),
    "dot": ("DOT", lambda d: -d),
    "euclidean": ("EUCLIDEAN", lambda d: -(d**2)),
}

# ---------------------------------------------------------------------------------------
# The SQL. {placeholders} are identifiers, metric names and integers the code checks and
# formats in (DDL takes no binds); :names are bind variables, none a reserved word.
# ---------------------------------------------------------------------------------------
SQL = {
    # VECTOR(number_of_dimensions, dimension_element_format), FLOAT32 elements:
    # https://docs.oracle.com/en/database/oracle/oracle-database/23/vecse/create-tables-using-vector-data-type.html
    # (the 26ai guide has the same page: Create Tables Using the VECTOR Data Type)
    "create_table": (
        "CREATE TABLE {table} ("
        "ID NUMBER(10) PRIMARY KEY, "
        "EMBEDDING VECTOR({dim}, FLOAT32) NOT NULL, "
        "CHUNK_TEXT CLOB)"
    ),
    # python-oracledb binds array.array('f') to a VECTOR column:
    # https://github.com/oracle/python-oracledb/blob/main/doc/src/user_guide/vector_data_type.rst
    "insert": (
        "INSERT INTO {table} (ID, EMBEDDING, CHUNK_TEXT) "
        "VALUES (:chunk_id, :embedding, :chunk_text)"
    ),
    # a pattern's table keeps each chunk's document id too
    "add_document_id": "ALTER TABLE {table} ADD (DOCUMENT_ID VARCHAR2(4000))",
    "insert_document": (
        "INSERT INTO {table} (ID, EMBEDDING, CHUNK_TEXT, DOCUMENT_ID) "
        "VALUES (:chunk_id, :embedding, :chunk_text, :document_id)"
    ),
    "read_rows": "SELECT ID, DOCUMENT_ID, CHUNK_TEXT, EMBEDDING FROM {table} WHERE ID IN ({ids})",
    # CREATE VECTOR INDEX ... ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE metric
    # WITH TARGET ACCURACY n PARAMETERS (TYPE HNSW, NEIGHBORS m, EFCONSTRUCTION efc):
    # https://docs.oracle.com/en/database/oracle/oracle-database/26/vecse/hierarchical-navigable-small-world-index-syntax-and-parameters.html
    "create_hnsw": (
        "CREATE VECTOR INDEX {index} ON {table} (EMBEDDING) "
        "ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE {metric} "
        "WITH TARGET ACCURACY {target_accuracy} "
        "PARAMETERS (TYPE HNSW, NEIGHBORS {m}, EFCONSTRUCTION {ef_construction})"
    ),
    # CREATE VECTOR INDEX ... ORGANIZATION NEIGHBOR PARTITIONS DISTANCE metric
    # WITH TARGET ACCURACY n PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS p):
    # https://docs.oracle.com/en/database/oracle/oracle-database/23/vecse/inverted-file-flat-index-creation-syntax-and-parameters.html
    # (the 26ai guide's "Inverted File Flat CREATE INDEX", linked from
    # https://docs.oracle.com/en/database/oracle/oracle-database/26/vecse/inverted-file-flat-alter-index.html)
    "create_ivf": (
        "CREATE VECTOR INDEX {index} ON {table} (EMBEDDING) "
        "ORGANIZATION NEIGHBOR PARTITIONS DISTANCE {metric} "
        "WITH TARGET ACCURACY {target_accuracy} "
        "PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS {nlist})"
    ),
    # CREATE SEARCH INDEX on a textual column makes an Oracle Text search index (FOR TEXT is
    # implied): https://docs.oracle.com/en/database/oracle/oracle-database/26/ccref/create-search-index.html
    "create_text_index": "CREATE SEARCH INDEX {index} ON {table} (CHUNK_TEXT)",
    # Exact search: ORDER BY VECTOR_DISTANCE(...) FETCH FIRST k ROWS ONLY (no APPROX):
    # https://docs.oracle.com/en/database/oracle/oracle-database/23/vecse/vector_distance-vecse.html
    # (COSINE: cosine distance; DOT: negated dot product; EUCLIDEAN: L2 distance)
    "exact": (
        "SELECT ID, VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) FROM {table} "
        "ORDER BY VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) "
        "FETCH FIRST :k ROWS ONLY"
    ),
    # Approximate search through the index: FETCH APPROX FIRST k ROWS ONLY with the
    # accuracy_clause [WITH] [TARGET] ACCURACY PARAMETERS (EFSEARCH efs) for HNSW ...
    # https://docs.oracle.com/en/database/oracle/oracle-database/26/vecse/approximate-search-using-hnsw.html
    # https://docs.oracle.com/cd/G11854_01/sqlrf/img_text/accuracy_clause.html
    "approx_hnsw": (
        "SELECT ID, VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) FROM {table} "
        "ORDER BY VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) "
        "FETCH APPROX FIRST :k ROWS ONLY WITH TARGET ACCURACY PARAMETERS (EFSEARCH {ef_search})"
    ),
    # ... and PARAMETERS (NEIGHBOR PARTITION PROBES nprobes) for IVF (same pages)
    "approx_ivf": (
        "SELECT ID, VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) FROM {table} "
        "ORDER BY VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) "
        "FETCH APPROX FIRST :k ROWS ONLY "
        "WITH TARGET ACCURACY PARAMETERS (NEIGHBOR PARTITION PROBES {nprobe})"
    ),
    # CONTAINS(column, query, label) > 0 with SCORE(label); the query is the question's words
    # joined by ACCUM (any word matches; more words matched score higher), each escaped in
    # braces: https://docs.oracle.com/en/database/oracle/oracle-database/26/ccref/accumulate-_.html
    # https://docs.oracle.com/en/database/oracle/oracle-database/26/ccref/reserved-words-and-characters.html
    # https://docs.oracle.com/en/database/oracle/oracle-database/19/ccref/score.html
    "keywords": (
        "SELECT ID, SCORE(1) FROM {table} WHERE CONTAINS(CHUNK_TEXT, :text_query, 1) > 0 "
        "ORDER BY SCORE(1) DESC, ID FETCH FIRST :k ROWS ONLY"
    ),
    # COMMENT ON TABLE takes a literal (quotes doubled by the code), read back from
    # USER_TAB_COMMENTS (standard Oracle SQL and data dictionary)
    "comment": "COMMENT ON TABLE {table} IS '{comment}'",
    "read_comment": "SELECT COMMENTS FROM USER_TAB_COMMENTS WHERE TABLE_NAME = :table_name",
    # DROP TABLE IF EXISTS (Oracle 23ai and later) ... PURGE (skip the recycle bin; the
    # table's indexes go with it)
    "drop": "DROP TABLE IF EXISTS {table} PURGE",
}


def render(name: str, **values: Any) -> str:
    """Statement ``name`` of ``SQL`` with its placeholders filled; every placeholder must
    be given (a missing one is a KeyError, never a stray brace sent to the server)."""
    return SQL[name].format(**values)


def fields(name: str) -> list[str]:
    """The placeholders of statement ``name``."""
    return re.findall(r"{(\w+)}", SQL[name])


def binds(statement: str) -> set[str]:
    """The bind variable names of a rendered statement (``:name``; quoted text skipped)."""
    return set(re.findall(r":(\w+)", re.sub(r"'[^']*'", "''", statement)))


def connection_settings(value: Callable[[str], str]) -> dict[str, Any]:
    """``oracledb.connect`` arguments from ``value(name)`` of ``DSN``, ``USER``,
    ``PASSWORD``, ``WALLET_DIR`` and ``WALLET_PASSWORD`` (the wallet: a folder for TLS)."""
    settings: dict[str, Any] = {
        "dsn": value("DSN"),
        "user": value("USER"),
        "password": value("PASSWORD"),
        "tcp_connect_timeout": CONNECT_TIMEOUT_S,
        "retry_count": 0,
    }
    wallet = value("WALLET_DIR")
    if wallet:
        settings.update(config_dir=wallet, wallet_location=wallet)
        if value("WALLET_PASSWORD"):
            settings["wallet_password"] = value("WALLET_PASSWORD")
    return settings


def scrub(exc: Exception, settings: dict[str, Any]) -> str:
    """The first line of an error, passwords removed."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for key in ("password", "wallet_password"):
        if settings.get(key):
            text = text.replace(settings[key], "***")
    return text


def create_table(
    cur: oracledb.Cursor,
    table: str,
    vectors: np.ndarray,
    texts: Sequence[str],
    document_ids: Sequence[str] | None = None,
) -> None:
    """Table ``table`` holding the chunks (row ``i`` is chunk ``i``; a former table of that
    name is replaced), with their ``document_ids`` when given; not committed."""
    cur.execute(render("drop", table=table))
    cur.execute(render("create_table", table=table, dim=int(vectors.shape[1])))
    rows = [
        {
            "chunk_id": i,
            "embedding": array("f", np.asarray(v, np.float32).tobytes()),
            "chunk_text": t,
        }
        for i, (v, t) in enumerate(zip(vectors, texts, strict=True))
    ]
    insert = render("insert", table=table)
    if document_ids is not None:
        cur.execute(render("add_document_id", table=table))
        for row, document_id in zip(rows, document_ids, strict=True):
            row["document_id"] = document_id
        insert = render("insert_document", table=table)
    for start in range(0, len(rows), INSERT_BATCH):
        cur.executemany(insert, rows[start : start + INSERT_BATCH])


def create_vector_index(
    cur: oracledb.Cursor, table: str, name: str, index: dict[str, Any], distance: str
) -> None:
    """The vector index ``index`` (its ``kind``, ``hnsw`` or ``ivf``, and its complete
    ``params``) on ``table``, named ``name``."""
    kind = index["kind"]
    names = {"index": name, "table": table, "metric": METRICS[distance][0]}
    values = {
        key: int(index["params"][key]) for key in fields(f"create_{kind}") if key not in names
    }
    cur.execute(render(f"create_{kind}", **names, **values))


def write_comment(cur: oracledb.Cursor, table: str, spec: dict[str, Any]) -> None:
    """``spec`` (the index, distance and whether there is a text index) in the table's comment."""
    comment = json.dumps(spec).replace("'", "''")
    cur.execute(render("comment", table=table, comment=comment))


def read_index(cur: oracledb.Cursor, table: str) -> dict[str, Any] | None:
    """What ``write_comment`` recorded; None: no such table."""
    found = cur.execute(SQL["read_comment"], table_name=table).fetchone()
    return json.loads(found[0]) if found and found[0] else None


def nearest_statement(table: str, metric: str, kind: str, params: dict[str, Any], k: int) -> str:
    """The search statement for index ``kind``: exact, or approximate with its query
    parameter (HNSW's ef_search is raised to ``k``, as it bounds the candidates kept)."""
    if kind == "hnsw":
        ef_search = max(int(params["ef_search"]), k)
        return render("approx_hnsw", table=table, metric=metric, ef_search=ef_search)
    if kind == "ivf":
        return render("approx_ivf", table=table, metric=metric, nprobe=int(params["nprobe"]))
    return render("exact", table=table, metric=metric)


def nearest(cur: oracledb.Cursor, statement: str, vector: np.ndarray, k: int) -> list[tuple]:
    """The rows (id, distance) of a ``nearest_statement`` for ``vector``, at most ``k``."""
    cur.arraysize = cur.prefetchrows = k + 1
    query = array("f", np.asarray(vector, np.float32).tobytes())
    return cur.execute(statement, query_vector=query, k=k).fetchall()[:k]


def text_query(question: str, words: Callable[[str], list[str]]) -> str | None:
    """An Oracle Text query matching any of the question's ``words`` (English stop words
    dropped, as BM25 does), ACCUM-ulated so chunks holding more of them rank higher; each
    word escaped in braces (a word holds letters, marks, digits and inner ``._-``, never a
    brace; Oracle Text reads ``{click.group}`` as the phrase "click group"). None when the
    question has no word."""
    terms, length = [], 0
    for word in dict.fromkeys(words(question)):
        term = "{" + word + "}"
        length += len(term) + len(" ACCUM ")
        if length > QUERY_TEXT_MAX:
            break
        terms.append(term)
    return " ACCUM ".join(terms) or None


def contains(cur: oracledb.Cursor, table: str, query: str | None, k: int) -> list[tuple]:
    """The rows (id, score) of Oracle Text's ``k`` best chunks for ``query``; none when it
    has no word or Oracle Text rejects it (a DRG- error, e.g. a query of Oracle Text's own
    stop words)."""
    if not query:
        return []
    cur.arraysize = cur.prefetchrows = k + 1
    try:
        return cur.execute(render("keywords", table=table), text_query=query, k=k).fetchall()[:k]
    except oracledb.DatabaseError as exc:
        if "DRG-" not in str(exc):
            raise
        log.info("oracle: Oracle Text rejected %r: %s", query, scrub(exc, {}))
        return []


# ---- a pattern's side: indexing.py and inference.py call these -------------------------------

TABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")


def check_index(where: str, settings: dict) -> None:
    """Before the documents are embedded: a table name, and a database that answers."""
    check_table(where)
    connect().close()


def write_index(where: str, chunks: list[dict], vectors: np.ndarray, settings: dict) -> None:
    """Table ``where`` as the sweep made its collection, with the document id, the
    pattern's vector index (``settings["oracle_index"]``; none for ``exact``) and an Oracle
    Text index (hybrid uses BM25 when the database refuses it, as the sweep did), recorded
    in the table's comment as the sweep records it."""
    table = check_table(where).upper()
    index, distance = settings["oracle_index"], settings["distance"]
    conn = connect()
    with conn, conn.cursor() as cur:
        try:
            texts, documents = [c["text"] for c in chunks], [c["document_id"] for c in chunks]
            create_table(cur, table, vectors, texts, documents)
            conn.commit()
            if index["kind"] != "exact":
                name = f"{table}_{index['kind'].upper()}"[:128]
                create_vector_index(cur, table, name, index, distance)
        except oracledb.DatabaseError as exc:
            fail(f"oracle: table {table}: {scrub(exc, conn_settings())}")
        try:
            cur.execute(render("create_text_index", index=f"{table}_TXT"[:128], table=table))
            text_index = True
        except oracledb.DatabaseError as exc:
            problem = scrub(exc, conn_settings())
            print(f"no Oracle Text index ({problem}); hybrid uses BM25", file=sys.stderr)
            text_index = False
        write_comment(cur, table, {**index, "distance": distance, "text_index": text_index})


def open_index(where: str, settings: dict, index_class: type) -> Any:
    """Table ``where``, searched with the sweep's statements: exact ``FETCH FIRST`` or
    ``FETCH APPROX`` through the pattern's index, and, for hybrid, Oracle Text (BM25 when
    the table has no text index, as the sweep fell back to); rows read by id when first
    needed. None when there is no such table."""
    conn = connect()
    table = check_table(where).upper()
    cur = conn.cursor()
    spec = read_index(cur, table)
    if spec is None:
        return None
    index, metric = settings["oracle_index"], METRICS[settings["distance"]][0]
    to_score = METRICS[settings["distance"]][1]

    def read(ids: list[int]) -> list[tuple]:
        binds = {f"id{i}": row for i, row in enumerate(ids)}
        statement = render("read_rows", table=table, ids=", ".join(f":{name}" for name in binds))
        found = conn.cursor().execute(statement, binds).fetchall()
        return [(int(i), d, t, np.asarray(v, np.float32)) for i, d, t, v in found]

    class OracleIndex(index_class):
        def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
            statement = nearest_statement(table, metric, index["kind"], index["params"], k)
            return [(int(row), float(to_score(d))) for row, d in nearest(cur, statement, vector, k)]

        def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
            if spec.get("text_index"):
                found = contains(cur, table, text_query(question, self.words), k)
                return [(int(row), float(score)) for row, score in found]
            if not hasattr(self, "everything"):  # BM25 needs every chunk, in row order
                count = cur.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                self.chunks.read(list(range(count)))
                self.everything = index_class([self.chunks[i] for i in range(count)], None)
            return self.everything.bm25(question, k)

    return OracleIndex.lazy(read)


def check_table(table: str) -> str:
    if not TABLE.fullmatch(table):
        fail(f"--index {table}: a table name of letters, digits and _ (at most 128)")
    return table


def env(name: str) -> str:
    """``ORACLE_<name>``, else ``RAGSWEEP_ORACLE_<name>``, else empty."""
    return os.environ.get(f"ORACLE_{name}") or os.environ.get(f"RAGSWEEP_ORACLE_{name}", "")


def conn_settings() -> dict[str, Any]:
    return connection_settings(env)


def connect() -> oracledb.Connection:
    """A connection to the Oracle database of ``ORACLE_DSN`` (thin mode), CLOBs fetched as
    text; a clear error (passwords hidden) when it cannot be made."""
    missing = [f"ORACLE_{n}" for n in ("DSN", "USER", "PASSWORD") if not env(n)]
    if missing:
        fail(
            f"oracle: set {', '.join(missing)} (or RAGSWEEP_{missing[0]}): the database's "
            "connect string (e.g. dbhost:1521/FREEPDB1), a user and its password"
        )
    settings = conn_settings()
    oracledb.defaults.fetch_lobs = False
    try:
        return oracledb.connect(**settings)
    except oracledb.Error as exc:
        where = f"{settings['dsn']} as {settings['user']}"
        fail(f"oracle: cannot connect to {where}: {scrub(exc, settings)}")


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)
