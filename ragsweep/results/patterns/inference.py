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
not ragsweep. A plugin store's index is opened by its ``vector_store.py`` beside this file
(``open_index``).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import sys
import unicodedata
import urllib.request
from pathlib import Path

import numpy as np
from indexing import (  # beside this file: the same embedding as the chunks', the same store
    COLLECTION,
    ORACLE_METRICS,
    ORACLE_SQL,
    PG_OPERATORS,
    check_oracle_table,
    check_table,
    embed,
    oracle_connect,
    pg_connect,
    plugin_code,
)

SETTINGS: dict = {}  # ragsweep writes this pattern's settings here

FUSION_DEPTH = 100  # candidates each ranking gives to hybrid's fusion
QUERY_RRF_K = 60  # multi-query's reciprocal rank fusion (ragsweep.retrieval.search.fuse)
QUERY_MAX_TOKENS = 256  # of a query transformation's reply
NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")  # "1. ", "- " before a paraphrase
HYDE_SYSTEM_PROMPT = (
    "You write the passage of a product's documentation that answers a question. Write one "
    "short paragraph, as the documentation would state it, and nothing else."
)
MULTI_QUERY_SYSTEM_PROMPT = (
    "You rewrite a question about a product's documentation in other words, to search the "
    "documentation with. Write exactly {n} rewritings, one a line, with no numbering and "
    "nothing else."
)
CROSS_ENCODER_BATCH = 32  # pairs per forward pass of a cross-encoder reranker
# the sweep's pgvector searches (ragsweep/retrieval/vector_stores/pgvector.py), and the rows by id
SET_HNSW = "SET hnsw.ef_search = {ef_search}"
SET_IVF = "SET ivfflat.probes = {nprobe}"
NEAREST = "SELECT id, embedding {op} %(q)s AS distance FROM {table} ORDER BY distance LIMIT %(k)s"
KEYWORDS = r"""
SELECT id, ts_rank(tsv, query, 1) AS score
FROM {table}, (
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')
           ::tsquery AS query
    FROM unnest(tsvector_to_array(to_tsvector('simple', %(q)s))) AS lexeme
    WHERE lexeme <> ALL (%(stop)s)
) AS asked
WHERE tsv @@ query
ORDER BY score DESC, id
LIMIT %(k)s"""
READ_ROWS = "SELECT id, document_id, text, embedding FROM {table} WHERE id = ANY(%s)"
# a store's distance -> a higher-is-better score on the memory store's scale, as the sweep's
SCORES = {"cosine": lambda d: 1 - d, "dot": lambda d: -d, "euclidean": lambda d: -(d**2)}
QUERY_TEXT_MAX = 3000  # characters of an Oracle Text query built from a question's words
STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i in is it its my of on or "
    "that the their there this to was what when where which who why will with you your".split()
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True, help="the index indexing.py built")
    parser.add_argument("--model", help="the embedding model's folder (default: as swept)")
    parser.add_argument("questions", nargs="+", help="the question(s) to ask")
    args = parser.parse_args()
    index = Index.load(args.index)
    if index is None:
        print(
            f"error: --index {args.index}: no index there; build it with indexing.py",
            file=sys.stderr,
        )
        return 2
    prefix = SETTINGS["query_prefix"]
    searched = [query_texts(q) for q in args.questions]
    vectors = iter(embed([prefix + t for texts in searched for t in texts], args.model))
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
    """The chunks and their vectors, searched exactly (the memory store); the stores'
    indexes below search in their store as the sweep did."""

    def __init__(self, chunks, vectors) -> None:
        self.chunks, self.vectors = chunks, vectors

    @classmethod
    def load(cls, where: str) -> Index | None:
        plugin = plugin_code("vector_store")
        if plugin is not None:  # a plugin store's index: an Index searched in its store
            return plugin.open_index(where, SETTINGS, cls)
        if SETTINGS["vector_store"] == "milvus":
            return MilvusIndex.open(where)
        if SETTINGS["vector_store"] == "pgvector":
            return PgvectorIndex.open(where)
        if SETTINGS["vector_store"] == "oracle":
            return OracleIndex.open(where)
        if SETTINGS["vector_store"] != "memory":
            sys.exit(f"error: vector store {SETTINGS['vector_store']}: no vector_store.py here")
        folder = Path(where)
        if not (folder / "chunks.jsonl").is_file():
            return None
        with (folder / "chunks.jsonl").open(encoding="utf-8") as f:
            chunks = [json.loads(line) for line in f]
        return cls(chunks, np.load(folder / "vectors.npy"))

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


class MilvusIndex(Index):
    """A Milvus collection indexing.py built: its vector search with the pattern's index and
    metric, and, for hybrid, Milvus's BM25 full-text search as the sweep used it (BM25 here
    on a server without full-text search, as the sweep fell back to)."""

    @classmethod
    def open(cls, uri: str) -> MilvusIndex | None:
        from pymilvus import MilvusClient

        if uri.endswith(".db") and not Path(uri).exists():
            return None
        client = MilvusClient(uri=uri, token=os.environ.get("MILVUS_TOKEN", ""))
        if not client.has_collection(COLLECTION):
            return None
        client.load_collection(COLLECTION)
        fields = client.describe_collection(COLLECTION).get("fields", [])
        rows = []
        pages = client.query_iterator(
            COLLECTION,
            batch_size=1000,
            filter="id >= 0",
            output_fields=["id", "vector", "text", "document_id"],
        )
        while page := pages.next():
            rows += page
        pages.close()
        rows.sort(key=lambda r: r["id"])
        chunks = [{"document_id": r["document_id"], "text": r["text"]} for r in rows]
        index = cls(chunks, np.asarray([r["vector"] for r in rows], np.float32))
        index.client = client
        index.full_text = any(f.get("name") == "sparse" for f in fields)
        return index

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        index = SETTINGS["milvus_index"]
        params = dict(index["search"])
        k = min(k, len(self.chunks))
        if "ef" in params:
            params["ef"] = max(params["ef"], k)
        found = self.ask(
            vector, "vector", k, {"metric_type": index["metric_type"], "params": params}
        )
        if SETTINGS["distance"] == "euclidean":  # Milvus's L2: lower is nearer
            found = [(i, -d) for i, d in found]
        return sorted(found, key=lambda f: (-f[1], f[0]))  # equal scores in chunk order

    def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
        """Milvus's BM25 ranking of the chunks sharing a term with the question."""
        if not self.full_text:
            return self.bm25(question, k)
        if not question.strip():
            return []
        found = self.ask(question, "sparse", min(k, len(self.chunks)), {"metric_type": "BM25"})
        found = [(i, abs(d)) for i, d in found]  # Milvus Lite reports BM25 scores negated
        return sorted(found, key=lambda f: (-f[1], f[0]))

    def ask(self, query, field: str, k: int, params: dict) -> list[tuple[int, float]]:
        [hits] = self.client.search(
            COLLECTION, data=[query], anns_field=field, limit=k, search_params=params
        )
        return [(int(h["id"]), float(h["distance"])) for h in hits]


class PgvectorIndex(Index):
    """A pgvector table indexing.py built, searched with the sweep's statements: the
    distance operator's nearest rows under the pattern's index, and, for hybrid,
    PostgreSQL's full-text search. Rows are read by id when first needed."""

    @classmethod
    def open(cls, table: str) -> PgvectorIndex | None:
        from psycopg import sql

        conn = pg_connect()
        name = sql.Identifier(check_table(table))
        found = conn.execute("SELECT to_regclass(%s)", [name.as_string(conn)])
        if found.fetchone()[0] is None:
            return None
        rows = Rows(
            lambda ids: conn.execute(sql.SQL(READ_ROWS).format(table=name), [ids], binary=True)
        )
        index = cls(rows, rows)
        index.conn, index.table = conn, name
        kind, params = SETTINGS["pgvector_index"]["kind"], SETTINGS["pgvector_index"]["params"]
        if kind == "ivf":
            conn.execute(sql.SQL(SET_IVF).format(nprobe=sql.Literal(int(params["nprobe"]))))
        if kind != "exact":
            conn.execute("SET enable_seqscan = off")
        return index

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        from psycopg import sql

        index = SETTINGS["pgvector_index"]
        if index["kind"] == "hnsw":
            ef_search = min(max(int(index["params"]["ef_search"]), k), 1000)
            self.conn.execute(sql.SQL(SET_HNSW).format(ef_search=sql.Literal(ef_search)))
        operator = sql.SQL(PG_OPERATORS[SETTINGS["distance"]][0])
        statement = sql.SQL(NEAREST).format(op=operator, table=self.table)
        rows = self.conn.execute(statement, {"q": vector, "k": k}).fetchall()
        return [(row, SCORES[SETTINGS["distance"]](distance)) for row, distance in rows]

    def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
        from psycopg import sql

        statement = sql.SQL(KEYWORDS).format(table=self.table)
        asked = {"q": question, "k": k, "stop": sorted(STOPWORDS)}
        return [(row, float(score)) for row, score in self.conn.execute(statement, asked)]


class OracleIndex(Index):
    """An Oracle table indexing.py built, searched with the sweep's statements: exact
    ``FETCH FIRST`` or ``FETCH APPROX`` through the pattern's index, and, for hybrid, Oracle
    Text (BM25 here when the table has no text index, as the sweep fell back to). Rows are
    read by id when first needed."""

    @classmethod
    def open(cls, table: str) -> OracleIndex | None:
        conn = oracle_connect()
        table = check_oracle_table(table).upper()
        cur = conn.cursor()
        found = cur.execute(ORACLE_SQL["read_comment"], table_name=table).fetchone()
        if not found or not found[0]:
            return None

        def read(ids: list[int]) -> list[tuple]:
            binds = {f"id{i}": row for i, row in enumerate(ids)}
            statement = ORACLE_SQL["read_rows"].format(
                table=table, ids=", ".join(f":{name}" for name in binds)
            )
            found = conn.cursor().execute(statement, binds).fetchall()
            return [(int(i), d, t, np.asarray(v, np.float32)) for i, d, t, v in found]

        rows = Rows(read)
        index = cls(rows, rows)
        index.cursor, index.table = cur, table
        index.text_index = bool(json.loads(found[0]).get("text_index"))
        return index

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        from array import array

        index, metric = SETTINGS["oracle_index"], ORACLE_METRICS[SETTINGS["distance"]]
        if index["kind"] == "hnsw":
            ef_search = max(int(index["params"]["ef_search"]), k)
            statement = ORACLE_SQL["approx_hnsw"].format(
                table=self.table, metric=metric, ef_search=ef_search
            )
        elif index["kind"] == "ivf":
            nprobe = int(index["params"]["nprobe"])
            statement = ORACLE_SQL["approx_ivf"].format(
                table=self.table, metric=metric, nprobe=nprobe
            )
        else:
            statement = ORACLE_SQL["exact"].format(table=self.table, metric=metric)
        self.cursor.arraysize = self.cursor.prefetchrows = k + 1
        query = array("f", np.asarray(vector, np.float32).tobytes())
        found = self.cursor.execute(statement, query_vector=query, k=k).fetchall()[:k]
        return [(int(row), SCORES[SETTINGS["distance"]](d)) for row, d in found]

    def keywords(self, question: str, k: int) -> list[tuple[int, float]]:
        """Oracle Text's ranking of the chunks holding any of the question's words (none
        when it has none, or Oracle Text rejects its query, as in the sweep)."""
        import oracledb

        if not self.text_index:
            if not hasattr(self, "everything"):  # BM25 needs every chunk, in row order
                count = self.cursor.execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]
                self.chunks.read(list(range(count)))
                self.everything = Index([self.chunks[i] for i in range(count)], None)
            return self.everything.bm25(question, k)
        query = text_query(question)
        if not query:
            return []
        statement = ORACLE_SQL["keywords"].format(table=self.table)
        self.cursor.arraysize = self.cursor.prefetchrows = k + 1
        try:
            found = self.cursor.execute(statement, text_query=query, k=k).fetchall()[:k]
        except oracledb.DatabaseError as exc:
            if "DRG-" not in str(exc):
                raise
            return []
        return [(int(row), float(score)) for row, score in found]


def text_query(question: str) -> str | None:
    """The sweep's Oracle Text query: the question's words, each escaped in braces, joined
    by ACCUM (chunks holding more of them rank higher), at most ``QUERY_TEXT_MAX`` long."""
    terms, length = [], 0
    for word in dict.fromkeys(words(question)):
        term = "{" + word + "}"
        length += len(term) + len(" ACCUM ")
        if length > QUERY_TEXT_MAX:
            break
        terms.append(term)
    return " ACCUM ".join(terms) or None


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


# ---- words: the keyword search's tokenizer, as ragsweep's ----------------------------------

CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc"
ASCII_WORD = re.compile(r"[a-z0-9]+(?:[._\-][a-z0-9]+)*")


def words(text: str) -> list[str]:
    """Case-folded content words; CJK runs as character pairs; English stop words dropped."""
    if text.isascii():
        return [w for w in ASCII_WORD.findall(text.lower()) if w not in STOPWORDS]
    import regex

    letter = rf"[[\p{{L}}\p{{M}}\p{{N}}]--[{CJK}]]"
    word = regex.compile(rf"(?P<cjk>[{CJK}]+)|{letter}+(?:[._\-]{letter}+)*", regex.VERSION1)
    accented = regex.compile(r"([\p{Latin}\p{Greek}\p{Cyrillic}])\p{Mn}+")
    folded = unicodedata.normalize(
        "NFC", accented.sub(r"\1", unicodedata.normalize("NFKD", text.casefold()))
    )
    tokens: list[str] = []
    for match in word.finditer(folded):
        run = match.group()
        if match.group("cjk") is None:
            if run not in STOPWORDS:
                tokens.append(run)
        elif len(run) == 1:
            tokens.append(run)
        else:
            tokens += [run[i : i + 2] for i in range(len(run) - 1)]
    return tokens


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
