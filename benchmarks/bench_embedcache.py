"""Fetching 100 vectors from an embedding cache of 50,000: before the shard index, and after;
then the cost of verifying what is read (the row checks): before them, and after.

    python benchmarks/bench_embedcache.py           # both
    python benchmarks/bench_embedcache.py checks    # the checks only

"Before" is ``ragsweep/embeddings/cache.py`` as it was at commit ``BEFORE`` (loaded from git
history): a lookup reads every shard of the model whole. "After" is the current module: it
reads the shards' indexes, then only the 100 rows (memory-mapped pages on a folder, byte
ranges on S3). Both caches hold the same 50,000 unit vectors of 384 numbers (the size of
all-MiniLM-L6-v2's), in N shards, on a folder and on S3 (a moto server on loopback); no
model runs (every text asked for is cached). Then the "after" cache is compacted (shards
under 8 MB merged into shards of up to 64 MB) and measured again. Bytes are what the lookup
read from the store: the whole shards before; the indexes and rows after (``bytes_read``).
Each figure is the fastest of three fresh caches. The result replaces the section between
the markers in ``benchmarks/README.md``.

The checks: the embeddings package at commit ``UNCHECKED`` (indexed shards, no row checks:
nothing read is verified) against the current one (a CRC-32 per row, finiteness and unit
length verified on every read), the same 50,000 vectors in 10 shards, looking up 100 and
10,000 of them (folder) and 100 (S3), and decoding one whole shard of 5,000 rows as
compaction does. The result replaces the ``embedcache-checks`` section.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
from history import git_show, module_at
from readme import write_section

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsweep.embeddings.cache import EmbeddingCache  # noqa: E402
from ragsweep.embeddings.shards import text_key  # noqa: E402

BEFORE = "4028de6"  # the last commit before the shard index
UNCHECKED = "5164cda"  # the last commit before the row checks
MODEL = "all-MiniLM-L6-v2"
VECTORS, DIM, ASKED, REPEATS = 50_000, 384, 100, 3
SHARD_COUNTS = (10, 50)


def old_module() -> ModuleType:
    """The embedding cache as it was before the index, from git history (then a flat
    module; its imports follow the modules' moves since)."""
    return module_at(
        BEFORE,
        "ragsweep/embedcache.py",
        "embedcache_before",
        {
            "from ragsweep import embedding": "from ragsweep.models import embedding",
            "from ragsweep.sources import": "from ragsweep.documents.sources import",
        },
    )


def unchecked_package() -> ModuleType:
    """``ragsweep.embeddings`` as it was before the row checks, as ``embeddings_unchecked``."""
    root = Path(tempfile.mkdtemp())
    package = root / "embeddings_unchecked"
    package.mkdir()
    for name in ("__init__", "cache", "files", "shards"):
        source = git_show(UNCHECKED, f"ragsweep/embeddings/{name}.py")
        source = source.replace("ragsweep.embeddings.", "embeddings_unchecked.")
        (package / f"{name}.py").write_text(source)
    sys.path.insert(0, str(root))
    importlib.import_module("embeddings_unchecked.cache")  # and the modules it imports
    return importlib.import_module("embeddings_unchecked")


def fill(before, location: str, shards: int, texts: list[str], vectors: np.ndarray) -> None:
    """The same vectors in ``shards`` shards: the old format under ``location``/before, the
    indexed one under ``location``/after."""
    old = before.EmbeddingCache(f"{location}/before")
    new = EmbeddingCache(f"{location}/after")
    for part in np.array_split(np.arange(len(texts)), shards):
        hashes = [hashlib.sha256(texts[i].encode()).hexdigest() for i in part]
        old._write(MODEL, hashes, vectors[part])
        new._write(MODEL, [text_key(texts[i]) for i in part], vectors[part])


def folder_of(cache: EmbeddingCache) -> str:
    return cache.files.folders()[0]


def store_bytes(location: str) -> int:
    files = EmbeddingCache(location).files
    return sum(e.size for f in files.folders() for e in files.list(f) if "/used/" not in e.name)


def measure(make, asked: list[str], expected: np.ndarray) -> tuple[float, int | None]:
    """The fastest of ``REPEATS`` lookups of ``asked`` by fresh caches, and the bytes read."""
    best, read = float("inf"), None
    for _ in range(REPEATS):
        cache = make()
        start = time.perf_counter()
        got = cache.embed(MODEL, asked)
        best = min(best, time.perf_counter() - start)
        assert cache.encoded == 0 and np.array_equal(got, expected)
        read = getattr(cache, "bytes_read", None)
    return best, read


def s3_location() -> tuple[str, object]:
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    credentials = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret"}
    os.environ.update(credentials, AWS_S3_ENDPOINT=endpoint, AWS_DEFAULT_REGION="us-east-1")
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench-secret",
    )
    client.create_bucket(Bucket="bench-embeddings")
    return "s3://bench-embeddings/cache", server


def range_costs(root: str) -> dict[int, float]:
    """Seconds one 1,536-byte range GET takes on the moto server, by the object's size."""
    files = EmbeddingCache(root).files
    costs = {}
    for size in (1_500_000, 40_000_000):
        files.write(f"probe/{size}", os.urandom(size))
        start = time.perf_counter()
        for _ in range(20):
            files.read_ranges(f"probe/{size}", [(4096, 4096 + DIM * 4)])
        costs[size] = (time.perf_counter() - start) / 20
    return costs


def main() -> None:
    logging.disable(logging.INFO)
    rng = np.random.default_rng(7)
    texts = [f"chunk {i} of the benchmark corpus" for i in range(VECTORS)]
    vectors = rng.standard_normal((VECTORS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    if sys.argv[1:] == ["checks"]:
        s3_root, server = s3_location()
        record_checks(check_costs(texts, vectors, rng, s3_root))
        server.stop()
        return
    before = old_module()
    picked = rng.choice(VECTORS, ASKED, replace=False)
    asked, expected = [texts[i] for i in picked], vectors[picked]
    s3_root, server = s3_location()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for store, root in (("folder", folder), ("S3 (moto)", s3_root)):
            for shards in SHARD_COUNTS:
                location = f"{root}/{shards}"
                fill(before, location, shards, texts, vectors)
                old_time, _ = measure(
                    lambda loc=location: before.EmbeddingCache(f"{loc}/before"), asked, expected
                )
                new_time, new_read = measure(
                    lambda loc=location: EmbeddingCache(f"{loc}/after"), asked, expected
                )
                old_read = store_bytes(f"{location}/before")  # every shard, read whole
                merged = EmbeddingCache(f"{location}/after")
                merged.compact(MODEL)
                left = sum(e.name.endswith(".arrow") for e in merged.files.list(folder_of(merged)))
                compact_time, compact_read = measure(
                    lambda loc=location: EmbeddingCache(f"{loc}/after"), asked, expected
                )
                rows.append(
                    (store, shards, old_time, old_read, new_time, new_read)
                    + (left, compact_time, compact_read)
                )
                print(rows[-1], flush=True)
    costs = range_costs(s3_root)
    record(rows, costs)
    record_checks(check_costs(texts, vectors, rng, s3_root))
    server.stop()


def check_costs(texts: list[str], vectors: np.ndarray, rng, s3_root: str) -> list[tuple]:
    """(what, unchecked seconds, checked seconds) of lookups and a whole-shard decode."""
    from ragsweep.embeddings import shards

    unchecked = unchecked_package()
    keys = [text_key(t) for t in texts]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for store, root, sizes in (
            ("folder", folder, (100, 10_000)),
            ("S3 (moto)", s3_root, (100,)),
        ):
            location = f"{root}/checks"
            old = unchecked.cache.EmbeddingCache(f"{location}/unchecked")
            new = EmbeddingCache(f"{location}/checked")
            for part in np.array_split(np.arange(len(texts)), 10):
                old._write(MODEL, [keys[i] for i in part], vectors[part])
                new._write(MODEL, [keys[i] for i in part], vectors[part])
            for size in sizes:
                picked = rng.choice(len(texts), size, replace=False)
                asked, expected = [texts[i] for i in picked], vectors[picked]
                times = [
                    measure(lambda c=cache, loc=f"{location}/{name}": c(loc), asked, expected)[0]
                    for cache, name in (
                        (unchecked.cache.EmbeddingCache, "unchecked"),
                        (EmbeddingCache, "checked"),
                    )
                ]
                rows.append((f"{store}: look up {size:,}", *times))
                print(rows[-1], flush=True)
    part = np.arange(5000)
    made_by = {unchecked.shards: (), shards: ("bench",)}  # the checked files record a model
    data = [
        module.encode(
            np.array([keys[i] for i in part], shards.KEY), vectors[part], *made_by[module]
        )[0]
        for module in (unchecked.shards, shards)
    ]
    times = []
    for module, shard in zip((unchecked.shards, shards), data, strict=True):
        best = float("inf")
        for _ in range(REPEATS):
            start = time.perf_counter()
            module.decode_shard(shard, *made_by[module])
            best = min(best, time.perf_counter() - start)
        times.append(best)
    rows.append(("decode a whole shard of 5,000 (compaction)", *times))
    print(rows[-1], flush=True)
    return rows


def record_checks(rows: list[tuple]) -> None:
    lines = [
        f"Verifying what is read: {VECTORS:,} vectors ({DIM} float32 each) in 10 shards, "
        f"fastest of {REPEATS} fresh caches, {time.strftime('%Y-%m-%d')}, the 2-core VM. "
        f"Unchecked: the package at {UNCHECKED}; checked: a CRC-32 per row, finiteness and "
        "unit length verified on every read.",
        "",
        "| read | unchecked | checked | checked / unchecked |",
        "| --- | --- | --- | --- |",
    ]
    for what, old, new in rows:
        lines.append(f"| {what} | {old:.4f} s | {new:.4f} s | {new / old:.2f} |")
    write_section("embedcache-checks", "\n".join(lines))


def record(rows: list[tuple], costs: dict[int, float]) -> None:
    mb = 1e6
    lines = [
        f"Fetching {ASKED} cached vectors from a cache of {VECTORS:,} ({DIM} float32 each), "
        f"fastest of {REPEATS} fresh caches, {time.strftime('%Y-%m-%d')}, the 2-core VM:",
        "",
        "| store | shards | before: time | before: read | after: time | after: read "
        "| after compaction: shards, time, read |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for store, shards, old_time, old_read, new_time, new_read, *compacted in rows:
        left, compact_time, compact_read = compacted
        lines.append(
            f"| {store} | {shards} | {old_time:.3f} s | {old_read / mb:.1f} MB | "
            f"{new_time:.3f} s | {new_read / mb:.3f} MB | "
            f"{left}, {compact_time:.3f} s, {compact_read / mb:.3f} MB |"
        )
    lines += [
        "",
        f"After, the bytes read are the shards' indexes ({VECTORS:,} x 16-byte hashes and "
        f"4-byte checks, {VECTORS * 20 / mb:.1f} MB, read once per process) and the {ASKED} rows "
        f"({ASKED * DIM * 4 / 1e3:.0f} kB). On S3 they take one request per row (rows at most "
        f"4 apart share one): moto answers one 1,536-byte range GET in "
        + ", ".join(
            f"{t * 1e3:.0f} ms from a {size / 1e6:g} MB object" for size, t in costs.items()
        )
        + " (its time grows with the object), so on moto the fewer, whole reads of before "
        "are quicker. Against a remote S3, where time follows the bytes moved, 80 MB against "
        "under 1 MB is the figure that counts (not measured here).",
    ]
    write_section("embedcache", "\n".join(lines))


if __name__ == "__main__":
    main()
