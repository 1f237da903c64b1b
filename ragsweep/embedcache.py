"""A content-addressed store of embeddings: (model, text hash) -> vector.

The text hashed is the text the model read: a prefix a model expects (``query: ``, an
instruction) is part of it, so prefixed and plain embeddings of one text are kept apart.

A nightly run over unchanged documents embeds nothing, and chunk sets that share chunk texts
share their embeddings. The store is a folder, or an ``s3://bucket/prefix`` in the cluster;
each write adds one immutable Arrow shard per model, so concurrent steps never clash.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ragsweep import embedding
from ragsweep.sources import s3_client, s3_errors, split_s3

log = logging.getLogger("ragsweep")


class EmbeddingCache:
    """Embeds texts through the model only when their (model, text) is not stored yet.

    ``location`` is a folder or ``s3://bucket/prefix``; empty or None keeps vectors for the
    life of this object only. ``encoded`` counts the texts the model actually embedded.
    """

    def __init__(self, location: str | Path | None = None) -> None:
        self.blobs = _blobs(str(location)) if location else None
        self.known: dict[str, dict[str, np.ndarray]] = {}  # model -> text hash -> vector
        self.encoded = 0

    def embed(self, model: str, texts: list[str], prefix: str = "") -> np.ndarray:
        """Unit-length embeddings of ``texts`` (one row each), each read by the model after
        ``prefix``; from the store where possible."""
        texts = [prefix + text for text in texts] if prefix else texts
        known = self._vectors(model)
        hashes = [_text_hash(text) for text in texts]
        missing = {h: text for h, text in zip(hashes, texts, strict=True) if h not in known}
        if missing:
            vectors = embedding.encode(model, list(missing.values()))
            self.encoded += len(missing)
            known.update(zip(missing, vectors, strict=True))
            self._write(model, list(missing), vectors)
        log.info(
            "embeddings: %d from the cache, %d new", len(set(hashes)) - len(missing), len(missing)
        )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[h] for h in hashes])

    def _vectors(self, model: str) -> dict[str, np.ndarray]:
        if model not in self.known:
            self.known[model] = {}
            if self.blobs:
                for name in self.blobs.names(_model_key(model)):
                    table = ipc.open_file(pa.BufferReader(self.blobs.read(name))).read_all()
                    matrix = np.stack(table["vector"].to_numpy(zero_copy_only=False))
                    self.known[model].update(zip(table["hash"].to_pylist(), matrix, strict=True))
        return self.known[model]

    def _write(self, model: str, hashes: list[str], vectors: np.ndarray) -> None:
        if not self.blobs:
            return
        table = pa.table(
            {"hash": hashes, "vector": pa.array(list(vectors), pa.list_(pa.float32()))}
        )
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        self.blobs.write(
            f"{_model_key(model)}/{uuid.uuid4().hex}.arrow", sink.getvalue().to_pybytes()
        )


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _model_key(model: str) -> str:
    """A folder name for ``model``: readable, and unique by a hash of the full name."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model.rstrip("/").rsplit("/", 1)[-1])
    return f"{slug}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"


class _LocalBlobs:
    def __init__(self, root: str) -> None:
        self.root = Path(root).expanduser()

    def names(self, folder: str) -> list[str]:
        path = self.root / folder
        return sorted(f"{folder}/{p.name}" for p in path.glob("*.arrow")) if path.is_dir() else []

    def read(self, name: str) -> bytes:
        return (self.root / name).read_bytes()

    def write(self, name: str, data: bytes) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.rename(path)  # readers never see half a shard


class _S3Blobs:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.bucket, prefix = split_s3(uri)
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = s3_client()

    def names(self, folder: str) -> list[str]:
        start = f"{self.prefix}{folder}/"
        with s3_errors(self.uri, self.bucket):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start
            )
            keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
        return sorted(key[len(self.prefix) :] for key in keys if key.endswith(".arrow"))

    def read(self, name: str) -> bytes:
        with s3_errors(self.uri, self.bucket):
            return self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"].read()

    def write(self, name: str, data: bytes) -> None:
        with s3_errors(self.uri, self.bucket):
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data)


def _blobs(location: str) -> _LocalBlobs | _S3Blobs:
    return _S3Blobs(location) if location.startswith("s3://") else _LocalBlobs(location)
