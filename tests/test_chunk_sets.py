"""A chunk set too large to hold: written, read and searched a record batch at a time, with
the rankings, scores and passages of the whole table."""

import numpy as np
import pyarrow as pa
import pytest

from ragsweep.documents import sources
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.retrieval.chunk_sets import ChunkFile, ChunkVectors
from ragsweep.retrieval.search import BM25
from ragsweep.retrieval.vector_stores import IndexSpec
from ragsweep.retrieval.vector_stores.memory import MemoryStore
from ragsweep.sweep import fanout, steps
from ragsweep.sweep.space import SearchSpace

DOCS = pa.table(
    {
        "doc_id": [f"d{i}.md" for i in range(4)],
        "text": [
            "Ports are opened by the admin. Each port is listed in the firewall table. "
            "A closed port refuses connections. The gateway forwards traffic to services.",
            "Plans renew monthly. An annual plan is billed once. Refunds follow the policy. "
            "Invoices arrive by email on the first day of the cycle.",
            "The release adds an export button. Exports are written as CSV files. Large "
            "exports run in the background and notify the owner when done.",
            "Backups run nightly and are kept for thirty days. A restore replaces the "
            "workspace with the snapshot chosen by the administrator.",
        ],
    }
)
TESTSET = pa.table(
    {
        "question_id": ["q1", "q2", "q3"],
        "question": ["Who opens ports?", "How are exports written?", "How long are backups kept?"],
    }
)
SPACE = SearchSpace(
    chunk_sizes=(16,),
    chunk_overlaps=(0,),
    top_ks=(1, 3),
    search_types=("similarity", "mmr", "hybrid"),
)
SAME = ["config_id", "question_id", "retrieved_chunk_ids", "retrieved_scores", "retrieved_doc_ids"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The chunk set whole, and written in record batches of 4 chunks."""
    folder = tmp_path_factory.mktemp("chunk-sets")
    [config] = SPACE.chunk_configs()
    cache = EmbeddingCache(folder / "cache")
    table = steps.build_chunks(DOCS, config, cache)
    path = fanout.write_chunk_set(table.to_batches(4), folder, config["chunk_config_id"])
    return table, ChunkFile(path), config, cache


def chunk_file(path, vectors: np.ndarray, rows: int) -> ChunkFile:
    n = len(vectors)
    table = pa.table(
        {
            "chunk_id": np.arange(n),
            "doc_id": [f"d{i}" for i in range(n)],
            "start": np.zeros(n, np.int64),
            "end": np.zeros(n, np.int64),
            "text": [f"chunk {i}" for i in range(n)],
            "embedding": pa.array(list(vectors), pa.list_(pa.float32())),
        }
    )
    return ChunkFile(fanout.write_chunk_set(table.to_batches(rows), path, "set"))


@pytest.mark.parametrize("distance", ["cosine", "euclidean"])
def test_exact_search_over_a_chunk_file_block_by_block_finds_what_search_in_memory_finds(
    tmp_path, distance
):
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((50, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.standard_normal((6, 8)).astype(np.float32)
    file = chunk_file(tmp_path, vectors, rows=7)
    assert len(file.starts) == 9  # 8 record batches
    in_memory, by_blocks = MemoryStore("a", distance), MemoryStore("b", distance)
    in_memory.create(vectors, [], IndexSpec())
    by_blocks.create(file.vectors, file.texts, IndexSpec())
    assert isinstance(by_blocks.vectors, ChunkVectors)  # the file, not its vectors
    for k in (1, 5, 50):
        expected, found = in_memory.search(queries, k), by_blocks.search(queries, k)
        assert found.ids.tolist() == expected.ids.tolist()
        # the same products, summed by BLAS kernels for other shapes: equal to a rounding
        assert np.allclose(found.scores, expected.scores, rtol=1e-6, atol=1e-6)


def test_a_chunk_set_read_in_record_batches_retrieves_as_the_whole_table(built):
    table, file, config, cache = built
    assert len(file) == table.num_rows and len(file.starts) - 1 == -(-table.num_rows // 4)
    whole = steps.retrieve(table, TESTSET, SPACE, config, cache)
    batched = steps.retrieve(file, TESTSET, SPACE, config, cache)
    assert batched.num_rows == len(SPACE.all_configs()) * TESTSET.num_rows
    assert batched.select(SAME).equals(whole.select(SAME))
    assert batched["passages"].to_pylist() == whole["passages"].to_pylist()
    assert batched["retrieved_spans"].to_pylist() == whole["retrieved_spans"].to_pylist()


def test_the_retrievals_passages_hold_the_retrieved_chunks_alone(built):
    table, file, config, cache = built
    top_1 = SearchSpace(chunk_sizes=(16,), chunk_overlaps=(0,), top_ks=(1,))
    retrievals = steps.retrieve(file, TESTSET, top_1, config, cache)
    picked = retrievals["retrieved_chunk_ids"].to_pylist()
    texts = table["text"].to_pylist()
    assert retrievals["passages"].to_pylist() == [[texts[i] for i in ids] for ids in picked]
    dictionary = retrievals["passages"].combine_chunks().values.dictionary
    retrieved = {i for ids in picked for i in ids}
    assert len(dictionary) == len(retrieved) < table.num_rows  # not every chunk's text


def bm25_as_built_whole(texts: list[str], queries: list[str]) -> np.ndarray:
    """BM25 scores as ragsweep computed them before it built BM25 batch by batch: one
    chunks x words matrix of every word, transposed (the reference, kept verbatim)."""
    from scipy import sparse

    from ragsweep.core.text import words

    k1, b, vocabulary, rows, cols = 1.5, 0.75, {}, [], []
    for d, text in enumerate(texts):
        for word in words(text):
            rows.append(d)
            cols.append(vocabulary.setdefault(word, len(vocabulary)))
    shape = (len(texts), max(len(vocabulary), 1))
    tf = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
    tf.sum_duplicates()
    lengths = np.asarray(tf.sum(axis=1)).ravel()
    df = np.bincount(tf.indices, minlength=shape[1])
    idf = np.log(1 + (len(texts) - df + 0.5) / (df + 0.5))
    norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
    row_of = np.repeat(np.arange(shape[0]), np.diff(tf.indptr))
    tf.data = tf.data * (k1 + 1) / (tf.data + norm[row_of]) * idf[tf.indices]
    rows, cols = [], []
    for q, text in enumerate(queries):
        for word in set(words(text)):
            if word in vocabulary:
                rows.append(q)
                cols.append(vocabulary[word])
    asked = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), (len(queries), shape[1]))
    return (asked @ tf.T.tocsr()).toarray()


def test_bm25_built_batch_by_batch_for_its_queries_scores_them_as_bm25_built_whole(built):
    table, file, _, _ = built
    queries = TESTSET["question"].to_pylist()
    whole = BM25(table["text"].to_pylist())
    batched = BM25(file.texts, queries=queries)
    reference = bm25_as_built_whole(table["text"].to_pylist(), queries)
    assert np.array_equal(batched.scores(queries).toarray(), reference)
    assert np.array_equal(whole.scores(queries).toarray(), reference)
    assert batched.top(queries, 5).ids.tolist() == whole.top(queries, 5).ids.tolist()
    assert len(batched.vocabulary) < len(whole.vocabulary)  # the questions' words alone
    with pytest.raises(ValueError, match="BM25 built for other queries"):
        batched.scores(["invoices"])


def test_a_chunk_set_built_run_by_run_is_the_one_built_whole_and_lets_its_vectors_go(
    built, tmp_path, monkeypatch
):
    table, _, config, _ = built
    monkeypatch.setattr(steps, "RUN_BYTES", 200)  # a document or two a run
    cache = EmbeddingCache(tmp_path / "cache")
    batches = list(steps.chunk_batches(DOCS, config, cache))
    assert len(batches) > 2
    assert cache.known == {}  # each run's vectors let go: the cache's store keeps them
    runs = pa.Table.from_batches(batches)
    same = ["chunk_id", "doc_id", "start", "end", "text"]
    assert runs.select(same).equals(table.select(same))
    assert runs["chunk_id"].to_pylist() == list(range(table.num_rows))
    expected = np.array(table["embedding"].to_pylist())
    assert np.allclose(np.array(runs["embedding"].to_pylist()), expected, atol=1e-5)


def test_documents_read_a_table_at_a_time_are_those_read_at_once(tmp_path, monkeypatch):
    for i in range(5):
        (tmp_path / f"doc{i}.txt").write_text(f"Document {i} says something of its own.\n")
    whole = sources.read_documents(str(tmp_path)).table
    monkeypatch.setattr(sources, "TABLE_ROWS", 2)
    parts = sources.read_documents(str(tmp_path)).table
    assert parts["text"].num_chunks == 3
    assert parts.equals(whole) and whole.num_rows == 5


def test_a_store_other_than_memory_is_handed_a_chunk_file_whole_and_ranks_as_from_the_table(
    built, plugins
):
    from approximate_store import register

    register(plugins)
    table, file, config, cache = built
    space = SearchSpace.from_dict(
        {
            "chunk_sizes": [16],
            "chunk_overlaps": [0],
            "top_ks": [1, 3],
            "vector_stores": ["approximate"],
            "indexes": {"approximate": {"hnsw": {"m": [3]}}},
        }
    )
    whole = steps.retrieve(table, TESTSET, space, config, cache)
    batched = steps.retrieve(file, TESTSET, space, config, cache)
    keep = [*SAME, "recall_vs_exact"]
    assert batched.select(keep).equals(whole.select(keep))
    assert min(batched["recall_vs_exact"].to_pylist()) < 1  # the store's own ranking
