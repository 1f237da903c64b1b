"""Every cache keys on what a model is, not on its name (issue 37): a model retrained in place
is embedded again, vectors copied from another runtime's folder are set aside, and one model
name at two URLs is two models, for vectors and for replies."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import own_cache
from scripted_llm import ScriptedLLM

from ragsweep.answering.generation import llm_answerer
from ragsweep.documents.chunking import chunk_documents
from ragsweep.documents.sources import read_documents
from ragsweep.embeddings.cache import QUARANTINE, EmbeddingCache
from ragsweep.models import embedding
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.space import SearchSpace

MODEL = "all-MiniLM-L6-v2"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TEXTS = ["Backups are kept for 30 days.", "The admin console listens on port 8443."]


def negate_tensor(weights: Path, suffix: str) -> None:
    """Negate the float32 tensor whose name ends in ``suffix``, in place: the same path,
    file name and size (a safetensors file: an 8-byte header length, a JSON header giving
    each tensor's byte range, then the data)."""
    data = bytearray(weights.read_bytes())
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    [name] = [n for n in header if n.endswith(suffix)]
    assert header[name]["dtype"] == "F32"
    begin, end = header[name]["data_offsets"]
    tensor = np.frombuffer(data, np.float32, (end - begin) // 4, 8 + length + begin)
    tensor *= -1  # a view of ``data``: negated in the buffer
    weights.write_bytes(bytes(data))


def test_a_model_retrained_in_place_is_embedded_again_with_its_new_weights(tmp_path):
    model = tmp_path / "minilm"
    shutil.copytree(embedding.model_path(MODEL), model)
    name = f"{model}@torch"  # no ONNX export to make, twice: the cache's key is the point
    location = tmp_path / "cache"
    first = EmbeddingCache(location)
    before = first.embed(name, TEXTS)
    assert first.encoded == 2

    weights = model / "model.safetensors"
    size = weights.stat().st_size
    negate_tensor(weights, "layer.0.attention.self.query.weight")
    assert weights.stat().st_size == size

    retrained = EmbeddingCache(location)
    after = retrained.embed(name, TEXTS)
    assert retrained.encoded == 2  # not served from the old weights' vectors
    assert float((before * after).sum(axis=1).min()) < 0.999
    rerun = EmbeddingCache(location)
    np.testing.assert_array_equal(rerun.embed(name, TEXTS), after)
    assert rerun.encoded == 0


def example_chunks() -> list[str]:
    """The chunks of the example documents' guides at the default space's largest chunk
    size (35 texts: enough for int8's vectors to differ, few enough to embed three times
    in seconds)."""
    documents: pa.Table = read_documents(str(EXAMPLES / "docs" / "guides")).table
    config = max(SearchSpace().chunk_configs(), key=lambda c: c["chunk_size"])
    chunks = chunk_documents(
        documents,
        config["chunker"],
        config["chunk_size"],
        config["chunk_overlap"],
        embedding.load_tokenizer(MODEL),
    )
    return sorted(set(chunks["text"].to_pylist()))


def test_int8_shards_copied_into_the_default_runtimes_folder_are_set_aside(tmp_path, caplog):
    texts = example_chunks()
    location = tmp_path / "cache"
    int8 = f"{MODEL}@onnx-int8"
    int8_vectors = EmbeddingCache(location).embed(int8, texts)
    files = EmbeddingCache(location).files
    source, target = EmbeddingCache().folder(int8), EmbeddingCache().folder(MODEL)
    assert source != target
    copied = [e.name.rsplit("/", 1)[1] for e in files.list(source) if "/used/" not in e.name]
    assert copied and all(n.endswith((".arrow", ".idx")) for n in copied)
    (location / target).mkdir()
    for file in copied:
        shutil.copy(location / source / file, location / target / file)

    reader = EmbeddingCache(location)
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        vectors = reader.embed(MODEL, texts)
    clean = EmbeddingCache().embed(MODEL, texts)
    assert not np.array_equal(int8_vectors, clean)  # serving the copies would show
    np.testing.assert_array_equal(vectors, clean)
    assert reader.encoded == len(texts) and reader.vectors_read == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    indexes = [n for n in copied if n.endswith(".idx")]
    assert len(warnings) == len(indexes)  # one per shard, naming it
    for index in indexes:
        [warning] = [w for w in warnings if f"{target}/{index} is another model's" in w]
        assert f"made by {EmbeddingCache().identity(int8)}" in warning, warning
    aside = sorted(p.name for p in (location / target / QUARANTINE).iterdir())
    assert aside == sorted(copied)


@pytest.fixture
def two_servers():
    """Two scripted OpenAI-compatible servers serving the same model names."""
    with ScriptedLLM() as first, ScriptedLLM() as second:
        for server in (first, second):
            server.models.append("embedder")
        yield first, second


def test_an_endpoint_models_vectors_are_not_served_for_the_same_name_at_another_url(
    two_servers, tmp_path, monkeypatch
):
    first, second = two_servers
    location = tmp_path / "cache"
    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", first.url)
    EmbeddingCache(location).embed("openai:embedder", TEXTS)
    assert sorted(first.embedded) == sorted(TEXTS)

    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", second.url)
    elsewhere = EmbeddingCache(location)
    elsewhere.embed("openai:embedder", TEXTS)
    assert elsewhere.encoded == 2 and sorted(second.embedded) == sorted(TEXTS)
    assert len([p for p in location.iterdir() if p.is_dir()]) == 2

    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", first.url)
    back = EmbeddingCache(location)
    back.embed("openai:embedder", TEXTS)
    assert back.encoded == 0 and len(first.embedded) == 2  # each URL's vectors kept


def test_an_endpoint_models_answers_are_not_served_for_the_same_name_at_another_url(
    two_servers, tmp_path, monkeypatch, ragsweep_cache
):
    first, second = two_servers
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", own_cache(tmp_path / "replies", ragsweep_cache))
    asked = [("Which port does the console use?", ["The console uses port 8443."])]
    settings = LLMSettings(backoff_s=0.01, timeout_s=5)
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", first.url)
    [answer] = llm_answerer("answerer", settings)(asked)
    assert not answer.cached and first.chat_calls == 1

    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", second.url)
    [elsewhere] = llm_answerer("answerer", settings)(asked)
    assert not elsewhere.cached and second.chat_calls == 1

    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", first.url)
    [again] = llm_answerer("answerer", settings)(asked)
    assert again.cached and first.chat_calls == 1
