"""Local embedding models run by ONNX Runtime: exported once from the local weights, offline.

The transformer is exported with torch's TorchScript exporter (``torch.onnx.export(...,
dynamo=False)``: no extra package, nothing downloaded) with eager attention, to a file that
returns the last hidden state; onnxruntime's transformer optimizer then fuses it (embedding
and skip LayerNorms, attention, GELU: 46 nodes for all-MiniLM-L6-v2, from 669 with
PyTorch's SDPA attention, which the optimizer cannot fuse). ragsweep tokenizes with the
model's own tokenizer and pools and normalizes as sentence-transformers does (mean or CLS
pooling, then unit length). ``onnx-int8`` is the fused file after dynamic quantisation of
the weights of its matrix products and attention, per output channel.

Exports are kept in ``<cache dir>/onnx/`` (beside the default embedding cache), named by
model and variant and keyed by a hash of the model's files, the export's recipe and the
versions of torch, transformers, onnx and onnxruntime, so an upgrade exports again. A file
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
from pathlib import Path

import numpy as np

from ragsweep.core.errors import RagsweepError

log = logging.getLogger("ragsweep")

VARIANTS = ("onnx", "onnx-int8")
# How a file is made, part of the export key: change it with the export, and every cached
# file is exported again (files of the first recipe: SDPA attention, unfused, int8 keeping
# the feed-forward output projections in float32).
RECIPE = {"attention": "eager", "fused": "bert", "int8": "MatMul, Attention; per channel"}
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CHUNK = 1 << 20  # bytes hashed at a time


def exports_dir() -> Path:
    """Where exported models are kept: ``onnx/`` in ragsweep's cache folder."""
    from ragsweep.models.replies import cache_dir

    return cache_dir() / "onnx"


def export_key(model: Path, variant: str) -> str:
    """What an export depends on: the model's files (names, sizes, config), the variant and
    the versions of the exporter and the runtime."""
    import onnx
    import onnxruntime
    import torch
    import transformers

    files = sorted(
        (str(p.relative_to(model)), p.stat().st_size) for p in model.rglob("*") if p.is_file()
    )
    key = {
        "recipe": RECIPE,
        "variant": variant,
        "files": files,
        "config": (model / "config.json").read_text(),
        "versions": [torch.__version__, transformers.__version__, onnx.__version__],
        "onnxruntime": onnxruntime.__version__,
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
    """Dynamic int8 quantisation of the fused graph's matrix products by a constant weight
    and of its attention (the QKV projection), per output channel."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet():
        quantize_dynamic(
            str(source),
            str(out),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            # the fused ops are outside ONNX's type inference: their outputs are float32
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
        )


class OnnxEncoder:
    """Embeds texts like the sentence-transformers model in ``model``, on ONNX Runtime."""

    def __init__(self, model: Path, variant: str, threads: int = 0) -> None:
        import onnxruntime
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model))
        self.max_length = int(
            json.loads((model / "sentence_bert_config.json").read_text())["max_seq_length"]
        )
        self.pooling = _pooling(model)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or step_threads()
        options.inter_op_num_threads = 1
        # waiting threads sleep instead of spinning: on a shared machine or a pod's CPU
        # limit, spinning threads take the cores the others need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(exported(model, variant)), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings of ``texts``, run as one batch."""
        tokens = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np"
        )
        feeds = {name: tokens[name].astype(np.int64) for name in self.inputs}
        hidden = self.session.run(None, feeds)[0]
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = tokens["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32)


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
def load_encoder(model: Path, variant: str, threads: int = 0) -> OnnxEncoder:
    """An ``OnnxEncoder``, loaded once per process."""
    return OnnxEncoder(model, variant, threads)
