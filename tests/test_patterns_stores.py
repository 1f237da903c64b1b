"""Patterns whose store is a server's: their scripts build the winner's index in that store
(pgvector's table and index, Milvus's collection with its full-text search) and search it as
the sweep did, without ragsweep."""

import json
from pathlib import Path

import psycopg
import pytest
from conftest import oracle_test_settings
from test_patterns import (
    EXAMPLES,
    assert_scripts_reproduce,
    build,
    pattern_settings,
    patterns_of,
    shared_index,
    sweep,
)

from ragsweep.patterns import STORE_CODE, write_scripts
from ragsweep.retrieval.vector_stores import IndexSpec, milvus_collection, oracle_sql, pgvector_sql
from ragsweep.retrieval.vector_stores.oracle import OracleStore

SEARCHES = {"similarity", "mmr", "hybrid"}


def assert_store_code(folder: Path, module) -> None:
    """The pattern builds and searches its store with the module the sweep used, copied."""
    assert (folder / STORE_CODE).read_text() == Path(module.__file__).read_text()


@pytest.fixture(scope="module")
def store_run(pgvector_server, tmp_path_factory, embedding_cache) -> Path:
    """One sweep in pgvector (exact and HNSW) and Milvus Lite (a flat index), each searched
    by similarity, MMR and hybrid: nine patterns."""
    lite = tmp_path_factory.mktemp("milvus-lite")
    space = lite / "space.yaml"
    space.write_text(
        "vector_stores: [pgvector, milvus]\nindexes: {pgvector: [exact, hnsw], milvus: [exact]}\n"
    )
    options = ["--space", str(space), "--search-types", ",".join(sorted(SEARCHES))]
    env = {"RAGSWEEP_PGVECTOR_URL": pgvector_server, "RAGSWEEP_MILVUS_LITE_DIR": str(lite)}
    return sweep(lite / "runs", embedding_cache, *options, "--patterns", "9", env=env)


def stored_in(run: Path, store: str) -> list[Path]:
    """The patterns of ``run`` searching ``store``."""
    return [f for f in patterns_of(run) if pattern_settings(f)["vector_store"] == store]


def test_pgvector_pattern_scripts_retrieve_what_the_sweep_retrieved_in_pgvector(
    store_run, pgvector_server, pattern_scripts
):
    """Each pattern's indexing.py builds its table and index in the server (HNSW with the
    sweep's parameters); inference.py, asked every question of the test set, prints the
    chunks the sweep retrieved, in its order: similarity, MMR over the table's candidates,
    and hybrid with PostgreSQL's full-text search."""
    env = {"PGVECTOR_URL": pgvector_server}
    folders = stored_in(store_run, "pgvector")
    by_kind: dict[str, list[Path]] = {}
    for folder in folders:
        settings = pattern_settings(folder)
        assert settings["vector_store"] == "pgvector"
        assert_store_code(folder, pgvector_sql)
        by_kind.setdefault(settings["pgvector_index"]["kind"], []).append(folder)
    kinds = {(k, pattern_settings(f)["search_type"]) for k, fs in by_kind.items() for f in fs}
    assert len(folders) == 6
    assert kinds == {(k, s) for k in ("exact", "hnsw") for s in SEARCHES}
    # a table per index kind, built by one of its patterns' indexing.py, serves its searches
    tables = {}
    for kind, same in by_kind.items():
        tables.update(shared_index(pattern_scripts, same, f"pattern_{kind}", env))
    with psycopg.connect(pgvector_server) as conn:
        made = [d for (d,) in conn.execute("SELECT indexdef FROM pg_indexes").fetchall()]
    [hnsw] = [d for d in made if "pattern_hnsw_hnsw" in d]
    assert "USING hnsw (embedding vector_cosine_ops)" in hnsw
    assert "WITH (m='16', ef_construction='64')" in hnsw
    exact = [d for d in made if "ON public.pattern_exact " in d]
    assert exact and not [d for d in exact if "USING hnsw" in d or "USING ivfflat" in d]
    assert_scripts_reproduce(pattern_scripts, store_run, tables, env)


def test_pgvector_scripts_without_a_server_or_a_table_are_clear_errors(
    store_run, pgvector_server, tmp_path, pattern_scripts
):
    """No URL, a server that refuses (its password never printed), a table not built: each
    one line naming what to do, exit 2, no traceback."""
    folder = stored_in(store_run, "pgvector")[0]
    settings = pattern_settings(folder)
    write_scripts(tmp_path, settings, {STORE_CODE: folder / STORE_CODE})
    docs = ["--docs", str(EXAMPLES / "docs")]
    unset = {"PGVECTOR_URL": "", "RAGSWEEP_PGVECTOR_URL": ""}
    result = pattern_scripts.run(tmp_path / "indexing.py", *docs, "--index", "t", env=unset)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "error: pgvector: set PGVECTOR_URL" in result.stderr
    refused = {"PGVECTOR_URL": "postgresql://me:s3cret-pw@127.0.0.1:1/db"}
    result = pattern_scripts.run(
        tmp_path / "inference.py", "--index", "t", "question?", env=refused
    )
    assert result.returncode == 2
    assert "error: pgvector: the server in PGVECTOR_URL:" in result.stderr
    assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr
    there = {"PGVECTOR_URL": pgvector_server}
    result = pattern_scripts.run(
        tmp_path / "inference.py", "--index", "never_built", "question?", env=there
    )
    assert result.returncode == 2
    assert "no index there" in result.stderr and "Traceback" not in result.stderr
    result = pattern_scripts.run(tmp_path / "indexing.py", *docs, "--index", "bad-name;", env=there)
    assert result.returncode == 2
    assert "--index bad-name;: a table name" in result.stderr


@pytest.fixture(scope="module")
def milvus_indexes(store_run, tmp_path_factory, pattern_scripts) -> dict[str, Path]:
    """The collection of the sweep's one chunk set and index, built by a pattern's
    indexing.py (with Milvus's BM25 full-text search): it serves each of its patterns."""
    index = tmp_path_factory.mktemp("milvus-pattern") / "pattern.db"
    return shared_index(pattern_scripts, stored_in(store_run, "milvus"), index)


def milvus_searching(run: Path, search_types: set[str]) -> list[Path]:
    stored = stored_in(run, "milvus")
    found = [f for f in stored if pattern_settings(f)["search_type"] in search_types]
    assert {pattern_settings(f)["search_type"] for f in found} == search_types
    return found


def test_milvus_pattern_scripts_retrieve_what_the_sweep_retrieved_in_milvus(
    store_run, milvus_indexes, pattern_scripts
):
    """Milvus Lite, a flat index: the scripts load a collection with pymilvus and search it
    (similarity, and MMR over its candidates) as the sweep did."""
    folders = milvus_searching(store_run, {"similarity", "mmr"})
    for folder in folders:
        settings = pattern_settings(folder)
        assert (settings["vector_store"], settings["index"]) == ("milvus", "exact")
        assert_store_code(folder, milvus_collection)
        assert settings["milvus_index"]["index_type"] == "FLAT"
    indexes = {f.name: milvus_indexes[f.name] for f in folders}
    assert_scripts_reproduce(pattern_scripts, store_run, indexes)


def test_milvus_hybrid_pattern_scripts_search_milvus_full_text_as_the_sweep_did(
    store_run, milvus_indexes, pattern_scripts
):
    """Milvus Lite, hybrid search: the collection indexing.py builds has Milvus's BM25
    full-text search, and inference.py fuses its ranking with the vector search's as the
    sweep did, for every question."""
    [folder] = milvus_searching(store_run, {"hybrid"})
    assert pattern_settings(folder)["vector_store"] == "milvus"
    indexes = {folder.name: milvus_indexes[folder.name]}
    assert_scripts_reproduce(pattern_scripts, store_run, indexes)


@pytest.fixture
def oracle_scripts(tmp_path) -> Path:
    """The scripts of a pattern searching Oracle with an exact index, in a folder."""
    settings = {"vector_store": "oracle", **OracleStore.pattern_settings(IndexSpec(), "cosine")}
    settings.update(distance="cosine", passage_prefix="", query_prefix="", top_k=3)
    write_scripts(tmp_path, settings, {STORE_CODE: Path(OracleStore.PATTERN_CODE)})
    return tmp_path


def test_oracle_scripts_without_a_database_are_clear_errors(oracle_scripts, pattern_scripts):
    """No connect string, a listener that is not there (the password never printed): one
    line naming what to set, exit 2, no traceback; the server is tried before embedding."""
    unset = {f"{p}ORACLE_{n}": "" for p in ("", "RAGSWEEP_") for n in ("DSN", "USER", "PASSWORD")}
    docs = ["--docs", str(EXAMPLES / "docs")]
    result = pattern_scripts.run(oracle_scripts / "indexing.py", *docs, "--index", "t", env=unset)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "error: oracle: set ORACLE_DSN, ORACLE_USER, ORACLE_PASSWORD" in result.stderr
    dead = {**unset, "ORACLE_DSN": "127.0.0.1:1/FREEPDB1", "ORACLE_USER": "me"}
    dead["RAGSWEEP_ORACLE_PASSWORD"] = "s3cret-pw"  # the fallback name is read too
    for name, args in (("indexing.py", docs), ("inference.py", ["question?"])):
        result = pattern_scripts.run(oracle_scripts / name, *args, "--index", "t", env=dead)
        assert result.returncode == 2, result.stderr[-3000:]
        assert "error: oracle: cannot connect to 127.0.0.1:1/FREEPDB1 as me:" in result.stderr
        assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(
    oracle_test_settings() is None, reason="set RAGSWEEP_TEST_ORACLE_DSN to test against Oracle"
)
def test_oracle_pattern_scripts_retrieve_what_the_sweep_retrieved_in_oracle(
    tmp_path, embedding_cache, pattern_scripts
):
    """Oracle, an exact index: the scripts build the table with its Oracle Text index and
    search it as the sweep did (similarity, MMR, hybrid), for every question."""
    env = oracle_test_settings()
    space = tmp_path / "space.yaml"
    space.write_text("vector_stores: [oracle]\nindexes: {oracle: [exact]}\n")
    searches = ["--search-types", "similarity,mmr,hybrid"]
    run = sweep(tmp_path / "runs", embedding_cache, "--space", str(space), *searches, env=env)
    folders = patterns_of(run)
    assert {
        json.loads((f / "pattern.json").read_text())["ragsweep"]["vector_store"] for f in folders
    } == {"oracle"}
    tables = {f.name: f"RS_PATTERN_{f.name.split('-')[0]}" for f in folders}
    try:
        for folder in folders:
            build(pattern_scripts, folder, tables[folder.name], env)
        assert_scripts_reproduce(pattern_scripts, run, tables, env)
    finally:
        import oracledb

        with oracledb.connect(
            dsn=env["RAGSWEEP_ORACLE_DSN"],
            user=env["RAGSWEEP_ORACLE_USER"],
            password=env["RAGSWEEP_ORACLE_PASSWORD"],
        ) as conn:
            for table in tables.values():
                conn.cursor().execute(oracle_sql.render("drop", table=table))
