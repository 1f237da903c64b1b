"""The embedding cache's files: shards of vectors and the small index written beside each.

A shard ``<id>.arrow`` is an Arrow IPC file of one record batch: ``hash`` (the first 16
bytes of the SHA-256 of the text the model read, ``fixed_size_binary(16)``) and ``vector``
(``fixed_size_list<float32>``, so the vectors are one contiguous float32 matrix). Its index
``<id>.idx`` holds the same hashes, in row order, and where the matrix starts in the shard:
a reader learns which shard holds a text from the indexes alone, then reads only the rows
it needs (a memory-mapped file's pages, or byte ranges of an S3 object).

Both files carry a CRC-32 of each row (its hash and vector bytes, column ``check``) and the
index the shard's size in bytes, so every row read is verified against its index and a
truncated shard is seen from a listing. Vectors must also be finite and, when the shard says
its rows are unit vectors (``unit`` in its metadata), of unit length. Data that fails raises
``Damaged``.

Older files are still read. Shards of the second format (``ragsweep-embeddings/2``: an index,
no checks) are verified by their structure, finiteness and unit length (everything ragsweep
embedded was normalized); compaction rewrites the small ones with checks. Shards written
before the index existed (``hash`` a hex string, ``vector`` a variable ``list<float32>``, no
``.idx``) are read whole, verified the same way; compaction rewrites them in this format.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

KEY = np.dtype("S16")  # compare and sort keys as numpy byte strings (exactly 16 bytes each)
FORMAT = "ragsweep-embeddings/3"
UNCHECKED = "ragsweep-embeddings/2"  # indexed shards written before the row checks
NORM_TOLERANCE = 1e-3  # how far from 1 a stored unit vector's length may be


class Damaged(ValueError):
    """A shard or index that does not verify: unreadable, truncated, or rows that fail."""


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
    checks: np.ndarray | None = None  # uint32 per row; None for the second format
    size: int | None = None  # the shard's bytes; None for the second format
    unit: bool = True  # rows are unit vectors

    @property
    def row_bytes(self) -> int:
        return self.dim * 4


def encode(keys: np.ndarray, vectors: np.ndarray) -> tuple[bytes, bytes]:
    """A shard of ``vectors`` (rows keyed by ``keys``) and its index, as file contents."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    rows, dim = vectors.shape
    checks = row_checks(keys, vectors)
    unit = str(int(bool(_unit(vectors).all())))
    table = pa.table(
        {
            "hash": pa.array(key_list(keys), pa.binary(16)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
            "check": pa.array(checks, pa.uint32()),
        }
    )
    schema = table.schema.with_metadata({"format": FORMAT, "unit": unit})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as writer:
        writer.write_batch(table.combine_chunks().to_batches(max_chunksize=max(rows, 1))[0])
    shard = sink.getvalue()
    values = ipc.open_file(pa.BufferReader(shard)).get_batch(0).column("vector").values
    offset = values.buffers()[1].address - shard.address + values.offset * 4
    meta = {"format": FORMAT, "rows": str(rows), "dim": str(dim), "offset": str(offset)}
    meta |= {"size": str(shard.size), "unit": unit}
    index = pa.table({"hash": table["hash"], "check": table["check"]})
    index = index.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, index.schema) as writer:
        writer.write_table(index)
    return shard.to_pybytes(), sink.getvalue().to_pybytes()


def row_checks(keys: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The CRC-32 of each row: its 16-byte key, then its vector's float32 bytes."""
    raw = np.ascontiguousarray(keys, dtype=KEY).tobytes()
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    rows = memoryview(matrix.reshape(len(matrix), -1)).cast("B")
    size = matrix.itemsize * (matrix.shape[1] if matrix.ndim == 2 else 0)
    return np.fromiter(
        (
            zlib.crc32(rows[i * size : (i + 1) * size], zlib.crc32(raw[i * 16 : i * 16 + 16]))
            for i in range(len(matrix))
        ),
        np.uint32,
        len(matrix),
    )


def verify_rows(
    keys: np.ndarray, vectors: np.ndarray, checks: np.ndarray | None, unit: bool
) -> None:
    """Raise ``Damaged`` unless each row matches its check (when there are checks) and its
    vector is finite and, for ``unit`` rows, of unit length."""
    if checks is not None:
        bad = np.flatnonzero(row_checks(keys, vectors) != checks)
        if len(bad):
            raise Damaged(f"{len(bad)} of {len(keys)} rows fail their checksum")
    if not np.isfinite(vectors).all():
        raise Damaged("vectors that are not finite numbers")
    if unit and not _unit(vectors).all():
        raise Damaged("vectors that are not of unit length")


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Which rows are unit vectors (or all zeros: the model's answer for an empty text)."""
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    return (np.abs(norms - 1) <= NORM_TOLERANCE) | (norms == 0)


def decode_index(data: bytes) -> ShardIndex:
    """The keys and layout of a shard, from its ``.idx`` contents."""
    try:
        table = ipc.open_file(pa.BufferReader(data)).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if meta.get("format") not in (FORMAT, UNCHECKED):
            raise Damaged(f"not an embeddings index: {json.dumps(meta)[:200]}")
        keys, rows = _keys(table["hash"]), int(meta["rows"])
        if meta["format"] == UNCHECKED:
            index = ShardIndex(keys, int(meta["dim"]), int(meta["offset"]))
        else:
            checks = table["check"].combine_chunks().to_numpy(zero_copy_only=False)
            unit = meta["unit"] == "1"
            index = ShardIndex(
                keys, int(meta["dim"]), int(meta["offset"]), checks, int(meta["size"]), unit
            )
    except (pa.ArrowException, ValueError, KeyError, UnicodeDecodeError) as exc:
        raise Damaged(f"unreadable index ({_first_line(exc)})") from None
    if len(keys) != rows or (index.checks is not None and len(index.checks) != rows):
        raise Damaged(f"an index of {len(keys)} keys for {rows} rows")
    return index


def decode_shard(data: bytes | pa.Buffer) -> tuple[np.ndarray, np.ndarray]:
    """Every key (``S16``) and vector (float32 rows) of a shard, of any format, verified."""
    try:
        table = ipc.open_file(pa.BufferReader(data)).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        hashes = table["hash"]
        if pa.types.is_fixed_size_binary(hashes.type):
            keys = _keys(hashes)
        else:  # the first format: hex strings of the full SHA-256
            keys = np.array([bytes.fromhex(h)[:16] for h in hashes.to_pylist()], dtype=KEY)
        vectors = table["vector"].combine_chunks()
        checks = None
        if meta.get("format") == FORMAT:
            checks = table["check"].combine_chunks().to_numpy(zero_copy_only=False)
        if len(vectors) == 0:
            return keys, np.zeros((0, 0), np.float32)
        flat = vectors.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        matrix = flat.reshape(len(vectors), -1)
    except (pa.ArrowException, ValueError, KeyError, UnicodeDecodeError) as exc:
        raise Damaged(f"unreadable shard ({_first_line(exc)})") from None
    verify_rows(keys, matrix, checks, meta.get("unit", "1") == "1")
    return keys, matrix


def take_rows(data: pa.Buffer | bytes, layout: ShardIndex, rows: np.ndarray) -> np.ndarray:
    """Rows ``rows`` (sorted) of a shard's matrix, where its index says the matrix is;
    ``data`` may be a memory map (only their pages are read; the rows are copied)."""
    rows_stored = len(layout.keys)
    if len(data) < layout.offset + rows_stored * layout.row_bytes:
        raise Damaged(f"{len(data)} bytes, too few for its {rows_stored} rows")
    matrix = np.frombuffer(data, np.float32, rows_stored * layout.dim, layout.offset)
    return matrix.reshape(rows_stored, layout.dim)[rows]


def check_size(layout: ShardIndex, size: int) -> None:
    """Raise ``Damaged`` unless a shard of ``size`` bytes can be the one ``layout`` is the
    index of (a truncated shard is seen from a listing)."""
    needed = layout.offset + len(layout.keys) * layout.row_bytes
    if size < needed or (layout.size is not None and size != layout.size):
        expected = layout.size if layout.size is not None else f"at least {needed}"
        raise Damaged(f"the shard has {size} bytes, its index says {expected}")


def verify_taken(layout: ShardIndex, rows: np.ndarray, vectors: np.ndarray) -> None:
    """Raise ``Damaged`` unless rows ``rows`` of the shard, read as ``vectors``, verify."""
    checks = None if layout.checks is None else layout.checks[rows]
    verify_rows(layout.keys[rows], vectors, checks, layout.unit)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _keys(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros(0, KEY)
    data = array.buffers()[1]
    return np.frombuffer(data, KEY, count=len(array), offset=array.offset * 16).copy()
