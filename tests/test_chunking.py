"""Chunk sizes are counted with the model's tokenizer, each distinct text tokenized once."""

import collections
from pathlib import Path

import numpy as np
import pytest

from ragsweep.core.text import bounded
from ragsweep.documents.chunking import chunk_documents, get_chunker
from ragsweep.documents.sources import read_documents
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models import embedding
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import build_chunks

MODEL = "all-MiniLM-L6-v2"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "docs"
GRID = {"chunk_sizes": [64, 128, 192], "chunk_overlaps": [0, 16]}  # the benchmark's chunk sets
# accents, case, no-break space, CJK, emoji, control characters, a long word, nothing
TRICKY = [
    "Héllo   WORLD naïve Café\u00a0x",
    "日本語のテキスト",
    "emoji 😀 ok",
    "a\tb\nc",
    "x" * 3000,
    "",
]


@pytest.fixture(scope="module")
def documents():
    return read_documents(str(EXAMPLES)).table


@pytest.fixture(scope="module")
def plain_tokenize():
    """The model's tokenizer as transformers loads it, every call encoding: ragsweep reads
    the same tokenizer.json with the tokenizers library alone, and must give the same ids."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(embedding.model_path(MODEL)))
    tokenizer.model_max_length = 1 << 30
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


@pytest.fixture
def tokenizer_calls(monkeypatch):
    """How often the model's tokenizer itself encodes each text (load_tokenizer loads afresh)."""
    calls: collections.Counter[str] = collections.Counter()
    load = embedding.token_ids

    def counting_load(path):
        encode = load(path)

        def counting(text):
            calls[text] += 1
            return encode(text)

        return counting

    monkeypatch.setattr(embedding, "token_ids", counting_load)
    embedding.load_tokenizer.cache_clear()
    yield calls
    embedding.load_tokenizer.cache_clear()


def test_a_sweep_tokenizes_each_distinct_text_once(documents, tokenizer_calls):
    tokenize = embedding.load_tokenizer(MODEL)
    asked: collections.Counter[str] = collections.Counter()

    def asking(text):
        asked[text] += 1
        return tokenize(text)

    configs = SearchSpace.from_dict(GRID).chunk_configs()
    for config in configs + [{**configs[0], "chunker": "token"}]:
        chunk_documents(
            documents, config["chunker"], config["chunk_size"], config["chunk_overlap"], asking
        )
    # the splitters ask for the same texts over and over; the tokenizer sees each once
    assert sum(asked.values()) > 3 * len(asked)
    assert set(tokenizer_calls) == set(asked) and set(tokenizer_calls.values()) == {1}


def test_memoized_ids_and_chunks_equal_those_of_the_plain_tokenizer(documents, plain_tokenize):
    tokenize = embedding.load_tokenizer(MODEL)
    for text in documents["text"].to_pylist() + TRICKY:
        assert tokenize(text).tolist() == plain_tokenize(text)
        assert not tokenize(text).flags.writeable  # one array answers every caller
    for chunker, size, overlap in [("sentence", 64, 16), ("sentence", 192, 0), ("token", 128, 16)]:
        memoized = chunk_documents(documents, chunker, size, overlap, tokenize)
        plain = chunk_documents(documents, chunker, size, overlap, plain_tokenize)
        assert memoized.equals(plain), (chunker, size, overlap)


def test_built_chunks_embed_as_the_plain_llama_index_path_does(
    documents, plain_tokenize, embedding_cache
):
    [config] = SearchSpace.from_dict({"chunk_sizes": [192], "chunk_overlaps": [0]}).chunk_configs()
    chunks = build_chunks(documents, config, EmbeddingCache(embedding_cache))
    plain = chunk_documents(documents, "sentence", 192, 0, plain_tokenize)
    assert chunks["text"].to_pylist() == plain["text"].to_pylist()
    # what HuggingFaceEmbedding returns for the texts, in llama-index's own batches
    expected = embedding.load_embedder(MODEL).get_text_embedding_batch(plain["text"].to_pylist())
    vectors = np.stack(chunks["embedding"].to_numpy(zero_copy_only=False))
    assert vectors.shape == (plain.num_rows, 384)
    assert np.allclose(vectors, np.asarray(expected, dtype=np.float32), atol=1e-5)


def test_texts_longer_than_a_chunk_in_words_are_not_tokenized_and_chunks_do_not_change(
    documents, plain_tokenize
):
    asked = []

    def tokenize(text):
        asked.append(text)
        return plain_tokenize(text)

    count = bounded(tokenize, 8)
    assert len(count("one two three four five six seven eight nine")) > 8 and not asked
    assert list(count("one two three four five six seven eight")) == plain_tokenize(
        "one two three four five six seven eight"
    )
    assert len(count("-- -- -- -- -- -- -- -- -- -- a")) == len(
        plain_tokenize("-- -- -- -- -- -- -- -- -- -- a")
    )  # runs without a letter or digit are not counted as words
    for chunker, size, overlap in [("sentence", 64, 16), ("sentence", 192, 0), ("token", 32, 8)]:
        plain = get_chunker(chunker)(size, overlap, plain_tokenize)
        fast = get_chunker(chunker)(size, overlap, bounded(plain_tokenize, size))
        for text in documents["text"].to_pylist():
            assert fast(text) == plain(text), (chunker, size, overlap)
