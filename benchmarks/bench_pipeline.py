"""The pipeline users run against its limit: `ragsweep run` end to end (kfp.local, cold cache)
against one process that embeds each of the same chunk sets once, side by side.

    python benchmarks/bench_pipeline.py                      # 2 alternated rounds
    python benchmarks/bench_pipeline.py --before /tmp/base   # and a checkout of another commit
    python benchmarks/bench_pipeline.py --backends torch,onnx,onnx-int8   # (a) on each backend

(a) is the whole CLI, `ragsweep run --no-store` in a subprocess with an empty cache folder:
every step's process start-up, kfp.local's bookkeeping, chunking, embedding, retrieval,
answers, metrics, ranking and exports. (b), the reference, is one subprocess that reads
the documents, chunks them into the same chunk sets (``ragsweep.documents.chunking`` with the
model's tokenizer), embeds every chunk of each set and the questions once with the same
model on PyTorch, whatever the default backend (``ragsweep.models.embedding``), and derives
every configuration's ranking (Top K, similarity and MMR) from one similarity matrix per
chunk set, scoring context correctness. Both are timed
from outside, start-up included. Corpus and grid are those of bench_sweep.py: the Click
8.1.8 documentation and 48 configurations. Runs alternate (b), (a), [(before)], twice, and
the fastest of each is kept; the machine's load average is recorded beside each run. The
results replace the section between the markers in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_sweep import CLICK_TESTSET, GRID, click_corpus
from readme import write_section

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RAGSWEEP = Path(sys.executable).parent / "ragsweep"
RESULTS = HERE / ".data" / "pipeline_results.json"
MODEL = "all-MiniLM-L6-v2"
MMR_LAMBDA, MMR_FETCH_K = 0.5, 20  # ragsweep's defaults
STEP_LINE = re.compile(
    r"ragsweep: step (\w+): peak memory (\d+) MB, ([\d.]+) s(?: \(([\d.]+) s starting\))?"
)


# ---- (b) the reference, in its own process ---------------------------------------------------


def reference(docs: str, testset: str, grid: dict) -> dict:
    """Embed each chunk set once and rank every configuration from its similarity matrix."""
    import numpy as np

    from ragsweep.documents.chunking import chunk_documents
    from ragsweep.documents.sources import read_documents
    from ragsweep.documents.testsets import load_testset, resolve_testset
    from ragsweep.models import embedding
    from ragsweep.sweep.space import SearchSpace

    documents = read_documents(docs).table
    questions = resolve_testset(load_testset(testset), documents)
    wanted = [set(ids) for ids in questions["reference_doc_ids"].to_pylist()]
    tokenize = embedding.load_tokenizer(MODEL)
    model = f"{MODEL}@torch"  # the reference is the one-pass PyTorch time
    queries = embedding.encode(model, questions["question"].to_pylist())
    best, embedded, depth = 0.0, 0, max(grid["top_ks"])
    for c in SearchSpace.from_dict(grid).chunk_configs():  # the pipeline's chunk sets
        size, overlap = c["chunk_size"], c["chunk_overlap"]
        chunks = chunk_documents(documents, c["chunker"], size, overlap, tokenize)
        vectors = embedding.encode(model, chunks["text"].to_pylist())
        embedded += chunks.num_rows
        doc_ids = np.asarray(chunks["doc_id"].to_pylist())
        sims = queries @ vectors.T  # every Top K and search type ranks from this matrix
        by_similarity = np.argsort(-sims, axis=1, kind="stable")[:, :depth]
        by_mmr = np.stack([mmr(sims[q], vectors, depth) for q in range(len(sims))])
        for ranked in (by_similarity, by_mmr):
            for k in grid["top_ks"]:
                best = max(best, context_correctness(doc_ids[ranked[:, :k]], wanted))
    return {"embedded": embedded, "best_context_correctness": best}


def mmr(relevance, vectors, depth: int):
    """Maximal marginal relevance over the MMR_FETCH_K most similar chunks."""
    import numpy as np

    candidates = np.argsort(-relevance, kind="stable")[: max(MMR_FETCH_K, depth)]
    redundancy = vectors[candidates] @ vectors[candidates].T
    closest, picked = np.zeros(len(candidates)), []  # similarity to the nearest picked
    for rank in range(min(depth, len(candidates))):
        score = MMR_LAMBDA * relevance[candidates] - (1 - MMR_LAMBDA) * closest
        score[picked] = -np.inf
        pick = int(np.argmax(score))
        picked.append(pick)
        closest = np.maximum(closest, redundancy[pick]) if rank else redundancy[pick].copy()
    return candidates[picked]


def context_correctness(retrieved, wanted: list[set]) -> float:
    """Mean reciprocal rank of the first chunk from a reference document (questions with
    reference documents only)."""
    scores = []
    for row, references in zip(retrieved, wanted, strict=True):
        if references:
            ranks = [r for r, doc in enumerate(row, start=1) if doc in references]
            scores.append(1.0 / ranks[0] if ranks else 0.0)
    return sum(scores) / len(scores)


# ---- (a) the pipeline, through the CLI -------------------------------------------------------


def options(grid: dict) -> list[str]:
    flags = {"chunk_sizes": "--chunk-sizes", "chunk_overlaps": "--chunk-overlaps"}
    flags |= {"top_ks": "--top-k", "search_types": "--search-types"}
    return [a for key, flag in flags.items() for a in (flag, ",".join(map(str, grid[key])))]


def timed(
    command: list[str], env: dict[str, str], cwd: str
) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``command`` in ``cwd`` (an empty folder: kfp.local starts each step with
    ``python -m``, which puts the working folder first on the path); its wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return seconds, done


def run(kind: str, corpus: tuple[Path, Path], code: Path, backend: str = "") -> dict:
    """One measurement of ``kind`` (reference or pipeline) with ``code`` first on the path;
    the pipeline's model on ``backend`` (empty: the default)."""
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        if kind == "reference":
            command = [sys.executable, __file__, "--reference", *map(str, corpus), json.dumps(GRID)]
            seconds, done = timed(command, env, scratch)
            result = json.loads(done.stdout.strip().splitlines()[-1])
        else:
            command = [str(RAGSWEEP), "run", "--docs", str(corpus[0]), "--testset", str(corpus[1])]
            command += options(GRID) + ["--no-store", "--cache", f"{scratch}/cache"]
            if backend:
                command += ["--embedding-models", f"{MODEL}@{backend}"]
            seconds, done = timed(command + ["--output", f"{scratch}/runs"], env, scratch)
            [run_dir] = Path(scratch, "runs").iterdir()
            result = pipeline_figures(run_dir)
    result |= {"seconds": seconds, "load_before": load, "load_after": os.getloadavg()[0]}
    print(f"  {kind:10s} {seconds:7.1f} s  (load {load:.1f} -> {result['load_after']:.1f})")
    return result


def pipeline_figures(run_dir: Path) -> dict:
    """Per-step cost lines of the run's log, and its best context correctness."""
    import pyarrow.ipc as ipc

    steps: dict[str, list] = {}
    for line in (run_dir / "pipeline.log").read_text().splitlines():
        match = STEP_LINE.search(line)
        if match:
            name, mb, seconds, starting = match.groups()
            steps.setdefault(name, []).append(
                {"peak_mb": int(mb), "seconds": float(seconds), "starting": float(starting or 0)}
            )
    with ipc.open_file(run_dir / "leaderboard.arrow") as reader:
        board = reader.read_all()
    best = max(board["context_correctness"].to_pylist())
    configs = board.num_rows
    return {"steps": steps, "best_context_correctness": best, "configs": configs}


# ---- the benchmark ---------------------------------------------------------------------------


def benchmark(rounds: int, before: Path | None, testset: Path, backends: list[str]) -> dict:
    corpus = (click_corpus()[0], testset)
    kinds = [("reference", ROOT, "")]
    kinds += [(f"pipeline {b}" if b else "pipeline", ROOT, b) for b in backends or [""]]
    kinds += [("before", before, "")] if before else []
    print(f"Click 8.1.8 docs, {rounds} rounds of {', '.join(k for k, _, _ in kinds)}")
    export(backends)
    runs: dict[str, list] = {kind: [] for kind, _, _ in kinds}
    for _ in range(rounds):
        for kind, code, backend in kinds:
            measured = "reference" if kind == "reference" else "pipeline"
            runs[kind].append(run(measured, corpus, code, backend))
            RESULTS.write_text(json.dumps(summarise(runs), indent=2))  # so far, if stopped
    return summarise(runs)


def export(backends: list[str]) -> None:
    """Make the ONNX files the runs use before timing them: an export is once per machine
    (kept in ragsweep's cache folder; ``bench_backends.py`` times it), not part of a run."""
    from ragsweep.models import embedding, onnx_backend

    for backend in {embedding.backend(f"{MODEL}@{b}" if b else MODEL) for b in backends or [""]}:
        if backend != "torch":
            onnx_backend.exported(embedding.model_path(MODEL), backend)


def summarise(runs: dict[str, list]) -> dict:
    fastest = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items() if v}
    return {"runs": {k: v for k, v in runs.items() if v}, "fastest": fastest}


def report(results: dict) -> str:
    fastest, runs = results["fastest"], results["runs"]
    pipelines = [kind for kind in fastest if kind.startswith("pipeline")]
    b = fastest["reference"]
    a = min((fastest[kind] for kind in pipelines), key=lambda r: r["seconds"])
    lines = [
        "| run | fastest | all runs (load average before) | best context correctness |",
        "| --- | --- | --- | --- |",
    ]
    names = {
        "reference": "(b) one process, each chunk set embedded once",
        "pipeline": "(a) `ragsweep run`, kfp.local, cold cache",
        "before": "(a) before this change",
    }
    for kind, measured in runs.items():
        every = ", ".join(f"{r['seconds']:.1f} s ({r['load_before']:.1f})" for r in measured)
        name = names.get(kind) or f"{names['pipeline']}, {kind.split()[1]} backend"
        lines.append(
            f"| {name} | {fastest[kind]['seconds']:.1f} s | {every} | "
            f"{fastest[kind]['best_context_correctness']:.3f} |"
        )
    ratios = [
        f"{kind.removeprefix('pipeline').strip() or 'default backend'} "
        f"{fastest[kind]['seconds'] / b['seconds']:.2f}x"
        for kind in pipelines
    ]
    target = "(issue 27's target: ≤ 0.8x on the default backend)"
    lines += ["", f"**(a)/(b) = {', '.join(ratios)}** {target}"]
    if "before" in fastest:
        before = fastest["before"]["seconds"]
        lines[-1] += f"; before this change {before / b['seconds']:.2f}x."
    lines += [
        "",
        "Steps of the fastest (a), from its `pipeline.log` (each step's own process: peak "
        "resident memory; time in the step; time from the process's start to the step, "
        "mostly imports):",
        "",
        "| step | runs | peak MB (max) | step s (sum) | starting s (sum) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, measured in a["steps"].items():
        lines.append(
            f"| {name} | {len(measured)} | {max(m['peak_mb'] for m in measured)} | "
            f"{sum(m['seconds'] for m in measured):.1f} | "
            f"{sum(m['starting'] for m in measured):.1f} |"
        )
    steps = [m for measured in a["steps"].values() for m in measured]
    inside = sum(m["seconds"] + m["starting"] for m in steps)
    lines += [
        "",
        f"{len(steps)} step processes; in them {inside:.1f} s of the {a['seconds']:.1f} s "
        f"(the rest: the CLI's own start-up and exports, kfp.local between steps, and each "
        f"process's exit); (b) embedded {b['embedded']} chunks.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds")
    parser.add_argument("--before", type=Path, help="a checkout of another commit to compare")
    parser.add_argument("--testset", type=Path, default=CLICK_TESTSET, help="Click questions")
    parser.add_argument(
        "--backends", default="", help="run (a) on each of these backends (default: the default)"
    )
    parser.add_argument(
        "--report-only", action="store_true", help=f"report the runs saved in {RESULTS.name}"
    )
    parser.add_argument("--reference", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference:
        docs, testset, grid = args.reference
        print(json.dumps(reference(docs, testset, json.loads(grid))))
        return
    RESULTS.parent.mkdir(exist_ok=True)
    if args.report_only:
        results = json.loads(RESULTS.read_text())
    else:
        backends = [b for b in args.backends.split(",") if b]
        results = benchmark(args.rounds, args.before, args.testset, backends)
        RESULTS.write_text(json.dumps(results, indent=2))
    text = report(results)
    print(text)
    write_section("pipeline", text)


if __name__ == "__main__":
    main()
