"""Patterns whose store is a server's: their scripts build the winner's index in that store
(pgvector's table and index, Milvus's collection with its full-text search) and search it as
the sweep did, without ragsweep."""

import importlib
import json
import sys
from pathlib import Path

import psycopg
import pytest
from conftest import oracle_test_settings
from test_patterns import (
    EXAMPLES,
    assert_scripts_reproduce,
    patterns_of,
    script,
    sweep,
    template_constants,
)

from ragsweep.results.patterns import fill, oracle_index
from ragsweep.retrieval.vector_stores import oracle, pgvector

PGVECTOR_SEARCHES = {"similarity", "mmr", "hybrid"}


def build(folder: Path, index: str, env: dict[str, str] | None = None) -> str:
    """Run the pattern's indexing.py on the examples into ``index``; ``index``."""
    built = script(
        folder / "indexing.py", "--docs", str(EXAMPLES / "docs"), "--index", index, env=env
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert "indexed 221 chunks of 21 documents" in built.stdout
    return index


@pytest.fixture(scope="module")
def pgvector_run(pgvector_server, tmp_path_factory) -> Path:
    """One sweep in pgvector, exact and HNSW, similarity, MMR and hybrid: six patterns."""
    space = tmp_path_factory.mktemp("pgvector-space") / "space.yaml"
    space.write_text("vector_stores: [pgvector]\nindexes: {pgvector: [exact, hnsw]}\n")
    out = tmp_path_factory.mktemp("pgvector-patterns") / "runs"
    options = ["--space", str(space), "--search-types", ",".join(sorted(PGVECTOR_SEARCHES))]
    env = {"RAGSWEEP_PGVECTOR_URL": pgvector_server}
    return sweep(out, *options, "--patterns", "6", env=env)


def test_pgvector_pattern_scripts_retrieve_what_the_sweep_retrieved_in_pgvector(
    pgvector_run, pgvector_server
):
    """Each pattern's indexing.py builds its table and index in the server (HNSW with the
    sweep's parameters); inference.py, asked every question of the test set, prints the
    chunks the sweep retrieved, in its order: similarity, MMR over the table's candidates,
    and hybrid with PostgreSQL's full-text search."""
    env = {"PGVECTOR_URL": pgvector_server}
    folders = patterns_of(pgvector_run)
    kinds = set()
    for folder in folders:
        settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
        assert settings["vector_store"] == "pgvector"
        kinds.add((settings["pgvector_index"]["kind"], settings["search_type"]))
    assert kinds == {(k, s) for k in ("exact", "hnsw") for s in PGVECTOR_SEARCHES}
    tables = {f.name: build(f, f"pattern_{f.name.split('-')[0]}", env) for f in folders}
    with psycopg.connect(pgvector_server) as conn:
        made = [d for (d,) in conn.execute("SELECT indexdef FROM pg_indexes").fetchall()]
    for folder in folders:
        settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
        if settings["pgvector_index"]["kind"] == "hnsw":
            [hnsw] = [d for d in made if f"{tables[folder.name]}_hnsw" in d]
            assert "USING hnsw (embedding vector_cosine_ops)" in hnsw
            assert "WITH (m='16', ef_construction='64')" in hnsw
    assert_scripts_reproduce(pgvector_run, tables, env)


def test_pgvector_scripts_without_a_server_or_a_table_are_clear_errors(
    pgvector_run, pgvector_server, tmp_path
):
    """No URL, a server that refuses (its password never printed), a table not built: each
    one line naming what to do, exit 2, no traceback."""
    folder = patterns_of(pgvector_run)[0]
    settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
    for name in ("indexing.py", "inference.py"):
        (tmp_path / name).write_text(fill(name, settings))
    docs = ["--docs", str(EXAMPLES / "docs")]
    unset = {"PGVECTOR_URL": "", "RAGSWEEP_PGVECTOR_URL": ""}
    result = script(tmp_path / "indexing.py", *docs, "--index", "t", env=unset)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "error: pgvector: set PGVECTOR_URL" in result.stderr
    refused = {"PGVECTOR_URL": "postgresql://me:s3cret-pw@127.0.0.1:1/db"}
    result = script(tmp_path / "inference.py", "--index", "t", "question?", env=refused)
    assert result.returncode == 2
    assert "error: pgvector: the server in PGVECTOR_URL:" in result.stderr
    assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr
    there = {"PGVECTOR_URL": pgvector_server}
    result = script(tmp_path / "inference.py", "--index", "never_built", "question?", env=there)
    assert result.returncode == 2
    assert "no index there" in result.stderr and "Traceback" not in result.stderr
    result = script(tmp_path / "indexing.py", *docs, "--index", "bad-name;", env=there)
    assert result.returncode == 2
    assert "--index bad-name;: a table name" in result.stderr


def test_the_scripts_search_pgvector_with_the_stores_statements():
    """The SQL the scripts copy from ragsweep/retrieval/vector_stores/pgvector.py is the store's."""
    indexing, inference = template_constants("indexing.py"), template_constants("inference.py")
    for name in ("CREATE_TABLE", "CREATE_TEXT_INDEX", "CREATE_HNSW", "CREATE_IVF", "DROP_TABLE"):
        assert indexing[name] == getattr(pgvector, name), name
    for name in ("NEAREST", "KEYWORDS", "SET_HNSW", "SET_IVF"):
        assert inference[name] == getattr(pgvector, name), name
    assert indexing["PG_OPERATORS"] == {d: op[:2] for d, op in pgvector.OPERATORS.items()}


def test_milvus_hybrid_pattern_scripts_search_milvus_full_text_as_the_sweep_did(tmp_path):
    """Milvus Lite, hybrid search: the collection indexing.py builds has Milvus's BM25
    full-text search, and inference.py fuses its ranking with the vector search's as the
    sweep did, for every question."""
    space = tmp_path / "space.yaml"
    space.write_text("vector_stores: [milvus]\nindexes: {milvus: [exact]}\n")
    lite = {"RAGSWEEP_MILVUS_LITE_DIR": str(tmp_path)}
    run = sweep(tmp_path / "runs", "--space", str(space), "--search-types", "hybrid", env=lite)
    [folder] = patterns_of(run)
    settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
    assert (settings["vector_store"], settings["search_type"]) == ("milvus", "hybrid")
    built = {folder.name: build(folder, str(tmp_path / "pattern.db"))}
    assert_scripts_reproduce(run, built)


@pytest.fixture
def oracle_scripts(tmp_path) -> Path:
    """The scripts of a pattern searching Oracle with an exact index, in a folder."""
    settings = {"vector_store": "oracle", "oracle_index": oracle_index("exact")}
    settings.update(distance="cosine", passage_prefix="", query_prefix="", top_k=3)
    for name in ("indexing.py", "inference.py"):
        (tmp_path / name).write_text(fill(name, settings))
    return tmp_path


def test_oracle_scripts_without_a_database_are_clear_errors(oracle_scripts):
    """No connect string, a listener that is not there (the password never printed): one
    line naming what to set, exit 2, no traceback; the server is tried before embedding."""
    unset = {f"{p}ORACLE_{n}": "" for p in ("", "RAGSWEEP_") for n in ("DSN", "USER", "PASSWORD")}
    docs = ["--docs", str(EXAMPLES / "docs")]
    result = script(oracle_scripts / "indexing.py", *docs, "--index", "t", env=unset)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "error: oracle: set ORACLE_DSN, ORACLE_USER, ORACLE_PASSWORD" in result.stderr
    dead = {**unset, "ORACLE_DSN": "127.0.0.1:1/FREEPDB1", "ORACLE_USER": "me"}
    dead["RAGSWEEP_ORACLE_PASSWORD"] = "s3cret-pw"  # the fallback name is read too
    for name, args in (("indexing.py", docs), ("inference.py", ["question?"])):
        result = script(oracle_scripts / name, *args, "--index", "t", env=dead)
        assert result.returncode == 2, result.stderr[-3000:]
        assert "error: oracle: cannot connect to 127.0.0.1:1/FREEPDB1 as me:" in result.stderr
        assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr


def test_the_scripts_search_oracle_with_the_stores_statements(oracle_scripts, monkeypatch):
    """The SQL the scripts copy from ragsweep/retrieval/vector_stores/oracle.py is the store's, and
    so is the
    Oracle Text query they build from a question."""
    statements = template_constants("indexing.py")["ORACLE_SQL"]
    for name, statement in oracle.SQL.items():
        if name != "insert":  # the scripts' insert adds the document id
            assert statements[name] == statement, name
    metrics = template_constants("indexing.py")["ORACLE_METRICS"]
    assert metrics == {d: m[0] for d, m in oracle.METRICS.items()}
    monkeypatch.syspath_prepend(str(oracle_scripts))
    for name in ("indexing", "inference"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    inference = importlib.import_module("inference")
    try:
        assert inference.QUERY_TEXT_MAX == oracle.QUERY_TEXT_MAX
        for question in ("How do I use click.option?", "Ça marche ? {x} 数据库", "the of", ""):
            assert inference.text_query(question) == oracle.text_query(question), question
    finally:
        for name in ("indexing", "inference"):
            sys.modules.pop(name, None)


@pytest.mark.skipif(
    oracle_test_settings() is None, reason="set RAGSWEEP_TEST_ORACLE_DSN to test against Oracle"
)
def test_oracle_pattern_scripts_retrieve_what_the_sweep_retrieved_in_oracle(tmp_path):
    """Oracle, an exact index: the scripts build the table with its Oracle Text index and
    search it as the sweep did (similarity, MMR, hybrid), for every question."""
    env = oracle_test_settings()
    space = tmp_path / "space.yaml"
    space.write_text("vector_stores: [oracle]\nindexes: {oracle: [exact]}\n")
    searches = ["--search-types", "similarity,mmr,hybrid"]
    run = sweep(tmp_path / "runs", "--space", str(space), *searches, env=env)
    folders = patterns_of(run)
    assert {
        json.loads((f / "pattern.json").read_text())["ragsweep"]["vector_store"] for f in folders
    } == {"oracle"}
    tables = {f.name: f"RS_PATTERN_{f.name.split('-')[0]}" for f in folders}
    try:
        for folder in folders:
            build(folder, tables[folder.name], env)
        assert_scripts_reproduce(run, tables, env)
    finally:
        import oracledb

        with oracledb.connect(
            dsn=env["RAGSWEEP_ORACLE_DSN"],
            user=env["RAGSWEEP_ORACLE_USER"],
            password=env["RAGSWEEP_ORACLE_PASSWORD"],
        ) as conn:
            for table in tables.values():
                conn.cursor().execute(oracle.SQL["drop"].format(table=table))
