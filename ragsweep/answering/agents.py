"""A deployed RAG application as a row of the leaderboard (``ragsweep run --agent NAME=URL``).

The application retrieves on its own: it is an OpenAI-compatible chat endpoint at ``URL``
(its key in ``RAGSWEEP_AGENT_API_KEY``, never a parameter), sent each question once, after
the question's conversation history. Its answers are judged and scored like a
configuration's; it is a configuration of its own kind, labelled ``agent:NAME``, with no
swept parameter. Its reply message may carry what it retrieved, in an optional ``context``
field: a list of ``{"doc_id": ..., "text": ...}``, best first. Without it, the retrieval
metrics and faithfulness are not measured for the assistant (null, never 0); with it, they
are computed as for the sweep's configurations, the span metrics where every text is found
in its document.

Replies are cached (``ragsweep.models.replies``) by the assistant's URL without credentials,
its name, the question and the history: a rerun makes no call.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ragsweep.answering.answers import Answer, History
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import config_id
from ragsweep.core.text import locate

if TYPE_CHECKING:  # imported where used: the settings import this module
    from ragsweep.models.llm import Endpoint, LLMSettings

log = logging.getLogger("ragsweep")

PREFIX = "agent:"  # an assistant's label and answerer: agent:NAME
KEY_VARIABLE = "RAGSWEEP_AGENT_API_KEY"
CONTEXT_FIELD = "context"  # the reply message's optional list of what was retrieved
NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Agent:
    """A deployed assistant: its name on the leaderboard and its base URL."""

    name: str
    url: str

    @property
    def label(self) -> str:
        return PREFIX + self.name

    def config(self) -> dict[str, Any]:
        """Its configuration: an id stable across runs (by name, so that a nightly compares
        the assistant however it is redeployed), its label, no swept parameter."""
        return {
            "config_id": row_id(self.name),
            "label": self.label,
            "answerer": self.label,
        }

    def spec(self) -> str:
        """``NAME=URL``, as ``--agent`` and the pipeline parameter ``agents`` take it."""
        return f"{self.name}={self.url}"

    def endpoint(self) -> Endpoint:
        """Where it is asked: its URL, its name as the model, the key from
        ``RAGSWEEP_AGENT_API_KEY`` (kept out of reprs and messages)."""
        from ragsweep.models.llm import Endpoint

        key = os.environ.get(KEY_VARIABLE, "")
        return Endpoint(self.name, self.url, key, "AGENT", f"--agent {self.name}", KEY_VARIABLE)


def row_id(name: str) -> str:
    """The config id of assistant ``name``'s row, in every run that names it so."""
    return config_id({"agent": name})


def parse_agent(text: str, source: str = "--agent") -> Agent:
    """``NAME=URL`` as an ``Agent``; else a clear error. The URL may hold no credentials and
    no query: the key goes in ``RAGSWEEP_AGENT_API_KEY``, and the URL is kept in settings."""
    name, sep, url = str(text).partition("=")
    name, url = name.strip(), url.strip().rstrip("/")
    if not sep or not url:
        raise RagsweepError(f"{source} {text!r}: expected NAME=URL, e.g. mybot=http://host/v1")
    if not NAME_RULE.fullmatch(name):
        raise RagsweepError(
            f"{source} {name!r}: a name is a letter or digit, then letters, digits, '.', '_' "
            "or '-' (64 at most)"
        )
    parts = urlsplit(url)
    if "@" in parts.netloc or parts.query or parts.fragment:
        raise RagsweepError(
            f"{source} {name}: the URL may hold no credentials, query or fragment (it is kept "
            f"in the run's settings); put the key in {KEY_VARIABLE}"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RagsweepError(f"{source} {name}: {url} is no http(s) URL")
    return Agent(name, url)


def parse_agents(specs: list[str] | tuple[str, ...], source: str = "--agent") -> list[Agent]:
    """Every ``NAME=URL``; a name given twice is an error."""
    agents = [parse_agent(s, source) for s in specs]
    names = [a.name for a in agents]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RagsweepError(f"{source}: the name {twice[0]!r} is given twice")
    return agents


def is_agent(config: dict[str, Any]) -> bool:
    """Whether ``config`` is a deployed assistant's row, not a configuration of the sweep."""
    return str(config.get("answerer") or "").startswith(PREFIX)


@dataclass(frozen=True)
class Retrieved:
    """What the assistant said it retrieved: document ids and texts, best first, and where
    each text lies in its document (None: not every text was found)."""

    doc_ids: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    spans: tuple[tuple[str, int, int], ...] | None = None
    given: bool = False  # the reply carried a context field


@dataclass(frozen=True)
class Reply:
    """The assistant's answer to one question and what it said it retrieved."""

    answer: Answer
    retrieved: Retrieved


def ask_agent(
    agent: Agent,
    items: list[tuple[str, History]],
    documents: dict[str, str],
    settings: LLMSettings | None = None,
) -> list[Reply]:
    """Ask ``agent`` each (question, history) once, through the reply cache, with the
    run's concurrency and deadlines (``settings``); its contexts resolved against
    ``documents`` (id -> text). A request that fails after its retries is
    an answer with an error (not cached); every one failing is a ``RagsweepError``."""
    from ragsweep.models.identity import endpoint
    from ragsweep.models.llm import Chat, LLMSettings, check_reachable
    from ragsweep.models.replies import ReplyCache

    where = agent.endpoint()
    check_reachable(where)
    chat = Chat(where, settings or LLMSettings())
    identity = endpoint(agent.url, agent.name)
    cache = ReplyCache()

    async def one(item: tuple[str, History]) -> tuple[Answer, Any]:
        question, history = item
        key = {"kind": "agent", "endpoint": identity, "question": question}
        if history:
            key["history"] = [list(message) for message in history]
        if (hit := cache.get(key)) is not None:
            context = hit.pop(CONTEXT_FIELD, None)
            return Answer(**hit, cached=True), context
        reply = await chat.ask([*history, ("user", question)])
        answer = Answer.of_reply(reply)
        context = reply.fields.get(CONTEXT_FIELD)
        if reply.error is None:
            cache.put(key, {**answer.cached_fields(), CONTEXT_FIELD: context})
        return answer, context

    try:
        got = chat.run(items, one, "answers")
    finally:
        cache.close()
    failed = [a.error for a, _ in got if a.error is not None]
    if failed and len(failed) == len(got):
        raise RagsweepError(
            f"agent {agent.name} at {where.where} answered none of {len(got)} questions; "
            f"first error: {failed[0]}"
        )
    log.info(
        "%s: %d answers, %d from the cache, %d failed",
        agent.label,
        len(got),
        sum(a.cached for a, _ in got),
        len(failed),
    )
    return [Reply(a, retrieved(agent, context, documents)) for a, context in got]


def retrieved(agent: Agent, context: Any, documents: dict[str, str]) -> Retrieved:
    """The reply's ``context`` field read: a list of ``{"doc_id", "text"}`` (a document id
    as the test set names it: its key, or its unique basename). A field of another shape
    is ignored, with a warning: the row's retrieval is then not measured."""
    if context is None:
        return Retrieved()
    items = context if isinstance(context, list) else None
    if items is None or not all(
        isinstance(i, dict) and isinstance(i.get("doc_id"), str) and isinstance(i.get("text"), str)
        for i in items
    ):
        log.warning(
            '%s: a reply\'s %r field is not a list of {"doc_id", "text"}: ignored',
            agent.label,
            CONTEXT_FIELD,
        )
        return Retrieved()
    names = _by_basename(documents)
    doc_ids = tuple(
        i["doc_id"] if i["doc_id"] in documents else names.get(i["doc_id"], i["doc_id"])
        for i in items
    )
    texts = tuple(i["text"] for i in items)
    spans = []
    for doc_id, text in zip(doc_ids, texts, strict=True):
        found = locate(documents[doc_id], text) if doc_id in documents else None
        if found is None:
            return Retrieved(doc_ids, texts, None, True)
        spans.append((doc_id, *found))
    return Retrieved(doc_ids, texts, tuple(spans), True)


def _by_basename(documents: dict[str, str]) -> dict[str, str]:
    """Document ids by their basename, where the basename is unique."""
    seen: dict[str, list[str]] = {}
    for doc_id in documents:
        seen.setdefault(doc_id.rsplit("/", 1)[-1], []).append(doc_id)
    return {base: ids[0] for base, ids in seen.items() if len(ids) == 1}
