"""The embedding cache's files: shards of vectors and the small index written beside each.

A shard ``<id>.arrow`` is an Arrow IPC file of one record batch: ``hash`` (the first 16
bytes of the SHA-256 of the text the model read, ``fixed_size_binary(16)``) and ``vector``
(``fixed_size_list<float32>``, so the vectors are one contiguous float32 matrix). Its index
``<id>.idx`` holds the same hashes, in row order, and where the matrix starts in the shard:
a reader learns which shard holds a text from the indexes alone, then reads only the rows
it needs (a memory-mapped file's pages, or byte ranges of an S3 object).

Shards written before the index existed (``hash`` a hex string, ``vector`` a variable
``list<float32>``, no ``.idx``) are read whole; compaction rewrites them in this format.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

KEY = np.dtype("S16")  # compare and sort keys as numpy byte strings (exactly 16 bytes each)
FORMAT = "ragsweep-embeddings/2"


def text_key(text: str) -> bytes:
    """The cache key of ``text``: the first 16 bytes of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:16]


def key_list(keys: np.ndarray) -> list[bytes]:
    """Keys of an ``S16`` array as 16-byte ``bytes`` (numpy would strip trailing zeros)."""
    raw = np.ascontiguousarray(keys, dtype=KEY).tobytes()
    return [raw[i : i + 16] for i in range(0, len(raw), 16)]


@dataclass(frozen=True)
class ShardIndex:
    """What a shard's ``.idx`` says: its keys in row order and where its matrix starts."""

    keys: np.ndarray  # S16, one per row
    dim: int
    offset: int  # byte offset of row 0 of the float32 matrix in the shard file

    @property
    def row_bytes(self) -> int:
        return self.dim * 4


def encode(keys: np.ndarray, vectors: np.ndarray) -> tuple[bytes, bytes]:
    """A shard of ``vectors`` (rows keyed by ``keys``) and its index, as file contents."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    rows, dim = vectors.shape
    table = pa.table(
        {
            "hash": pa.array(key_list(keys), pa.binary(16)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
        }
    )
    schema = table.schema.with_metadata({"format": FORMAT})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as writer:
        writer.write_batch(table.combine_chunks().to_batches(max_chunksize=max(rows, 1))[0])
    shard = sink.getvalue()
    values = ipc.open_file(pa.BufferReader(shard)).get_batch(0).column("vector").values
    offset = values.buffers()[1].address - shard.address + values.offset * 4
    meta = {"format": FORMAT, "rows": str(rows), "dim": str(dim), "offset": str(offset)}
    index = pa.table({"hash": table["hash"]}).replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, index.schema) as writer:
        writer.write_table(index)
    return shard.to_pybytes(), sink.getvalue().to_pybytes()


def decode_index(data: bytes) -> ShardIndex:
    """The keys and layout of a shard, from its ``.idx`` contents."""
    table = ipc.open_file(pa.BufferReader(data)).read_all()
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if meta.get("format") != FORMAT:
        raise ValueError(f"not an embeddings index of format {FORMAT}: {json.dumps(meta)}")
    return ShardIndex(_keys(table["hash"]), int(meta["dim"]), int(meta["offset"]))


def decode_shard(data: bytes | pa.Buffer) -> tuple[np.ndarray, np.ndarray]:
    """Every key (``S16``) and vector (float32 rows) of a shard, of either format."""
    table = ipc.open_file(pa.BufferReader(data)).read_all()
    hashes = table["hash"]
    if pa.types.is_fixed_size_binary(hashes.type):
        keys = _keys(hashes)
    else:  # the first format: hex strings of the full SHA-256
        keys = np.array([bytes.fromhex(h)[:16] for h in hashes.to_pylist()], dtype=KEY)
    vectors = table["vector"].combine_chunks()
    if len(vectors) == 0:
        return keys, np.zeros((0, 0), np.float32)
    flat = vectors.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return keys, flat.reshape(len(vectors), -1)


def take_rows(data: pa.Buffer, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` of a shard's matrix; ``data`` may be a memory map (only their pages are
    read)."""
    vectors = ipc.open_file(pa.BufferReader(data)).get_batch(0).column("vector")
    matrix = vectors.values.to_numpy(zero_copy_only=True).reshape(len(vectors), -1)
    return matrix[rows]


def _keys(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros(0, KEY)
    data = array.buffers()[1]
    return np.frombuffer(data, KEY, count=len(array), offset=array.offset * 16).copy()
