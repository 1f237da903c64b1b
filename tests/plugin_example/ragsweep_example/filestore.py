"""A vector store kept as files: each collection a ``.npy`` matrix in ``FILESTORE_DIR``.

One module serves both sides: ragsweep's sweep uses ``FileStore`` (the ``VectorStore``
protocol), and a pattern's scripts use ``write_index`` / ``open_index``, this very file
copied beside them (``PATTERN_CODE``). It imports ragsweep only inside ``FileStore.search``,
so the scripts run it without ragsweep, and both sides search with the same ``nearest``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

ENV = "FILESTORE_DIR"


def nearest(vectors: np.ndarray, queries: np.ndarray, k: int, distance: str):
    """Row indices and scores (higher is nearer) of each query's ``k`` nearest vectors,
    best first, equal scores in row order."""
    scores = queries @ vectors.T
    if distance == "euclidean":
        scores = 2 * scores - (vectors**2).sum(axis=1)[None, :] - (queries**2).sum(axis=1)[:, None]
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(scores, ids, axis=1)


class FileStore:
    name = "filestore"
    INDEXES: dict = {"exact": {}}
    CONNECTION_KEYS = (ENV,)  # the pipeline mounts it from the vector-store Secret
    PATTERN_CODE = __file__

    def __init__(self, collection: str, distance: str) -> None:
        folder = os.environ.get(ENV)
        if not folder:
            raise RuntimeError(f"filestore: set {ENV} to a folder")
        self.path = Path(folder) / f"{collection}.npy"
        self.distance = distance

    def create(self, vectors: np.ndarray, texts: list[str], index) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        np.save(self.path, np.asarray(vectors, np.float32))

    def search(self, queries: np.ndarray, k: int):
        from ragsweep.retrieval.vector_stores import Hits

        vectors = np.load(self.path)
        out = Hits.empty(len(queries), k)
        ids, scores = nearest(vectors, np.asarray(queries, np.float32), k, self.distance)
        out.ids[:, : ids.shape[1]] = ids
        out.scores[:, : ids.shape[1]] = scores
        return out

    def keyword_search(self, queries: list[str], k: int):
        return None  # hybrid search uses ragsweep's BM25

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)


# ---- the pattern's side: indexing.py and inference.py call these ----------------------------


def write_index(where: str, chunks: list[dict], vectors: np.ndarray, settings: dict) -> None:
    """The pattern's index in folder ``where``: the chunks and their vectors."""
    folder = Path(where)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "chunks.jsonl").open("w", encoding="utf-8") as f:
        for chunk in chunks:
            f.write(json.dumps(chunk, ensure_ascii=False) + "\n")
    np.save(folder / "vectors.npy", np.asarray(vectors, np.float32))


def open_index(where: str, settings: dict, index_class):
    """The index ``write_index`` built, searched with ``nearest``; None when there is none."""
    folder = Path(where)
    if not (folder / "vectors.npy").is_file():
        return None
    with (folder / "chunks.jsonl").open(encoding="utf-8") as f:
        chunks = [json.loads(line) for line in f]

    class FileIndex(index_class):
        def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
            ids, scores = nearest(self.vectors, vector[None, :], k, settings["distance"])
            return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True)]

    return FileIndex(chunks, np.load(folder / "vectors.npy"))
