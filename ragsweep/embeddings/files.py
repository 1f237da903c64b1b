"""Where the embedding cache keeps its files: a folder, or an ``s3://bucket/prefix``.

Both offer the same few operations on names relative to the root (``model/abc.arrow``):
list a folder's files with their sizes and times, read a file or byte ranges of it, write
a file so that a reader sees all of it or nothing, move one aside, and delete one. A file
deleted under a reader raises ``Vanished``, so the reader can look again (compaction deletes
shards only after their rows are durable elsewhere).

In a folder, a file is written to ``<name>.<host>.<pid>.<random>.partial`` and renamed. A
write that fails (a full disk) removes its partial file; one left by a killed writer is
removed by a later writer of the same folder once it is ``PARTIAL_GRACE`` seconds old, unless
the process named in it still runs on this host (another user's, say).
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from ragsweep.documents.sources import s3_client, s3_errors, split_s3

if TYPE_CHECKING:  # botocore is imported where used: a folder cache never needs it
    from botocore.client import BaseClient

RANGE_THREADS = 8  # byte-range GETs in flight at once
PARTIAL_GRACE = 3600  # seconds a partial file of a process not known to be alive is kept


class Vanished(Exception):
    """A file listed a moment ago is gone (compacted or evicted by another process)."""


@dataclass(frozen=True)
class Entry:
    name: str  # relative to the root: "folder/file"
    size: int  # bytes
    mtime: float  # seconds since the epoch


class LocalFiles:
    """The cache in a folder; shards are memory-mapped, so only the rows taken are read."""

    def __init__(self, root: str) -> None:
        self.root = Path(root).expanduser()
        self.uri = str(self.root)
        self.swept: set[Path] = set()  # folders whose orphaned partial files were removed

    def folders(self) -> list[str]:
        return (
            sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []
        )

    def list(self, folder: str) -> list[Entry]:
        path = self.root / folder
        entries = []
        for item in path.iterdir() if path.is_dir() else []:
            if item.suffix == ".partial" or not item.is_file():
                continue
            try:
                stat = item.stat()
            except FileNotFoundError:  # deleted since listed
                continue
            entries.append(Entry(f"{folder}/{item.name}", stat.st_size, stat.st_mtime))
        return sorted(entries, key=lambda e: e.name)

    def read(self, name: str) -> bytes:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            raise Vanished(name) from None

    @contextmanager
    def mapped(self, name: str) -> Iterator[pa.Buffer]:
        """The file memory-mapped, as an Arrow buffer (pages are read when touched)."""
        try:
            source = pa.memory_map(str(self.root / name))
        except FileNotFoundError:
            raise Vanished(name) from None
        with source:
            yield source.read_buffer()

    def write(self, name: str, data: bytes) -> None:
        """Write ``name`` whole or not at all; an ``OSError`` (a full disk) leaves nothing."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent not in self.swept:
            self.swept.add(path.parent)
            remove_orphans(path.parent)
        partial = path.with_name(f"{path.name}.{_HOST}.{os.getpid()}.{uuid.uuid4().hex}.partial")
        try:
            with open(partial, "wb") as out:
                out.write(data)
            os.replace(partial, path)  # readers never see half a file
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def move(self, name: str, to: str) -> None:
        """Rename ``name`` to ``to`` (nothing when ``name`` is gone)."""
        target = self.root / to
        target.parent.mkdir(parents=True, exist_ok=True)
        with suppress(FileNotFoundError):  # moved or deleted by another process
            os.replace(self.root / name, target)

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)


_HOST = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:64] or "host"
_PARTIAL = re.compile(r"\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>\d+)\.[0-9a-f]{32}\.partial$")


def remove_orphans(folder: Path, grace: float = PARTIAL_GRACE) -> list[Path]:
    """Remove the partial files in ``folder`` left by writers that died: older than
    ``grace`` seconds and not written by a process alive on this host. Returns them."""
    removed = []
    now = time.time()
    for path in folder.glob("*.partial"):
        try:
            if now - path.stat().st_mtime < grace:
                continue
        except FileNotFoundError:  # renamed or removed meanwhile
            continue
        owner = _PARTIAL.search(path.name)
        if owner and owner["host"] == _HOST and _alive(int(owner["pid"])):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


class S3Files:
    """The cache under an S3 prefix; rows are read with byte-range GETs."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.bucket, prefix = split_s3(uri)
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = _client()

    def folders(self) -> list[str]:
        with s3_errors(self.uri, self.bucket):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix, Delimiter="/"
            )
            found = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
        return sorted(p[len(self.prefix) :].rstrip("/") for p in found)

    def list(self, folder: str) -> list[Entry]:
        start = f"{self.prefix}{folder}/"
        with s3_errors(self.uri, self.bucket):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start, Delimiter="/"
            )
            items = [item for page in pages for item in page.get("Contents", [])]
        return [
            Entry(i["Key"][len(self.prefix) :], i["Size"], i["LastModified"].timestamp())
            for i in sorted(items, key=lambda i: i["Key"])
        ]

    def read(self, name: str) -> bytes:
        return self._get(name)

    def read_ranges(self, name: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes ``[start, end)`` of each range, fetched in parallel."""
        if len(ranges) == 1:
            return [self._get(name, ranges[0])]
        with ThreadPoolExecutor(RANGE_THREADS) as pool:
            return list(pool.map(lambda r: self._get(name, r), ranges))

    def write(self, name: str, data: bytes) -> None:
        with s3_errors(self.uri, self.bucket):
            self.client.put_object(Bucket=self.bucket, Key=self.prefix + name, Body=data)

    def move(self, name: str, to: str) -> None:
        """Copy ``name`` to ``to``, then delete it (nothing when ``name`` is gone)."""
        from botocore.exceptions import ClientError

        source = {"Bucket": self.bucket, "Key": self.prefix + name}
        with s3_errors(self.uri, self.bucket):
            try:
                self.client.copy_object(Bucket=self.bucket, Key=self.prefix + to, CopySource=source)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return
                raise
            self.client.delete_object(**source)

    def delete(self, name: str) -> None:
        with s3_errors(self.uri, self.bucket):
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + name)

    def _get(self, name: str, byte_range: tuple[int, int] | None = None) -> bytes:
        from botocore.exceptions import ClientError

        extra = {"Range": f"bytes={byte_range[0]}-{byte_range[1] - 1}"} if byte_range else {}
        with s3_errors(self.uri, self.bucket):
            try:
                reply = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name, **extra)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    raise Vanished(name) from None
                raise
            return reply["Body"].read()


CONNECTION = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_S3_ENDPOINT")


def _client() -> BaseClient:
    """One S3 client per connection in a process (making one takes a good part of a second;
    a client is safe to share between threads)."""
    return _client_of(
        tuple(os.environ.get(name, "") for name in (*CONNECTION, "AWS_DEFAULT_REGION"))
    )


@lru_cache(maxsize=4)
def _client_of(connection: tuple[str, ...]) -> BaseClient:
    return s3_client()


def open_files(location: str) -> LocalFiles | S3Files:
    """The folder or S3 prefix ``location``."""
    return S3Files(location) if location.startswith("s3://") else LocalFiles(location)
