"""Local embedding models run by ONNX Runtime: exported once from the local weights, offline.

The transformer is exported with torch's TorchScript exporter (``torch.onnx.export(...,
dynamo=False)``: no extra package, nothing downloaded) with eager attention, to a file that
returns the last hidden state; onnxruntime's transformer optimizer then fuses it (embedding
and skip LayerNorms, attention, GELU: 46 nodes for all-MiniLM-L6-v2, from 669 with
PyTorch's SDPA attention, which the optimizer cannot fuse). ``onnx-int8`` is the fused file
with the weights of its matrix products (all but the attention's) in 8 bits, by blocks of
``INT8_BLOCK`` along the input with one scale each, run by ``MatMulNBits`` on int8 products
(``accuracy_level`` 4: the activations quantized by the same blocks, row by row, as they
come). Blockwise scales follow the activations' outliers far more closely than one scale per
tensor (dynamic quantisation: mean cosine 0.993 against PyTorch, against 0.9996 here).

ragsweep tokenizes with the model's ``tokenizer.json`` (the ``tokenizers`` library, which
transformers' fast tokenizer wraps: the same ids without importing transformers and torch)
and pools and normalizes as sentence-transformers does (mean or CLS pooling, then unit
length); torch is imported only to export.

Exports are kept in ``<cache dir>/onnx/`` (beside the default embedding cache), named by
model and variant and keyed by the digest of the contents of the model's files
(``identity.folder_digest``), the export's recipe and the versions of torch, transformers,
onnx and onnxruntime: a model retrained in place, or an upgrade, exports again. A file
is written under a temporary name and renamed, with its SHA-256 beside it; a file whose
checksum does not match is exported again. Processes exporting at once take turns on a lock
file.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import numpy as np

from ragsweep.core.errors import RagsweepError
from ragsweep.models.identity import folder_digest

log = logging.getLogger("ragsweep")

VARIANTS = ("onnx", "onnx-int8")
INT8_BLOCK = 128  # weights per scale (block 32: mean cosine 0.99986, 12% slower)
# How a file is made, part of the export key: change it with the export, and every cached
# file is exported again (earlier recipes: SDPA attention, unfused; int8 by dynamic
# quantisation, per channel).
RECIPE = {
    "attention": "eager",
    "fused": "bert",
    "int8": f"MatMulNBits 8 bits, symmetric, block {INT8_BLOCK}, accuracy level 4",
}
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CHUNK = 1 << 20  # bytes hashed at a time


def exports_dir() -> Path:
    """Where exported models are kept: ``onnx/`` in ragsweep's cache folder."""
    from ragsweep.models.replies import cache_dir

    return cache_dir() / "onnx"


def export_key(model: Path, variant: str) -> str:
    """What an export depends on: the contents of the model's files, the variant, the
    recipe and the versions of the exporter and the runtime."""
    key = {
        "recipe": RECIPE,
        "variant": variant,
        "model": folder_digest(model),
        # read from the installed packages' metadata: importing them takes seconds
        "versions": [version(p) for p in ("torch", "transformers", "onnx")],
        "onnxruntime": version("onnxruntime"),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def exported(model: Path, variant: str, folder: Path | None = None) -> Path:
    """The ONNX file of the sentence-transformers model in folder ``model`` as ``variant``
    (``onnx`` or ``onnx-int8``), exported now unless a verified copy is kept."""
    if variant not in VARIANTS:
        raise RagsweepError(f"ONNX variant {variant!r}: use one of {', '.join(VARIANTS)}")
    folder = folder or exports_dir()
    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(model.parts[-2:]))
    path = folder / f"{slug}-{variant}-{export_key(model, variant)}.onnx"
    if _verified(path):  # complete (renamed into place): no lock, so a read-only cache serves
        return path
    with _locked(path):
        if _verified(path):
            return path
        if path.exists():
            log.warning("ONNX model %s: checksum mismatch, exporting it again", path)
        if variant == "onnx":
            _write(path, lambda tmp: _export(model, tmp))
        else:
            source = exported(model, "onnx", folder)  # the float32 file, exported first
            _write(path, lambda tmp: _quantize(source, tmp))
        log.info("exported %s as %s to %s", model.name, variant, path)
        return path


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock beside ``path`` (other processes exporting it wait)."""
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _checksum_path(path: Path) -> Path:
    return path.with_suffix(".onnx.sha256")


def _verified(path: Path) -> bool:
    """Whether ``path`` and its checksum file exist and agree."""
    checksum = _checksum_path(path)
    if not (path.is_file() and checksum.is_file()):
        return False
    return checksum.read_text().strip() == _sha256(path)


def _write(path: Path, make) -> None:
    """Make the file under a temporary name, then rename it and its checksum into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        make(tmp)
        checksum = _sha256(tmp)
        os.replace(tmp, path)
        tmp_sum = _checksum_path(tmp)
        tmp_sum.write_text(checksum + "\n")
        os.replace(tmp_sum, _checksum_path(path))
    finally:
        tmp.unlink(missing_ok=True)
        _checksum_path(tmp).unlink(missing_ok=True)


def _export(model: Path, out: Path) -> None:
    """Export the transformer of ``model`` (last hidden state; batch and length dynamic),
    fused by onnxruntime's transformer optimizer."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    # eager attention exports as the MatMul/Softmax pattern that the optimizer fuses
    network = AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    sample = tokenizer(
        ["an example", "a longer example sentence"], padding=True, return_tensors="pt"
    )
    names = [name for name in INPUTS if name in sample]

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.network = network

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.network(**dict(zip(names, inputs, strict=True))).last_hidden_state

    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "hidden"]}
    plain = out.with_name(out.name + ".plain")
    try:
        # The tracer's warnings (shapes read as Python values) concern paths that the dynamic
        # axes keep general; the export is checked against PyTorch (tests/test_onnx_backend.py).
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                LastHidden(),
                tuple(sample[name] for name in names),
                str(plain),
                input_names=names,
                output_names=["hidden"],
                dynamic_axes=axes,
                opset_version=OPSET,
                dynamo=False,
            )
        _fuse(plain, out, network.config)
    finally:
        plain.unlink(missing_ok=True)


def _fuse(source: Path, out: Path, config) -> None:
    """Fuse the exported BERT-like graph with onnxruntime's transformer optimizer (its Python
    fusions only: the runtime's own optimisations run when a session loads the file)."""
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet():
        fused = optimize_model(
            str(source),
            model_type="bert",
            num_heads=config.num_attention_heads,
            hidden_size=config.hidden_size,
            opt_level=0,
        )
    fused.save_model_to_file(str(out))


@contextmanager
def _quiet() -> Iterator[None]:
    """Keep onnxruntime's tools' advice (on the root logger) out of ragsweep's output."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _quantize(source: Path, out: Path) -> None:
    """The fused graph with its matrix products by a constant weight in 8 bits (``MatMulNBits``,
    symmetric, by blocks of ``INT8_BLOCK``), computed in int8 (accuracy level 4)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    with _quiet():
        quantizer = MatMulNBitsQuantizer(
            str(source), bits=8, block_size=INT8_BLOCK, is_symmetric=True, accuracy_level=4
        )
        quantizer.process()
        quantizer.model.save_model_to_file(str(out))


class OnnxEncoder:
    """Embeds texts like the sentence-transformers model in ``model``, on ONNX Runtime."""

    def __init__(self, model: Path, variant: str, threads: int = 0) -> None:
        import onnxruntime

        self.max_length = int(
            json.loads((model / "sentence_bert_config.json").read_text())["max_seq_length"]
        )
        self.tokenizer = _tokenizer(model, self.max_length)
        self.pooling = _pooling(model)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Threads spin between operators, as ONNX Runtime's default: with 2 threads, sleeping
        # instead ran float32 1.4x slower in wall time and took more CPU, not less
        # (benchmarks/README.md). A step's threads are its share of the cores
        # (step_threads), so the spinning takes no core another step needs.
        options.intra_op_num_threads = threads or step_threads()
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(exported(model, variant)), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings of ``texts``, run as one batch."""
        encodings = self.tokenizer.encode_batch(texts)
        tokens = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        hidden = self.session.run(None, {name: tokens[name] for name in self.inputs})[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = tokens["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32)


def _tokenizer(model: Path, max_length: int):
    """The model's ``tokenizer.json`` as sentence-transformers runs it: special tokens added,
    truncated at ``max_length`` and each batch padded to its longest text."""
    from tokenizers import Tokenizer

    path = model / "tokenizer.json"
    if not path.is_file():
        raise RagsweepError(
            f"embedding model {model}: the ONNX backend reads the model's tokenizer.json, "
            "which it lacks; use the torch backend for this model"
        )
    tokenizer = Tokenizer.from_file(str(path))
    pad = (tokenizer.padding or {}).get("pad_token")
    if pad is None and (model / "special_tokens_map.json").is_file():
        pad = json.loads((model / "special_tokens_map.json").read_text()).get("pad_token")
        pad = pad["content"] if isinstance(pad, dict) else pad
    if pad is None or tokenizer.token_to_id(pad) is None:
        raise RagsweepError(f"embedding model {model}: its tokenizer names no padding token")
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad)  # to the longest
    return tokenizer


def _pooling(model: Path) -> str:
    """``mean`` or ``cls``: how the sentence-transformers model pools its token vectors."""
    modules = json.loads((model / "modules.json").read_text())
    pooling = [m for m in modules if m["type"].endswith("Pooling")]
    config = json.loads((model / pooling[0]["path"] / "config.json").read_text()) if pooling else {}
    if config.get("pooling_mode_mean_tokens"):
        return "mean"
    if config.get("pooling_mode_cls_token"):
        return "cls"
    raise RagsweepError(
        f"embedding model {model}: the ONNX backend pools by mean or CLS token only; "
        "use the torch backend for this model"
    )


def step_threads() -> int:
    """The threads torch would take here: ``OMP_NUM_THREADS`` (a step's share of the cores,
    or a pod's CPU limit, which a pod's core count does not show), else 0 (ONNX Runtime's
    default: one per physical core)."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() else 0


@lru_cache(maxsize=4)
def load_encoder(model: Path, variant: str, threads: int = 0, identity: str = "") -> OnnxEncoder:
    """An ``OnnxEncoder``, loaded once per process and ``identity`` (the model's, by
    content: a model changed in place is loaded again)."""
    return OnnxEncoder(model, variant, threads)
