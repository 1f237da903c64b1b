"""Red Hat AutoRAG's choices that shape the search space rather than set a field of it:
its ``preset`` (its chunk lists and chunker) and its ``vector_io_provider_id`` (its one
store). ``ragsweep.sweep.options.build_settings`` applies them, so ``ragsweep run``, a
``--space`` file, ``submit`` and the pipeline read them alike."""

from __future__ import annotations

from typing import Any

from ragsweep.core.errors import RagsweepError
from ragsweep.retrieval.vector_stores import store_names

# AutoRAG's chunk sizes count characters (a recursive character splitter); ragsweep's count
# the embedding model's tokens, about four characters of English each.
CHARACTERS_PER_TOKEN = 4
PRESETS: dict[str, dict[str, list[int]]] = {  # in characters, as AutoRAG's presets
    "speed": {"chunk_sizes": [128, 256, 512], "chunk_overlaps": [32, 64]},
    "balanced": {"chunk_sizes": [512, 1024, 2048], "chunk_overlaps": [0, 128, 256]},
}
# speed: paragraphs, then sentences, then words (AutoRAG's recursive splitter); balanced:
# sections first (AutoRAG's Docling hybrid chunker and Markdown-header splitting)
PRESET_CHUNKERS = {"speed": "sentence", "balanced": "headings"}

# A vector_io_provider_id names a provider registered in OGX (``milvus``, ``remote::milvus``,
# ``ls_milvus``...): the registered store whose name it holds, or one OGX names otherwise.
PROVIDER_STORES = {
    "faiss": "memory",  # OGX's inline providers search exactly, in process
    "sqlite-vec": "memory",
    "sqlite_vec": "memory",
}


def shaped(search_space: dict[str, Any], preset: str, vector_io_provider_id: str) -> dict[str, Any]:
    """``search_space`` with AutoRAG's ``preset`` (its chunk lists, in tokens) and
    ``vector_io_provider_id`` (its store) in place of its own; empty: left as it is."""
    space = dict(search_space)
    if preset:
        if preset not in PRESETS:
            raise RagsweepError(
                f"preset {preset!r}: expected one of {', '.join(PRESETS)}, or empty"
            )
        space["chunkers"] = [PRESET_CHUNKERS[preset]]
        for field, characters in PRESETS[preset].items():
            space[field] = [round(n / CHARACTERS_PER_TOKEN) for n in characters]
    if vector_io_provider_id:
        store = store_of(vector_io_provider_id)
        space["vector_stores"] = [store]
        if space.get("indexes"):  # the other stores' indexes are not swept
            space["indexes"] = {s: kinds for s, kinds in space["indexes"].items() if s == store}
    return space


def store_of(provider_id: str) -> str:
    """The ragsweep vector store an OGX vector_io provider id names."""
    name = provider_id.rpartition("::")[2].lower()
    known = {**{store: store for store in store_names()}, **PROVIDER_STORES}
    stores = {store for key, store in known.items() if key in name}
    if len(stores) != 1:
        raise RagsweepError(
            f"vector_io_provider_id {provider_id!r}: names no vector store ragsweep knows; "
            f"expected an id holding one of {', '.join(known)}"
        )
    return stores.pop()
