"""Embeddings are computed once per (model, text): in a run, across chunk sets, across runs."""

import numpy as np
import pytest

from ragsweep import embedding
from ragsweep.embedcache import EmbeddingCache

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
    assert model_calls == ["backups are kept 30 days", "port 8443"]
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


def test_models_are_kept_apart(tmp_path, model_calls):
    cache = EmbeddingCache(tmp_path)
    cache.embed(MODEL, ["same text"])
    cache.embed("sentence-transformers/all-MiniLM-L6-v2", ["same text"])
    assert model_calls == ["same text", "same text"]
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 2


def test_store_on_s3_is_shared_between_runs(bucket, model_calls):
    location = f"s3://{bucket}/cache/embeddings"
    EmbeddingCache(location).embed(MODEL, ["stored on s3", "twice"])
    rerun = EmbeddingCache(location)
    vectors = rerun.embed(MODEL, ["twice", "stored on s3"])
    assert rerun.encoded == 0 and vectors.shape == (2, 384)
    assert model_calls == ["stored on s3", "twice"]


def test_store_on_a_missing_bucket_is_a_clear_error(s3):
    from ragsweep.errors import RagsweepError

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

    from ragsweep.errors import RagsweepError

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
