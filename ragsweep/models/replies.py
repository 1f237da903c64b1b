"""A persistent cache of model replies, so a rerun (or another configuration that asks the
same thing) makes no call.

One SQLite file, by default ``~/.cache/ragsweep/replies.sqlite`` (``RAGSWEEP_CACHE_DIR``
moves it). A key is any JSON-able value, stored as the SHA-256 of its canonical JSON; the
value is a JSON object. SQLite's write-ahead log and a busy timeout let the pipeline's
parallel steps share the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    """``RAGSWEEP_CACHE_DIR``, else ``$XDG_CACHE_HOME/ragsweep``, else ``~/.cache/ragsweep``."""
    if os.environ.get("RAGSWEEP_CACHE_DIR"):
        return Path(os.environ["RAGSWEEP_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ragsweep"


def digest(key: Any) -> str:
    """SHA-256 of the key's canonical JSON form."""
    canonical = json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class ReplyCache:
    """Values by key in one SQLite file; counts its hits and misses."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_dir() / "replies.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # used by one thread at a time: the caller's, or the one ``llm.run_coroutine`` runs
        # requests in while the caller waits
        self.db = sqlite3.connect(
            self.path, timeout=60, isolation_level=None, check_same_thread=False
        )
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT)")
        self.hits = self.misses = 0

    def get(self, key: Any) -> dict | None:
        row = self.db.execute("SELECT value FROM replies WHERE key = ?", (digest(key),)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: Any, value: dict) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO replies (key, value) VALUES (?, ?)",
            (digest(key), json.dumps(value, ensure_ascii=False)),
        )

    def close(self) -> None:
        self.db.close()
