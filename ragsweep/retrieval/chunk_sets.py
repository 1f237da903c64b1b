"""A chunk set as retrieval reads it: whole in memory (a table), or an Arrow IPC file read a
record batch at a time, so that a chunk set larger than a step's memory is searched all the
same.

A file's vectors come as blocks (``ChunkVectors.blocks``) that are read, searched and let
go; its texts batch by batch (``ChunkTexts.batches``); and the rows a search picked are read
alone (``take``). The file is read, not memory-mapped: pages touched through a map count in
the step's resident memory until the map is closed, so scanning a mapped file of every
vector would hold them all.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import check_kind

# rows of a record batch when a chunk set is written batch by batch: 16,384 vectors of 384
# float32 dimensions are 25 MB, the block exact search holds
BATCH_ROWS = 16_384


def matrix(embeddings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An embedding column (lists of float32) as a rows x dimensions matrix, no row objects."""
    if isinstance(embeddings, pa.ChunkedArray):
        embeddings = embeddings.combine_chunks()
    if not len(embeddings):
        return np.zeros((0, 0), np.float32)
    return embeddings.flatten().to_numpy().reshape(len(embeddings), -1)


class ChunkFile:
    """A chunk set's Arrow IPC file (kind ``chunks``): its record batches read one at a time,
    only the columns asked for."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            with ipc.open_file(pa.OSFile(self.path)) as reader:
                self.schema = reader.schema
                check_kind(self.path, self.schema, "chunks")
                at = self.schema.get_field_index("chunk_id")
                options = ipc.IpcReadOptions(included_fields=[at])
            with ipc.open_file(pa.OSFile(self.path), options=options) as reader:
                sizes = [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
        except (OSError, pa.ArrowInvalid) as exc:
            raise RagsweepError(f"{self.path}: not a readable Arrow artifact ({exc})") from None
        self.starts = np.r_[0, np.cumsum(sizes, dtype=np.int64)]  # each batch's first row

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def vectors(self) -> ChunkVectors:
        return ChunkVectors(self)

    @property
    def texts(self) -> ChunkTexts:
        return ChunkTexts(self)

    def batches(self, columns: list[str]) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Each record batch's first row and its ``columns``, read one batch at a time."""
        with self._reader(columns) as reader:
            for i in range(reader.num_record_batches):
                yield int(self.starts[i]), reader.get_batch(i)

    def take(self, ids: np.ndarray, columns: list[str]) -> pa.Table:
        """The rows ``ids`` (in that order, repeats allowed) of ``columns``, reading only the
        batches that hold them."""
        ids = np.asarray(ids, np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self)):
            raise IndexError(f"rows outside the {len(self)} chunks of {self.path}")
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        batch = np.searchsorted(self.starts, ordered, side="right") - 1
        parts = [pa.schema([self.schema.field(name) for name in columns]).empty_table()]
        with self._reader(columns) as reader:
            for b in np.unique(batch):
                rows = ordered[batch == b] - self.starts[b]
                parts.append(pa.Table.from_batches([reader.get_batch(int(b)).take(rows)]))
        table = pa.concat_tables(parts)
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return table.take(back)

    def _reader(self, columns: list[str]) -> ipc.RecordBatchFileReader:
        at = [self.schema.get_field_index(name) for name in columns]
        options = ipc.IpcReadOptions(included_fields=at)
        return ipc.open_file(pa.OSFile(self.path), options=options)


class TableChunks:
    """A chunk set held whole (a table of kind ``chunks``), with ``ChunkFile``'s reads."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.vectors = matrix(table.column("embedding"))
        self.texts = table.column("text").to_pylist()

    def __len__(self) -> int:
        return self.table.num_rows

    def take(self, ids: np.ndarray, columns: list[str]) -> pa.Table:
        return self.table.select(columns).take(pa.array(np.asarray(ids, np.int64)))


class ChunkVectors:
    """A chunk file's vectors, never held all at once: searched block by block (``blocks``),
    or the rows asked for (``vectors[ids]``). ``np.asarray`` of it reads them all, for a
    store that loads the whole chunk set."""

    def __init__(self, file: ChunkFile) -> None:
        self.file = file

    def __len__(self) -> int:
        return len(self.file)

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """Each record batch's first row and its vectors (float32, rows x dimensions)."""
        for start, batch in self.file.batches(["embedding"]):
            yield start, matrix(batch.column(0))

    def __getitem__(self, ids: Any) -> np.ndarray:
        rows = np.arange(len(self))[ids] if isinstance(ids, slice) else np.asarray(ids)
        return matrix(self.file.take(rows.ravel(), ["embedding"]).column(0))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate([block for _, block in self.blocks()] or [np.zeros((0, 0))])
        return whole if dtype is None else whole.astype(dtype, copy=False)


class ChunkTexts(Sequence[str]):
    """A chunk file's texts as a sequence, read a record batch at a time (the last one read
    kept): in order, or batch by batch (``batches``), or the rows asked for (``take``)."""

    def __init__(self, file: ChunkFile) -> None:
        self.file = file
        self._held: tuple[int, list[str]] = (-1, [])

    def __len__(self) -> int:
        return len(self.file)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        i = operator.index(i) + (len(self) if operator.index(i) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(f"chunk {i} of {len(self)}")
        b = int(np.searchsorted(self.file.starts, i, side="right") - 1)
        if self._held[0] != b:
            with self.file._reader(["text"]) as reader:
                self._held = (b, reader.get_batch(b).column(0).to_pylist())
        return self._held[1][i - int(self.file.starts[b])]

    def __iter__(self) -> Iterator[str]:
        for batch in self.batches():
            yield from batch

    def batches(self) -> Iterator[list[str]]:
        """The texts, a record batch's at a time."""
        for _, batch in self.file.batches(["text"]):
            yield batch.column(0).to_pylist()

    def take(self, ids: np.ndarray) -> list[str]:
        return self.file.take(ids, ["text"]).column(0).to_pylist()


def blocks_of(vectors: np.ndarray | ChunkVectors) -> Iterator[tuple[int, np.ndarray]]:
    """``vectors`` as (first row, block) pairs: a file's by record batch, an array whole."""
    if isinstance(vectors, ChunkVectors):
        yield from vectors.blocks()
    else:
        yield 0, vectors


def batches_of(texts: Sequence[str]) -> Iterator[Sequence[str]]:
    """``texts`` in batches: a file's by record batch, a list whole."""
    if isinstance(texts, ChunkTexts):
        yield from texts.batches()
    else:
        yield texts


def texts_of(texts: Sequence[str], ids: np.ndarray) -> dict[int, str]:
    """The texts of chunks ``ids`` by id: a file's read in one pass of its batches."""
    unique = np.unique(np.asarray(ids, np.int64))
    unique = unique[unique >= 0]
    found = texts.take(unique) if isinstance(texts, ChunkTexts) else [texts[i] for i in unique]
    return dict(zip(unique.tolist(), found, strict=True))
