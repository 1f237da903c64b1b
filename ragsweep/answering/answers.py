"""A question as an answerer reads it (the question, its retrieved passages, a conversation's
earlier messages) and the answer it gives, with what it cost."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragsweep.models.llm import Reply


@dataclass(frozen=True)
class Answer:
    """An answer and what it cost; a model's request that failed after its retries leaves
    ``text`` empty and says why in ``error``."""

    text: str
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    llm_calls: int = 0
    cached: bool = False  # taken from the reply cache, no call made now
    error: str | None = None

    @classmethod
    def of_reply(cls, reply: Reply) -> Answer:
        """A model's reply (``models.llm.Reply``) as an answer: its text, cost and error."""
        return cls(
            text=reply.text,
            latency_s=reply.latency_s,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            llm_calls=reply.calls,
            error=reply.error,
        )

    def cached_fields(self) -> dict:
        """What the reply cache keeps of it (all but ``cached``)."""
        return {k: v for k, v in asdict(self).items() if k != "cached"}


ROLES = ("system", "user", "assistant")  # a history message of another role is the user's
History = tuple[tuple[str, str], ...]  # (role, content) messages before the question
# a question, its retrieved passages (best first) and, optionally, its conversation history
Question = tuple[str, list[str]] | tuple[str, list[str], History]
Answerer = Callable[[list[Question]], list[Answer]]  # answers a batch, in order


def parts(item: Question) -> tuple[str, list[str], History]:
    """(question, passages, history) of a batch item; no history when it has none."""
    question, passages, *rest = item
    return question, passages, (rest[0] if rest else ())


def parse_history(raw: str | None) -> History:
    """The (role, content) messages of a test set's ``conversation_history`` (JSON text, a
    list of ``{"role", "content"}`` as Giskard writes it); empty when there is none."""
    messages = json.loads(raw) if raw else []
    return tuple(
        (role if role in ROLES else "user", str(m["content"]))
        for m in messages
        if isinstance(m, dict) and m.get("content")
        for role in [str(m.get("role") or "user").strip().lower()]
    )


def with_history(question: str, history: History) -> str:
    """``question`` after the user's earlier turns: what retrieval and the extractive
    answerer search with, since a conversational question leaves its subject to them."""
    said = [content for role, content in history if role == "user"]
    return "\n".join([*said, question])
