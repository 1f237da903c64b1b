"""How the pipeline's loops divide the work.

The chunk configurations are dealt into *groups*, one fan-out branch each: when the loop's
parallelism is bounded (a laptop, or ``--parallelism N`` on a cluster) there are that many
groups, so each step process loads its embedding model once for several chunk sets instead
of once per set; unbounded, one configuration per group, one pod each. A group's chunk sets
travel in one folder artifact, one Arrow file per set, so a step holds one set at a time.

When the documents exceed ``shard_bytes``, each chunk set is also embedded in *shards*:
contiguous runs of documents of about equal size, one parallel step each, whose vectors the
chunk sets' own steps then read instead of embedding them again.

A group's retrieval can also be split into *question blocks* (``retrieval_items``): the
loop's items are then (group, block) pairs, each branch retrieving for a contiguous block of
the test set, so that a large chunk set's retrieval holds one block's rows at a time. Each
branch's ``chunk_embed`` rebuilds the group's chunk sets, so a split run embeds every chunk
set in the shard loop first (``shard_items(whole=True)``): the branches read those vectors
and embed only their own block's questions, and nothing is embedded twice.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.core.schemas import read_table, write_batches


def group_chunk_configs(configs: list[dict[str, Any]], groups: int) -> list[dict[str, Any]]:
    """The fan-out's items: ``configs`` dealt into ``groups`` groups of nearly equal size
    (0: one group per configuration), each ``{"group": n, "chunk_configs": [...]}``.
    Configurations of one embedding model are kept together, so a group loads few models."""
    if groups < 0:
        raise ValueError(f"groups must be 0 (one per configuration) or more, not {groups}")
    count = len(configs) if groups == 0 else min(groups, len(configs))
    ordered = sorted(configs, key=lambda c: c["embedding_model"])  # stable: plan order within
    size, extra = divmod(len(ordered), max(count, 1))
    items, start = [], 0
    for n in range(count):
        stop = start + size + (n < extra)
        items.append({"group": n, "chunk_configs": ordered[start:stop]})
        start = stop
    return items


def document_ranges(sizes: list[int], shard_bytes: int) -> list[tuple[int, int]]:
    """Contiguous (first, stop) row ranges of documents of ``sizes`` bytes, of about equal
    total size, as many as it takes for each to hold about ``shard_bytes``; one range, the
    whole, when they fit in one (or ``shard_bytes`` is 0: never shard)."""
    total = sum(sizes)
    if not shard_bytes or total <= shard_bytes or len(sizes) < 2:
        return [(0, len(sizes))]
    count = min(math.ceil(total / shard_bytes), len(sizes))
    ranges, first, seen = [], 0, 0
    for row, size in enumerate(sizes):
        seen += size
        cut = total * (len(ranges) + 1) / count
        rows_left, ranges_left = len(sizes) - row - 1, count - len(ranges) - 1
        if len(ranges) < count - 1 and (seen >= cut or rows_left == ranges_left):
            ranges.append((first, row + 1))
            first = row + 1
    ranges.append((first, len(sizes)))
    return ranges


# The pipeline's default embedding_shard_bytes: some 20,000 chunks of 256 tokens, about
# seven minutes of a 2-core CPU pod's embedding at ~48 chunks/s (docs/performance.md).
DEFAULT_SHARD_BYTES = 20_000_000
# `ragsweep run`'s default: never shard. kfp.local runs the shards one after another, each a
# process loading the model, so on one machine they only add time (the synthetic 10,000
# documents: 202.5 s sharded against 163.2 s, benchmarks/README.md); on a cluster they are pods.
LOCAL_SHARD_BYTES = 0

# The shard list when nothing is sharded. kfp.local (2.17) registers no outputs for a loop
# of no iterations, so a Collected of it fails: the loop runs once, embedding nothing.
NO_SHARD: dict[str, Any] = {"shard": 0, "shards": 0}


def is_shard(item: dict[str, Any]) -> bool:
    """Whether a shard item has documents to embed (``NO_SHARD`` has none)."""
    return bool(item.get("shards"))


def document_sizes(documents: pa.Table) -> list[int]:
    """Each document's text in bytes (0 for none)."""
    sizes = pc.binary_length(documents.column("text")).to_pylist() if documents.num_rows else []
    return [s or 0 for s in sizes]


def shard_items(
    chunk_configs: list[dict[str, Any]], documents: pa.Table, shard_bytes: int, whole: bool = False
) -> list[dict[str, Any]]:
    """The shard loop's items: every chunk configuration x document range when the
    documents' text exceeds ``shard_bytes`` (0: never), else none; with ``whole`` (a run
    whose retrieval is split by question blocks), at least one item per chunk configuration,
    its range every document. Each item:
    ``{"chunk_config": ..., "shard": n, "shards": count, "first": row, "stop": row}``;
    ``[NO_SHARD]`` when nothing is sharded."""
    if shard_bytes < 0:
        raise ValueError(f"shard bytes must be 0 (never shard) or more, not {shard_bytes}")
    ranges = document_ranges(document_sizes(documents), shard_bytes)
    if len(ranges) < 2 and not (whole and documents.num_rows):
        return [NO_SHARD]
    return [
        {"chunk_config": config, "shard": n, "shards": len(ranges), "first": a, "stop": b}
        for config in chunk_configs
        for n, (a, b) in enumerate(ranges)
    ]


def shard_documents(documents: pa.Table, item: dict[str, Any]) -> pa.Table:
    """The documents of one shard item."""
    first, stop = int(item["first"]), int(item["stop"])
    if not 0 <= first <= stop <= documents.num_rows:
        raise ValueError(f"shard rows {first}:{stop} outside the {documents.num_rows} documents")
    return documents.slice(first, stop - first)


def retrieval_items(
    groups: list[dict[str, Any]], blocks: int, questions: int
) -> list[dict[str, Any]]:
    """The retrieval loop's items: each of ``groups`` (``group_chunk_configs``) crossed with
    ``blocks`` blocks of the test set's ``questions`` (at most one block per question),
    each item the group's with ``"block": b, "blocks": count``; ``groups`` as they are when
    there is one block."""
    if blocks < 1:
        raise ValueError(f"question blocks must be 1 or more, not {blocks}")
    count = max(1, min(blocks, questions))
    if count == 1:
        return groups
    return [{**group, "block": b, "blocks": count} for group in groups for b in range(count)]


def block_range(questions: int, block: int, blocks: int) -> tuple[int, int]:
    """The (first, stop) rows of block ``block`` of ``blocks`` nearly equal contiguous blocks
    of ``questions`` rows."""
    if not 0 <= block < blocks:
        raise ValueError(f"question block {block} outside the {blocks} blocks")
    size, extra = divmod(questions, blocks)
    first = block * size + min(block, extra)
    return first, first + size + (block < extra)


def question_block(testset: pa.Table, item: dict[str, Any]) -> pa.Table:
    """The questions of one retrieval item's block (the whole test set for an item of no
    block)."""
    block, blocks = int(item.get("block", 0)), int(item.get("blocks", 1))
    first, stop = block_range(testset.num_rows, block, blocks)
    return testset.slice(first, stop - first)


def block_run_id(run_id: str, item: dict[str, Any]) -> str:
    """The run id a retrieval item's step names its vector-store collections by
    (``store_search.collection_name``): with the block's number when retrieval is split,
    since blocks of one group may run at once and would otherwise load and drop one
    collection; as it is otherwise, and when empty (each step's collections then get a
    random id)."""
    if not run_id or "blocks" not in item:
        return run_id
    return f"{run_id}-block{int(item['block'])}"


def chunk_set_path(folder: str | Path, chunk_config_id: str) -> Path:
    """Where a group's chunks artifact (a folder) keeps one chunk set."""
    return Path(folder) / f"{chunk_config_id}.arrow"


def question_vectors(folder: str | Path) -> Path:
    """Where a group's chunks folder keeps its questions' vectors (embedding-cache layout)."""
    return Path(folder) / "questions"


def write_chunk_set(
    batches: Iterable[pa.RecordBatch], folder: str | Path, chunk_config_id: str
) -> Path:
    """Write one chunk set into a group's chunks folder, a record batch at a time as
    ``batches`` come (``steps.chunk_batches``): the set is never held whole."""
    return write_batches(batches, chunk_set_path(folder, chunk_config_id), "chunks")


def read_chunk_set(folder: str | Path, chunk_config_id: str) -> pa.Table:
    """One chunk set of a group's chunks folder, whole (memory-mapped); retrieval reads it
    a batch at a time instead (``chunk_sets.ChunkFile`` of its ``chunk_set_path``)."""
    return read_table(chunk_set_path(folder, chunk_config_id), "chunks")


def merge_folders(folders: list[str | Path], target: str | Path) -> int:
    """Copy the shards (and their indexes) of embedding-cache ``folders`` into one folder of
    the same layout, ``target``; the number of shards copied. Shard names are unique, so
    nothing is overwritten."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    for folder in map(Path, folders):
        for path in sorted(folder.glob("*/*")):
            if path.suffix in (".arrow", ".idx"):
                into = target / path.parent.name
                into.mkdir(exist_ok=True)
                shutil.copyfile(path, into / path.name)
                copied += path.suffix == ".arrow"
    return copied
