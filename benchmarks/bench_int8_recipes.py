"""int8 recipes for all-MiniLM-L6-v2 on ONNX Runtime: cosine vs PyTorch, leaderboard, speed.

    python benchmarks/bench_int8_recipes.py OUT RECIPE[,RECIPE...] cos N   # N corpus texts
    python benchmarks/bench_int8_recipes.py OUT RECIPE[,RECIPE...] board   # examples' top 3
    python benchmarks/bench_int8_recipes.py OUT RECIPE[,RECIPE...] speed [ROUNDS]

A recipe is a set of ``quantize_dynamic`` options (``RECIPES``) applied to the fused float32
export; each gets its own file in OUT (the float32 export is made once). ``cos``: mean
cosine against PyTorch on the first N chunks of the test suite's corpus (1 or 2 of the
example documents' sentences; with N >= 2000 the example chunks too). ``board``: the
default space's leaderboard on the examples, top 3 and metrics outside PyTorch's intervals
(tests/test_onnx_backend.py's check). ``speed``: texts per CPU second (process_time) at
batch 32 with 2 threads on 256 128-token example chunks, against PyTorch in the same
process, alternated (PyTorch before and after each recipe round).
"""

import json
import random
import re
import sys
import time
from pathlib import Path

import onnx
import pyarrow as pa
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic

from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models import embedding, onnx_backend
from ragsweep.sweep.space import SearchSpace, configs_table
from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

MODEL = "all-MiniLM-L6-v2"
EX = Path(__file__).resolve().parent.parent / "examples"
OUT = Path(sys.argv[1])
OUT.mkdir(exist_ok=True, parents=True)
which = sys.argv[2].split(",")
stage = sys.argv[3]  # cos | board | speed
onnx_backend.exports_dir = lambda: OUT
LAYERS = 6


def names(kind, layers=range(LAYERS)):
    out = []
    for i in layers:
        if kind == "qkv":
            out.append(f"Attention_{i}")
        if kind == "attn_out":
            out.append(f"/network/encoder/layer.{i}/attention/output/dense/MatMul")
        if kind == "ffn_in":
            out.append(f"/network/encoder/layer.{i}/intermediate/dense/MatMul")
        if kind == "ffn_out":
            out.append(f"/network/encoder/layer.{i}/output/dense/MatMul")
    return out


ALL = ["qkv", "attn_out", "ffn_in", "ffn_out"]
RECIPES = {
    "current": {},
    "keep-ffn-out": {"exclude": names("ffn_out")},
    "keep-qkv": {"exclude": names("qkv")},
    "keep-attn-out": {"exclude": names("attn_out")},
    "keep-ffn-in": {"exclude": names("ffn_in")},
    "keep-layer0": {"exclude": sum((names(k, [0]) for k in ALL), [])},
    "keep-layer5": {"exclude": sum((names(k, [5]) for k in ALL), [])},
    "keep-ffn-out-0-5": {"exclude": names("ffn_out", [0, 5])},
    "reduce-range": {"reduce_range": True},
    "uint8-weights": {"weight_type": QuantType.QUInt8},
    "per-tensor": {"per_channel": False},
}
for i in range(LAYERS):
    RECIPES[f"keep-ffn-out-{i}"] = {"exclude": names("ffn_out", [i])}


def make_quantize(r):
    def q(source, out):
        with onnx_backend._quiet():
            quantize_dynamic(
                str(source),
                str(out),
                weight_type=r.get("weight_type", QuantType.QInt8),
                per_channel=r.get("per_channel", True),
                reduce_range=r.get("reduce_range", False),
                op_types_to_quantize=["MatMul", "Attention"],
                nodes_to_exclude=r.get("exclude", []),
                extra_options={
                    "MatMulConstBOnly": True,
                    "DefaultTensorType": onnx.TensorProto.FLOAT,
                },
            )

    return q


_key = onnx_backend.export_key
CURRENT = {"recipe": "current"}
onnx_backend.export_key = lambda model, variant: (
    _key(model, variant) + ("" if variant == "onnx" else "-" + CURRENT["recipe"])
)


def use(recipe):
    CURRENT["recipe"] = recipe
    onnx_backend._quantize = make_quantize(RECIPES[recipe])
    onnx_backend.load_encoder.cache_clear()


docs = read_documents(str(EX / "docs")).table


def corpus(seed=27, n=2000, k=2):
    text = " ".join(docs["text"].to_pylist())
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n{2,}", text) if len(s.strip()) > 3]
    rng = random.Random(seed)
    return [" ".join(rng.sample(sentences, rng.randint(1, k))) for _ in range(n)]


def sweep(model, store, testset="testset.jsonl", space=None):
    questions = resolve_testset(load_testset(str(EX / testset)), docs)
    space = space or SearchSpace(embedding_models=(model,))
    retrieved = []
    for cc in space.chunk_configs():
        chunks = build_chunks(docs, cc, store)
        retrieved.append(retrieve(chunks, questions, space, cc, store))
    configs = space.all_configs()
    answers, scores = evaluate(pa.concat_tables(retrieved), questions, configs, "auto")
    return build_board(scores, answers, questions, configs_table(configs)).leaderboard.to_pylist()


def label(row):
    return row["label"].replace(row["embedding_model"].rsplit("/", 1)[-1], MODEL)


def compare(ref, board):
    metrics = [c.removesuffix("_low") for c in ref[0] if c.endswith("_low")]
    by = {label(r): r for r in ref}
    outside = 0
    for row in board:
        t = by[label(row)]
        for m in metrics:
            if t[m] is not None and not (t[f"{m}_low"] <= row[m] <= t[f"{m}_high"]):
                outside += 1
    top = [label(r) for r in board[:3]] == [label(r) for r in ref[:3]]
    return top, outside, [(label(r), round(r["answer_correctness"], 4)) for r in board[:3]]


torch.set_num_threads(1)
store = EmbeddingCache(OUT / "vectors")
results = {}
if stage == "cos":
    n = int(sys.argv[4])
    full = n >= 2000
    texts = corpus()[:n]
    ex = (
        sorted(
            {
                t
                for cc in SearchSpace().chunk_configs()
                for t in build_chunks(docs, cc, store)["text"].to_pylist()
            }
        )
        if full
        else []
    )
    ref_c = store.embed(f"{MODEL}@torch", texts)
    ref_e = store.embed(f"{MODEL}@torch", ex) if ex else None
    for r in which:
        use(r)
        enc = embedding.batch_encoder(f"{MODEL}@onnx-int8")
        c = float((enc(texts) * ref_c).sum(1).mean())
        e = float((enc(ex) * ref_e).sum(1).mean()) if ex else None
        print(
            json.dumps(
                {"recipe": r, "texts": n, "corpus": round(c, 5), "examples": e and round(e, 5)}
            ),
            flush=True,
        )
elif stage == "board":
    ref = sweep(f"{MODEL}@torch", store)
    print(
        "torch top3", [(label(r), round(r["answer_correctness"], 4)) for r in ref[:3]], flush=True
    )
    for r in which:
        use(r)
        cache = EmbeddingCache(OUT / f"vectors-{r}")
        print(
            json.dumps({"recipe": r, "board": compare(ref, sweep(f"{MODEL}@onnx-int8", cache))}),
            flush=True,
        )
elif stage == "speed":
    from ragsweep.documents.chunking import chunk_documents

    texts = chunk_documents(docs, "sentence", 128, 16, embedding.load_tokenizer(MODEL))[
        "text"
    ].to_pylist()[:256]
    texts.sort(key=len)
    torch.set_num_threads(2)
    tenc = embedding.batch_encoder(f"{MODEL}@torch")
    encs = {}
    for r in which:
        use(r)
        onnx_backend.exported(embedding.model_path(MODEL), "onnx-int8")
        encs[r] = onnx_backend.OnnxEncoder(embedding.model_path(MODEL), "onnx-int8", threads=2)

    def run(f):
        t = time.process_time()
        for i in range(0, len(texts), 32):
            f(texts[i : i + 32])
        return len(texts) / (time.process_time() - t)

    run(tenc)
    [run(e) for e in encs.values()]
    for rnd in range(int(sys.argv[4]) if len(sys.argv) > 4 else 3):
        t = run(tenc)
        row = {r: round(run(e) / t, 3) for r, e in encs.items()}
        t2 = run(tenc)
        print(
            json.dumps(
                {
                    "round": rnd,
                    "torch_tps": round((t + t2) / 2, 1),
                    "ratio_vs_torch": {r: round(v * t / ((t + t2) / 2), 3) for r, v in row.items()},
                }
            ),
            flush=True,
        )
