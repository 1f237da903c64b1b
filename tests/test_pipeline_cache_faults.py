"""A rerun of the pipeline's chunk_embed step over a damaged embedding cache: before the
checks, random float32 over a shard's vectors gave answer_correctness 0.087 instead of 0.661
(exit 0), and a truncated shard or index a raw ``ArrowInvalid`` naming no file on every later
run. chunk_embed is the one step of a run that reads the cache's shards (retrieve reads the
questions' vectors chunk_embed saved); its Python function runs here as its process runs it,
with the scripted endpoint's vectors. A rerun that gives the cold run's vectors ranks as the
cold run did."""

from pathlib import Path

import numpy as np
import pyarrow as pa
from builders import configured
from kfp import dsl
from test_pipeline import example_subset

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.core.schemas import write_table
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.embeddings.shards import decode_index
from ragsweep.sweep.fanout import question_vectors, read_chunk_set
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import asked, with_history

MODEL = "openai:embedder"
CONFIGS = SearchSpace(chunk_sizes=(64, 128), embedding_models=(MODEL,)).chunk_configs()


def chunk_embed_step(tmp_path: Path, name: str, cache: Path) -> Path:
    """The step's chunks folder for the chunk sizes 64 and 128 of the example subset, one
    group, the embedding cache at ``cache``."""
    docs, testset = example_subset(tmp_path)
    documents = dsl.Dataset(uri=str(tmp_path / name / "documents"))
    table = read_documents(str(docs)).table
    write_table(table, documents.path, "documents")
    questions = dsl.Dataset(uri=str(tmp_path / name / "questions"))
    write_table(resolve_testset(load_testset(str(testset)), table), questions.path, "testset")
    chunks = dsl.Dataset(uri=str(tmp_path / name / "chunks"))
    settings = configured(
        tmp_path / name / "settings", input_data_key="docs", embedding_cache=str(cache)
    )
    chunk_embed.python_func(
        settings=settings,
        documents=documents,
        chunk_group={"group": 0, "chunk_configs": CONFIGS},
        sharded=dsl.Dataset(uri=str(tmp_path / name / "no-shards")),
        questions=questions,
        chunks=chunks,
    )
    return Path(chunks.path)


def vectors_of(chunks: Path, testset: pa.Table) -> dict[str, np.ndarray]:
    """Each chunk set's vectors, and the questions' (read back, none computed)."""
    found = {
        c["chunk_config_id"]: np.stack(
            read_chunk_set(chunks, c["chunk_config_id"])["embedding"].to_numpy(False)
        )
        for c in CONFIGS
    }
    texts = [with_history(q, h) for q, h in asked(testset)]
    saved = EmbeddingCache(question_vectors(chunks))
    found["questions"] = saved.embed(MODEL, texts, CONFIGS[0].get("query_prefix", ""))
    assert saved.encoded == 0
    return found


def test_a_rerun_over_damaged_shards_gives_the_cold_runs_vectors_and_names_each_file_once(
    endpoint, tmp_path, capsys
):
    cache = tmp_path / "cache"
    cold = chunk_embed_step(tmp_path, "cold", cache)
    shards = sorted(cache.glob("*/*.arrow"))
    assert len(shards) >= 3, shards  # chunks of 64 and 128 tokens, questions
    [vectors_overwritten, truncated, indexed] = shards[:3]
    made_by = EmbeddingCache().identity(MODEL)
    index = decode_index(vectors_overwritten.with_suffix(".idx").read_bytes(), made_by)
    data = bytearray(vectors_overwritten.read_bytes())
    matrix = len(index.keys) * index.row_bytes
    noise = np.random.default_rng(0).standard_normal(matrix // 4).astype(np.float32)
    data[index.offset : index.offset + matrix] = noise.tobytes()  # the same size
    vectors_overwritten.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:1000])
    index_truncated = indexed.with_suffix(".idx")
    index_truncated.write_bytes(index_truncated.read_bytes()[:100])
    damaged = [vectors_overwritten, truncated, index_truncated]
    embedded = len(endpoint.embedded)

    capsys.readouterr()
    rerun = chunk_embed_step(tmp_path, "rerun", cache)
    log = capsys.readouterr().out  # the step's log, as its process writes it
    for path in damaged:
        assert log.count(f"{path} is damaged") == 1, log[-3000:]
    aside = {p.name for p in cache.glob("*/quarantine/*")}
    assert {p.with_suffix(".arrow").name for p in damaged} <= aside
    assert len(endpoint.embedded) > embedded  # the damaged shards' texts, computed again

    testset = load_testset(str(tmp_path / "testset.json"))
    before, after = vectors_of(cold, testset), vectors_of(rerun, testset)
    assert before.keys() == after.keys()
    for name, vectors in before.items():
        np.testing.assert_allclose(after[name], vectors, atol=1e-6, err_msg=name)
