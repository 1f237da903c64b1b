"""Ask one ragsweep pattern: retrieve the chunks for a question and, with a model, answer it.

    python inference.py --index PATH "question" ["another question" ...]

Prints one JSON line per retrieved chunk (``question``, ``rank``, ``document_id``, ``text``,
``score``), best first, as the sweep ranked them for this pattern (the settings below:
query transformation, search type and its parameters, reranker, Top K, query prefix,
distance). A query transformation (``hyde``, ``multi_query:N``) asks the pattern's query
model at ``RAGSWEEP_LLM_BASE_URL`` (key ``RAGSWEEP_LLM_API_KEY``). A reranker
``rerank:<model>`` is asked at ``RAGSWEEP_RERANK_BASE_URL`` (key
``RAGSWEEP_RERANK_API_KEY``), else at the LLM's URL and key; ``cross-encoder:/folder`` is
read from that folder. When the pattern answers with a model (``llm:<model>``) and
``RAGSWEEP_LLM_BASE_URL`` is set (an OpenAI-compatible ``/v1`` URL; key in
``RAGSWEEP_LLM_API_KEY``), one more line per question holds the ``answer``. The index is
what ``indexing.py`` built: its folder, Milvus database or URI, or table (pgvector: in the
database at ``PGVECTOR_URL``; Oracle: at ``ORACLE_DSN``, as indexing.py says). Needs
llama-index, sentence-transformers and the store's client (pymilvus, psycopg, oracledb);
not ragsweep. A store's index, but the memory store's, is opened by the store's own
module beside this file (``vector_store.py``: ``open_index``). The questions are embedded
as indexing.py embeds the chunks: give it the same ``--onnx FILE``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import urllib.request
from pathlib import Path

import numpy as np
from indexing import (  # beside this file: the chunks' embedding
    ONNX_HELP,
    embed,
    plugin_code,
    runtime_note,
)
from prompts import HYDE_SYSTEM_PROMPT, MULTI_QUERY_SYSTEM_PROMPT  # ragsweep's own, beside
from text import STOPWORDS, words  # ragsweep's tokenizer, beside this file

SETTINGS: dict = {}  # ragsweep writes this pattern's settings here

FUSION_DEPTH = 100  # candidates each ranking gives to hybrid's fusion
QUERY_RRF_K = 60  # multi-query's reciprocal rank fusion (ragsweep.retrieval.search.fuse)
QUERY_MAX_TOKENS = 256  # of a query transformation's reply
NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")  # "1. ", "- " before a paraphrase
CROSS_ENCODER_BATCH = 32  # pairs per forward pass of a cross-encoder reranker


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, help="the index indexing.py built")
    parser.add_argument("--model", help="the embedding model's folder (default: as swept)")
    parser.add_argument("--onnx", help=ONNX_HELP)
    parser.add_argument("questions", nargs="+", help="the question(s) to ask")
    args = parser.parse_args()
    index = Index.load(args.index)
    if index is None:
        print(
            f"error: --index {args.index}: no index there; build it with indexing.py",
            file=sys.stderr,
        )
        return 2
    print(runtime_note(args.onnx), file=sys.stderr)  # before the model's first use
    prefix = SETTINGS["query_prefix"]
    searched = [query_texts(q) for q in args.questions]
    asked_texts = [prefix + t for texts in searched for t in texts]
    vectors = iter(embed(asked_texts, args.model, args.onnx))
    for question, texts in zip(args.questions, searched, strict=True):
        asked = [(text, next(vectors)) for text in texts]
        found = index.rank(question, asked, SETTINGS["top_k"])
        for rank, (row, score) in enumerate(found, start=1):
            line = {"question": question, "rank": rank, **index.chunk(row), "score": score}
            print(json.dumps(line, ensure_ascii=False))
        answer = generate(question, [index.chunk(row)["text"] for row, _ in found])
        if answer is not None:
            print(json.dumps({"question": question, "answer": answer}, ensure_ascii=False))
    return 0


class Index:
    """The chunks and their vectors, searched exactly (the memory store). Another store's
    module (``vector_store.py``) opens its index as a subclass searching in the store as
    the sweep did (its ``nearest``, and ``keywords`` when it has full-text search)."""

    STOPWORDS = STOPWORDS  # ragsweep's tokenizer, for a store's keyword search
    words = staticmethod(words)

    def __init__(self, chunks, vectors) -> None:
        self.chunks, self.vectors = chunks, vectors

    @classmethod
    def load(cls, where: str) -> Index | None:
        store = plugin_code("vector_store")
        if store is not None:  # the store's own module: an Index searched in its store
            return store.open_index(where, SETTINGS, cls)
        if SETTINGS["vector_store"] != "memory":
            sys.exit(f"error: vector store {SETTINGS['vector_store']}: no vector_store.py here")
        folder = Path(where)
        if not (folder / "chunks.jsonl").is_file():
            return None
        with (folder / "chunks.jsonl").open(encoding="utf-8") as f:
            chunks = [json.loads(line) for line in f]
        return cls(chunks, np.load(folder / "vectors.npy"))

    @classmethod
    def lazy(cls, read) -> Index:
        """An index whose rows a store reads by id when first needed (``Rows``)."""
        rows = Rows(read)
        return cls(rows, rows)

    def chunk(self, row: int) -> dict:
        return {"document_id": self.chunks[row]["document_id"], "text": self.chunks[row]["text"]}

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest chunks, best first (equal scores in chunk order)."""
        k = min(k, len(self.chunks))
        scores = self.vectors @ vector
        if SETTINGS["distance"] == "euclidean":
            scores = 2 * scores - (self.vectors**2).sum(axis=1) - float(vector @ vector)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order]

    def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best chunks by keywords (hybrid's other side): BM25 here."""
        return self.bm25(question, k)

    def rank(
        self, question: str, asked: list[tuple[str, np.ndarray]], k: int
    ) -> list[tuple[int, float]]:
        """The ``k`` best chunks for what is searched for ``question`` (``asked``: texts and
        their vectors): the search's, or its first ``rerank_fetch_k`` reordered by the
        reranker's scores for the question (equal scores in the search's order)."""
        if SETTINGS["reranker"] == "none":
            return self.fused(asked, k)
        found = self.fused(asked, SETTINGS["rerank_fetch_k"])
        scores = rerank(question, [self.chunks[row]["text"] for row, _ in found])
        order = sorted(range(len(found)), key=lambda j: -scores[j])
        return [(found[j][0], scores[j]) for j in order][:k]

    def fused(self, asked: list[tuple[str, np.ndarray]], k: int) -> list[tuple[int, float]]:
        """One text's search; several texts' (a question and its paraphrases) fused by
        reciprocal rank, each searched as deep as the sweep's rankings were (the space's
        largest Top K; a reranker's ``rerank_fetch_k``)."""
        if len(asked) == 1:
            return self.search(*asked[0], k)
        reranked = SETTINGS["reranker"] != "none"
        deep = SETTINGS["rerank_fetch_k"] if reranked else SETTINGS["query_fusion_depth"]
        fused: dict[int, float] = {}
        for text, vector in asked:
            for rank, (chunk, _) in enumerate(self.search(text, vector, deep), start=1):
                fused[chunk] = fused.get(chunk, 0.0) + 1.0 / (QUERY_RRF_K + rank)
        best = sorted(fused, key=lambda c: (-fused[c], c))[: min(k, deep)]
        return [(c, fused[c]) for c in best]

    def search(self, question: str, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        search = SETTINGS["search_type"]
        if search == "mmr":
            return self.mmr(vector, k, SETTINGS["mmr_lambda"], SETTINGS["mmr_fetch_k"])
        if search == "hybrid":
            return self.hybrid(question, vector, k, SETTINGS["rrf_k"])
        return self.nearest(vector, k)

    def mmr(self, vector: np.ndarray, k: int, lam: float, fetch_k: int) -> list[tuple[int, float]]:
        """Maximal marginal relevance over the ``fetch_k`` nearest chunks: each pick is the most
        similar to the question and the least similar to the chunks picked before it."""
        candidates = np.array([i for i, _ in self.nearest(vector, max(fetch_k, k))], np.int64)
        vectors = self.vectors[candidates]
        relevance = vectors @ vector
        redundancy = vectors @ vectors.T
        closest = np.zeros(len(candidates))
        picked = np.zeros(len(candidates), dtype=bool)
        out = []
        for rank in range(min(k, len(candidates))):
            score = lam * relevance - (1 - lam) * closest
            score[picked] = -np.inf
            best = int(np.argmax(score))
            picked[best] = True
            out.append((int(candidates[best]), float(score[best])))
            closest = np.maximum(closest, redundancy[best]) if rank else redundancy[best].copy()
        return out

    def hybrid(
        self, question: str, vector: np.ndarray, k: int, rrf_k: int
    ) -> list[tuple[int, float]]:
        """The nearest chunks and the keyword search's best, ``FUSION_DEPTH`` of each, fused by
        reciprocal rank: a chunk scores the sum of 1 / (rrf_k + its rank) over the rankings
        holding it."""
        pool = max(FUSION_DEPTH, k)
        fused: dict[int, float] = {}
        for ranking in (self.nearest(vector, pool), self.keywords(question, pool)):
            for rank, (chunk, _) in enumerate(ranking, start=1):
                fused[chunk] = fused.get(chunk, 0.0) + 1.0 / (rrf_k + rank)
        best = sorted(fused, key=lambda c: (-fused[c], c))[:k]
        return [(c, fused[c]) for c in best]

    def bm25(
        self, question: str, k: int, k1: float = 1.5, b: float = 0.75
    ) -> list[tuple[int, float]]:
        """Okapi BM25 over the chunks' content words: the ``k`` best chunks sharing a word
        with the question."""
        if not hasattr(self, "postings"):
            self.postings: dict[str, dict[int, int]] = {}
            lengths = np.zeros(len(self.chunks))
            for row, chunk in enumerate(self.chunks):
                for word in words(chunk["text"]):
                    counts = self.postings.setdefault(word, {})
                    counts[row] = counts.get(row, 0) + 1
                    lengths[row] += 1
            self.norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
        n = len(self.chunks)
        scores = np.zeros(n)
        for word in set(words(question)):
            counts = self.postings.get(word, {})
            idf = math.log(1 + (n - len(counts) + 0.5) / (len(counts) + 0.5))
            for row, tf in counts.items():
                scores[row] += tf * (k1 + 1) / (tf + self.norm[row]) * idf
        scores = scores.astype(np.float32)
        order = [int(i) for i in np.argsort(-scores, kind="stable")[:k] if scores[i] > 0]
        return [(i, float(scores[i])) for i in order]


class Rows(dict):
    """A store's rows by id, read (by ``read(ids)``: id, document id, text, vector) when
    first asked for: ``rows[i]`` is chunk ``i``; ``rows[ids]`` (an array) their vectors."""

    def __init__(self, read) -> None:
        super().__init__()
        self.reader = read

    def __getitem__(self, key):
        if isinstance(key, np.ndarray):
            self.read([int(i) for i in key if int(i) not in self])
            return np.stack([super(Rows, self).__getitem__(int(i))["vector"] for i in key])
        return super().__getitem__(key)

    def __missing__(self, row: int) -> dict:
        self.read([row])
        return super().__getitem__(row)

    def read(self, rows: list[int]) -> None:
        for start in range(0, len(rows), 1000):
            for row, document_id, text, vector in self.reader(rows[start : start + 1000]):
                self[row] = {"document_id": document_id, "text": text, "vector": vector}


# ---- the reranker ----------------------------------------------------------------------------


def rerank(question: str, texts: list[str]) -> list[float]:
    """The pattern's reranker's score of each of ``texts`` for ``question``. A cross-encoder
    scores the distinct texts in one call, in the search's order, as the sweep did: its
    scores depend on the batch a pair is computed in, and near-equal ones would reorder."""
    kind, _, argument = SETTINGS["reranker"].partition(":")
    if kind == "cross-encoder":
        distinct = list(dict.fromkeys(texts))
        scores = cross_encoder(argument).predict(
            [(question, text) for text in distinct],
            batch_size=CROSS_ENCODER_BATCH,
            show_progress_bar=False,
        )
        scores = np.asarray(scores, np.float64).reshape(len(distinct), -1)[:, -1].tolist()
        by_text = dict(zip(distinct, scores, strict=True))
        return [by_text[text] for text in texts]
    base_url = os.environ.get("RAGSWEEP_RERANK_BASE_URL")
    key = os.environ.get("RAGSWEEP_RERANK_API_KEY")
    if not base_url:  # the LLM endpoint's URL, and its key only with it
        base_url, key = (
            os.environ.get("RAGSWEEP_LLM_BASE_URL"),
            os.environ.get("RAGSWEEP_LLM_API_KEY"),
        )
    if not base_url:
        sys.exit(f"error: reranker {SETTINGS['reranker']}: set RAGSWEEP_RERANK_BASE_URL")
    body = {"model": argument, "query": question, "documents": texts, "top_n": len(texts)}
    request = urllib.request.Request(
        base_url.rstrip("/") + "/rerank",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}
        | ({"Authorization": f"Bearer {key}"} if key else {}),
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        results = json.load(response)["results"]
    scores = [0.0] * len(texts)
    for result in results:
        scores[int(result["index"])] = float(result["relevance_score"])
    return scores


@functools.cache
def cross_encoder(folder: str):
    from sentence_transformers import CrossEncoder

    return CrossEncoder(folder, local_files_only=True)


# ---- the answer -----------------------------------------------------------------------------


def query_texts(question: str) -> list[str]:
    """What the sweep searched for ``question``: the question itself; with ``hyde``, the
    passage the pattern's query model writes; with ``multi_query:N``, the question and the
    N paraphrases it writes (asked at ``RAGSWEEP_LLM_BASE_URL``, as the sweep asked)."""
    transform = SETTINGS.get("query_transform") or "none"
    if transform == "none":
        return [question]
    base_url = os.environ.get("RAGSWEEP_LLM_BASE_URL")
    if not base_url:
        sys.exit(f"error: query transform {transform}: set RAGSWEEP_LLM_BASE_URL")
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=SETTINGS["query_model"],
        api_base=base_url.rstrip("/"),
        api_key=os.environ.get("RAGSWEEP_LLM_API_KEY") or "none",
        is_chat_model=True,
        temperature=0.0,
        max_tokens=QUERY_MAX_TOKENS,
    )
    kind, _, count = transform.partition(":")
    system = HYDE_SYSTEM_PROMPT if kind == "hyde" else MULTI_QUERY_SYSTEM_PROMPT
    messages = [
        ChatMessage(role="system", content=system.replace("{n}", count)),
        ChatMessage(role="user", content=question),
    ]
    reply = llm.chat(messages).message.content or ""
    if kind == "hyde":
        return [reply.strip() or question]
    lines = [NUMBERING.sub("", line).strip() for line in reply.splitlines()]
    return [question, *[line for line in lines if line][: int(count)]]


def generate(question: str, passages: list[str]) -> str | None:
    """The pattern's model's answer over ``passages``, with the swept prompt; None when the
    pattern answers without a model or no endpoint is set."""
    answerer, base_url = SETTINGS["answerer"], os.environ.get("RAGSWEEP_LLM_BASE_URL")
    if not answerer.startswith("llm:") or not base_url:
        return None
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model=answerer.removeprefix("llm:"),
        api_base=base_url.rstrip("/"),
        api_key=os.environ.get("RAGSWEEP_LLM_API_KEY") or "none",
        is_chat_model=True,
        temperature=SETTINGS["temperature"],
        max_tokens=SETTINGS["max_tokens"],
    )
    user = SETTINGS["prompt_template"].replace("{context}", "\n\n".join(passages))
    messages = [
        ChatMessage(role="system", content=SETTINGS["system_prompt"]),
        ChatMessage(role="user", content=user.replace("{question}", question)),
    ]
    return llm.chat(messages).message.content


if __name__ == "__main__":
    sys.exit(main())
