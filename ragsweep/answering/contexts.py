"""Retrieved contexts held as ids, not strings: every distinct passage text once, every
distinct context (passages in order) once, and each row's context as a number.

A retrievals table stores each chunk set's texts once (its ``passages`` are dictionary
indices); evaluation keeps them that way. Rows that retrieved the same passages (Top K
prefixes aside, many configurations agree) share one context, so they are answered and
scored once, a context string is built only for the answers artifact, by Arrow, and the
words of a passage are read once however many contexts hold it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.core.text import words

SEPARATOR = "\n\n"  # between the passages of a context, as the answer prompt joins them


def codes(column: pa.ChunkedArray | pa.Array, values: list[str]) -> np.ndarray:
    """Each element of the string ``column`` as its position in ``values``; -1 where it is
    not one of them."""
    found = pc.index_in(column, value_set=pa.array(values, pa.string()))
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def group_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Equal rows of the 2-D integer array ``keys``: (each row's group, each group's first
    row); groups are numbered in the order of the keys."""
    if len(keys) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), first.astype(np.int64)


def padded(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The lists ``values[offsets[i]:offsets[i + 1]]`` as rows of a matrix, padded with -1."""
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    matrix = np.full((len(lengths), width), -1, dtype=np.int64)
    row = np.repeat(np.arange(len(lengths)), lengths)
    matrix[row, np.arange(len(values)) - offsets[row]] = values
    return matrix


def flat_lists(column: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The elements of a list column, concatenated, and each row's offsets into them (a null
    list is empty)."""
    lists = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    return lists.flatten(), np.r_[0, np.cumsum(lengths)].astype(np.int64)


@dataclass
class Contexts:
    """Each row's retrieved context as ids: ``texts`` the distinct passage texts,
    ``members[c]`` the passage ids of distinct context ``c`` (best first, padded with -1),
    ``of_row[i]`` the context of row ``i``."""

    texts: pa.StringArray
    members: np.ndarray
    of_row: np.ndarray
    # read lazily, once per passage, and shared by every view (``take``)
    _strings: dict[int, str] = field(default_factory=dict, repr=False)
    _tokens: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def of_passages(cls, passages: pa.ChunkedArray) -> Contexts:
        """The contexts of a retrievals ``passages`` column (lists of strings, plain or
        dictionary-encoded, as many chunk sets as it has chunks)."""
        indices, dictionaries, offsets, start = [], [], [np.zeros(1, np.int64)], 0
        for chunk in passages.chunks:
            values, chunk_offsets = flat_lists(chunk)
            if not pa.types.is_dictionary(values.type):
                values = values.cast(pa.string()).dictionary_encode()
            indices.append(values.indices.to_numpy(zero_copy_only=False).astype(np.int64))
            dictionaries.append(values.dictionary.cast(pa.string()))
            offsets.append(chunk_offsets[1:] + start)
            start += len(values)
        texts = pc.unique(pa.chunked_array(dictionaries, pa.string()))
        ids = [
            pc.index_in(d, value_set=texts).to_numpy(zero_copy_only=False).astype(np.int64)[i]
            for d, i in zip(dictionaries, indices, strict=True)
        ]
        flat = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        matrix = padded(flat, np.concatenate(offsets))
        of_row, first = group_rows(matrix)
        return cls(texts, matrix[first], of_row)

    @classmethod
    def of_strings(cls, contexts: pa.ChunkedArray | pa.Array) -> Contexts:
        """The contexts of an answers ``context`` column: each distinct string one passage."""
        encoded = pc.dictionary_encode(pc.fill_null(contexts, ""))
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.unify_dictionaries().combine_chunks()
        texts = encoded.dictionary
        return cls(
            texts,
            np.arange(len(texts), dtype=np.int64).reshape(-1, 1),
            encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
        )

    def take(self, rows: np.ndarray) -> Contexts:
        """The contexts of ``rows`` only (the same ids: passages and words are shared)."""
        return Contexts(self.texts, self.members, self.of_row[rows], self._strings, self._tokens)

    def passages(self, context: int) -> tuple[str, ...]:
        """The passage texts of distinct context ``context``, best first."""
        return tuple(self._text(i) for i in self.members[context].tolist() if i >= 0)

    def _text(self, passage: int) -> str:
        if passage not in self._strings:
            self._strings[passage] = self.texts[passage].as_py()
        return self._strings[passage]

    def words(self, context: int) -> Counter:
        """The content tokens of a context with their counts: its passages' together, each
        passage tokenized once (a separator between passages makes no token)."""
        tokens = []
        for i in self.members[context].tolist():
            if i < 0:
                break
            if i not in self._tokens:
                self._tokens[i] = tuple(words(self._text(i)))
            tokens.append(self._tokens[i])
        return Counter(chain.from_iterable(tokens))

    def column(self, block: int = 16384) -> pa.ChunkedArray:
        """Each row's context as one string, its passages joined by a blank line; built
        ``block`` rows at a time, each distinct context of a block joined once."""
        return pa.chunked_array(
            [self._joined(self.of_row[i : i + block]) for i in range(0, len(self.of_row), block)],
            pa.string(),
        )

    def _joined(self, of_row: np.ndarray) -> pa.Array:
        used, inverse = np.unique(of_row, return_inverse=True)
        members = self.members[used]
        lengths = (members >= 0).sum(axis=1)
        flat = members[members >= 0]
        offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
        lists = pa.ListArray.from_arrays(offsets, self.texts.take(pa.array(flat)))
        return pc.binary_join(lists, SEPARATOR).take(pa.array(inverse.reshape(-1)))
