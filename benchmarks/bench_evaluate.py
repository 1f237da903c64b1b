#!/usr/bin/env python3
"""Peak memory and time of ``sweep.evaluate`` on a synthetic retrievals table:
CONFIGS configurations x QUESTIONS questions x ~5 passages from one chunk set of CHUNKS
chunks (~60 words each), the extractive answerer (no model, no judge).

The inputs are written as the pipeline writes them (``write_table``: passages
dictionary-encoded per chunk set); then a fresh Python process reads them (``read_table``,
memory-mapped, as the evaluate step does), runs ``evaluate`` once and prints its wall time
and CPU time and its peak RSS (``resource.getrusage``), with the RSS it had before
evaluate started. On a shared machine, read the CPU time rather than the wall time.

Retrievals share chunks as a real grid's do: each configuration is a Top K (3 to 7) and one
of CONFIGS / 5 search settings; a search setting's ranking of a question is the question's
base ranking (10 chunks) with, half the time, two of its first eight chunks swapped.

Usage: PYTHONPATH=. python benchmarks/bench_evaluate.py [CONFIGS QUESTIONS CHUNKS]
(default 200 1000 10000). To measure two checkouts on the same inputs: ``--make <folder>
[CONFIGS QUESTIONS CHUNKS]`` writes them, then ``PYTHONPATH=<checkout> python
benchmarks/bench_evaluate.py --run <folder> [<prefix>]`` prints one checkout's figures as
JSON (and writes its answers and scores to ``<prefix>.answers.arrow`` /
``<prefix>.scores.arrow``).
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

TOP_KS = (3, 4, 5, 6, 7)


def vocabulary(rng: random.Random, size: int = 8000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(size)]


def make(folder: Path, n_configs: int, n_questions: int, n_chunks: int) -> None:
    """Write ``retrievals.arrow``, ``testset.arrow`` and ``configs.json`` into ``folder``."""
    from ragsweep.core.schemas import write_table

    rng = random.Random(7)
    vocab = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like word frequencies

    def sentence() -> str:
        return " ".join(rng.choices(vocab, weights, k=rng.randint(8, 16))).capitalize() + "."

    chunk_texts = [" ".join(sentence() for _ in range(5)) for _ in range(n_chunks)]
    per_doc = 20
    doc_ids = [f"doc{i // per_doc:05}.md" for i in range(n_chunks)]
    starts, position = [], 0
    for i, text in enumerate(chunk_texts):
        position = 0 if i % per_doc == 0 else position
        starts.append(position)
        position += len(text) + 1
    ends = [s + len(t) for s, t in zip(starts, chunk_texts, strict=True)]

    targets = rng.sample(range(n_chunks), n_questions)
    questions, answers, spans = [], [], []
    for target in targets:
        first = chunk_texts[target].split(". ")[0]
        picked = rng.sample(first.rstrip(".").split(), min(6, len(first.split())))
        questions.append("What about " + " ".join(picked).lower() + "?")
        answers.append([first])
        spans.append([{"doc_id": doc_ids[target], "start": starts[target], "end": ends[target]}])
    question_ids = [f"q{i:05}" for i in range(n_questions)]
    testset = pa.table(
        {
            "question_id": question_ids,
            "question": questions,
            "reference_answers": answers,
            "reference_doc_ids": [[doc_ids[t]] for t in targets],
            "reference_context": pa.nulls(n_questions, pa.string()),
            "gold_spans": spans,
            "question_type": ["simple"] * n_questions,
            "topic": pa.nulls(n_questions, pa.string()),
            "conversation_history": pa.nulls(n_questions, pa.string()),
            "question_version": [f"{q}-v1" for q in question_ids],
        }
    )
    nprng = np.random.default_rng(7)
    base = np.empty((n_questions, 10), np.int64)
    for q, target in enumerate(targets):  # the target first, 9 others (its neighbours often)
        base[q, 0] = target
        others = nprng.choice(n_chunks, 12, replace=False)
        base[q, 1:] = [o for o in others if o != target][:9]
    settings = max(1, n_configs // len(TOP_KS))
    configs, ids = [], []
    for s in range(settings):
        ranking = base.copy()
        swap = nprng.random(n_questions) < 0.5
        a, b = nprng.integers(0, 8, n_questions), nprng.integers(0, 8, n_questions)
        rows = np.flatnonzero(swap)
        ranking[rows, a[rows]], ranking[rows, b[rows]] = base[rows, b[rows]], base[rows, a[rows]]
        for k in TOP_KS:
            config_id = f"s{s:03}-k{k}"
            configs.append(
                {"config_id": config_id, "answerer": "extractive", "top_k": k, "setting": s}
            )
            ids.append(ranking[:, :k])
    configs = configs[:n_configs]
    picked = [row for block in ids[:n_configs] for row in block.tolist()]
    offsets = np.r_[0, np.cumsum([len(p) for p in picked])].astype(np.int32)
    flat = np.concatenate([np.asarray(p) for p in picked]).astype(np.int32)
    texts = pa.array(chunk_texts)
    span_struct = pa.StructArray.from_arrays(
        [pa.array(doc_ids), pa.array(starts), pa.array(ends)], names=["doc_id", "start", "end"]
    )
    doc_array = pa.array(doc_ids)
    retrievals = pa.table(
        {
            "config_id": [c["config_id"] for c in configs for _ in range(n_questions)],
            "question_id": question_ids * len(configs),
            "retrieved_chunk_ids": pa.ListArray.from_arrays(offsets, pa.array(flat, pa.int64())),
            "retrieved_doc_ids": pa.ListArray.from_arrays(offsets, doc_array.take(flat)),
            "passages": pa.ListArray.from_arrays(
                offsets, pa.DictionaryArray.from_arrays(flat, texts)
            ),
            "retrieved_spans": pa.ListArray.from_arrays(offsets, span_struct.take(flat)),
        }
    )
    write_table(retrievals, folder / "retrievals.arrow", "retrievals")
    write_table(testset, folder / "testset.arrow", "testset")
    (folder / "configs.json").write_text(json.dumps(configs))


def run(folder: Path, save: str | None = None) -> dict:
    """Evaluate the inputs in ``folder`` in this process: seconds and RSS in MB; with
    ``save``, the answers and scores are written to ``<save>.answers.arrow`` and
    ``<save>.scores.arrow`` afterwards, to compare two checkouts' results."""
    from ragsweep.core.schemas import read_table
    from ragsweep.sweep.steps import evaluate

    retrievals = read_table(folder / "retrievals.arrow", "retrievals")
    testset = read_table(folder / "testset.arrow", "testset")
    configs = json.loads((folder / "configs.json").read_text())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    answers, scores = evaluate(retrievals, testset, configs, "auto")
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    before, peak = usage.ru_maxrss / 1024, after.ru_maxrss / 1024
    metrics = ("context_correctness", "span_recall", "answer_correctness", "faithfulness")
    means = {
        m: round(float(np.nanmean(scores[m].to_numpy(zero_copy_only=False))), 6) for m in metrics
    }
    for name, table in (("answers", answers), ("scores", scores)):
        if save:
            with ipc.new_file(f"{save}.{name}.arrow", table.schema) as writer:
                writer.write_table(table)
    return {
        "rows": answers.num_rows,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "rss_before_mb": round(before),
        "peak_rss_mb": round(peak),
        "means": means,
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["--run"]:
        print(json.dumps(run(Path(argv[1]), *argv[2:3])))
        return
    if argv[:1] == ["--make"]:
        sizes = [int(a) for a in argv[2:] or ["200", "1000", "10000"]]
        make(Path(argv[1]), *sizes)
        return
    n_configs, n_questions, n_chunks = (int(a) for a in (argv or ["200", "1000", "10000"]))
    with tempfile.TemporaryDirectory(prefix="bench-evaluate-") as tmp:
        folder = Path(tmp)
        make(folder, n_configs, n_questions, n_chunks)
        size = (folder / "retrievals.arrow").stat().st_size / 2**20
        done = subprocess.run(
            [sys.executable, __file__, "--run", str(folder)],
            check=True,
            capture_output=True,
            text=True,
        )
        result = json.loads(done.stdout.splitlines()[-1])
    print(
        f"{n_configs} configurations x {n_questions} questions, {n_chunks} chunks "
        f"(retrievals {size:.0f} MB): evaluate {result['seconds']} s ({result['cpu_seconds']} s "
        f"CPU), peak RSS "
        f"{result['peak_rss_mb']} MB ({result['rss_before_mb']} MB before evaluate); "
        f"means {result['means']}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
