"""The Milvus store against Milvus Lite (embedded, a database in the test's folder): its
indexes, distances, texts, errors, and the search types over it against exact search."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.chunking import chunk_documents
from ragsweep.documents.sources import read_documents
from ragsweep.models import embedding
from ragsweep.retrieval.search import BM25, Index, rank_chunks
from ragsweep.retrieval.vector_stores import IndexSpec, open_store
from ragsweep.retrieval.vector_stores.memory import MemoryStore
from ragsweep.retrieval.vector_stores.milvus import collection_name
from ragsweep.retrieval.vector_stores.milvus_collection import MAX_TEXT_BYTES

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def lite(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGSWEEP_MILVUS_URI", raising=False)
    monkeypatch.delenv("RAGSWEEP_MILVUS_TOKEN", raising=False)
    monkeypatch.setenv("RAGSWEEP_MILVUS_LITE_DIR", str(tmp_path))
    return tmp_path


def loaded(name, vectors, texts, index=IndexSpec(), distance="cosine"):
    store = open_store(name, "test_" + index.kind, distance)
    store.create(vectors, texts, index)
    return store


def recall(found, truth):
    """Mean share of each row of ``truth`` (its chunks, not its -1s) found in ``found``."""
    shares = []
    for f, t in zip(found, truth, strict=True):
        wanted = set(t.tolist()) - {-1}
        if wanted:
            shares.append(len(wanted & set(f.tolist())) / len(wanted))
    return np.mean(shares)


@pytest.mark.parametrize("distance", ["dot", "euclidean"])
def test_dot_and_euclidean_rank_and_score_as_exact_search_does(distance):
    rng = np.random.default_rng(5)  # not unit length: the distances rank differently
    vectors = rng.normal(size=(400, 24)).astype(np.float32) * rng.uniform(0.2, 3, (400, 1))
    queries = rng.normal(size=(15, 24)).astype(np.float32)
    texts = [""] * 400
    memory, milvus = loaded("memory", vectors, texts, distance=distance), None
    try:
        milvus = loaded("milvus", vectors, texts, distance=distance)
        found, truth = milvus.search(queries, 8), memory.search(queries, 8)
    finally:
        if milvus is not None:
            milvus.drop()
    assert (found.ids == truth.ids).all()
    assert np.allclose(found.scores, truth.scores, rtol=1e-4, atol=1e-4)
    units = loaded("memory", vectors / np.linalg.norm(vectors, axis=1, keepdims=True), texts)
    assert not (truth.ids == units.search(queries, 8).ids).all(), "distances rank differently"


def test_approximate_indexes_answer_searches_with_their_parameters():
    """A coarse IVF (1 of 64 lists probed) misses neighbours exact search finds: the index
    built on the sealed rows answers, not a scan; more lists probed find more."""
    rng = np.random.default_rng(6)
    vectors = rng.normal(size=(2000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:50] + rng.normal(scale=0.3, size=(50, 32)).astype(np.float32)
    truth = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    found = {}
    for nprobe in (1, 64):
        store = loaded(
            "milvus", vectors, [""] * 2000, IndexSpec("ivf", {"nlist": 64, "nprobe": nprobe})
        )
        found[nprobe] = recall(store.search(queries, 10).ids, truth)
        built = store.client.describe_index(store.collection, "vector")
        assert (built["index_type"], built["params"]) == ("IVF_FLAT", {"nlist": 64})
        store.drop()
    assert found[1] < 0.9 and found[64] == 1.0, found


def test_unknown_index_kinds_and_parameters_are_refused_before_loading():
    store = open_store("milvus", "bad")
    vectors = np.eye(4, dtype=np.float32)
    with pytest.raises(RagsweepError, match="milvus: unknown index 'diskann'.*exact.*ivf.*hnsw"):
        store.create(vectors, [""] * 4, IndexSpec("diskann"))
    with pytest.raises(RagsweepError, match="index 'hnsw' has no parameter 'nlist'"):
        store.create(vectors, [""] * 4, IndexSpec("hnsw", {"nlist": 8}))
    with pytest.raises(RagsweepError, match="nprobe must be a positive integer, got 0"):
        store.create(vectors, [""] * 4, IndexSpec("ivf", {"nprobe": 0}))
    store.drop()


def test_long_texts_load_and_are_searched_by_keywords_up_to_the_varchar_limit():
    head = "zebrafish " + "é" * 40_000  # 80 kB of UTF-8: cut at a character boundary
    texts = [head + " platypus", "short text about otters", "x" * 200_000]
    vectors = np.eye(3, 8, dtype=np.float32)
    store = loaded("milvus", vectors, texts)
    try:
        hits = store.keyword_search(["zebrafish", "otters", "platypus", "  "], 3)
        assert store.search(vectors[:1], 1).ids.tolist() == [[0]]
    finally:
        store.drop()
    assert hits.ids[0, 0] == 0 and hits.ids[1, 0] == 1
    assert hits.scores[0, 0] > 0 and np.isinf(hits.scores[0, 1])
    # only the first MAX_TEXT_BYTES of a text are stored: its end is not keyword-searched
    assert len(head.encode()) > MAX_TEXT_BYTES and (hits.ids[2] == -1).all()
    assert (hits.ids[3] == -1).all(), "a blank question matches nothing"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("http://admin:hunter2@127.0.0.1:9", "http://127.0.0.1:9"),
        ("admin:hunter2@127.0.0.1:9", "127.0.0.1:9"),  # no scheme: refused by pymilvus
    ],
)
def test_an_unreachable_server_is_named_by_its_variable_without_credentials(
    uri, shown, monkeypatch
):
    monkeypatch.setenv("RAGSWEEP_MILVUS_URI", uri)
    monkeypatch.setenv("RAGSWEEP_MILVUS_TOKEN", "root:s3cret-token")
    with pytest.raises(RagsweepError, match=f"RAGSWEEP_MILVUS_URI={re.escape(shown)} ") as err:
        open_store("milvus", "c")
    message = str(err.value)
    assert "hunter2" not in message and "admin" not in message and "s3cret" not in message


def test_a_milvus_lite_folder_that_does_not_exist_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_MILVUS_LITE_DIR", str(tmp_path / "missing"))
    with pytest.raises(RagsweepError, match="missing.*writable folder.*RAGSWEEP_MILVUS_LITE_DIR"):
        open_store("milvus", "c")


def test_collection_names_are_made_valid_for_milvus_and_dropped_with_the_store():
    assert collection_name("run-7/chunks 64.0") == "run_7_chunks_64_0"
    assert collection_name("7x") == "c_7x"
    long = collection_name("a" * 300), collection_name("a" * 299)
    assert len(long[0]) == 255 and long[0] != long[1]
    store = open_store("milvus", "run-7/chunks 64.0")
    store.create(np.eye(3, dtype=np.float32), ["a", "b", "c"], IndexSpec())
    assert "run_7_chunks_64_0" in store.client.list_collections()
    store.drop()
    again = open_store("milvus", "other")
    assert "run_7_chunks_64_0" not in again.client.list_collections()
    again.drop()


@pytest.fixture(scope="module")
def corpus(monkeypatch_module):
    """The examples' documents in 128-token chunks and their questions, embedded with the
    real all-MiniLM-L6-v2 (offline)."""
    monkeypatch_module.setenv("HF_HUB_OFFLINE", "1")
    documents = read_documents(str(EXAMPLES / "docs")).table
    model = "all-MiniLM-L6-v2"
    chunks = chunk_documents(documents, "sentence", 128, 16, embedding.load_tokenizer(model))
    texts = chunks.column("text").to_pylist()
    questions = [q["question"] for q in json.loads((EXAMPLES / "testset.json").read_text())]
    return texts, embedding.encode(model, texts), questions, embedding.encode(model, questions)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


class MemoryWithKeywordsOf(MemoryStore):
    """Exact search, with another store's keyword search (to isolate hybrid's fusion)."""

    def __init__(self, other):
        super().__init__("c", "cosine")
        self.keyword_search = other.keyword_search


def test_search_types_over_milvus_exact_rank_as_over_memory(corpus):
    texts, vectors, questions, question_vectors = corpus
    milvus = loaded("milvus", vectors, texts)
    memory = loaded("memory", vectors, texts)
    fused = MemoryWithKeywordsOf(milvus)
    fused.create(vectors, texts, IndexSpec())
    try:
        over = {
            name: Index(store, question_vectors, vectors, questions, texts)
            for name, store in [("milvus", milvus), ("memory", memory), ("fused", fused)]
        }
        for search_type, params in [("similarity", {}), ("mmr", {"mmr_lambda": 0.5})]:
            got = rank_chunks(over["milvus"], search_type, 10, **params)
            assert (got == rank_chunks(over["memory"], search_type, 10, **params)).all()
        # hybrid: the same fusion, of the same nearest chunks and of Milvus's BM25
        hybrid = rank_chunks(over["milvus"], "hybrid", 10)
        assert (hybrid == rank_chunks(over["fused"], "hybrid", 10)).all()
        # Milvus's BM25 (its analyzer, its stop words) ranks near the library's BM25
        theirs = milvus.keyword_search(questions, 10).ids
        ours = BM25(texts).top(questions, 10).ids
        assert recall(theirs, ours) >= 0.5
        assert np.mean(theirs[:, 0] == ours[:, 0]) >= 0.5
        # a collection without full-text search (a server before Milvus 2.5): BM25 here
        milvus.full_text = False
        without = Index(milvus, question_vectors, vectors, questions, texts)
        assert milvus.keyword_search(questions, 10) is None
        assert (
            rank_chunks(without, "hybrid", 10) == rank_chunks(over["memory"], "hybrid", 10)
        ).all()
    finally:
        milvus.drop()


def test_no_queries_and_searches_deeper_than_the_collection():
    vectors = np.eye(6, 8, dtype=np.float32)
    store = loaded("milvus", vectors, ["alpha beta"] * 6)
    try:
        none = store.search(np.zeros((0, 8), np.float32), 5)
        deep = store.search(vectors[:2], 50)
        keywords = store.keyword_search([], 5)
    finally:
        store.drop()
    assert none.ids.shape == (0, 5) and keywords.ids.shape == (0, 5)
    assert deep.ids.shape == (2, 6) and sorted(deep.ids[0]) == list(range(6))
    assert deep.ids[1, 0] == 1


FORK_WHILE_SEARCHING = """
import multiprocessing, threading
import numpy as np
from ragsweep.retrieval.vector_stores import IndexSpec, open_store

store = open_store("milvus", "fork")
vectors = np.random.default_rng(0).normal(size=(2000, 32)).astype(np.float32)
store.create(vectors, ["some words"] * 2000, IndexSpec())
done = threading.Event()


def search():
    while not done.is_set():
        store.search(vectors[:50], 10)


searcher = threading.Thread(target=search)
searcher.start()
for _ in range(5):
    child = multiprocessing.get_context("fork").Process(target=int)
    child.start()
    child.join()
done.set()
searcher.join()
store.drop()
print("forked")
"""


def test_forking_while_milvus_lite_serves_prints_no_grpc_chatter(tmp_path):
    """gRPC logs a fork_posix INFO line on stderr for each fork while Milvus Lite's
    in-process server is busy; the store turns gRPC's log down to errors."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRPC_", "RAGSWEEP_MILVUS"))}
    env.update(RAGSWEEP_MILVUS_LITE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    # Milvus Lite computes distances with numpy in its server's threads. A threaded OpenBLAS
    # shuts its thread pool down at each fork, so a matrix product in flight then waits
    # forever (seen once in the suite: 288 s, killed): one BLAS thread, and a bound.
    env["OPENBLAS_NUM_THREADS"] = "1"
    ran = subprocess.run(
        [sys.executable, "-c", FORK_WHILE_SEARCHING],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0 and "forked" in ran.stdout, ran.stderr
    assert "fork_posix" not in ran.stderr and "gRPC" not in ran.stderr, ran.stderr


@pytest.fixture
def milvus_server(tmp_path):
    """A Milvus gRPC server on a free local port: Milvus Lite's standalone server."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = tmp_path / "server"
    server = subprocess.Popen(
        [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(data)]
        + ["--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", data
    finally:
        server.terminate()
        server.wait()


def test_a_server_at_the_uri_holds_the_collections(milvus_server, lite, monkeypatch):
    uri, data = milvus_server
    monkeypatch.setenv("RAGSWEEP_MILVUS_URI", uri)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = loaded("milvus", vectors, [f"word{i}" for i in range(300)], IndexSpec("hnsw"))
    try:
        assert not store.lite and "test_hnsw" in store.client.list_collections()
        assert (store.search(vectors[:20], 5).ids[:, 0] == np.arange(20)).all()
        assert store.keyword_search(["word42"], 3).ids[0, 0] == 42
    finally:
        store.drop()
    assert data.is_dir() and not (lite / "ragsweep_milvus.db").exists()


def test_a_collection_loaded_before_is_searched_by_a_later_handle():
    rng = np.random.default_rng(8)
    vectors = rng.normal(size=(500, 16)).astype(np.float32)
    texts = [f"token{i}" for i in range(500)]
    first = loaded("milvus", vectors, texts, IndexSpec("ivf", {"nlist": 16, "nprobe": 1}))
    expected = first.search(vectors[:30], 5)
    first.client.close()
    later = open_store("milvus", "test_ivf")
    try:
        found = later.search(vectors[:30], 5)
        assert later.search_params == {"nprobe": 1} and later.rows == 500
        assert later.keyword_search(["token7"], 1).ids.tolist() == [[7]]
    finally:
        later.drop()
    assert (found.ids == expected.ids).all()
