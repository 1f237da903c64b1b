"""Each heavy step's peak memory, estimated from the corpus before the sweep, and the check
(in ``plan``, before anything is embedded) that refuses a corpus whose estimate exceeds a
step's memory limit, saying what to change.

The costs are read from benchmarks/README.md (``bench_scale.py``: 384-dimension vectors from
a hashing endpoint, so no model's weights are in them; its MB are MiB, as the steps' cost
lines count them, ``peak_memory_mb``). A step's peak is its base (imports, runtime, its
batches) plus a cost per chunk of the largest chunk set it holds (and, for ``retrieve``,
per retrieval row):

- the tokens: each embedding model's tokenizer reads a sample of the documents
  (``SAMPLE_BYTES``, evenly spread) for their bytes a token (~2.65 on the synthetic corpus,
  from its 26.6 MB and 161,587 chunks of 64 tokens; 4.06 on examples/docs with
  all-MiniLM-L6-v2's), and each document's chunks are its tokens over the stride, rounded
  up (examples/docs: 373, 191, 102 chunks estimated at 64, 128, 256 tokens; 380, 194, 101
  made).
- ``chunk_embed`` and ``retrieve``: "Growth", 2026-12-06 07:13 UTC, alone on the 2-core VM:
  the synthetic corpus at 10,000 and 100,000 documents (161,587 and 1,614,406 chunks of 64
  tokens), 1,000 questions x 6 configurations (6,000 retrieval rows) in one group.
  ``chunk_embed`` peaked at 624 and 903 MiB: (903 - 624) MiB / 1,452,819 chunks = 201
  bytes a chunk over a base of 593 MiB. ``retrieve`` at 542 and 856 MiB: 227 bytes a chunk
  over 507 MiB, of which the rows' ``RETRIEVE_PER_ROW`` (below) leaves a base of 488 MiB.
- ``RETRIEVE_PER_ROW``: 3,400 bytes, from the run of 2026-12-01 (Django's 24,000 rows and
  the synthetic corpus's 20,000, when the rows carried every chunk's text): an upper
  bound now that they carry only the retrieved chunks'; not measured again.
- ``embed_shard``: peaked at 1,115 MB on a shard of half the 10,000 documents (2026-12-01:
  26.6 MB above the 20 MB shard size, two shards of ~80,800 chunks): (1,115 - 300) MB /
  80,794 chunks over a base of 300 MB (a reading of the small steps' 73-347 MB there). A
  shard is bounded by ``embedding_shard_bytes``; not measured again.

The vectors are 384 float32 a chunk in every figure: a wider model costs more than this
estimate says.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ragsweep.core.errors import RagsweepError
from ragsweep.sweep.fanout import block_range, is_shard
from ragsweep.sweep.space import SearchSpace

MIB = 1 << 20
SAMPLE_BYTES = 1_000_000  # of document text, read by each model's tokenizer
SAMPLE_ROWS = 256
DEFAULT_BYTES_PER_TOKEN = 4.0  # when the sample holds no token
BASE = {"chunk_embed": 593 * MIB, "retrieve": 488 * MIB, "embed_shard": 300 * MIB}
PER_CHUNK = {"chunk_embed": 201, "retrieve": 227, "embed_shard": 10_600}  # bytes
RETRIEVE_PER_ROW = 3_400

# The steps whose memory grows with the corpus, as the pipeline names them.
HEAVY_STEPS = ("chunk_embed", "embed_shard", "retrieve")
# On a cluster, the heavy steps' pod memory limits as compiled ("chunk_embed=6Gi,..."), set
# in the plan step's environment by ``ragsweep.kubeflow.tasks``.
MEMORY_LIMITS_ENV = "RAGSWEEP_MEMORY_LIMITS"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)(B?)\s*$", re.IGNORECASE)


def parse_size(text: str, source: str = "--memory-limit") -> int | None:
    """The bytes of a size such as 2GB, 1500MB or 4Gi (KB, MB, GB, TB and K, M, G, T: powers
    of 1,000; Ki, Mi, Gi, Ti, with or without B: of 1,024, as Kubernetes reads them; a bare
    number: bytes); None for an empty text."""
    if not text or not str(text).strip():
        return None
    match = _SIZE.match(str(text))
    if not match or float(match.group(1)) <= 0:
        raise RagsweepError(f"{source}: {text!r} is not a size like 2GB, 1500MB or 4Gi")
    number, unit, binary, _ = match.groups()
    power = "KMGT".index(unit.upper()) + 1 if unit else 0
    return int(float(number) * (1024 if binary else 1000) ** power)


def step_limits(text: str) -> dict[str, int]:
    """The steps' limits of a ``MEMORY_LIMITS_ENV`` value ("step=size,...")."""
    limits = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        step, _, size = part.partition("=")
        limits[step.strip()] = parse_size(size, f"{MEMORY_LIMITS_ENV}: {step.strip()}")
    return limits


def bytes_per_token(texts: pa.Array | pa.ChunkedArray, tokenize: Callable[[str], Any]) -> float:
    """The bytes of the documents' ``texts`` per token of ``tokenize``, on at most
    ``SAMPLE_BYTES`` of them, from up to ``SAMPLE_ROWS`` rows spread evenly (only those
    rows are read into Python)."""
    rows = np.unique(np.linspace(0, len(texts) - 1, min(len(texts), SAMPLE_ROWS)).astype(int))
    read = tokens = 0
    for text in texts.take(pa.array(rows)).to_pylist() if len(texts) else []:
        piece = (text or "")[: SAMPLE_BYTES - read]
        read += len(piece.encode())
        tokens += len(tokenize(piece)) if piece else 0
        if read >= SAMPLE_BYTES:
            break
    return read / tokens if tokens else DEFAULT_BYTES_PER_TOKEN


def estimated_chunks(sizes: list[int], chunk_size: int, overlap: int, per_token: float) -> int:
    """The chunks of documents of ``sizes`` bytes cut into ``chunk_size`` tokens with
    ``overlap``, at ``per_token`` bytes a token: each document's tokens over the stride,
    rounded up."""
    sizes = np.asarray(sizes, dtype=np.float64)
    tokens = sizes[sizes > 0] / per_token
    stride = max(1, chunk_size - overlap)
    return int(np.maximum(1, np.ceil((tokens - overlap) / stride)).sum())


@dataclass(frozen=True)
class Peak:
    """A step's estimated peak for one of its loop items: ``chunks`` in the chunk set it
    holds, ``rows`` of retrieval (retrieve), ``questions`` in its block (retrieve) and the
    text ``bytes`` of its documents (embed_shard)."""

    step: str
    bytes: int
    chunks: int
    chunk_set: str
    rows: int = 0
    questions: int = 0
    shard_bytes: int = 0


def estimate_peaks(
    sizes: list[int],
    items: list[dict[str, Any]],
    shards: list[dict[str, Any]],
    questions: int,
    space: SearchSpace,
    per_token: dict[str, float],
) -> list[Peak]:
    """The peak of every heavy step the run will start: a ``chunk_embed`` and a ``retrieve``
    per retrieval item (``fanout.retrieval_items``), an ``embed_shard`` per shard item
    (``fanout.shard_items``), for documents of ``sizes`` bytes, ``questions`` questions and
    each embedding model's bytes a token (``per_token``)."""
    counts: dict[str, int] = {}

    def chunks_of(config: dict[str, Any], rows: list[int]) -> int:
        size, overlap = int(config["chunk_size"]), int(config["chunk_overlap"])
        return estimated_chunks(rows, size, overlap, per_token[config["embedding_model"]])

    peaks = []
    for item in items:
        configs = item["chunk_configs"]
        for config in configs:
            if config["chunk_config_id"] not in counts:
                counts[config["chunk_config_id"]] = chunks_of(config, sizes)
        largest = max(configs, key=lambda c: counts[c["chunk_config_id"]])
        chunks = counts[largest["chunk_config_id"]]
        first, stop = block_range(questions, int(item.get("block", 0)), int(item.get("blocks", 1)))
        rows = (stop - first) * sum(len(space.configs(c)) for c in configs)
        name = largest["chunk_config_id"]
        peaks.append(Peak("chunk_embed", _held("chunk_embed", chunks), chunks, name))
        retrieve = _held("retrieve", chunks) + rows * RETRIEVE_PER_ROW
        peaks.append(Peak("retrieve", retrieve, chunks, name, rows, stop - first))
    for item in filter(is_shard, shards):
        part = sizes[int(item["first"]) : int(item["stop"])]
        chunks = chunks_of(item["chunk_config"], part)
        name = item["chunk_config"]["chunk_config_id"]
        peak = _held("embed_shard", chunks)
        peaks.append(Peak("embed_shard", peak, chunks, name, shard_bytes=sum(part)))
    return peaks


def _held(step: str, chunks: int) -> int:
    """``step``'s base and its cost of ``chunks`` chunks."""
    return BASE[step] + chunks * PER_CHUNK[step]


def memory_limits(memory_limit: str, compiled: str) -> tuple[dict[str, int], str]:
    """The limits to check, by step, and where they come from: the run's ``memory_limit``
    for every heavy step, else the pods' as compiled (``compiled``: ``MEMORY_LIMITS_ENV``'s
    value); none: no check."""
    given = parse_size(memory_limit, "memory_limit (--memory-limit)")
    if given:
        return dict.fromkeys(HEAVY_STEPS, given), "memory_limit, --memory-limit"
    if compiled:
        return step_limits(compiled), "the pod's memory_limit, submit --resources FILE"
    return {}, ""


def check_memory(
    peaks: list[Peak], limits: dict[str, int], source: str, questions: int, cluster: bool = False
) -> None:
    """Refuse the run when a step's estimated peak exceeds its limit (``limits`` by step,
    from ``source``): one line naming the step, its estimate, the limit and what to change
    (options as ``submit -p`` takes them on a ``cluster``); the step furthest over its limit
    is named."""
    over = [p for p in peaks if p.step in limits and p.bytes > limits[p.step]]
    if not over:
        return
    peak = max(over, key=lambda p: p.bytes / limits[p.step])
    limit = limits[peak.step]

    def flag(name: str, value: int) -> str:
        return f"-p {name}={value}" if cluster else f"--{name.replace('_', '-')} {value}"

    what = f"~{peak.chunks:,} chunks of chunk set {peak.chunk_set}"
    changes = []
    room = limit - BASE[peak.step]
    if peak.step == "retrieve":
        what += f", {peak.rows:,} retrieval rows"
        rows_per_question = peak.rows / max(peak.questions, 1)
        fit = (room - peak.chunks * PER_CHUNK["retrieve"]) / (rows_per_question * RETRIEVE_PER_ROW)
        if fit >= 1:
            blocks = math.ceil(questions / math.floor(fit))
            changes.append(f"split the questions ({flag('retrieval_question_blocks', blocks)})")
    if peak.step == "embed_shard" and room > 0:
        smaller = int(peak.shard_bytes * room / (peak.bytes - BASE["embed_shard"])) // 1_000_000
        if smaller >= 1:
            shard = flag("embedding_shard_bytes", smaller * 1_000_000)
            changes.append(f"embed in smaller shards ({shard})")
    changes.append("choose larger chunk sizes (fewer chunks)")
    changes.append("raise the limit")
    raise RagsweepError(
        f"step {peak.step} would need about {peak.bytes / MIB:,.0f} MiB ({what}), over its "
        f"memory limit of {limit / MIB:,.0f} MiB ({source}): " + ", or ".join(changes)
    )
