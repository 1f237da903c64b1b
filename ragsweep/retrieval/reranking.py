"""Rerankers: re-order the first candidates of a search (as many as the space says) by a
relevance score.

A reranker is named in the search space's ``rerankers``:

- ``none``: the search's own order (the default);
- ``cross-encoder:/path/to/folder``: a sentence-transformers ``CrossEncoder`` read from a
  local folder (nothing is downloaded);
- ``rerank:<model>``: an OpenAI-/Cohere-style ``POST {base_url}/rerank`` endpoint (vLLM,
  Llama Stack, KServe, Cohere), sent ``{model, query, documents, top_n}`` and answering
  ``{results: [{index, relevance_score}]}``. The base URL and key come from
  ``RAGSWEEP_RERANK_BASE_URL`` / ``RAGSWEEP_RERANK_API_KEY``, else from the LLM endpoint's
  (``RAGSWEEP_LLM_*``; its key only with its URL), as the judge's do.

Scores are kept for the whole step (``Reranking``): an endpoint's per (question, chunk text),
so configurations whose candidates overlap score each pair once; a cross-encoder's per
(question, candidate list), because its scores depend on the batch a pair is computed in
(its padding, its size: float32 differences that reorder near-equal scores). A cross-encoder
scores each question's candidates as one list, in the search's order, a text once,
``CROSS_ENCODER_BATCH`` pairs at a time: as a pattern's ``inference.py`` does, so that the
script reorders them exactly as the sweep did.

Rerankers are plugins: a ``RerankerKind`` registered under its kind (the part before the
``:``) in the entry point group ``ragsweep.rerankers``, ``cross-encoder`` and ``rerank`` in
ragsweep's setup.cfg.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragsweep.core import plugins
from ragsweep.core.errors import RagsweepError
from ragsweep.models.llm import RETRY_STATUS, Endpoint, retry_delay
from ragsweep.retrieval.vector_stores import Hits

if TYPE_CHECKING:  # imported where used: every pipeline step imports this module
    import httpx

log = logging.getLogger("ragsweep")

NONE = "none"
DEFAULT_FETCH_K = 20
CROSS_ENCODER_BATCH = 32  # pairs per forward pass; patterns/inference.py copies it


class Reranker(Protocol):
    """Scores (question, passages) pairs: higher is more relevant. ``whole_lists``: a
    passage's score depends on the passages scored with it, so a question's candidates are
    always scored together and their scores reused only for the same candidates."""

    name: str
    whole_lists: bool

    def score(self, items: Sequence[tuple[str, list[str]]]) -> list[tuple[np.ndarray, float]]:
        """For each (question, passages) of ``items``: one score per passage, and the
        milliseconds scoring them took (a request's time, or its share of a batch's)."""
        ...


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder read from a local folder; each question's
    passages in one ``predict`` call, as a pattern's script makes it."""

    whole_lists = True

    def __init__(self, name: str, path: str, batch_size: int = CROSS_ENCODER_BATCH) -> None:
        from sentence_transformers import CrossEncoder

        self.name = name
        self.batch_size = batch_size
        try:
            self.model = CrossEncoder(path, local_files_only=True)
        except Exception as exc:  # whatever transformers raises for a broken folder
            raise RagsweepError(
                f"reranker {name}: cannot load a cross-encoder from {path}: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            ) from None

    def score(self, items: Sequence[tuple[str, list[str]]]) -> list[tuple[np.ndarray, float]]:
        return [self._one(question, texts) for question, texts in items]

    def _one(self, question: str, texts: list[str]) -> tuple[np.ndarray, float]:
        if not texts:
            return np.zeros(0), 0.0
        start = time.perf_counter()
        scores = self.model.predict(
            [(question, text) for text in texts],
            batch_size=self.batch_size,
            show_progress_bar=False,
        )
        # a two-label model: the "relevant" column
        scores = np.asarray(scores, dtype=np.float64).reshape(len(texts), -1)[:, -1]
        return scores, (time.perf_counter() - start) * 1000


class EndpointReranker:
    """A ``/rerank`` endpoint: one request per question, ``concurrency`` in flight, retried
    on 408/409/429/5xx, timeouts and dropped connections like ``ragsweep.models.llm``."""

    whole_lists = False  # a pair's score is its own: only the pairs not yet scored are sent

    def __init__(
        self,
        name: str,
        endpoint: Endpoint,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s

    def score(self, items: Sequence[tuple[str, list[str]]]) -> list[tuple[np.ndarray, float]]:
        import httpx

        headers = {}
        if self.endpoint.api_key:
            headers["Authorization"] = f"Bearer {self.endpoint.api_key}"
        with (
            httpx.Client(timeout=self.timeout_s, headers=headers) as http,
            ThreadPoolExecutor(self.concurrency) as pool,
        ):
            return list(pool.map(lambda item: self._one(http, *item), items))

    def _one(self, http: httpx.Client, question: str, texts: list[str]) -> tuple[np.ndarray, float]:
        """The scores of ``texts`` for ``question``, and the answering request's time."""
        import httpx

        if not texts:
            return np.zeros(0), 0.0
        body = {
            "model": self.endpoint.model,
            "query": question,
            "documents": texts,
            "top_n": len(texts),
        }
        url = f"{self.endpoint.base_url}/rerank"
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            start = time.perf_counter()
            try:
                response = http.post(url, json=body)
            except httpx.TransportError as exc:  # timeouts and dropped connections
                if last:
                    raise self._error(f"{type(exc).__name__}: {exc}", attempt + 1) from None
                time.sleep(retry_delay(None, attempt, self.backoff_s))
                continue
            status = response.status_code
            if status in RETRY_STATUS or status >= 500:
                if last:
                    raise self._error(f"HTTP {status}: {response.text[:200]}", attempt + 1)
                time.sleep(retry_delay(response.headers, attempt, self.backoff_s))
                continue
            if not response.is_success:
                raise self._error(f"HTTP {status}: {response.text[:200]}", attempt + 1)
            return self._scores(response, len(texts)), (time.perf_counter() - start) * 1000
        raise AssertionError("unreachable")

    def _scores(self, response: httpx.Response, n: int) -> np.ndarray:
        scores = np.full(n, np.nan)
        try:
            for result in response.json()["results"]:
                scores[int(result["index"])] = float(result["relevance_score"])
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise self._error(f"malformed response ({type(exc).__name__}: {exc})", 1) from None
        if np.isnan(scores).any():
            raise self._error(f"the response scored {int((~np.isnan(scores)).sum())} of {n}", 1)
        return scores

    def _error(self, what: str, calls: int) -> RagsweepError:
        detail = " ".join(what.split())[:300]
        return RagsweepError(
            self.endpoint.redact(
                f"reranker {self.name} at {self.endpoint.where}/rerank failed after "
                f"{calls} call(s): {detail}"
            )
        )


@dataclass(frozen=True)
class RerankerKind:
    """What a reranker plugin registers: ``make(name, argument)`` builds the reranker
    ``<kind>:<argument>``; ``check(argument)`` says what is wrong with an argument (None:
    nothing), before the run starts; ``argument`` says what it means, for messages."""

    argument: str
    make: Callable[[str, str], Reranker]
    check: Callable[[str], str | None] = lambda argument: None


def _folder(path: str) -> str | None:
    return None if Path(path).is_dir() else f"{path} is not a folder"


CROSS_ENCODER = RerankerKind(
    "a local sentence-transformers cross-encoder folder",
    lambda name, path: CrossEncoderReranker(name, path),
    _folder,
)
ENDPOINT = RerankerKind(
    "a model served at RAGSWEEP_RERANK_BASE_URL",
    lambda name, model: EndpointReranker(name, Endpoint.from_env(model, role="RERANK")),
)


def check_reranker(name: str) -> None:
    """Raise ``RagsweepError`` unless ``name`` is ``none`` or ``<kind>:<argument>`` of a
    registered kind whose argument checks out (a cross-encoder's folder exists)."""
    if name == NONE:
        return
    kind, _, argument = name.partition(":")
    kinds = plugins.names(plugins.RERANKERS)
    if kind not in kinds or not argument.strip():
        choices = ", ".join(f"{k}:<{plugins.load(plugins.RERANKERS, k).argument}>" for k in kinds)
        raise RagsweepError(f"unknown reranker {name!r}; choose none, {choices}")
    problem = plugins.load(plugins.RERANKERS, kind).check(argument)
    if problem:
        raise RagsweepError(f"reranker {name!r}: {problem}")


def get_reranker(name: str) -> Reranker:
    """The reranker ``name`` names (not ``none``)."""
    check_reranker(name)
    kind, _, argument = name.partition(":")
    return plugins.load(plugins.RERANKERS, kind).make(name, argument)


def short_name(name: str) -> str:
    """``name`` for a label: a cross-encoder by its folder's name."""
    kind, _, argument = name.partition(":")
    if kind == "cross-encoder":
        return f"{kind}:{argument.rstrip('/').rsplit('/', 1)[-1]}"
    return name


class Reranking:
    """Rerank rankings with any number of rerankers, scoring each (reranker, question,
    chunk text) once, or, for a reranker scoring ``whole_lists``, each (reranker, question,
    candidate list) once; each pair also keeps its share of the time scoring it took (its
    request's, or its list's, shared evenly among the pairs)."""

    def __init__(self, get: Callable[[str], Reranker] = get_reranker) -> None:
        self.get = get
        self.rerankers: dict[str, Reranker] = {}
        # (reranker, question, the candidate texts scored together or (), text) -> (score, ms)
        self.scores: dict[tuple[str, str, tuple[str, ...], str], tuple[float, float]] = {}

    def rerank(
        self, name: str, questions: list[str], texts: list[str], candidates: np.ndarray
    ) -> tuple[Hits, np.ndarray]:
        """``candidates`` (questions x fetch_k chunk indices, -1 padded) in order of
        ``name``'s score, best first (ties: the search's order), with those scores, and
        each question's reranking time in ms (the time its pairs took when scored)."""
        if name not in self.rerankers:
            self.rerankers[name] = self.get(name)
        whole = self.rerankers[name].whole_lists
        rows = [[int(i) for i in row if i >= 0] for row in candidates.tolist()]
        # a question's candidate texts, in the search's order, each once
        lists = [tuple(dict.fromkeys(texts[i] for i in row)) if whole else () for row in rows]
        missing: dict[tuple[str, tuple[str, ...]], dict[str, None]] = {}
        for q, row in enumerate(rows):
            for i in row:
                if (name, questions[q], lists[q], texts[i]) not in self.scores:
                    missing.setdefault((questions[q], lists[q]), {})[texts[i]] = None
        if missing:
            self._score(
                name, [(q, together, list(found)) for (q, together), found in missing.items()]
            )
        out = Hits.empty(*candidates.shape)
        latency = np.zeros(len(rows))
        for q, row in enumerate(rows):
            got = [self.scores[(name, questions[q], lists[q], texts[i])] for i in row]
            order = sorted(range(len(row)), key=lambda j: -got[j][0])  # stable: search order
            out.ids[q, : len(row)] = [row[j] for j in order]
            out.scores[q, : len(row)] = [got[j][0] for j in order]
            latency[q] = sum(ms for _, ms in got)
        return out, latency

    def _score(self, name: str, items: list[tuple[str, tuple[str, ...], list[str]]]) -> None:
        """Score each (question, candidate list, texts to score) of ``items``."""
        scored = self.rerankers[name].score([(question, found) for question, _, found in items])
        for (question, together, found), (scores, ms) in zip(items, scored, strict=True):
            for text, score in zip(found, scores.tolist(), strict=True):
                self.scores[(name, question, together, text)] = (score, ms / len(found))
        pairs = sum(len(found) for _, _, found in items)
        log.info("reranker %s: scored %d pairs of %d questions", name, pairs, len(items))
