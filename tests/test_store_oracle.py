"""The Oracle AI Database 26ai store.

Against a server (skipped unless RAGSWEEP_TEST_ORACLE_DSN names one, see conftest): every
index kind and distance, keyword search through Oracle Text, a collection searched from a
new handle. Always: the errors that need no server (no settings, nothing listening), and a
check of the SQL text that is honestly only that (every statement renders with the values
the code gives it and binds only what the code binds); it is not a test against Oracle.
"""

import re

import numpy as np
import pytest
from conftest import free_port

from ragsweep.core.errors import RagsweepError
from ragsweep.core.text import words
from ragsweep.retrieval.vector_stores import IndexSpec, open_store, oracle_sql
from ragsweep.retrieval.vector_stores import oracle as store
from ragsweep.retrieval.vector_stores.memory import MemoryStore


def unit(rng, rows, dim=24):
    m = rng.normal(size=(rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


# --- without a server -------------------------------------------------------------------


def test_every_statement_renders_and_binds_only_what_the_code_supplies():
    table, index = store.table_name("c"), store.index_name("c", "hnsw")
    render, nearest = oracle_sql.render, oracle_sql.nearest_statement
    rendered = {
        "create_table": render("create_table", table=table, dim=384),
        "insert": render("insert", table=table),
        "add_document_id": render("add_document_id", table=table),
        "insert_document": render("insert_document", table=table),
        "read_rows": render("read_rows", table=table, ids=":id0, :id1"),
        "create_hnsw": render(
            "create_hnsw",
            index=index,
            table=table,
            metric="COSINE",
            target_accuracy=95,
            m=16,
            ef_construction=64,
        ),
        "create_ivf": render(
            "create_ivf", index=index, table=table, metric="DOT", target_accuracy=95, nlist=32
        ),
        "create_text_index": render("create_text_index", index=index, table=table),
        "keywords": render("keywords", table=table),
        "comment": render("comment", table=table, comment='{"kind": "exact"}'),
        "read_comment": oracle_sql.SQL["read_comment"],
        "drop": render("drop", table=table),
    }
    searches = {"exact": "exact", "hnsw": "approx_hnsw", "ivf": "approx_ivf"}
    for kind, params in store.OracleStore.INDEXES.items():
        rendered[searches[kind]] = nearest(table, "EUCLIDEAN", kind, params, 10)
    assert rendered.keys() == oracle_sql.SQL.keys()
    supplied = {
        "insert": {"chunk_id", "embedding", "chunk_text"},
        "insert_document": {"chunk_id", "embedding", "chunk_text", "document_id"},
        "read_rows": {"id0", "id1"},
        "keywords": {"text_query", "k"},
        "read_comment": {"table_name"},
        **{name: {"query_vector", "k"} for name in searches.values()},
    }
    for name, statement in rendered.items():
        assert statement.strip() and not re.search(r"{\w+}", statement), name
        assert oracle_sql.binds(statement) == supplied.get(name, set()), name


def test_approximate_searches_name_their_query_parameter_and_hnsw_raises_it_to_k():
    nearest = oracle_sql.nearest_statement
    assert "PARAMETERS (EFSEARCH 40)" in nearest("T", "COSINE", "hnsw", {"ef_search": 40}, 10)
    assert "PARAMETERS (EFSEARCH 100)" in nearest("T", "COSINE", "hnsw", {"ef_search": 40}, 100)
    ivf = nearest("T", "DOT", "ivf", {"nprobe": 7}, 10)
    assert "FETCH APPROX FIRST :k ROWS ONLY" in ivf and "NEIGHBOR PARTITION PROBES 7" in ivf
    exact = nearest("T", "DOT", "exact", {}, 10)
    assert "FETCH FIRST :k ROWS ONLY" in exact and "APPROX" not in exact


def test_a_question_becomes_an_escaped_accum_of_its_words():
    def text_query(question: str) -> str | None:
        return oracle_sql.text_query(question, words)

    assert text_query("How do I nest click.group commands?") == (
        "{nest} ACCUM {click.group} ACCUM {commands}"
    )
    # operators are plain words in braces ("and", "or" are stop words); accents fold as in BM25
    assert text_query("AND | OR & {braces} NEAR; über") == "{braces} ACCUM {near} ACCUM {uber}"
    assert text_query("what is it?") is None
    assert len(text_query(" ".join(f"w{i}" for i in range(2000)))) <= oracle_sql.QUERY_TEXT_MAX


def test_collection_names_become_distinct_identifiers():
    assert store.table_name("run-1/chunks 512") == "RAGSWEEP_RUN_1_CHUNKS_512"
    long_a, long_b = "x" * 200 + "a", "x" * 200 + "b"
    assert len(store.table_name(long_a)) == 128
    assert store.table_name(long_a) != store.table_name(long_b)


def test_missing_settings_are_named(monkeypatch):
    for name in ("RAGSWEEP_ORACLE_DSN", "RAGSWEEP_ORACLE_USER", "RAGSWEEP_ORACLE_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGSWEEP_ORACLE_DSN", "dbhost:1521/FREEPDB1")
    with pytest.raises(RagsweepError, match="set RAGSWEEP_ORACLE_USER, RAGSWEEP_ORACLE_PASSWORD"):
        open_store("oracle", "c")


def test_nothing_listening_is_a_clear_error_without_the_password(monkeypatch):
    monkeypatch.setenv("RAGSWEEP_ORACLE_DSN", f"127.0.0.1:{free_port()}/FREEPDB1")
    monkeypatch.setenv("RAGSWEEP_ORACLE_USER", "scott")
    monkeypatch.setenv("RAGSWEEP_ORACLE_PASSWORD", "t1ger-s3cret")
    monkeypatch.delenv("RAGSWEEP_ORACLE_WALLET_DIR", raising=False)
    with pytest.raises(RagsweepError) as raised:
        open_store("oracle", "c").drop()
    message = str(raised.value)
    assert message.startswith("vector store oracle: cannot connect to 127.0.0.1:")
    assert "as scott (from RAGSWEEP_ORACLE_DSN" in message and "t1ger-s3cret" not in message


def test_a_wallet_folder_reaches_the_connection(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGSWEEP_ORACLE_DSN", "mydb_high")
    monkeypatch.setenv("RAGSWEEP_ORACLE_USER", "admin")
    monkeypatch.setenv("RAGSWEEP_ORACLE_PASSWORD", "pw")
    monkeypatch.setenv("RAGSWEEP_ORACLE_WALLET_DIR", str(tmp_path))
    monkeypatch.setenv("RAGSWEEP_ORACLE_WALLET_PASSWORD", "wpw")
    settings = store.connection_settings()
    assert settings["config_dir"] == settings["wallet_location"] == str(tmp_path)
    assert settings["wallet_password"] == "wpw" and settings["dsn"] == "mydb_high"


# --- against a server (RAGSWEEP_TEST_ORACLE_DSN) ----------------------------------------


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean"])
@pytest.mark.parametrize("kind", ["exact", "hnsw", "ivf"])
def test_every_index_and_distance_scores_like_the_memory_store(oracle_env, kind, distance):
    rng = np.random.default_rng(7)
    vectors, queries = unit(rng, 600), unit(rng, 25)
    reference = MemoryStore("ref", distance)
    reference.create(vectors, [""] * len(vectors), IndexSpec())
    truth = reference.search(queries, 10)
    oracle = open_store("oracle", f"t_{kind}_{distance}", distance)
    oracle.create(vectors, [f"chunk {i}" for i in range(len(vectors))], IndexSpec(kind))
    try:
        hits = oracle.search(queries, 10)
    finally:
        oracle.drop()
    found = hits.ids >= 0
    expected = np.take_along_axis(reference.scores(queries), np.where(found, hits.ids, 0), 1)
    assert np.allclose(hits.scores[found], expected[found], atol=1e-4)
    recall = np.mean([len(set(h) & set(t)) / 10 for h, t in zip(hits.ids, truth.ids, strict=True)])
    assert recall == 1.0 if kind == "exact" else recall >= 0.8


TEXTS = [
    "click options are declared with a decorator",
    "arguments are positional, options are named",
    "the context object carries state between commands",
    "groups nest commands; a group is a command too",
    "testing a command uses the CliRunner",
]


def test_keyword_search_finds_the_chunks_holding_the_words(oracle_env):
    oracle = open_store("oracle", "t_text")
    oracle.create(unit(np.random.default_rng(0), len(TEXTS)), TEXTS, IndexSpec())
    try:
        hits = oracle.keyword_search(["named options", "state", "nothing matches here"], 5)
    finally:
        oracle.drop()
    assert hits is not None, "the Oracle Text index could not be created (see the warning)"
    assert hits.ids[0, 0] == 1 and set(hits.ids[0][hits.ids[0] >= 0].tolist()) == {0, 1}
    assert hits.ids[1].tolist() == [2, -1, -1, -1, -1]
    assert (hits.ids[2] == -1).all()


def test_a_new_handle_searches_a_collection_another_created(oracle_env):
    rng = np.random.default_rng(3)
    vectors, queries = unit(rng, 300), unit(rng, 5)
    first = open_store("oracle", "t_shared", "dot")
    first.create(vectors, [""] * len(vectors), IndexSpec("hnsw", {"ef_search": 64}))
    try:
        again = open_store("oracle", "t_shared", "dot")
        found = again.search(queries, 5)
        assert again.index.kind == "hnsw" and again.index.params["ef_search"] == 64
        assert (found.ids == first.search(queries, 5).ids).all()
        with pytest.raises(RagsweepError, match="indexed for dot distance, not cosine"):
            open_store("oracle", "t_shared", "cosine").search(queries, 5)
    finally:
        first.drop()
    with pytest.raises(RagsweepError, match="no collection table RAGSWEEP_T_SHARED"):
        open_store("oracle", "t_shared", "dot").search(queries, 5)
