"""What a step pays to know the bundled model's identity, as the cache remembers more files
of other folders: one memo of every file ever hashed (before) against a memo per folder
(after).

    python benchmarks/bench_digest_memo.py

"Before" is ``ragsweep/models/identity.py`` at commit ``BEFORE`` (loaded from git history):
every step that needs a digest reads, and every new digest rewrites, the one memo of every
file the cache folder ever hashed. "After" is the current module: a step reads the memos of
the folders it asks about. Each cache first hashes OTHERS documents of 2 kB in folders of
1,000 (a corpus, as a benchmark or a user's nightly folders leave behind), then the bundled
model's files; measured is ``folder_digest`` of the model with every digest remembered,
fastest of ``REPEATS``, and one re-read of the documents' digests (as a run's reads step
does). The result replaces the section between the markers in ``benchmarks/README.md``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from history import module_at
from readme import write_section

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsweep.models import embedding, identity  # noqa: E402

BEFORE = "061a1dc"
OTHERS = (0, 10_000, 100_000)
PER_FOLDER = 1_000
REPEATS = 5


def corpus(root: Path, count: int) -> list[Path]:
    files = []
    for i in range(count):
        folder = root / f"f{i // PER_FOLDER:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"doc{i:06d}.md"
        path.write_text(f"document {i} " + "x" * 2000)
        files.append(path)
    return files


def fastest(call) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def measure(module, files: list[Path], model: Path) -> tuple[float, float, int]:
    """(model identity s, documents re-read s, bytes of memo) in a new cache folder."""
    os.environ["RAGSWEEP_CACHE_DIR"] = tempfile.mkdtemp(prefix="digest-memo-")
    if files:
        module.file_digests(files)
    module.folder_digest(model)
    model_s = fastest(lambda: module.folder_digest(model))
    start = time.perf_counter()
    if files:
        module.file_digests(files)
    docs_s = time.perf_counter() - start
    memo = Path(os.environ["RAGSWEEP_CACHE_DIR"]) / "identity"
    size = sum(p.stat().st_size for p in memo.rglob("*.json"))
    return model_s, docs_s, size


def main() -> None:
    before = module_at(BEFORE, "ragsweep/models/identity.py", "identity_before")
    model = embedding.model_path("all-MiniLM-L6-v2")
    root = Path(tempfile.mkdtemp(prefix="digest-corpus-"))
    files = corpus(root, max(OTHERS))
    rows = []
    for others in OTHERS:
        asked = files[:others]
        old = measure(before, asked, model)
        new = measure(identity, asked, model)
        rows.append((others, old, new))
        print(others, old, new, flush=True)
    lines = [
        f"The bundled model's identity (`folder_digest`, every digest remembered; fastest of "
        f"{REPEATS}) as the cache remembers other files, {date.today()}, the 2-core VM. "
        f"Before: one memo of every file (commit {BEFORE}); after: a memo per folder.",
        "",
        "| other files remembered | before: model identity | after | before / after "
        "| before: documents re-read | after | memo bytes before / after |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for others, (m0, d0, s0), (m1, d1, s1) in rows:
        docs = (f"{d0:.2f} s", f"{d1:.2f} s") if others else ("-", "-")
        lines.append(
            f"| {others:,} | {m0 * 1000:.1f} ms | {m1 * 1000:.1f} ms | {m0 / m1:.1f} "
            f"| {docs[0]} | {docs[1]} | {s0 / 1e6:.2f} MB / {s1 / 1e6:.2f} MB |"
        )
    write_section("digest-memo", "\n".join(lines))


if __name__ == "__main__":
    main()
