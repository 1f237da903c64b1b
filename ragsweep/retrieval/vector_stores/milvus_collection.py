"""Milvus's collections, standalone (numpy and pymilvus, imported when used; no ragsweep
import).

One source for both sides: the sweep's store (``ragsweep.retrieval.vector_stores.milvus``)
makes and indexes its collections with ``create_collection`` and ``build_index``; and this
file is the store's pattern code (``PATTERN_CODE``), copied beside a pattern's scripts as
``vector_store.py``, whose ``write_index`` and ``open_index`` make and search the pattern's
collection with the same ones.

A collection: the chunk's row as the int64 primary key ``id``, the ``vector``, the ``text``
(analyzed for Milvus's BM25 full-text search where the server has it, which hybrid search
uses) and the BM25 ``sparse`` vector Milvus computes from the text; a pattern's has the
``document_id`` too.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

MAX_TEXT_BYTES = 65535  # Milvus's VARCHAR limit; longer texts are cut (keyword search only)


def create_collection(
    client: Any,
    name: str,
    dim: int,
    analyzer: dict[str, Any],
    properties: dict[str, str] | None = None,
    document_id: bool = False,
) -> bool:
    """Collection ``name``, with BM25 full-text search over the text analyzed by
    ``analyzer`` where the server has it (Milvus 2.5+, Milvus Lite 3); True when it has."""
    from pymilvus import DataType, Function, FunctionType, MilvusException

    for full_text in (True, False):
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        analyzed = {"enable_analyzer": True, "analyzer_params": analyzer} if full_text else {}
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES, **analyzed)
        if document_id:
            schema.add_field("document_id", DataType.VARCHAR, max_length=4096)
        if full_text:
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                Function(
                    name="bm25",
                    function_type=FunctionType.BM25,
                    input_field_names=["text"],
                    output_field_names=["sparse"],
                )
            )
        try:
            client.create_collection(
                name, schema=schema, **({"properties": properties} if properties else {})
            )
            return full_text
        except MilvusException:
            if not full_text:
                raise
            logging.getLogger("ragsweep").info(
                "milvus: no BM25 full-text search on the server; hybrid uses ragsweep's BM25"
            )
    return False


def build_index(
    client: Any, name: str, index: dict[str, Any], full_text: bool, sync: bool = True
) -> None:
    """Collection ``name``'s vector index (``index``: ``index_type``, ``metric_type``,
    ``build`` parameters) and, with ``full_text``, its BM25 index (``bm25`` parameters);
    then the collection loaded, its rows flushed into sealed segments first so the index
    (not a scan of unsealed rows) answers."""
    client.flush(name)
    params = client.prepare_index_params()
    build = index["build"]
    params.add_index(
        field_name="vector",
        index_type=index["index_type"],
        metric_type=index["metric_type"],
        # flat (pymilvus 3, Milvus servers) and as "params" (what Milvus Lite reads)
        params={**build, "params": build},
    )
    if full_text:
        bm25 = index["bm25"]
        params.add_index(
            field_name="sparse",
            index_type="SPARSE_INVERTED_INDEX",
            metric_type="BM25",
            params={**bm25, "params": bm25},
        )
    client.release_collection(name)
    client.create_index(name, params, sync=sync)
    client.load_collection(name)


def cut(text: str) -> str:
    """``text`` within Milvus's VARCHAR limit, cut at a character boundary."""
    if len(text) * 4 <= MAX_TEXT_BYTES:
        return text
    return text.encode()[:MAX_TEXT_BYTES].decode("utf-8", "ignore")


# ---- a pattern's side: indexing.py and inference.py call these -------------------------------

COLLECTION = "ragsweep_pattern"


def client_of(uri: str) -> Any:
    """A client on a Milvus Lite database (a ``.db`` path) or a server URI (token in
    ``MILVUS_TOKEN``)."""
    from pymilvus import MilvusClient

    return MilvusClient(uri=uri, token=os.environ.get("MILVUS_TOKEN", ""))


def write_index(where: str, chunks: list[dict], vectors: np.ndarray, settings: dict) -> None:
    """The pattern's collection at ``where``: the chunk's row as its id, the vector, the
    text and document id, with the pattern's index and metric (``settings["milvus_index"]``)
    and, where the server has it, the sweep's BM25 full-text search over the text."""
    client = client_of(where)
    if client.has_collection(COLLECTION):
        client.drop_collection(COLLECTION)
    index = settings["milvus_index"]
    full_text = create_collection(
        client, COLLECTION, vectors.shape[1], index["analyzer"], document_id=True
    )
    rows = [
        {"id": i, "vector": v, "text": cut(c["text"]), "document_id": c["document_id"]}
        for i, (c, v) in enumerate(zip(chunks, vectors, strict=True))
    ]
    for start in range(0, len(rows), 1000):
        client.insert(COLLECTION, rows[start : start + 1000])
    build_index(client, COLLECTION, index, full_text)
    client.close()


def open_index(where: str, settings: dict, index_class: type) -> Any:
    """The collection ``write_index`` made, its rows read; searched by its vector index
    with the pattern's metric and, for hybrid, by Milvus's BM25 full-text search as the
    sweep used it (BM25 outside Milvus on a server without it, as the sweep fell back to).
    None when there is none."""
    if where.endswith(".db") and not Path(where).exists():
        return None
    client = client_of(where)
    if not client.has_collection(COLLECTION):
        return None
    client.load_collection(COLLECTION)
    fields = client.describe_collection(COLLECTION).get("fields", [])
    full_text = any(f.get("name") == "sparse" for f in fields)
    rows = []
    pages = client.query_iterator(
        COLLECTION,
        batch_size=1000,
        filter="id >= 0",
        output_fields=["id", "vector", "text", "document_id"],
    )
    while page := pages.next():
        rows += page
    pages.close()
    rows.sort(key=lambda r: r["id"])
    index = settings["milvus_index"]

    def ask(query: Any, field: str, k: int, params: dict) -> list[tuple[int, float]]:
        [hits] = client.search(
            COLLECTION, data=[query], anns_field=field, limit=k, search_params=params
        )
        return [(int(h["id"]), float(h["distance"])) for h in hits]

    class MilvusIndex(index_class):
        def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
            params = dict(index["search"])
            k = min(k, len(self.chunks))
            if "ef" in params:  # Milvus needs ef >= k
                params["ef"] = max(params["ef"], k)
            found = ask(
                vector, "vector", k, {"metric_type": index["metric_type"], "params": params}
            )
            if settings["distance"] == "euclidean":  # Milvus's L2: lower is nearer
                found = [(i, -d) for i, d in found]
            return sorted(found, key=lambda f: (-f[1], f[0]))  # equal scores in chunk order

        def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
            if not full_text:
                return self.bm25(question, k)
            if not question.strip():
                return []
            found = ask(question, "sparse", min(k, len(self.chunks)), {"metric_type": "BM25"})
            found = [(i, abs(d)) for i, d in found]  # Milvus Lite reports BM25 scores negated
            return sorted(found, key=lambda f: (-f[1], f[0]))

    chunks = [{"document_id": r["document_id"], "text": r["text"]} for r in rows]
    return MilvusIndex(chunks, np.asarray([r["vector"] for r in rows], np.float32))
