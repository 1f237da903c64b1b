"""Patterns whose store is a server's: their scripts build the winner's index in that store
(pgvector's table and index, Milvus's collection with its full-text search) and search it as
the sweep did, without ragsweep."""

import json
from pathlib import Path

import psycopg
import pytest
from test_patterns import (
    EXAMPLES,
    assert_scripts_reproduce,
    patterns_of,
    script,
    sweep,
    template_constants,
)

from ragsweep.patterns import fill
from ragsweep.stores import pgvector

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
    """The SQL the scripts copy from ragsweep/stores/pgvector.py is the store's."""
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
