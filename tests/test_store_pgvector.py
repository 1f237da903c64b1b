"""The pgvector store against a real PostgreSQL with the extension (started by ``pgserver``),
and its errors against a server without it (Debian's) and against no server at all."""

import numpy as np
import pytest
from conftest import free_port

from ragsweep.core.errors import RagsweepError
from ragsweep.retrieval.search import BM25, Index, rank_chunks
from ragsweep.retrieval.vector_stores import IndexSpec, open_store
from ragsweep.retrieval.vector_stores.memory import MemoryStore
from ragsweep.retrieval.vector_stores.pgvector import PgvectorStore, table_name


def unit(rng, rows, dim=24):
    m = rng.normal(size=(rows, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def recall(found, truth):
    return np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)])


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    return unit(rng, 600), unit(rng, 25)


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclidean"])
@pytest.mark.parametrize("kind", ["exact", "hnsw", "ivf"])
def test_every_index_and_distance_scores_like_the_memory_store(pgvector_url, data, kind, distance):
    vectors, queries = data
    reference = MemoryStore("ref", distance)
    reference.create(vectors, [""] * len(vectors), IndexSpec())
    truth = reference.search(queries, 10)
    store = open_store("pgvector", f"t_{kind}_{distance}", distance)
    store.create(vectors, [f"chunk {i}" for i in range(len(vectors))], IndexSpec(kind))
    try:
        hits = store.search(queries, 10)
    finally:
        store.drop()
    assert hits.ids.shape == (25, 10) and (hits.ids >= 0).all()
    # the scores are the memory store's (same scale, higher is better) for the chunks found
    expected = reference.scores(queries)
    assert np.allclose(hits.scores, np.take_along_axis(expected, hits.ids, 1), atol=1e-4)
    if kind == "exact":
        assert (hits.ids == truth.ids).all()
    else:
        assert recall(hits.ids, truth.ids) >= 0.8


def test_hnsw_returns_k_rows_when_k_exceeds_ef_search(pgvector_url, data):
    vectors, queries = data
    store = open_store("pgvector", "t_ef")
    store.create(vectors, [""] * len(vectors), IndexSpec("hnsw", {"ef_search": 10}))
    try:
        hits = store.search(queries, 30)
    finally:
        store.drop()
    assert (hits.ids >= 0).all(), "a scan capped at ef_search=10 would leave 20 of 30 empty"


def test_a_new_handle_searches_a_collection_another_created(pgvector_url, data):
    vectors, queries = data
    first = open_store("pgvector", "t_shared", "dot")
    first.create(vectors, [""] * len(vectors), IndexSpec("ivf", {"nlist": 8, "nprobe": 8}))
    try:
        again = open_store("pgvector", "t_shared", "dot")
        found = again.search(queries, 5)
        assert again.index == IndexSpec("ivf", {"nlist": 8, "nprobe": 8})
        assert (found.ids == first.search(queries, 5).ids).all()
        with pytest.raises(RagsweepError, match="indexed for dot distance, not cosine"):
            open_store("pgvector", "t_shared", "cosine").search(queries, 5)
    finally:
        first.drop()
    with pytest.raises(RagsweepError, match="no collection table ragsweep_t_shared"):
        open_store("pgvector", "t_shared", "dot").search(queries, 5)


def test_fewer_chunks_than_k_leave_the_rest_empty(pgvector_url, data):
    vectors, queries = data
    store = open_store("pgvector", "t_few")
    store.create(vectors[:4], ["a", "b\x00", "c", "d"], IndexSpec())  # PostgreSQL text: no NUL
    try:
        hits = store.search(queries[:2], 6)
    finally:
        store.drop()
    assert (hits.ids[:, :4] >= 0).all() and (hits.ids[:, 4:] == -1).all()
    assert np.isneginf(hits.scores[:, 4:]).all()


TEXTS = [
    "click options are declared with a decorator",
    "arguments are positional, options are named",
    "the context object carries state between commands",
    "groups nest commands; a group is a command too",
    "testing a command uses the CliRunner",
]


def test_keyword_search_matches_any_word_and_ranks_chunks_with_more_of_them_first(pgvector_url):
    store = open_store("pgvector", "t_text")
    store.create(unit(np.random.default_rng(0), len(TEXTS)), TEXTS, IndexSpec())
    try:
        hits = store.keyword_search(["named options", "state", "nothing matches here"], 5)
    finally:
        store.drop()
    # "named options": chunk 1 holds both words, chunk 0 only "options"; none other holds either
    assert hits.ids[0].tolist() == [1, 0, -1, -1, -1]
    assert hits.scores[0, 0] > hits.scores[0, 1] > 0
    assert hits.ids[1].tolist() == [2, -1, -1, -1, -1]
    assert (hits.ids[2] == -1).all()


def test_keyword_search_takes_any_question_text(pgvector_url):
    store = open_store("pgvector", "t_quotes")
    store.create(unit(np.random.default_rng(0), len(TEXTS)), TEXTS, IndexSpec())
    odd = ["it's 'group' \\ & | ! : <-> (commands)", "", "'", "\\"]
    try:
        hits = store.keyword_search(odd, 3)
    finally:
        store.drop()
    assert hits.ids[0].tolist() == [3, 2, -1]  # "group" and "commands"; 2 has "commands" only
    assert (hits.ids[1:] == -1).all()


def test_keyword_search_agrees_with_bm25_on_the_best_chunk_of_a_small_case(pgvector_url):
    questions = ["how are options declared", "what does a group nest", "CliRunner testing"]
    store = open_store("pgvector", "t_bm25")
    store.create(unit(np.random.default_rng(0), len(TEXTS)), TEXTS, IndexSpec())
    try:
        full_text = store.keyword_search(questions, 1).ids[:, 0]
    finally:
        store.drop()
    assert full_text.tolist() == BM25(TEXTS).top(questions, 1).ids[:, 0].tolist() == [0, 3, 4]


def test_an_unreachable_server_is_a_clear_error_without_the_password(monkeypatch):
    url = f"postgresql://scott:s3cret-pw@127.0.0.1:{free_port()}/db"
    monkeypatch.setenv("RAGSWEEP_PGVECTOR_URL", url)
    store = open_store("pgvector", "c")
    with pytest.raises(RagsweepError) as raised:
        store.drop()
    message = str(raised.value)
    assert "vector store pgvector: cannot connect to postgresql://scott:***@127.0.0.1" in message
    assert "RAGSWEEP_PGVECTOR_URL" in message and "s3cret-pw" not in message


def test_no_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("RAGSWEEP_PGVECTOR_URL", raising=False)
    with pytest.raises(RagsweepError, match="set RAGSWEEP_PGVECTOR_URL"):
        open_store("pgvector", "c")


def test_a_server_without_pgvector_is_a_clear_error(postgres_server, monkeypatch):
    # Debian's PostgreSQL (the results-store fixture) has no pgvector extension
    monkeypatch.setenv("RAGSWEEP_PGVECTOR_URL", postgres_server)
    with pytest.raises(RagsweepError) as raised:
        open_store("pgvector", "c").drop()
    message = str(raised.value)
    assert (
        "the pgvector extension is not installed in postgresql://ragsweep:***@127.0.0.1" in message
    )
    assert "pw-not-checked" not in message


def test_an_unknown_index_is_refused(pgvector_url):
    with pytest.raises(RagsweepError, match="unknown index 'diskann'"):
        open_store("pgvector", "c").create(np.zeros((1, 2)), [""], IndexSpec("diskann"))


def test_collection_names_become_distinct_identifiers():
    assert table_name("Run-1/chunks 512") == "ragsweep_run_1_chunks_512"
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    assert len(table_name(long_a)) == 63 and table_name(long_a) != table_name(long_b)
    assert PgvectorStore.INDEXES.keys() == {"exact", "hnsw", "ivf"}


def test_a_database_error_is_a_clear_error_naming_the_collection(pgvector_url):
    store = open_store("pgvector", "t_wide")
    wide = unit(np.random.default_rng(1), 3, dim=2001)  # HNSW indexes take at most 2000
    with pytest.raises(RagsweepError) as raised:
        store.create(wide, ["a", "b", "c"], IndexSpec("hnsw"))
    message = str(raised.value)
    assert message.startswith("vector store pgvector: collection table ragsweep_t_wide in ")
    assert "2000 dimensions" in message
    store.drop()


def test_every_search_type_runs_over_pgvector_as_over_the_memory_store(pgvector_url):
    rng = np.random.default_rng(5)
    vectors, queries = unit(rng, len(TEXTS)), unit(rng, 3)
    questions = ["named options", "group of commands", "CliRunner"]
    memory = MemoryStore("m", "cosine")
    memory.create(vectors, TEXTS, IndexSpec())
    pg = open_store("pgvector", "t_search_types")
    pg.create(vectors, TEXTS, IndexSpec())
    try:
        on_pg = Index(pg, queries, vectors, questions, TEXTS)
        on_memory = Index(memory, queries, vectors, questions, TEXTS)
        for search_type in ("similarity", "mmr"):
            assert (
                rank_chunks(on_pg, search_type, 3) == rank_chunks(on_memory, search_type, 3)
            ).all()
        # hybrid fuses pgvector's own full-text ranking: every chunk it ranks is a real one
        fused = rank_chunks(on_pg, "hybrid", 5)
        assert fused.shape == (3, 5) and ((fused >= 0) & (fused < len(TEXTS))).all()
        assert on_pg.keywords(5).ids[2, 0] == 4  # "CliRunner" is only in chunk 4
    finally:
        pg.drop()
