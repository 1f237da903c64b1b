"""The embedding cache under faults: damaged shards and indexes, old shards, orphaned partial
files, a full disk, a kill mid-embedding. Vectors come from the scripted OpenAI-compatible
endpoint (deterministic, 64 numbers each), on a folder and on S3 (a moto server)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from ragsweep.embeddings.cache import QUARANTINE, EmbeddingCache
from ragsweep.embeddings.files import LocalFiles, remove_orphans
from ragsweep.embeddings.shards import decode_index, key_list, text_key

MODEL = "openai:embedder"
ROOT = Path(__file__).resolve().parents[1]
TEXT = {"capture_output": True, "text": True, "check": True}


def texts(first: int, count: int) -> list[str]:
    return [f"chunk {i} says word{i} and term{i * 7}" for i in range(first, first + count)]


def folder() -> str:
    """The model's folder in a cache (named by its identity: the endpoint's URL, set by the
    ``endpoint`` fixture)."""
    return EmbeddingCache().folder(MODEL)


def shard_names(location: str) -> list[str]:
    files = EmbeddingCache(location).files
    return [e.name for e in files.list(folder()) if e.name.endswith(".arrow")]


def quarantined(location: str) -> list[str]:
    files = EmbeddingCache(location).files
    return sorted(e.name.rsplit("/", 1)[1] for e in files.list(f"{folder()}/{QUARANTINE}"))


def random_vectors(data: bytes, offset: int, length: int) -> bytes:
    """The issue's damage: the matrix overwritten with random float32, same file size."""
    noise = np.random.default_rng(3).standard_normal(length // 4).astype(np.float32)
    return data[:offset] + noise.tobytes() + data[offset + length :]


def one_bit(data: bytes, offset: int, length: int) -> bytes:
    """The lowest bit of the first number flipped: its length stays 1 to 7 digits, only the
    checksum tells."""
    return data[:offset] + bytes([data[offset] ^ 1]) + data[offset + 1 :]


DAMAGES = {
    "random float32 over the vectors": ("arrow", random_vectors),
    "one flipped bit of a vector": ("arrow", one_bit),
    "garbage bytes of the shard's size": ("arrow", lambda data, *_: os.urandom(len(data))),
    "a truncated shard": ("arrow", lambda data, *_: data[: len(data) // 2]),
    "a truncated index": ("idx", lambda data, *_: data[: len(data) // 2]),
    "garbage bytes of the index's size": ("idx", lambda data, *_: os.urandom(len(data))),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_shard_or_index_is_moved_aside_and_its_vectors_computed_again(
    endpoint, location, damage, caplog
):
    asked = texts(0, 80)
    EmbeddingCache(location, flush=40).embed(MODEL, asked)  # two shards of 40
    cold = EmbeddingCache().embed(MODEL, asked)
    files = EmbeddingCache(location).files
    shard = shard_names(location)[0]
    index = shard.removesuffix(".arrow") + ".idx"
    layout = decode_index(files.read(index), EmbeddingCache().identity(MODEL))
    suffix, damaging = DAMAGES[damage]
    victim = shard if suffix == "arrow" else index
    files.write(victim, damaging(files.read(victim), layout.offset, 40 * layout.row_bytes))

    rerun = EmbeddingCache(location)
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        vectors = rerun.embed(MODEL, asked)
    np.testing.assert_array_equal(vectors, cold)
    assert rerun.encoded == 40  # the damaged shard's texts, no more
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert f"{victim} is damaged" in warning and f"{QUARANTINE}/" in warning, warning
    names = [shard.rsplit("/", 1)[1], index.rsplit("/", 1)[1]]
    assert quarantined(location) == sorted(names)  # moved aside, not deleted
    again = EmbeddingCache(location)
    np.testing.assert_array_equal(again.embed(MODEL, asked), cold)
    assert again.encoded == 0


def second_format(keys: list[bytes], vectors: np.ndarray) -> tuple[bytes, bytes]:
    """A shard and its index as ragsweep wrote them before the row checks (format 2)."""
    rows, dim = vectors.shape
    table = pa.table(
        {
            "hash": pa.array(keys, pa.binary(16)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
        }
    )
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema.with_metadata({"format": "ragsweep-embeddings/2"})) as w:
        w.write_batch(table.combine_chunks().to_batches(max_chunksize=rows)[0])
    shard = sink.getvalue()
    values = ipc.open_file(pa.BufferReader(shard)).get_batch(0).column("vector").values
    offset = values.buffers()[1].address - shard.address + values.offset * 4
    meta = {"format": "ragsweep-embeddings/2", "rows": str(rows), "dim": str(dim)}
    index = pa.table({"hash": table["hash"]}).replace_schema_metadata(
        meta | {"offset": str(offset)}
    )
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, index.schema) as w:
        w.write_table(index)
    return shard.to_pybytes(), sink.getvalue().to_pybytes()


def test_shards_of_earlier_formats_are_set_aside_not_read(endpoint, location, caplog):
    batch = texts(0, 30)
    cold = EmbeddingCache().embed(MODEL, batch)
    files = EmbeddingCache(location).files
    shard, index = second_format([text_key(t) for t in batch], cold)
    files.write(f"{folder()}/old.arrow", shard)
    files.write(f"{folder()}/old.idx", index)

    reader = EmbeddingCache(location)
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        np.testing.assert_array_equal(reader.embed(MODEL, batch), cold)
    assert reader.encoded == 30 and quarantined(location) == ["old.arrow", "old.idx"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "old.idx is damaged" in warning and "ragsweep-embeddings/2" in warning, warning


def test_compaction_moves_a_damaged_shard_aside_and_merges_the_rest(endpoint, tmp_path, caplog):
    location = str(tmp_path / "embeddings")
    for part in range(3):
        EmbeddingCache(location).embed(MODEL, texts(part * 10, 10))
    [damaged, *_] = sorted(tmp_path.glob(f"embeddings/{folder()}/*.arrow"))
    damaged.write_bytes(os.urandom(damaged.stat().st_size))
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        assert EmbeddingCache(location).compact(MODEL) == 2
    assert [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert quarantined(location) == sorted([damaged.name, damaged.with_suffix(".idx").name])
    rerun = EmbeddingCache(location)
    rerun.embed(MODEL, texts(0, 30))
    assert rerun.encoded == 10 and len(shard_names(location)) == 2


def test_orphaned_partial_files_are_removed_after_the_grace_but_a_live_writers_kept(
    endpoint, tmp_path
):
    from ragsweep.embeddings import files as cache_files

    where = tmp_path / "embeddings" / folder()
    where.mkdir(parents=True)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    dead_pid = int(ended.stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    host = cache_files._HOST
    hour_ago = time.time() - cache_files.PARTIAL_GRACE - 60
    partials = {
        "orphan": f"a.arrow.{host}.{dead_pid}.{'1' * 32}.partial",
        "live writer's": f"b.arrow.{host}.{live.pid}.{'2' * 32}.partial",
        "young orphan": f"c.arrow.{host}.{dead_pid}.{'3' * 32}.partial",
        "another host's": f"d.arrow.elsewhere.{live.pid}.{'4' * 32}.partial",
        "an older ragsweep's": f"e.arrow.{'5' * 32}.partial",
    }
    for what, name in partials.items():
        (where / name).write_bytes(b"half a shard")
        if what != "young orphan":
            os.utime(where / name, (hour_ago, hour_ago))
    try:
        EmbeddingCache(tmp_path / "embeddings").save(MODEL, ["x"], np.ones((1, 4)) / 2)
        left = {p.name for p in where.glob("*.partial")}
        assert left == {partials["live writer's"], partials["young orphan"]}
        live.kill()
        live.wait()
        assert remove_orphans(where) == [where / partials["live writer's"]]
    finally:
        live.kill()


def test_another_users_live_writer_keeps_its_partial_file(tmp_path):
    """Two people on one host: a writer running as nobody leaves root's live partial file
    alone (it may not signal root's process, so it cannot tell it is dead) and removes a
    dead one's."""
    import tempfile

    from ragsweep.embeddings import files as cache_files

    if os.geteuid() != 0:
        pytest.skip("runs a second user's process: needs root")
    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    folder.chmod(0o777)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **TEXT)
    hour_ago = time.time() - cache_files.PARTIAL_GRACE - 60
    mine = f"a.arrow.{cache_files._HOST}.{live.pid}.{'1' * 32}.partial"
    orphan = f"b.arrow.{cache_files._HOST}.{int(ended.stdout)}.{'2' * 32}.partial"
    for name in (mine, orphan):
        (folder / name).write_bytes(b"half a shard")
        os.utime(folder / name, (hour_ago, hour_ago))
    script = (  # modules load before the process becomes nobody (who may not read them)
        "import os, sys\n"
        "from pathlib import Path\n"
        "from ragsweep.embeddings.files import remove_orphans\n"
        "os.setuid(65534)\n"
        "print(' '.join(p.name for p in remove_orphans(Path(sys.argv[1]))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        run = subprocess.run([sys.executable, "-c", script, str(folder)], env=env, **TEXT)
        assert run.stdout.split() == [orphan]
        assert sorted(p.name for p in folder.iterdir()) == [mine]
    finally:
        live.kill()
        live.wait()
        subprocess.run(["rm", "-rf", str(folder)], check=True)


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)])
    if result.returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here (the test needs root)")


@pytest.fixture
def small_disk(tmp_path):
    """A 256 kB tmpfs, unmounted after the test."""
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "256k")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_one_warning_naming_the_path_and_leaves_nothing_half_written(
    endpoint, small_disk
):
    script = (
        "import sys\n"
        "from ragsweep.embeddings.cache import EmbeddingCache\n"
        "texts = [f'chunk {i} says word{i} and term{i * 7}' for i in range(2000)]\n"
        f"cache = EmbeddingCache(sys.argv[1], flush=2000)\n"
        f"vectors = cache.embed({MODEL!r}, texts)\n"
        "print(vectors.shape, cache.encoded)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", script, str(small_disk)], env=env, **TEXT)
    assert run.stdout.strip() == "(2000, 64) 2000"  # 2000 x 256 bytes: more than the disk
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert f"cannot write {small_disk}/{folder()}/" in lines[0] and "No space left" in lines[0]
    assert [p.name for p in small_disk.rglob("*") if p.is_file()] == []


def test_a_disk_that_takes_the_shard_but_not_its_index_keeps_neither(endpoint, small_disk, caplog):
    from ragsweep.embeddings.shards import encode

    asked = texts(0, 500)  # a shard of 500 x 256 bytes, about 128 kB
    cold = EmbeddingCache().embed(MODEL, asked)
    made_by = EmbeddingCache().identity(MODEL)
    shard, _ = encode(np.array([text_key(t) for t in asked], "S16"), cold, made_by)
    (small_disk / "embeddings" / folder()).mkdir(parents=True)
    free = os.statvfs(small_disk)
    filler = free.f_bavail * free.f_frsize - -(-len(shard) // 4096) * 4096  # pages
    (small_disk / "filler").write_bytes(b"\0" * filler)
    cache = EmbeddingCache(small_disk / "embeddings", flush=500)
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        np.testing.assert_array_equal(cache.embed(MODEL, asked), cold)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert ".idx: No space left on device" in warning, warning
    assert [p.name for p in (small_disk / "embeddings").rglob("*") if p.is_file()] == []
    assert cache.embed(MODEL, ["one more"]).shape == (1, 64)  # used, not stored, no warning
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


def stored_keys(location: Path, model: str) -> set[bytes]:
    """The keys of every vector of ``model`` stored under ``location``."""
    from ragsweep.embeddings.shards import decode_shard

    files = LocalFiles(str(location))
    made_by = EmbeddingCache().identity(model)
    keys: set[bytes] = set()
    for entry in files.list(EmbeddingCache().folder(model)):
        if entry.name.endswith(".arrow"):
            keys.update(key_list(decode_shard(files.read(entry.name), made_by)[0]))
    return keys


def test_a_kill_mid_embedding_loses_at_most_one_flush_and_a_rerun_embeds_only_the_rest(
    tmp_path,
):
    """A real model (all-MiniLM-L6-v2) in a process killed with SIGKILL at about half: 256
    texts, a shard stored every 64 (one model batch), so four flushes as 1024 texts make by
    default."""
    local = "all-MiniLM-L6-v2"
    asked = [f"note {i}: the {'quick ' * (i % 7)}service {i} keeps data" for i in range(256)]
    location = tmp_path / "embeddings"
    script = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "from ragsweep.embeddings.cache import EmbeddingCache\n"
        f"asked = {asked!r}\n"
        f"EmbeddingCache(sys.argv[1], flush=64).embed({local!r}, asked)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    killed = subprocess.Popen(
        [sys.executable, "-c", script, str(location)], env=env, stderr=subprocess.PIPE, text=True
    )
    stored_when_killed = 0
    for line in killed.stderr:
        if line.startswith("embedded "):
            stored_when_killed = int(line.split()[1].split("/")[0])
            if stored_when_killed >= len(asked) // 2:
                killed.kill()
                break
    assert killed.wait() == -9, "the process ended before it was killed"
    written = stored_keys(location, local)
    assert stored_when_killed <= len(written) < len(asked)

    rerun = EmbeddingCache(location)
    vectors = rerun.embed(local, asked)
    assert rerun.encoded == len(asked) - len(written)  # only what was not yet written
    assert rerun.encoded <= len(asked) - stored_when_killed
    uninterrupted = EmbeddingCache().embed(local, asked)
    np.testing.assert_allclose(vectors, uninterrupted, rtol=0, atol=1e-6)
