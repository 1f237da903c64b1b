"""Embeddings are computed once per (model, text): in a run, across chunk sets, across runs."""

import numpy as np
import pytest

from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models import embedding

MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def model_calls(monkeypatch):
    """Every text the model itself embeds, in call order."""
    calls: list[str] = []
    encode = embedding.encode

    def counting(name, texts):
        calls.extend(texts)
        return encode(name, texts)

    monkeypatch.setattr(embedding, "encode", counting)
    return calls


def test_each_distinct_text_is_embedded_once_and_a_rerun_embeds_nothing(tmp_path, model_calls):
    texts = ["backups are kept 30 days", "port 8443", "backups are kept 30 days"]
    first = EmbeddingCache(tmp_path)
    vectors = first.embed(MODEL, texts)
    assert sorted(model_calls) == ["backups are kept 30 days", "port 8443"]
    assert (vectors[0] == vectors[2]).all() and vectors.shape == (3, 384)
    first.embed(MODEL, ["port 8443", "a new chunk"])  # a second chunk set sharing one text
    assert model_calls[2:] == ["a new chunk"]

    rerun = EmbeddingCache(tmp_path)  # a later process: only the store is shared
    again = rerun.embed(MODEL, texts)
    assert rerun.encoded == 0 and len(model_calls) == 3
    np.testing.assert_array_equal(again, vectors)


def test_vectors_from_the_store_equal_freshly_computed_ones(tmp_path):
    stored = EmbeddingCache(tmp_path).embed(MODEL, ["the admin console uses port 9000"])
    fresh = embedding.encode(MODEL, ["the admin console uses port 9000"])
    np.testing.assert_allclose(stored, fresh, atol=1e-6)
    assert abs(float(np.linalg.norm(stored[0])) - 1) < 1e-5


def test_without_a_location_vectors_live_only_as_long_as_the_cache(tmp_path, model_calls):
    EmbeddingCache(None).embed(MODEL, ["x"])
    EmbeddingCache("").embed(MODEL, ["x"])
    assert model_calls == ["x", "x"]
    assert list(tmp_path.iterdir()) == []


def test_one_model_by_two_names_is_one_model_by_its_contents(tmp_path, model_calls):
    cache = EmbeddingCache(tmp_path)
    cache.embed(MODEL, ["same text"])
    EmbeddingCache(tmp_path).embed("sentence-transformers/all-MiniLM-L6-v2", ["same text"])
    assert model_calls == ["same text"]
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 1


def test_store_on_s3_is_shared_between_runs(bucket, model_calls):
    location = f"s3://{bucket}/cache/embeddings"
    EmbeddingCache(location).embed(MODEL, ["stored on s3", "twice"])
    rerun = EmbeddingCache(location)
    vectors = rerun.embed(MODEL, ["twice", "stored on s3"])
    assert rerun.encoded == 0 and vectors.shape == (2, 384)
    assert sorted(model_calls) == ["stored on s3", "twice"]


def test_store_on_a_missing_bucket_is_a_clear_error(s3):
    from ragsweep.core.errors import RagsweepError

    with pytest.raises(RagsweepError, match="bucket 'no-such-bucket' does not exist"):
        EmbeddingCache("s3://no-such-bucket/cache").embed(MODEL, ["x"])


def test_a_model_behind_an_openai_compatible_endpoint_embeds_each_text_once(
    llm_server, tmp_path, monkeypatch
):
    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", llm_server.url)
    llm_server.models.append("embedder")
    texts = ["backups are kept 30 days", "port 8443", "backups are kept 30 days"]
    vectors = EmbeddingCache(tmp_path).embed("openai:embedder", texts)
    assert sorted(llm_server.embedded) == ["backups are kept 30 days", "port 8443"]
    assert vectors.shape == (3, 64) and abs(float(vectors[1] @ vectors[1]) - 1) < 1e-6
    assert float(vectors[0] @ vectors[2]) == pytest.approx(1.0)
    rerun = EmbeddingCache(tmp_path)
    rerun.embed("openai:embedder", texts)
    assert rerun.encoded == 0 and len(llm_server.embedded) == 2


def test_an_unreachable_embedding_endpoint_fails_fast_with_one_line(monkeypatch):
    from scripted_llm import free_port

    from ragsweep.core.errors import RagsweepError

    embedding.load_embedder.cache_clear()
    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(RagsweepError, match="embedding endpoint .* is unreachable"):
        EmbeddingCache().embed("openai:nowhere", ["x"])


def test_prefixed_and_plain_embeddings_of_a_text_are_kept_apart(tmp_path, model_calls):
    cache = EmbeddingCache(tmp_path)
    plain = cache.embed(MODEL, ["port 8443"])
    prefixed = cache.embed(MODEL, ["port 8443"], prefix="query: ")
    assert model_calls == ["port 8443", "query: port 8443"]
    assert float(plain[0] @ prefixed[0]) < 0.999
    rerun = EmbeddingCache(tmp_path)
    np.testing.assert_array_equal(rerun.embed(MODEL, ["port 8443"], prefix="query: "), prefixed)
    np.testing.assert_array_equal(rerun.embed(MODEL, ["port 8443"]), plain)
    assert rerun.encoded == 0 and len(model_calls) == 2


# The store's index, compaction and eviction, on a folder and on S3 (a moto server). Vectors
# come from the scripted OpenAI-compatible endpoint: 64 numbers each, quick to make by the
# thousand.

ENDPOINT_MODEL = "openai:embedder"
ROW_BYTES = 64 * 4


def texts(first: int, count: int) -> list[str]:
    return [f"chunk {i} says word{i} and term{i * 7}" for i in range(first, first + count)]


def stored_files(location: str) -> list[str]:
    cache = EmbeddingCache(location)
    return [e.name for e in cache.files.list(cache.files.folders()[0])]


def test_a_lookup_reads_only_the_rows_and_shards_it_needs(endpoint, location):
    written = {}
    random = np.random.default_rng(0)
    for shard in range(5):  # 10,000 vectors in 5 shards, made here: the lookups are the test
        batch = texts(shard * 2000, 2000)
        vectors = random.standard_normal((2000, 64)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        EmbeddingCache(location).save(ENDPOINT_MODEL, batch, vectors)
        written.update(zip(batch, vectors, strict=True))
    asked = texts(0, 10_000)[::100]  # 100 texts spread over every shard
    rerun = EmbeddingCache(location)
    vectors = rerun.embed(ENDPOINT_MODEL, asked)
    assert rerun.encoded == 0 and rerun.vectors_read == 100 and rerun.shards_read == 5
    np.testing.assert_array_equal(vectors, np.stack([written[t] for t in asked]))
    assert rerun.bytes_read - rerun.index_bytes_read == 100 * ROW_BYTES
    assert 10_000 * 20 <= rerun.index_bytes_read < 10_000 * 20 + 5 * 4096  # hash, check

    one_shard = EmbeddingCache(location)  # 1,000 texts, all in the third shard
    one_shard.embed(ENDPOINT_MODEL, texts(4000, 1000)[::-1])
    assert one_shard.shards_read == 1 and one_shard.vectors_read == 1000
    assert one_shard.bytes_read - one_shard.index_bytes_read == 1000 * ROW_BYTES
    again = one_shard.index_bytes_read
    one_shard.embed(ENDPOINT_MODEL, texts(9000, 10))  # the same cache reads no index again
    assert one_shard.index_bytes_read == again and one_shard.vectors_read == 1010
    assert one_shard.encoded == 0 and endpoint.embedded == []


def first_format_shard(hashes: list[str], vectors: np.ndarray) -> bytes:
    """A shard as ragsweep wrote them before the index: hex hashes, variable-size lists."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    table = pa.table({"hash": hashes, "vector": pa.array(list(vectors), pa.list_(pa.float32()))})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_shards_of_the_first_format_are_set_aside_and_embedded_again(endpoint, location):
    import hashlib

    from ragsweep.embeddings.cache import QUARANTINE

    batch = texts(0, 300)
    vectors = EmbeddingCache().embed(ENDPOINT_MODEL, batch)
    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in batch]
    files = EmbeddingCache(location).files
    folder = EmbeddingCache().folder(ENDPOINT_MODEL)
    for part in range(3):  # three old shards, no index beside them, no model identity
        rows = slice(part * 100, part * 100 + 100)
        files.write(f"{folder}/old{part}.arrow", first_format_shard(hashes[rows], vectors[rows]))

    reader = EmbeddingCache(location)
    np.testing.assert_array_equal(reader.embed(ENDPOINT_MODEL, batch[::-1]), vectors[::-1])
    assert reader.encoded == 300 and reader.shards_read == 0
    aside = sorted(e.name.rsplit("/", 1)[1] for e in files.list(f"{folder}/{QUARANTINE}"))
    assert aside == ["old0.arrow", "old1.arrow", "old2.arrow"]


def test_compaction_merges_small_shards_and_keeps_every_vector(endpoint, location):
    from ragsweep.embeddings.cache import COMPACT_AT

    written = {}
    shards = COMPACT_AT - 1  # one short of a compaction on write
    for shard in range(shards):
        batch = texts(shard * 50, 50) + texts(0, 5)  # five texts in every write: duplicates
        cache = EmbeddingCache(location)
        written.update(zip(batch, cache.embed(ENDPOINT_MODEL, batch), strict=True))
    assert sum(n.endswith(".arrow") for n in stored_files(location)) == shards
    # compaction merges only when there are enough small shards, or when asked
    assert EmbeddingCache(location).compact(ENDPOINT_MODEL, at_least=shards + 1) == 0
    assert EmbeddingCache(location).compact(ENDPOINT_MODEL) == shards
    assert sum(n.endswith(".arrow") for n in stored_files(location)) == 1
    rerun = EmbeddingCache(location)
    asked = list(written)
    np.testing.assert_array_equal(
        rerun.embed(ENDPOINT_MODEL, asked), np.stack([written[t] for t in asked])
    )
    assert rerun.encoded == 0 and rerun.vectors_read == len(asked) == shards * 50


def test_a_write_that_leaves_many_small_shards_compacts_them(endpoint, location):
    from ragsweep.embeddings.cache import COMPACT_AT

    for shard in range(COMPACT_AT):
        EmbeddingCache(location).embed(ENDPOINT_MODEL, texts(shard * 10, 10))
    assert sum(n.endswith(".arrow") for n in stored_files(location)) == 1
    rerun = EmbeddingCache(location)
    rerun.embed(ENDPOINT_MODEL, texts(0, COMPACT_AT * 10))
    assert rerun.encoded == 0 and rerun.shards_read == 1


def test_compaction_beside_concurrent_writers_and_readers_loses_no_vector(endpoint, location):
    import threading
    import time

    errors: list[BaseException] = []
    done = threading.Event()
    written: list[str] = []

    def write(worker: int) -> None:
        try:
            for step in range(12):
                batch = texts(worker * 10_000 + step * 20, 20)
                EmbeddingCache(location).embed(ENDPOINT_MODEL, batch)
                written.extend(batch)
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            while not done.wait(0.01):  # every 10 ms, not a spin that starves the writers
                seen = list(written)
                reader = EmbeddingCache(location)
                reader.embed(ENDPOINT_MODEL, seen)
                if reader.encoded:
                    raise AssertionError(f"{reader.encoded} stored vectors not found")
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    reader = threading.Thread(target=read)
    for thread in [*writers, reader]:
        thread.start()
    merged = 0
    while any(w.is_alive() for w in writers):
        merged += EmbeddingCache(location).compact(ENDPOINT_MODEL)
        time.sleep(0.05)  # leave the writers some of the interpreter
    done.set()
    reader.join()
    assert not errors, errors
    merged += EmbeddingCache(location).compact(ENDPOINT_MODEL)
    assert merged >= 2
    final = EmbeddingCache(location)
    final.embed(ENDPOINT_MODEL, written)
    assert final.encoded == 0 and len(written) == 2 * 12 * 20


def test_over_the_cap_the_least_recently_used_shards_are_evicted(endpoint, location):
    batches = [texts(i * 200, 200) for i in range(5)]  # a shard each
    for batch in batches[:4]:  # shards A, B, C, D, written in this order
        EmbeddingCache(location, flush=200).embed(ENDPOINT_MODEL, batch)
    EmbeddingCache(location).embed(ENDPOINT_MODEL, batches[0][:10])  # A is used again
    cache = EmbeddingCache(location)
    sizes = [e.size for e in cache.files.list(cache.files.folders()[0]) if "/used/" not in e.name]
    shard = sum(sizes) / 4  # a shard and its index
    capped = EmbeddingCache(location, max_gb=3.5 * shard / 1e9, flush=200)
    capped.embed(ENDPOINT_MODEL, batches[4])  # E: five shards over a cap of three and a half

    assert sum(n.endswith(".arrow") for n in stored_files(location)) == 3
    for batch, kept in zip(batches, [True, False, False, True, True], strict=True):
        probe = EmbeddingCache(location)
        probe.embed(ENDPOINT_MODEL, batch)
        assert probe.encoded == (0 if kept else 200), batch[0]


def test_without_a_cap_nothing_is_evicted_and_a_negative_cap_is_refused(endpoint, tmp_path):
    for i in range(3):
        EmbeddingCache(tmp_path).embed(ENDPOINT_MODEL, texts(i * 100, 100))
    assert EmbeddingCache(tmp_path).evict(10**12) == 0
    assert sum(n.endswith(".arrow") for n in stored_files(str(tmp_path))) == 3
    with pytest.raises(ValueError, match="max_gb must be 0"):
        EmbeddingCache(tmp_path, max_gb=-1)


def test_fully_cached_texts_are_read_without_loading_the_model_stack(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    vectors = EmbeddingCache(tmp_path).embed(MODEL, ["port 8443", "backups"], prefix="query: ")
    script = (
        "import json, sys\n"
        "from ragsweep.embeddings.cache import EmbeddingCache\n"
        f"cache = EmbeddingCache({str(tmp_path)!r})\n"
        "v = cache.embed('all-MiniLM-L6-v2', ['backups', 'port 8443'], prefix='query: ')\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'torch', 'transformers', 'llama_index', 'sentence_transformers'})\n"
        "print(json.dumps({'heavy': heavy, 'encoded': cache.encoded, 'v': v.tolist()}))\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [] and result["encoded"] == 0
    np.testing.assert_array_equal(np.asarray(result["v"], np.float32), vectors[::-1])


def test_a_negative_cache_cap_on_the_command_line_is_one_clear_error(kb):
    from conftest import ragsweep_here

    tmp_path, docs, testset = kb
    args = ["run", "--docs", str(docs), "--testset", str(testset), "--cache-max-gb", "-1"]
    result = ragsweep_here(*args, "--output", str(tmp_path / "runs"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--cache-max-gb): must be 0 (no cap) or more, not -1" in result.stderr


def test_the_chunk_embed_step_keeps_the_cache_under_its_cap(tmp_path):
    import pyarrow as pa
    from builders import configured, make_testset
    from kfp import dsl

    from ragsweep.components.chunk_embed import chunk_embed
    from ragsweep.core.schemas import DOCUMENTS, write_table
    from ragsweep.sweep.fanout import read_chunk_set
    from ragsweep.sweep.space import SearchSpace

    documents = dsl.Dataset(uri=str(tmp_path / "documents"))
    text = "Tidewater listens on port 8443. The Pro plan keeps backups for 90 days."
    rows = {"doc_id": ["a.md"], "source": ["a.md"], "format": ["md"], "text": [text]}
    write_table(pa.table(rows, schema=DOCUMENTS), documents.path, "documents")
    [chunk_config] = SearchSpace(chunk_sizes=(16,), chunk_overlaps=(0,)).chunk_configs()
    questions = dsl.Dataset(uri=str(tmp_path / "questions"))
    write_table(make_testset(["q1"]), questions.path, "testset")

    def shards_after(cap: float) -> list[str]:
        cache = tmp_path / f"cache-{cap}"
        chunks = dsl.Dataset(uri=str(tmp_path / f"chunks-{cap}"))
        settings = configured(
            tmp_path / f"settings-{cap}",
            input_data_key="docs",
            embedding_cache=str(cache),
            cache_max_gb=cap,
        )
        chunk_embed.python_func(
            settings=settings,
            documents=documents,
            chunk_group={"group": 0, "chunk_configs": [chunk_config]},
            sharded=dsl.Dataset(uri=str(tmp_path / "no-shards")),
            questions=questions,
            chunks=chunks,
        )
        assert read_chunk_set(chunks.path, chunk_config["chunk_config_id"]).num_rows >= 2
        return [p.name for p in cache.glob("*/*.arrow")]

    assert len(shards_after(0.0)) == 2  # no cap: the step's shards (chunks, questions) kept
    assert shards_after(1e-9) == []  # a cap of one byte: the least recently used go, all of them


def test_writer_processes_beside_a_compacting_one_lose_no_vector(endpoint, location):
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    # Each writer stores what an embed call with 30 new texts stores: a shard, the record
    # of its use, then a compaction if the small shards are many. Its vectors are its own
    # (unit length): making them by the endpoint would cost each writer the import of an
    # HTTP embedding client (~3 CPU s), which adds nothing to the race.
    script = (
        "import sys\n"
        "import numpy as np\n"
        "from ragsweep.embeddings.cache import EmbeddingCache\n"
        "first = int(sys.argv[1])\n"
        "random = np.random.default_rng(first)\n"
        "for step in range(10):\n"
        "    texts = [f'chunk {i} says word{i}' for i in range(first + step * 30, "
        "first + step * 30 + 30)]\n"
        "    vectors = random.standard_normal((30, 64)).astype(np.float32)\n"
        "    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)\n"
        f"    EmbeddingCache(sys.argv[2]).save({ENDPOINT_MODEL!r}, texts, vectors)\n"
        "    cache = EmbeddingCache(sys.argv[2])\n"
        f"    cache.embed({ENDPOINT_MODEL!r}, texts)  # found, and its use recorded\n"
        "    assert cache.encoded == 0\n"
        f"    cache.maintain({ENDPOINT_MODEL!r})\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(first), location], env=env)
        for first in (0, 10_000)
    ]
    merged = 0
    while any(w.poll() is None for w in writers):
        merged += EmbeddingCache(location).compact(ENDPOINT_MODEL)
        time.sleep(0.05)  # compacting again and again, not a spin that starves the writers
    assert [w.wait() for w in writers] == [0, 0]
    merged += EmbeddingCache(location).compact(ENDPOINT_MODEL)
    written = [f"chunk {i} says word{i}" for i in [*range(300), *range(10_000, 10_300)]]
    final = EmbeddingCache(location)
    final.embed(ENDPOINT_MODEL, written)
    assert final.encoded == 0 and merged >= 2
    assert sum(n.endswith(".arrow") for n in stored_files(location)) == 1
