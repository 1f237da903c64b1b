"""A content-addressed store of embeddings: (model identity, text hash) -> vector.

Vectors are kept per model identity (``embedding.identity``): a local model is the digest of
its files' contents with the runtime that runs it, an endpoint model its URL (without
credentials) and model name. A model retrained in place, the same model run by PyTorch and
by ONNX Runtime (slightly different vectors), or one model name at two URLs are different
models, whose vectors never mix. Each model's folder is named by its name as the cache keeps
it (``embedding.cache_name``) and its identity's digest, and every shard and index records
the identity that made it: a file that records another one (copied from another model's
folder) is not read but moved aside like a damaged one, and its vectors computed again.

The text hashed is the text the model read: a prefix a model expects (``query: ``, an
instruction) is part of it, so prefixed and plain embeddings of one text are kept apart.

A nightly run over unchanged documents embeds nothing, and chunk sets that share chunk texts
share their embeddings. The store is a folder, or an ``s3://bucket/prefix`` in the cluster,
with one subfolder per model. Each write adds one immutable shard and its index
(``ragsweep.embeddings.shards``); a reader reads the indexes, then only the rows it needs, so a
step's read volume follows the texts it asks for, not the size of the cache. Nothing is
locked: writers never touch each other's files, compaction merges small shards into a new
one before it deletes them, and a reader that finds a shard gone looks again. With a size
cap, whole shards are evicted, least recently used first (each read or write leaves a small
use record under ``<model>/used/``).

The cache cannot lie: every shard and index is verified when read (``shards``), and one that
fails is moved aside to ``<model>/quarantine/`` with one warning naming it; its vectors are
computed again. New vectors are stored a shard every ``flush`` texts, so a process killed
mid-way loses at most the texts since the last shard. A store that cannot be written (a full
disk) gets one warning naming the file: the vectors are used, nothing half-written is kept,
and this cache writes no more.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

import numpy as np

from ragsweep.core import progress
from ragsweep.core.errors import RagsweepError
from ragsweep.embeddings.files import Entry, LocalFiles, S3Files, Vanished, open_files
from ragsweep.embeddings.shards import (
    KEY,
    Damaged,
    Foreign,
    ShardIndex,
    check_size,
    decode_index,
    decode_shard,
    encode,
    key_list,
    take_rows,
    text_key,
    verify_taken,
)
from ragsweep.models import embedding, identity

log = logging.getLogger("ragsweep")

COMPACT_AT = 8  # a write that leaves this many small shards of a model starts a compaction
SMALL_BYTES = 8 << 20  # shards below this size are merged by compaction
TARGET_BYTES = 64 << 20  # compaction writes shards of up to about this size
GRACE_SECONDS = 600  # a shard younger than this without its index may still be being written
FOLD_AT = 64  # more use records than this are folded into one
GAP_ROWS = 4  # on S3, rows this close are fetched in one byte range
THREADS = 8  # S3 requests a lookup makes at once
LOOKUPS = 5  # listings a lookup takes at most while the store changes under it
FLUSH_TEXTS = 256  # new vectors are stored a shard per this many texts (4 model batches)
QUARANTINE = "quarantine"  # the subfolder of a model's folder where unusable files go


class EmbeddingCache:
    """Embeds texts through the model only when their (model, text) is not stored yet.

    ``location`` is a folder or ``s3://bucket/prefix``; empty or None keeps vectors for the
    life of this object only. ``max_gb`` caps the store's size (GB of 10^9 bytes; 0: no cap):
    after a write, least recently used shards are deleted until it fits. ``encoded`` counts
    the texts the model actually embedded; ``vectors_read`` and ``bytes_read`` what lookups
    read from the store (``index_bytes_read`` of it from shard indexes), ``shards_read`` the
    shards they read rows from. ``tiers`` are folders of the same layout read first and
    never written (the vectors of the pipeline's shard steps); ``from_tiers`` counts the
    vectors found there. ``flush`` is how many new texts are embedded between two stored
    shards (a multiple of 256 gives the model the batches one call would).
    """

    def __init__(
        self,
        location: str | Path | None = None,
        max_gb: float = 0.0,
        tiers: list[str | Path] | None = None,
        flush: int = FLUSH_TEXTS,
    ) -> None:
        if max_gb < 0:
            raise ValueError(f"max_gb must be 0 (no cap) or more, not {max_gb}")
        if flush < 1:
            raise ValueError(f"flush must be 1 or more texts, not {flush}")
        self.files = open_files(str(location)) if location else None
        self.writable = True  # until a write fails (a full disk, a read-only folder)
        self.flush = flush
        self.tiers = [EmbeddingCache(tier) for tier in tiers or []]
        self.from_tiers = 0
        self.max_bytes = int(max_gb * 1e9)
        self.known: dict[str, dict[bytes, np.ndarray]] = {}  # model -> key -> vector
        self.identities: dict[str, str] = {}  # model -> its identity, found once per cache
        self.indexes: dict[str, _Index] = {}
        self.used: dict[str, set[str]] = {}  # model -> shards read or written, not yet recorded
        self.encoded = 0
        self.vectors_read = 0
        self.bytes_read = 0
        self.index_bytes_read = 0
        self.shards_read = 0  # shards lookups read rows from

    def embed(self, model: str, texts: list[str], prefix: str = "") -> np.ndarray:
        """Unit-length embeddings of ``texts`` (one row each), each read by the model after
        ``prefix``; from the store where possible."""
        texts = [prefix + text for text in texts] if prefix else texts
        keys = [text_key(text) for text in texts]
        known = self.known.setdefault(model, {})
        wanted = {key: text for key, text in zip(keys, texts, strict=True) if key not in known}
        for tier in self.tiers:
            if not wanted:
                break
            tier.known.setdefault(model, {})
            tier._fetch(model, list(wanted))
            found = {key: tier.known[model].pop(key) for key in wanted if key in tier.known[model]}
            known.update(found)
            self.from_tiers += len(found)
            wanted = {key: text for key, text in wanted.items() if key not in found}
        unindexed = False
        if wanted and self.files:
            unindexed = self._fetch(model, list(wanted))
        missing = {key: text for key, text in wanted.items() if key not in known}
        if missing:
            self._encode(model, missing)
        log.info(
            "embeddings: %d from the cache, %d new (store: %d vectors, %.1f MB read so far)",
            len(set(keys)) - len(missing),
            len(missing),
            self.vectors_read,
            self.bytes_read / 1e6,
        )
        if self.files and self.writable:
            self._record_use(model)
            if missing or unindexed:
                self.maintain(model)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([known[key] for key in keys])

    def _encode(self, model: str, missing: dict[bytes, str]) -> None:
        """Embed ``missing`` (key -> text) through the model and store a shard every
        ``flush`` texts. Texts go in order of length, as one ``embedding.encode`` call
        orders them, so the model sees the batches one call would."""
        order = sorted(missing, key=lambda key: len(missing[key]))
        progress.expect(progress.EMBEDDED, len(order))
        for start in range(0, len(order), self.flush):
            keys = order[start : start + self.flush]
            vectors = embedding.encode(model, [missing[key] for key in keys])
            self.encoded += len(keys)
            self.known[model].update(zip(keys, vectors, strict=True))
            self._write(model, keys, vectors)
            if len(order) > self.flush:
                log.info("embedded %d/%d texts", start + len(keys), len(order))

    def save(self, model: str, texts: list[str], vectors: np.ndarray, prefix: str = "") -> None:
        """Store ``vectors`` (one row per text, read by the model after ``prefix``) as one
        shard, each distinct text once."""
        keys = [text_key(prefix + text) for text in texts]
        first = list({key: row for row, key in enumerate(keys)}.values())
        if first and self.files:
            self._write(model, [keys[row] for row in first], np.asarray(vectors)[first])

    def maintain(self, model: str) -> None:
        """Compact the model's small shards when there are many, then apply the size cap."""
        self.compact(model, at_least=COMPACT_AT)
        if self.max_bytes:
            self.evict(self.max_bytes)

    def compact(
        self,
        model: str,
        small_bytes: int = SMALL_BYTES,
        at_least: int = 2,
        grace: float = GRACE_SECONDS,
    ) -> int:
        """Merge ``model``'s shards smaller than ``small_bytes`` (and every shard without an
        index older than ``grace`` seconds: its writer died) into shards of up to
        ``TARGET_BYTES``, when there are ``at_least`` of them.

        The merged shard and its index are written before the merged ones are deleted, so a
        reader always finds every vector; shards written meanwhile are left alone. Returns
        the number of shards merged away.
        """
        if not self.files or not self.writable:
            return 0
        folder = self.folder(model)
        entries = self.files.list(folder)
        shards, indexed = _shards(entries)
        now = time.time()
        for name in indexed - {s.name for s in shards}:  # its shard was deleted: an orphan
            self.files.delete(_index_name(name))
        old = [s for s in shards if s.name not in indexed and now - s.mtime > grace]
        small = [s for s in shards if s.name in indexed and s.size < small_bytes]
        if len(old) + len(small) < at_least and not old:
            return 0
        last_used = self._last_used(folder, shards)
        groups: list[list[Entry]] = [[]]
        for shard in sorted(old + small, key=lambda s: last_used[s.name]):
            if groups[-1] and sum(s.size for s in groups[-1]) + shard.size > TARGET_BYTES:
                groups.append([])
            groups[-1].append(shard)
        merged = 0
        for group in groups:
            if len(group) > 1 or (group and group[0].name not in indexed):
                merged += self._merge(model, group, max(last_used[s.name] for s in group))
        if merged:
            log.info("embedding cache: compacted %d shards of %s", merged, model)
        return merged

    def evict(self, max_bytes: int) -> int:
        """Delete whole shards, least recently used first, until the store's shards take at
        most ``max_bytes``; returns how many were deleted."""
        if not self.files:
            return 0
        sized: list[tuple[float, int, str]] = []
        for folder in self.files.folders():
            entries = self.files.list(folder)
            shards, _ = _shards(entries)
            if not shards:
                continue
            sizes = {e.name: e.size for e in entries}
            last_used = self._last_used(folder, shards)
            for s in shards:
                size = s.size + sizes.get(_index_name(s.name), 0)
                sized.append((last_used[s.name], size, s.name))
        total = sum(size for _, size, _ in sized)
        evicted = 0
        for _, size, name in sorted(sized):
            if total <= max_bytes:
                break
            self.files.delete(name)  # first the shard: readers list shards, not indexes
            self.files.delete(_index_name(name))
            total -= size
            evicted += 1
        if evicted:
            log.info("embedding cache: evicted %d shards (now %.3f GB)", evicted, total / 1e9)
        return evicted

    def identity(self, model: str) -> str:
        """``model``'s identity (``embedding.identity``), found once per cache."""
        if model not in self.identities:
            self.identities[model] = embedding.identity(model)
        return self.identities[model]

    def folder(self, model: str) -> str:
        """The folder of ``model``'s shards: readable, and unique by its identity's digest."""
        name = embedding.cache_name(model)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name.rstrip("/").rsplit("/", 1)[-1])
        return f"{slug}-{identity.short(self.identity(model))}"

    def _fetch(self, model: str, wanted: list[bytes]) -> bool:
        """Read the stored vectors of ``wanted`` into ``known``; True when a shard without
        an index had to be read whole.

        A listing taken while another process compacts may show neither the merged shards
        nor their replacement, and a shard listed may be gone when read: while keys are
        missing and the store changed, it looks again.
        """
        known = self.known[model]
        index = self.indexes.setdefault(model, _Index())
        whole, vanished = False, False
        for attempt in range(LOOKUPS):
            added, read_whole = self._refresh(model, index, set(wanted))
            whole |= read_whole
            pending = [key for key in wanted if key not in known]
            if not pending or (attempt and not added and not vanished):
                break
            found, names, rows = index.locate(pending)
            jobs = [(name, found & (names == name)) for name in sorted(set(names[found]))]
            reads = [(name, index.layout[name], rows[picked]) for name, picked in jobs]
            results = self._parallel(lambda read: self._read_rows(*read), reads)
            vanished = False
            for (name, picked), result in zip(jobs, results, strict=True):
                if isinstance(result, Damaged):
                    self._quarantine(name, result)
                if result is None or isinstance(result, Damaged):
                    # its rows are in a shard listed now, or were evicted, or are damaged:
                    # look again for other copies (the rest are computed again)
                    index.drop(name)
                    vanished = True
                    continue
                vectors, read = result
                self.vectors_read += len(vectors)
                self.bytes_read += read
                self.shards_read += 1
                known.update(zip(np.asarray(pending, dtype=object)[picked], vectors, strict=True))
                self.used.setdefault(model, set()).add(name)
        return whole

    def _refresh(self, model: str, index: _Index, wanted: set[bytes]) -> tuple[int, bool]:
        """Bring ``index`` up to the store's shards; shards without an index are read whole.
        Returns how many shards were new to it, and whether any was read whole."""
        entries = self.files.list(self.folder(model))
        made_by = self.identity(model)
        shards, indexed = _shards(entries)
        sizes = {s.name: s.size for s in shards}
        index.keep(set(sizes))
        new = [s.name for s in shards if s.name not in index.seen]
        files = [_index_name(n) if n in indexed else n for n in new]
        added, whole = 0, False
        for name, file, data in zip(new, files, self._parallel(self._read, files), strict=True):
            if data is None:
                continue
            self.bytes_read += len(data)
            index.seen.add(name)  # read once: a damaged file is not read again
            try:
                if name in indexed:
                    self.index_bytes_read += len(data)
                    layout = decode_index(data, made_by)
                    file = name  # what follows checks the shard against its index
                    check_size(layout, sizes[name])
                    index.add(name, layout)
                    added += 1
                    continue
                keys, vectors = decode_shard(data, made_by)
            except Damaged as exc:
                self._quarantine(file, exc)
                continue
            added += 1
            self.vectors_read += len(keys)
            self.shards_read += 1
            found = key_list(keys)
            self.known[model].update(zip(found, vectors, strict=True))
            if wanted.intersection(found):
                self.used.setdefault(model, set()).add(name)
            whole = True
        return added, whole

    def _parallel(self, function, items: list) -> list:
        """``function`` of each item: on S3 several requests at once, on a folder in turn."""
        if isinstance(self.files, S3Files) and len(items) > 1:
            with ThreadPoolExecutor(THREADS) as pool:
                return list(pool.map(function, items))
        return [function(item) for item in items]

    def _read(self, name: str) -> bytes | None:
        try:
            return self.files.read(name)
        except Vanished:
            return None

    def _read_rows(
        self, name: str, layout: ShardIndex, rows: np.ndarray
    ) -> tuple[np.ndarray, int] | Damaged | None:
        """Rows ``rows`` of shard ``name`` and the bytes read for them: only they are read
        (pages of a memory map, or byte ranges), and verified; None when the shard is gone,
        ``Damaged`` when they fail."""
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        try:
            if isinstance(self.files, LocalFiles):
                with self.files.mapped(name) as data:
                    vectors = take_rows(data, layout, ordered)
                read = len(rows) * layout.row_bytes
            else:
                vectors, read = self._ranges(name, layout, ordered)
            verify_taken(layout, ordered, vectors)
        except Vanished:
            return None
        except Damaged as exc:
            return exc
        out = np.empty_like(vectors)
        out[order] = vectors
        return out, read

    def _ranges(self, name: str, layout: ShardIndex, rows: np.ndarray) -> tuple[np.ndarray, int]:
        assert isinstance(self.files, S3Files)
        runs = np.split(rows, np.flatnonzero(np.diff(rows) > GAP_ROWS) + 1)
        start, size = layout.offset, layout.row_bytes
        spans = [(int(start + r[0] * size), int(start + (r[-1] + 1) * size)) for r in runs]
        parts = self.files.read_ranges(name, spans)
        if [len(p) for p in parts] != [end - begin for begin, end in spans]:
            raise Damaged("shorter than its index says")
        blocks = [
            np.frombuffer(part, np.float32).reshape(-1, layout.dim)[run - run[0]]
            for part, run in zip(parts, runs, strict=True)
        ]
        return np.concatenate(blocks), sum(len(p) for p in parts)

    def _write(self, model: str, keys: list[bytes], vectors: np.ndarray) -> None:
        if not self.files or not self.writable:
            return
        name = f"{self.folder(model)}/{uuid.uuid4().hex}.arrow"
        made_by = self.identity(model)
        shard, index = encode(np.array(keys, dtype=KEY), vectors, made_by)
        if self._store(name, shard, index):
            # indexed, not only seen: once ``known`` is cleared (build_chunk_sets holds one
            # chunk set's vectors at a time), a later lookup reads these rows back
            self.indexes.setdefault(model, _Index()).add(name, decode_index(index, made_by))
            self.used.setdefault(model, set()).add(name)

    def _store(self, name: str, shard: bytes, index: bytes) -> bool:
        """Write a shard, then its index (a reader finds the shard complete before its
        index). False when the store cannot take them: neither is kept."""
        for file, data in ((name, shard), (_index_name(name), index)):
            try:
                self.files.write(file, data)
            except OSError as exc:  # a full disk, a read-only folder (S3's errors are raised)
                with suppress(OSError):
                    self.files.delete(name)
                self._unwritable(file, exc)
                return False
        return True

    def _unwritable(self, name: str, exc: OSError) -> None:
        """One warning naming the file that could not be written; no more writes."""
        if self.writable:
            self.writable = False
            log.warning(
                "embedding cache: cannot write %s/%s: %s; vectors are used but no more are "
                "stored by this step",
                self.files.uri,
                name,
                exc.strerror or exc,
            )

    def _quarantine(self, name: str, problem: Damaged) -> None:
        """Move the shard ``name`` (or the shard of index ``name``) and its index aside to
        ``<model>/quarantine/``, with one warning naming the file that failed: damaged, or
        made by another model (``Foreign``)."""
        shard = name.removesuffix(".idx") + ".arrow" if name.endswith(".idx") else name
        aside = f"{shard.rsplit('/', 1)[0]}/{QUARANTINE}"
        try:
            for file in (shard, _index_name(shard)):  # the shard first: readers list shards
                self.files.move(file, f"{aside}/{file.rsplit('/', 1)[1]}")
            where = f"moved to {self.files.uri}/{aside}/"
        except (OSError, RagsweepError) as exc:
            where = f"not used, and not moved aside ({exc})"
        log.warning(
            "embedding cache: %s/%s %s (%s): %s; its vectors are computed again",
            self.files.uri,
            name,
            "is another model's" if isinstance(problem, Foreign) else "is damaged",
            problem,
            where,
        )

    def _record_use(self, model: str) -> None:
        names = self.used.pop(model, set())
        if names:
            now = time.time()
            try:
                self._write_use(self.folder(model), {name: now for name in names})
            except (OSError, RagsweepError) as exc:  # a read-only store still serves lookups
                log.warning("embedding cache: use not recorded (%s)", exc)

    def _write_use(self, folder: str, used: dict[str, float]) -> None:
        body = json.dumps({"used": used}, sort_keys=True).encode()
        name = f"{folder}/used/{uuid.uuid4().hex}.json"
        try:
            self.files.write(name, body)
        except OSError as exc:
            self._unwritable(name, exc)

    def _last_used(self, folder: str, shards: list[Entry]) -> dict[str, float]:
        """When each shard was last read or written (its use records, else its file time);
        folds the use records into one when there are many."""
        records = [e for e in self.files.list(f"{folder}/used") if e.name.endswith(".json")]
        times: dict[str, float] = {}
        read = []
        for record in records:
            try:
                used = json.loads(self.files.read(record.name))["used"]
            except (Vanished, ValueError, KeyError):
                continue
            read.append(record)
            for name, when in used.items():
                times[name] = max(times.get(name, 0.0), float(when))
        present = {s.name for s in shards}
        if len(read) > FOLD_AT:
            self._write_use(folder, {n: t for n, t in times.items() if n in present})
            for record in read:
                self.files.delete(record.name)
        return {s.name: times.get(s.name, s.mtime) for s in shards}

    def _merge(self, model: str, group: list[Entry], last_used: float) -> int:
        folder, made_by = self.folder(model), self.identity(model)
        keys, vectors, merged = [], [], []
        for shard in group:
            try:
                found, rows = decode_shard(self.files.read(shard.name), made_by)
            except Vanished:  # compacted or evicted by another process meanwhile
                continue
            except Damaged as exc:
                self._quarantine(shard.name, exc)
                continue
            if len(found):
                keys.append(found)
                vectors.append(rows)
            merged.append(shard)
        if len({v.shape[1] for v in vectors}) > 1:
            log.warning("embedding cache: %s holds vectors of several sizes; not compacted", folder)
            return 0
        if vectors:
            all_keys = np.concatenate(keys)
            _, first = np.unique(all_keys, return_index=True)
            first.sort()
            name = f"{folder}/{uuid.uuid4().hex}.arrow"
            merged_shard = encode(all_keys[first], np.concatenate(vectors)[first], made_by)
            if not self._store(name, *merged_shard):
                return 0
            self._write_use(folder, {name: last_used})
        for shard in merged:  # only now: every row is durable in the new shard
            self.files.delete(shard.name)
            self.files.delete(_index_name(shard.name))
        return len(merged)


class _Index:
    """Where each stored key of a model is: its shard's name and row, for sorted lookups."""

    def __init__(self) -> None:
        self.seen: set[str] = set()  # shards indexed (those this cache wrote too) or read whole
        self.layout: dict[str, ShardIndex] = {}
        self._sorted: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, name: str, shard: ShardIndex) -> None:
        self.seen.add(name)
        self.layout[name] = shard
        self._sorted = None

    def drop(self, name: str) -> None:
        if self.layout.pop(name, None) is not None:
            self._sorted = None

    def keep(self, names: set[str]) -> None:
        """Forget the shards not among ``names`` (compacted or evicted)."""
        for name in set(self.layout) - names:
            self.drop(name)

    def locate(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each key: whether it is stored, in which shard, at which row."""
        if self._sorted is None:
            names = list(self.layout)
            stored = [self.layout[n].keys for n in names]
            all_keys = np.concatenate(stored) if stored else np.zeros(0, KEY)
            order = np.argsort(all_keys, kind="stable")
            shard_names = np.repeat(np.asarray(names, dtype=object), [len(k) for k in stored])
            rows = np.concatenate([np.arange(len(k)) for k in stored]) if stored else order
            self._sorted = (all_keys[order], shard_names[order], rows[order])
        stored_keys, shard_names, rows = self._sorted
        query = np.array(keys, dtype=KEY)
        if not len(stored_keys):
            return (
                np.zeros(len(keys), bool),
                np.full(len(keys), None, object),
                np.zeros(len(keys), int),
            )
        at = np.minimum(np.searchsorted(stored_keys, query), len(stored_keys) - 1)
        return stored_keys[at] == query, shard_names[at], rows[at]


def _shards(entries: list[Entry]) -> tuple[list[Entry], set[str]]:
    """The shards among ``entries``, and the shard names that have an index (an index whose
    shard is gone, too)."""
    shards = [e for e in entries if e.name.endswith(".arrow")]
    return shards, {
        e.name.removesuffix(".idx") + ".arrow" for e in entries if e.name.endswith(".idx")
    }


def _index_name(shard: str) -> str:
    return shard.removesuffix(".arrow") + ".idx"
