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

Both files also record the identity of the model that made the vectors (``model`` in their
metadata: ``ragsweep.models.identity``), and are read only for that model: a file recording
another identity (a shard copied from another model's folder) raises ``Foreign``. Files of
earlier formats, which recorded no identity, are not read either.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

KEY = np.dtype("S16")  # compare and sort keys as numpy byte strings (exactly 16 bytes each)
FORMAT = "ragsweep-embeddings/4"  # 3 had no model identity, 2 no row checks, 1 no index
NORM_TOLERANCE = 1e-3  # how far from 1 a stored unit vector's length may be


class Damaged(ValueError):
    """A shard or index that does not verify: unreadable, truncated, or rows that fail."""


class Foreign(Damaged):
    """A shard or index made by another model than the one it is read for."""


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
    checks: np.ndarray  # uint32 per row
    size: int  # the shard's bytes
    unit: bool  # rows are unit vectors

    @property
    def row_bytes(self) -> int:
        return self.dim * 4


def encode(keys: np.ndarray, vectors: np.ndarray, model: str) -> tuple[bytes, bytes]:
    """A shard of ``vectors`` (rows keyed by ``keys``) made by the model of identity
    ``model``, and its index, as file contents."""
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
    schema = table.schema.with_metadata({"format": FORMAT, "unit": unit, "model": model})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, schema) as writer:
        writer.write_batch(table.combine_chunks().to_batches(max_chunksize=max(rows, 1))[0])
    shard = sink.getvalue()
    values = ipc.open_file(pa.BufferReader(shard)).get_batch(0).column("vector").values
    offset = values.buffers()[1].address - shard.address + values.offset * 4
    meta = {"format": FORMAT, "rows": str(rows), "dim": str(dim), "offset": str(offset)}
    meta |= {"size": str(shard.size), "unit": unit, "model": model}
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


def verify_rows(keys: np.ndarray, vectors: np.ndarray, checks: np.ndarray, unit: bool) -> None:
    """Raise ``Damaged`` unless each row matches its check and its vector is finite and, for
    ``unit`` rows, of unit length."""
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


def decode_index(data: bytes, model: str) -> ShardIndex:
    """The keys and layout of a shard, from its ``.idx`` contents; the index must record
    ``model``'s identity."""
    try:
        table = ipc.open_file(pa.BufferReader(data)).read_all()
        meta = _metadata(table.schema, "index")
        keys, rows = _keys(table["hash"]), int(meta["rows"])
        checks = table["check"].combine_chunks().to_numpy(zero_copy_only=False)
        dim, offset, size = int(meta["dim"]), int(meta["offset"]), int(meta["size"])
        index = ShardIndex(keys, dim, offset, checks, size, meta["unit"] == "1")
    except (pa.ArrowException, ValueError, KeyError, UnicodeDecodeError) as exc:
        raise Damaged(f"unreadable index ({_first_line(exc)})") from None
    _check_model(meta, model)
    if len(keys) != rows or len(index.checks) != rows:
        raise Damaged(f"an index of {len(keys)} keys for {rows} rows")
    return index


def decode_shard(data: bytes | pa.Buffer, model: str) -> tuple[np.ndarray, np.ndarray]:
    """Every key (``S16``) and vector (float32 rows) of a shard made by ``model`` (its
    identity), verified."""
    try:
        table = ipc.open_file(pa.BufferReader(data)).read_all()
        meta = _metadata(table.schema, "shard")
        keys = _keys(table["hash"])
        vectors = table["vector"].combine_chunks()
        checks = table["check"].combine_chunks().to_numpy(zero_copy_only=False)
        if len(vectors) == 0:
            matrix = np.zeros((0, 0), np.float32)
        else:
            flat = vectors.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
            matrix = flat.reshape(len(vectors), -1)
    except (pa.ArrowException, ValueError, KeyError, UnicodeDecodeError) as exc:
        raise Damaged(f"unreadable shard ({_first_line(exc)})") from None
    _check_model(meta, model)
    if len(matrix):
        verify_rows(keys, matrix, checks, meta.get("unit", "1") == "1")
    return keys, matrix


def _metadata(schema: pa.Schema, what: str) -> dict[str, str]:
    """A file's metadata; ``Damaged`` unless it is of this format."""
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    if meta.get("format") != FORMAT:
        found = meta.get("format", "no format")
        raise Damaged(f"not an embeddings {what} of {FORMAT} ({found}: not read)")
    return meta


def _check_model(meta: dict[str, str], model: str) -> None:
    if meta.get("model") != model:
        raise Foreign(f"made by {meta.get('model')}, not {model}")


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
    if size != layout.size:
        raise Damaged(f"the shard has {size} bytes, its index says {layout.size}")


def verify_taken(layout: ShardIndex, rows: np.ndarray, vectors: np.ndarray) -> None:
    """Raise ``Damaged`` unless rows ``rows`` of the shard, read as ``vectors``, verify."""
    verify_rows(layout.keys[rows], vectors, layout.checks[rows], layout.unit)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _keys(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros(0, KEY)
    data = array.buffers()[1]
    return np.frombuffer(data, KEY, count=len(array), offset=array.offset * 16).copy()
