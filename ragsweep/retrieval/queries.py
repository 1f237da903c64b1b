"""Query transformations: what is searched for a question, swept as ``query_transforms``.

- ``none``: the question itself;
- ``hyde``: a passage the model writes to answer the question (Hypothetical Document
  Embeddings): the passage is embedded and searched in place of the question;
- ``multi_query:N`` (``multi_query``: 3): the question and N paraphrases the model writes,
  each searched, their rankings fused by reciprocal rank (``ragsweep.retrieval.search.fuse``).

The model is the space's ``query_model`` (else its first ``llm:`` answerer's), at the LLM
endpoint (``RAGSWEEP_LLM_BASE_URL``). Each (transform, model identity: the endpoint's URL
without credentials and the model name, prompt, question) is asked once and its reply kept
in the reply cache (``ragsweep.models.replies``), so the chunk sets of a run, and a rerun,
share one call per question. A question whose transformation
fails after its retries stops the step with one line naming it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from ragsweep.core.errors import RagsweepError
from ragsweep.models.llm import Chat, Endpoint, LLMSettings
from ragsweep.models.prompts import HYDE_SYSTEM_PROMPT, MULTI_QUERY_SYSTEM_PROMPT
from ragsweep.models.replies import ReplyCache
from ragsweep.retrieval.search import fuse
from ragsweep.retrieval.vector_stores import Hits

log = logging.getLogger("ragsweep")

NONE, HYDE, MULTI_QUERY = "none", "hyde", "multi_query"
DEFAULT_PARAPHRASES = 3
MAX_PARAPHRASES = 10
MAX_TOKENS = 256  # a passage or a few paraphrases
NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")  # "1. ", "- " before a paraphrase


def canonical(name: str) -> str:
    """The one spelling of a transformation (``multi_query`` is ``multi_query:3``); raises
    ``RagsweepError`` for an unknown one."""
    kind, colon, count = name.strip().partition(":")
    if kind in (NONE, HYDE) and not colon:
        return kind
    if kind == MULTI_QUERY:
        n = int(count) if count.isdigit() else DEFAULT_PARAPHRASES if not colon else 0
        if 1 <= n <= MAX_PARAPHRASES:
            return f"{MULTI_QUERY}:{n}"
    raise RagsweepError(
        f"unknown query transform {name!r}; choose from none, hyde, multi_query, "
        f"multi_query:N (N paraphrases, 1 to {MAX_PARAPHRASES})"
    )


def paraphrases(name: str) -> int:
    """How many paraphrases transformation ``name`` (canonical) searches besides the question."""
    kind, _, count = name.partition(":")
    return int(count) if kind == MULTI_QUERY else 0


def messages(name: str, question: str) -> list[tuple[str, str]]:
    """The (role, content) messages that ask the model for ``name``'s texts."""
    if name == HYDE:
        return [("system", HYDE_SYSTEM_PROMPT), ("user", question)]
    n = paraphrases(name)
    return [("system", MULTI_QUERY_SYSTEM_PROMPT.replace("{n}", str(n))), ("user", question)]


def searched_texts(name: str, question: str, reply: str) -> list[str]:
    """What is searched for ``question`` under ``name`` given the model's ``reply``: the
    passage (hyde), or the question and the first N non-empty lines, numbering removed
    (multi_query:N; fewer when the model wrote fewer)."""
    if name == HYDE:
        return [reply.strip() or question]
    lines = [NUMBERING.sub("", line).strip() for line in reply.splitlines()]
    return [question, *[line for line in lines if line][: paraphrases(name)]]


@dataclass(frozen=True)
class Transformed:
    """One question's transformation: the model's reply, the requests it took (0: from the
    reply cache), and its error (None: answered)."""

    reply: str = ""
    calls: int = 0
    error: str | None = None


def transform(
    name: str, model: str, questions: list[str], settings: LLMSettings
) -> list[Transformed]:
    """Ask ``model`` for transformation ``name`` of every question (each distinct text once,
    through the reply cache, ``settings.concurrency`` in flight); one per question."""
    endpoint = Endpoint.from_env(model)
    chat = Chat(endpoint, settings)
    where = {"kind": "query_transform", "transform": name, "model": endpoint.identity}
    cache = ReplyCache()

    async def one(question: str) -> Transformed:
        key = {**where, "messages": [list(m) for m in messages(name, question)]}
        if (hit := cache.get(key)) is not None:
            return Transformed(**{**hit, "calls": 0})
        reply = await chat.ask(messages(name, question), temperature=0.0, max_tokens=MAX_TOKENS)
        done = Transformed(reply.text, reply.calls, reply.error)
        if reply.error is None:
            cache.put(key, asdict(done))
        return done

    distinct = list(dict.fromkeys(questions))
    try:
        found = dict(zip(distinct, chat.run(distinct, one, f"{name} queries"), strict=True))
    finally:
        cache.close()
    for question, done in found.items():
        if done.error is not None:
            raise RagsweepError(
                f"query transform {name} by {model} at {endpoint.where} failed for the "
                f"question {question[:80]!r}: {done.error}"
            )
    log.info(
        "query transform %s by %s: %d questions, %d calls",
        name,
        model,
        len(distinct),
        sum(d.calls for d in found.values()),
    )
    out, seen = [], set()
    for question in questions:  # a repeated question's calls are counted once
        out.append(found[question] if question not in seen else Transformed(found[question].reply))
        seen.add(question)
    return out


@dataclass(frozen=True)
class QueryPlan:
    """How one transformation searches: the query sets whose rankings it fuses (``""``:
    the questions as asked), which question each set holds (``used``: sets x questions;
    None: all), and per question what is stored as searched (None: the question) and the
    requests its transformation sent."""

    sets: tuple[str, ...]
    used: np.ndarray | None
    shown: list[str | None]
    calls: list[int]

    def ranking(self, rankings: Callable[[str], Hits], depth: int) -> Hits:
        """The transformation's ranking, ``depth`` deep, from each query set's
        (``rankings(set)``): the one set's, or the sets' fused by reciprocal rank (scored
        by the fused score)."""
        if len(self.sets) == 1:
            return rankings(self.sets[0])
        return fuse([rankings(name).ids for name in self.sets], depth, used=self.used)


def plan_queries(
    questions: list[str], transformed: dict[str, list[Transformed]]
) -> tuple[dict[str, list[str]], dict[str, QueryPlan]]:
    """The query sets to search (name -> one text per question) and each transformation's
    plan (``none`` included), from each transformation's replies (``transform``)."""
    n = len(questions)
    sets: dict[str, list[str]] = {"": questions}
    plans = {NONE: QueryPlan(("",), None, [None] * n, [0] * n)}
    for name, done in transformed.items():
        texts = [searched_texts(name, q, d.reply) for q, d in zip(questions, done, strict=True)]
        width = max(len(t) for t in texts)
        used = np.array([[j < len(t) for t in texts] for j in range(width)])
        names = []
        for j in range(width):
            column = [t[j] if j < len(t) else t[0] for t in texts]
            key = next((k for k, v in sets.items() if v == column), f"{name}#{j}")
            sets.setdefault(key, column)
            names.append(key)
        shown = [t[0] if name == HYDE else "\n".join(t[1:]) or None for t in texts]
        plans[name] = QueryPlan(tuple(names), used, shown, [d.calls for d in done])
    return sets, plans
