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

Every statement below was checked against the Oracle AI Database 26ai documentation (the
page is cited above each); none has been run against an Oracle server from this project's
test suite unless ``RAGSWEEP_TEST_ORACLE_DSN`` was set.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import oracledb

from ragsweep.core.errors import RagsweepError
from ragsweep.core.text import words
from ragsweep.retrieval.vector_stores import Hits, IndexSpec

log = logging.getLogger(__name__)

ENV_DSN, ENV_USER, ENV_PASSWORD = (
    "RAGSWEEP_ORACLE_DSN",
    "RAGSWEEP_ORACLE_USER",
    "RAGSWEEP_ORACLE_PASSWORD",
)
ENV_WALLET, ENV_WALLET_PASSWORD = "RAGSWEEP_ORACLE_WALLET_DIR", "RAGSWEEP_ORACLE_WALLET_PASSWORD"
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


class OracleStore:
    name = "oracle"
    INDEXES: dict[str, dict[str, Any]] = {
        "exact": {},
        "hnsw": {"m": 16, "ef_construction": 64, "ef_search": 40, "target_accuracy": 95},
        "ivf": {"nlist": 32, "nprobe": 16, "target_accuracy": 95},
    }
    CONNECTION_KEYS = (ENV_DSN, ENV_USER, ENV_PASSWORD, ENV_WALLET, ENV_WALLET_PASSWORD)
    PATTERN_CODE = None  # the pattern scripts' own (ragsweep.results.patterns.SCRIPT_STORES)

    def __init__(self, collection: str, distance: str) -> None:
        self.settings = connection_settings()
        self.collection = collection
        self.table = table_name(collection)
        self.distance = distance
        self.index: IndexSpec | None = None
        self.text_index = False

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
            cur.execute(render("drop", table=self.table))
            cur.execute(render("create_table", table=self.table, dim=int(vectors.shape[1])))
            rows = [
                {"chunk_id": i, "embedding": array("f", vector.tobytes()), "chunk_text": text}
                for i, (vector, text) in enumerate(zip(vectors, texts, strict=True))
            ]
            insert = render("insert", table=self.table)
            for start in range(0, len(rows), INSERT_BATCH):
                cur.executemany(insert, rows[start : start + INSERT_BATCH])
            conn.commit()
            if index.kind != "exact":
                self._create_vector_index(cur, index.kind, params)
            self.text_index = self._create_text_index(cur)
            spec = {
                "kind": index.kind,
                "params": params,
                "distance": self.distance,
                "text_index": self.text_index,
            }
            comment = json.dumps(spec).replace("'", "''")
            cur.execute(render("comment", table=self.table, comment=comment))
        self.index = IndexSpec(index.kind, params)

    def search(self, queries: np.ndarray, k: int) -> Hits:
        """Each query's ``k`` nearest chunks, one statement (parsed once) per query."""
        queries = np.asarray(queries, dtype=np.float32)
        metric, to_score = METRICS[self.distance]
        with self.connect() as conn, conn.cursor() as cur:
            statement = nearest_statement(self.table, metric, self._spec(cur), k)
            cur.arraysize = cur.prefetchrows = k + 1
            rows = [
                cur.execute(statement, query_vector=array("f", q.tobytes()), k=k).fetchall()
                for q in queries
            ]
        return to_hits(rows, k, to_score)

    def keyword_search(self, queries: list[str], k: int) -> Hits | None:
        """Each query's ``k`` best chunks by Oracle Text (the chunks holding any of its
        words, ranked by SCORE); None when the collection has no text index."""
        with self.connect() as conn, conn.cursor() as cur:
            self._spec(cur)
            if not self.text_index:
                return None
            statement = render("keywords", table=self.table)
            cur.arraysize = cur.prefetchrows = k + 1
            rows = [self._contains(cur, statement, text_query(q), k) for q in queries]
        return to_hits(rows, k, lambda score: score)

    def _contains(self, cur: oracledb.Cursor, statement: str, query: str | None, k: int) -> list:
        """One question's rows; none when it has no word or Oracle Text rejects its query
        (a DRG- error, e.g. a query of Oracle Text's own stop words)."""
        if not query:
            return []
        try:
            return cur.execute(statement, text_query=query, k=k).fetchall()
        except oracledb.DatabaseError as exc:
            if "DRG-" not in str(exc):
                raise
            log.info("vector store oracle: Oracle Text rejected %r: %s", query, scrub(exc, {}))
            return []

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
        metric, _ = METRICS[self.distance]
        names = {"index": index_name(self.collection, kind), "table": self.table, "metric": metric}
        values = {key: int(params[key]) for key in fields(f"create_{kind}") if key not in names}
        try:
            cur.execute(render(f"create_{kind}", **names, **values))
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
            found = cur.execute(SQL["read_comment"], table_name=self.table).fetchone()
            if not found or not found[0]:
                raise RagsweepError(
                    f"vector store oracle: no collection table {self.table} in "
                    f"{self.settings['dsn']}; create it first"
                )
            spec = json.loads(found[0])
            if spec.get("distance", self.distance) != self.distance:
                raise RagsweepError(
                    f"vector store oracle: collection table {self.table} was indexed for "
                    f"{spec['distance']} distance, not {self.distance}"
                )
            self.index = IndexSpec(spec["kind"], spec["params"])
            self.text_index = bool(spec.get("text_index"))
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
    settings: dict[str, Any] = {
        "dsn": os.environ[ENV_DSN],
        "user": os.environ[ENV_USER],
        "password": os.environ[ENV_PASSWORD],
        "tcp_connect_timeout": CONNECT_TIMEOUT_S,
        "retry_count": 0,
    }
    wallet = os.environ.get(ENV_WALLET)
    if wallet:
        settings.update(config_dir=wallet, wallet_location=wallet)
        if os.environ.get(ENV_WALLET_PASSWORD):
            settings["wallet_password"] = os.environ[ENV_WALLET_PASSWORD]
    return settings


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


def nearest_statement(table: str, metric: str, index: IndexSpec, k: int) -> str:
    """The search statement for ``index``: exact, or approximate with its query parameter
    (HNSW's ef_search is raised to ``k``, as it bounds the candidates kept)."""
    if index.kind == "hnsw":
        ef_search = max(int(index.params["ef_search"]), k)
        return render("approx_hnsw", table=table, metric=metric, ef_search=ef_search)
    if index.kind == "ivf":
        return render("approx_ivf", table=table, metric=metric, nprobe=int(index.params["nprobe"]))
    return render("exact", table=table, metric=metric)


def text_query(question: str) -> str | None:
    """An Oracle Text query matching any of the question's words (``words``: English stop
    words dropped, as BM25 here does), ACCUM-ulated so chunks holding more of them rank
    higher; each word escaped in braces (a word holds letters, marks, digits and inner
    ``._-``, never a brace; Oracle Text reads ``{click.group}`` as the phrase "click group").
    None when the question has no word."""
    terms, length = [], 0
    for word in dict.fromkeys(words(question)):
        term = "{" + word + "}"
        length += len(term) + len(" ACCUM ")
        if length > QUERY_TEXT_MAX:
            break
        terms.append(term)
    return " ACCUM ".join(terms) or None


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


def scrub(exc: Exception, settings: dict[str, Any]) -> str:
    """The first line of an error, passwords removed."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for key in ("password", "wallet_password"):
        if settings.get(key):
            text = text.replace(settings[key], "***")
    return text
