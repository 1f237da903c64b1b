"""The embedding backends side by side: PyTorch, ONNX Runtime float32 and ONNX Runtime int8.

    python benchmarks/bench_backends.py            # --texts 512 --batches 16,64,256 --threads 1,2

Texts: the Click 8.1.8 documentation (bench_sweep's corpus) chunked at 128 tokens, the
first ``--texts`` of them in document order. Each (backend, threads) pair runs in a fresh
Python process: the model loaded (PyTorch on CUDA where a GPU is seen, ONNX Runtime on the
CPU; an ONNX export read from the cache, or made first if absent: the time of an export is
reported apart), one warm-up batch, then every batch size in turn, each timed over all the
texts (sorted by length, as ``embedding.encode`` sorts them). The process's peak resident
memory is read at its end. Pairs run alternately, ``--rounds`` times (default 2), and the
fastest of each is kept. The vectors' mean cosine against PyTorch's (same threads) is
reported beside: the fidelity the choice must keep. The results replace the section
between the markers in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_sweep import click_corpus
from readme import write_section

HERE = Path(__file__).resolve().parent
RESULTS = HERE / ".data" / "backends_results.json"
MODEL = "all-MiniLM-L6-v2"
BACKENDS = ("torch", "onnx", "onnx-int8")


def texts(count: int) -> list[str]:
    """The first ``count`` chunks of 128 tokens of the Click docs."""
    from ragsweep.documents.chunking import chunk_documents
    from ragsweep.documents.sources import read_documents
    from ragsweep.models import embedding

    documents = read_documents(str(click_corpus()[0])).table
    chunks = chunk_documents(documents, "sentence", 128, 0, embedding.load_tokenizer(MODEL))
    return chunks["text"].to_pylist()[:count]


def measure(backend: str, threads: int, batches: list[int], count: int, out: Path) -> dict:
    """In this process: texts/s of ``backend`` at each batch size with ``threads`` threads."""
    import numpy as np
    import torch

    from ragsweep.models import embedding, onnx_backend

    torch.set_num_threads(threads)
    corpus = sorted(texts(count), key=len)
    name = f"{MODEL}@{backend}"
    start = time.perf_counter()
    if backend == "torch":
        from sentence_transformers import SentenceTransformer

        device = embedding.device()  # CUDA on a GPU machine: the figure for the GPU arithmetic
        model = SentenceTransformer(str(embedding.model_path(MODEL)), device=device)

        def run(batch: list[str]) -> np.ndarray:
            return model.encode(batch, batch_size=len(batch), normalize_embeddings=True)
    else:
        encoder = onnx_backend.load_encoder(embedding.model_path(name), backend, threads)
        run = encoder
    loaded = time.perf_counter() - start
    run(corpus[:16])  # warm-up
    result = {"backend": backend, "threads": threads, "load_s": loaded}
    result |= {"texts_per_s": {}, "texts_per_cpu_s": {}}
    for size in batches:
        start, cpu = time.perf_counter(), time.process_time()
        vectors = np.concatenate([run(corpus[i : i + size]) for i in range(0, len(corpus), size)])
        result["texts_per_s"][str(size)] = len(corpus) / (time.perf_counter() - start)
        result["texts_per_cpu_s"][str(size)] = len(corpus) / (time.process_time() - cpu)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.save(out, vectors)
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return result


def export_seconds(backend: str) -> float:
    """Time to export ``backend``'s file into an empty folder (a fresh process)."""
    with tempfile.TemporaryDirectory() as folder:
        script = (
            "import sys, time; from pathlib import Path; "
            "from ragsweep.models import embedding, onnx_backend; start = time.perf_counter(); "
            f"onnx_backend.exported(embedding.model_path({MODEL!r}), {backend!r}, "
            "Path(sys.argv[1])); print(time.perf_counter() - start)"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, folder], capture_output=True, text=True, check=True
        )
        return float(done.stdout.strip().splitlines()[-1])


def benchmark(rounds: int, batches: list[int], threads: list[int], count: int) -> dict:
    import numpy as np

    runs: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(rounds):
            for t in threads:
                for backend in BACKENDS:
                    out = Path(scratch, f"{backend}-{t}.npy")
                    arguments = [backend, str(t), ",".join(map(str, batches)), str(count), str(out)]
                    load = os.getloadavg()[0]
                    done = subprocess.run(
                        [sys.executable, __file__, "--measure", *arguments],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    result = json.loads(done.stdout.strip().splitlines()[-1]) | {"load": load}
                    reference = np.load(Path(scratch, f"torch-{t}.npy"))
                    result["cosine"] = float((np.load(out) * reference).sum(axis=1).mean())
                    runs.setdefault(f"{backend} {t}", []).append(result)
                    print(f"  {backend:10s} threads {t}: {result['texts_per_s']} (load {load:.1f})")
    fastest = {
        key: max(measured, key=lambda r: max(r["texts_per_s"].values()))
        for key, measured in runs.items()
    }
    exports = {backend: export_seconds(backend) for backend in BACKENDS[1:]}
    return {"runs": runs, "fastest": fastest, "exports": exports, "texts": count}


def report(results: dict) -> str:
    fastest = results["fastest"]
    batches = list(next(iter(fastest.values()))["texts_per_s"])
    lines = [
        "| backend | threads | "
        + " | ".join(f"texts/s, batch {b}" for b in batches)
        + " | vs torch (best batch) | texts per CPU second, best batch | vs torch | peak MB "
        "| load s | mean cosine vs torch |",
        "| --- | --- | "
        + " | ".join("---" for _ in batches)
        + " | --- | --- | --- | --- | --- | --- |",
    ]
    for key, r in fastest.items():
        backend, threads = key.split()
        reference = fastest[f"torch {threads}"]
        rates, cpu = r["texts_per_s"], max(r["texts_per_cpu_s"].values())
        torch_cpu = max(reference["texts_per_cpu_s"].values())
        lines.append(
            f"| {backend} | {threads} | "
            + " | ".join(f"{rates[b]:.1f}" for b in batches)
            + f" | {max(rates.values()) / max(reference['texts_per_s'].values()):.2f}x"
            f" | {cpu:.1f} | {cpu / torch_cpu:.2f}x | {r['peak_mb']} | "
            f"{r['load_s']:.1f} | {r['cosine']:.5f} |"
        )
    loads = sorted(r["load"] for measured in results["runs"].values() for r in measured)
    exports = ", ".join(f"{b} {s:.1f} s" for b, s in results["exports"].items())
    lines += [
        "",
        f"{results['texts']} Click chunks of 128 tokens; load average before the runs "
        f"{loads[0]:.1f} to {loads[-1]:.1f}. One-time export into an empty folder: {exports}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds")
    parser.add_argument("--texts", type=int, default=512, help="texts embedded per batch size")
    parser.add_argument("--batches", default="16,64,256", help="batch sizes")
    parser.add_argument("--threads", default="1,2", help="thread counts")
    parser.add_argument("--report-only", action="store_true", help="report the saved runs")
    parser.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        backend, threads, batches, count, out = args.measure
        sizes = [int(b) for b in batches.split(",")]
        print(json.dumps(measure(backend, int(threads), sizes, int(count), Path(out))))
        return
    RESULTS.parent.mkdir(exist_ok=True)
    if args.report_only:
        results = json.loads(RESULTS.read_text())
    else:
        batches = [int(b) for b in args.batches.split(",")]
        threads = [int(t) for t in args.threads.split(",")]
        results = benchmark(args.rounds, batches, threads, args.texts)
        RESULTS.write_text(json.dumps(results, indent=2))
    text = report(results)
    print(text)
    write_section("backends", text)


if __name__ == "__main__":
    main()
