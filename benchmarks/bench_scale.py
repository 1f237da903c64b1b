"""ragsweep at real size: the whole ``ragsweep run`` on a 7.5 MB documentation corpus, on
10,000 and on 100,000 documents, with 1,000 questions, against the embedding limit, step by
step in memory.

    python benchmarks/bench_scale.py                    # both corpora
    python benchmarks/bench_scale.py --corpus django    # or synthetic
    python benchmarks/bench_scale.py --growth           # 10,000 against 100,000 documents

Embeddings come from an OpenAI-compatible endpoint in this process that hashes words into
384 dimensions (the size of all-MiniLM-L6-v2's vectors), so the figures measure ragsweep's
own work, not a model's: on a real model, embedding dominates and the ratios only improve.

- **django**: the Django 5.2.19 documentation (656 .txt files, 7.5 MB; fetched from PyPI with
  ``pip download``, not committed), 1,000 known-item questions (a sentence of a document
  asks for itself: this measures size, not difficulty), 24 configurations (chunk sizes 128
  and 256 x Top K 1, 3, 5, 10 x similarity, MMR, hybrid).
- **synthetic**: 10,000 documents of 18 sentences drawn from the Django documentation,
  1,000 questions, 20 configurations of 64-token chunks (Top K 1, 3, 5, 10 x similarity, MMR
  at lambda 0.25, 0.5, 0.75, hybrid).
- **synthetic-100k**: 100,000 documents of the same generator (its first 10,000 are
  synthetic's), 1,000 questions, 6 configurations of 64-token chunks (Top K 1, 10 x
  similarity, MMR, hybrid): about 1.6 million chunks, a chunk set larger than a step's 2 GB.

Measured: the run's wall time, cold (empty embedding cache) and again unchanged (warm); the
limit, one process that chunks nothing and sends each chunk set's texts to the same endpoint
once; chunks per second of each; the peak memory of every step, which each step reports in
``pipeline.log`` from its own process. Results replace the section between the markers in
``benchmarks/README.md``.

``--growth`` measures how the run grows with the corpus: the synthetic generator's 10,000
and 100,000 documents (the first 10,000 are the same), 1,000 questions each, the same 6
configurations (64-token chunks, Top K 1 and 10 x similarity, MMR, hybrid), cold, one after
the other in one invocation: each run's wall time and its ratio to the 10,000's, each
step's peak memory and time, the questions every configuration answered, and each step's
memory slope (MB per 10,000 documents).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from readme import write_section

HERE = Path(__file__).resolve().parent
DATA = HERE / ".data"
DJANGO = "django==5.2.19"
DIMENSIONS = 384
MODEL = "openai:hashed-words"
STEP_COST = re.compile(r"step ([\w-]+): peak memory (\d+) MB, ([\d.]+) s")

GRIDS = {
    "django": {
        "chunk_sizes": [128, 256],
        "chunk_overlaps": [0],
        "top_ks": [1, 3, 5, 10],
        "search_types": ["similarity", "mmr", "hybrid"],
    },
    "synthetic": {
        "chunk_sizes": [64],
        "chunk_overlaps": [0],
        "top_ks": [1, 3, 5, 10],
        "search_types": ["similarity", "mmr", "hybrid"],
        "mmr_lambdas": [0.25, 0.5, 0.75],
    },
    "growth": {  # both sizes of --growth
        "chunk_sizes": [64],
        "chunk_overlaps": [0],
        "top_ks": [1, 10],
        "search_types": ["similarity", "mmr", "hybrid"],
    },
}


# ---- the embedding endpoint ------------------------------------------------------------------


def hashed(text: str) -> np.ndarray:
    """Words hashed into signed buckets: texts sharing words are near, nothing to load."""
    vector = np.zeros(DIMENSIONS, np.float32)
    for word in re.findall(r"\w+", text.lower()):
        h = zlib.crc32(word.encode())
        vector[h % DIMENSIONS] += 1.0 if h & 1 << 20 else -1.0
    return vector


class Embeddings(ThreadingHTTPServer):
    """``/v1/embeddings`` and ``/v1/models`` on 127.0.0.1; counts the texts it embedded."""

    daemon_threads = True

    def __init__(self) -> None:
        self.texts = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: Embeddings

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": MODEL.split(":", 1)[1], "object": "model"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
        with self.server.lock:
            self.server.texts += len(texts)
        data = []
        for i, text in enumerate(texts):
            vector = hashed(text)
            if request.get("encoding_format") == "base64":
                encoded = base64.b64encode(vector.astype("<f4").tobytes()).decode()
            else:
                encoded = vector.tolist()
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        usage = {"prompt_tokens": 0, "total_tokens": 0}
        self._send({"object": "list", "data": data, "model": request["model"], "usage": usage})


# ---- corpora ---------------------------------------------------------------------------------


def django_docs() -> Path:
    """The .txt files of the Django documentation, in their folders."""
    docs = DATA / "django-docs"
    if not docs.is_dir():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
                + [DJANGO, "-d", tmp, "--quiet"],
                check=True,
            )
            [archive] = Path(tmp).glob("*.tar.gz")
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            [source] = Path(tmp).glob("django-*/docs")
            for path in source.rglob("*.txt"):
                target = docs / path.relative_to(source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
    return docs


def sentences_of(
    docs: Path, words: tuple[int, int] = (12, 40), markup: bool = False
) -> list[tuple[str, str]]:
    """(document id, sentence) for every sentence of ``words`` words (without markup unless
    ``markup``), as ragsweep reads the documents (so each is in its document's text)."""
    from ragsweep.documents.sources import read_documents

    table = read_documents(str(docs)).table
    out = []
    for doc_id, text in zip(table["doc_id"].to_pylist(), table["text"].to_pylist(), strict=True):
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            length = len(sentence.split())
            plain = markup or not re.search(r"[=*`_|<>]|---", sentence)
            if words[0] <= length <= words[1] and plain:
                out.append((doc_id, sentence))
    return out


def known_items(pairs: list[tuple[str, str]], n: int, seed: int) -> list[dict]:
    """``n`` questions, each a sentence asking for itself, in as few documents as there
    are (every document that has it is a reference)."""
    where: dict[str, list[str]] = {}
    for doc_id, sentence in pairs:
        where.setdefault(sentence, []).append(doc_id)
    rarest = sorted(where, key=lambda s: (len(where[s]), s))[: 2 * n]
    picked = random.Random(seed).sample(rarest, n)
    return [
        {
            "question": f"What does the documentation say here: {' '.join(s.split())[:-1]}?",
            "correct_answers": [s],
            "correct_answer_document_ids": sorted(set(where[s])),
        }
        for s in picked
    ]


def django_corpus() -> tuple[Path, Path]:
    docs = django_docs()
    testset = DATA / "django-testset.json"
    if not testset.is_file():
        testset.write_text(json.dumps(known_items(sentences_of(docs), 1000, seed=1), indent=1))
    return docs, testset


def synthetic_corpus(documents: int = 10_000) -> tuple[Path, Path]:
    """``documents`` documents of 18 sentences drawn from the Django documentation's (a
    question's sentence is in several documents, each a reference); the first 10,000 of
    any size are the same."""
    root = DATA / f"synthetic-{documents // 1000}k"
    docs, testset = root / "docs", root / "testset.json"
    if testset.is_file():
        return docs, testset
    pool = [s for _, s in sentences_of(django_docs(), words=(5, 60), markup=True)]
    rng = random.Random(2)
    docs.mkdir(parents=True, exist_ok=True)
    pairs = []
    for d in range(documents):
        picked = rng.sample(pool, 18)
        (docs / f"doc-{d:05d}.txt").write_text("\n\n".join(picked) + "\n")
        pairs += [(f"doc-{d:05d}.txt", s) for s in picked]
    plain = [(d, s) for d, s in pairs if not re.search(r"[=*`_|<>]|---", s)]
    testset.write_text(json.dumps(known_items(plain, 1000, seed=3), indent=1))
    return docs, testset


CORPORA = {"django": django_corpus, "synthetic": synthetic_corpus}
GROWTH = (10_000, 100_000)  # documents


# ---- measurements ----------------------------------------------------------------------------


def run_sweep(docs: Path, testset: Path, grid: dict, cache: Path, out: Path, env: dict) -> dict:
    """The whole ``ragsweep run``, as a user types it: its wall time, each step's peak
    memory (the largest of its runs) and time (summed over its runs), and the fewest
    questions any configuration was scored on."""
    space = out / "space.yaml"
    space.write_text(json.dumps({**grid, "embedding_models": [MODEL]}))
    command = [str(Path(sys.executable).with_name("ragsweep")), "run", "--docs", str(docs)]
    command += ["--testset", str(testset), "--space", str(space), "--cache", str(cache)]
    command += ["--output", str(out / "runs"), "--no-store", "--top", "3"]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"ragsweep run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    [run] = sorted(p for p in (out / "runs").iterdir() if (p / "pipeline.log").is_file())[-1:]
    peaks: dict[str, int] = {}
    step_seconds: dict[str, float] = {}
    for step, mb, took in STEP_COST.findall((run / "pipeline.log").read_text()):
        peaks[step] = max(peaks.get(step, 0), int(mb))
        step_seconds[step] = step_seconds.get(step, 0.0) + float(took)
    results = pq.read_table(run / "results.parquet", columns=["config_id"])
    per_config = results.group_by("config_id").aggregate([("config_id", "count")])
    shutil.rmtree(out / "runs")
    return {
        "seconds": seconds,
        "peaks": peaks,
        "step_seconds": step_seconds,
        "fewest_questions": min(per_config["config_id_count"].to_pylist()),
    }


def limit_pass(docs: Path, grid: dict, env: dict) -> dict:
    """One process: each chunk set chunked (not timed), then its texts sent to the endpoint
    once, nothing else: the least a sweep of these chunk sets can take."""
    script = f"""
import json, time
from ragsweep.models import embedding
from ragsweep.documents.chunking import chunk_documents
from ragsweep.documents.sources import read_documents
from ragsweep.sweep.space import SearchSpace
documents = read_documents({str(docs)!r}).table
space = SearchSpace.from_dict({{**{grid!r}, "embedding_models": [{MODEL!r}]}})
tokenize = embedding.load_tokenizer({MODEL!r})
sets = [chunk_documents(documents, c["chunker"], c["chunk_size"], c["chunk_overlap"], tokenize)
        for c in space.chunk_configs()]
start = time.perf_counter()
for chunks in sets:
    embedding.encode({MODEL!r}, chunks["text"].to_pylist())
print(json.dumps({{"seconds": time.perf_counter() - start,
                   "chunks": sum(c.num_rows for c in sets)}}))
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the limit pass failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench(corpus: str, server: Embeddings, scratch: Path) -> dict:
    from ragsweep.sweep.space import SearchSpace

    docs, testset = CORPORA[corpus]()
    grid = GRIDS[corpus]
    env = {**os.environ, "RAGSWEEP_EMBEDDING_BASE_URL": server.url, "HF_HUB_OFFLINE": "1"}
    cache = scratch / f"cache-{corpus}"
    limit = limit_pass(docs, grid, env)
    before = server.texts
    cold = run_sweep(docs, testset, grid, cache, scratch, env)
    embedded = server.texts - before
    before = server.texts
    warm = run_sweep(docs, testset, grid, cache, scratch, env)
    result = {
        "corpus": corpus,
        "documents": sum(1 for _ in docs.rglob("*.txt")),
        "megabytes": sum(p.stat().st_size for p in docs.rglob("*.txt")) / 1e6,
        "questions": len(json.loads(testset.read_text())),
        "configs": len(SearchSpace.from_dict({**grid, "embedding_models": [MODEL]}).all_configs()),
        "chunks": limit["chunks"],
        "limit_s": limit["seconds"],
        "cold": cold,
        "warm": warm,
        "embedded_cold": embedded,
        "embedded_warm": server.texts - before,
    }
    print(json.dumps(result, indent=1), flush=True)
    return result


def report(results: list[dict]) -> str:
    """The results as the Markdown that goes between the markers."""
    steps = sorted({step for r in results for step in r["cold"]["peaks"]})
    lines = [
        "| corpus | docs | MB | questions | configs | chunks | limit | cold run | "
        "cold / limit | warm run | embedded cold / warm |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['corpus']} | {r['documents']:,} | {r['megabytes']:.1f} | {r['questions']:,} "
            f"| {r['configs']} | {r['chunks']:,} | {r['limit_s']:.1f} s "
            f"| {r['cold']['seconds']:.1f} s | {r['cold']['seconds'] / r['limit_s']:.1f}x "
            f"| {r['warm']['seconds']:.1f} s | {r['embedded_cold']:,} / {r['embedded_warm']:,} |"
        )
    lines += ["", "Peak resident memory of each step (MB; the largest of its runs), cold run:", ""]
    lines += ["| corpus | " + " | ".join(steps) + " |", "| --- |" + " --- |" * len(steps)]
    for r in results:
        peaks = [str(r["cold"]["peaks"].get(step, "–")) for step in steps]
        lines.append(f"| {r['corpus']} | " + " | ".join(peaks) + " |")
    return "\n".join(lines)


def growth(server: Embeddings, scratch: Path) -> list[dict]:
    """The cold run of each of ``GROWTH``'s synthetic corpora, one after the other."""
    from ragsweep.sweep.space import SearchSpace

    space = SearchSpace.from_dict({**GRIDS["growth"], "embedding_models": [MODEL]})
    env = {**os.environ, "RAGSWEEP_EMBEDDING_BASE_URL": server.url, "HF_HUB_OFFLINE": "1"}
    results = []
    for documents in GROWTH:
        docs, testset = synthetic_corpus(documents)
        cold = run_sweep(
            docs, testset, GRIDS["growth"], scratch / f"cache-{documents}", scratch, env
        )
        result = {
            "documents": documents,
            "questions": len(json.loads(testset.read_text())),
            "configs": len(space.all_configs()),
            **cold,
        }
        print(json.dumps(result, indent=1), flush=True)
        results.append(result)
    return results


def growth_report(results: list[dict]) -> str:
    """``growth``'s results as Markdown: the runs, then each step's peak, time and slope."""
    small, large = results
    lines = [
        "| documents | questions | configs | fewest questions a config was scored on "
        "| wall time | ratio to 10,000 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['documents']:,} | {r['questions']:,} | {r['configs']} "
            f"| {r['fewest_questions']:,} | {r['seconds']:.1f} s "
            f"| {r['seconds'] / small['seconds']:.2f}x |"
        )
    per = 10_000 / (large["documents"] - small["documents"])
    lines += [
        "",
        "Each step: peak resident memory (MB, the largest of its runs), time (s, summed over "
        "its runs), and the memory's slope (MB per 10,000 documents, from the two peaks):",
        "",
        "| step | peak 10k | peak 100k | MB per 10,000 docs | time 10k | time 100k |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for step in sorted(set(small["peaks"]) | set(large["peaks"])):
        a, b = small["peaks"].get(step), large["peaks"].get(step)
        slope = f"{(b - a) * per:.1f}" if a is not None and b is not None else "–"
        ta, tb = small["step_seconds"].get(step), large["step_seconds"].get(step)
        lines.append(
            f"| {step} | {a if a is not None else '–'} | {b if b is not None else '–'} "
            f"| {slope} | {ta if ta is not None else 0:.1f} | {tb if tb is not None else 0:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=[*CORPORA, "both"], default="both")
    parser.add_argument("--growth", action="store_true", help="10,000 against 100,000 documents")
    parser.add_argument("--report-only", action="store_true", help="rewrite the README table")
    args = parser.parse_args()
    if args.growth:
        saved = DATA / "growth.json"
        if not args.report_only:
            server = Embeddings()
            with tempfile.TemporaryDirectory() as tmp:
                saved.write_text(json.dumps(growth(server, Path(tmp)), indent=1))
            server.shutdown()
        write_section("growth", growth_report(json.loads(saved.read_text())))
        return
    saved = DATA / "scale.json"
    if args.report_only:
        write_section("scale", report(json.loads(saved.read_text())))
        return
    corpora = list(CORPORA) if args.corpus == "all" else [args.corpus]
    server = Embeddings()
    with tempfile.TemporaryDirectory() as tmp:
        results = [bench(corpus, server, Path(tmp)) for corpus in corpora]
    server.shutdown()
    saved.write_text(json.dumps(results, indent=1))
    write_section("scale", report(results))


if __name__ == "__main__":
    main()
