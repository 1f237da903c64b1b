"""The LLM judge: is an answer correct with respect to the reference answers, and why?

It gives the fields Giskard RAGET and the Oracle AI Optimizer Testbed use: ``correctness``
(true/false) and ``correctness_reason``. It asks for a JSON object matching
``VERDICT_SCHEMA`` (``response_format``: the JSON schema, else a JSON object, as far as the
server accepts), reads it from bare, fenced, wrapped or chatty replies, and when it cannot,
asks again (``CORRECTIONS``: saying what was wrong, then with stricter
instructions and an example). A reply that still cannot be read is a judge error for that
answer: the judge's failure, left out of the comparisons (``ragsweep.evaluation.scoring``).
Verdicts are cached by (the judge's identity: its URL without credentials and model name,
prompt, question, references, answer), so a rerun and configurations that gave the same
answer share one judgment.
"""

from __future__ import annotations

import ast
import json
import logging
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from ragsweep.evaluation.metrics import is_out_of_scope
from ragsweep.models.llm import Chat, Endpoint, LLMSettings, Reply, check_reachable
from ragsweep.models.prompts import (
    JUDGE_CORRECTION,
    JUDGE_OUT_OF_SCOPE,
    JUDGE_STRICT,
    JUDGE_TEMPLATE,
    RELEVANCE_PROMPT,
)
from ragsweep.models.replies import ReplyCache, digest

log = logging.getLogger("ragsweep")

VERDICT_KEYS = ("correctness", "correct", "is_correct", "eval_passed")
REASON_KEYS = ("correctness_reason", "reason", "explanation")
# what the judge is told after an unreadable reply: what was wrong, then stricter instructions
CORRECTIONS = (JUDGE_CORRECTION, JUDGE_STRICT)
# the verdict's shape, sent as ``response_format`` where the server accepts a JSON schema
# (small models give parseable verdicts only so); a JSON object, or none, where it does not.
# The reason is bounded so that the JSON closes within a small max_tokens.
REASON_CHARACTERS = 200
VERDICT_SCHEMA = {
    "title": "verdict",
    "type": "object",
    "properties": {
        "correctness": {"type": "boolean"},
        "correctness_reason": {"type": "string", "maxLength": REASON_CHARACTERS},
    },
    "required": ["correctness", "correctness_reason"],
    "additionalProperties": False,
}
# AutoRAG's answer_relevance: a score of 1 to 5 (ai4rag's judge response format)
RELEVANCE_SCHEMA = {
    "title": "relevance",
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "rationale": {"type": "string", "maxLength": REASON_CHARACTERS},
    },
    "required": ["score", "rationale"],
    "additionalProperties": False,
}
TRUE_WORDS = frozenset({"true", "yes", "correct", "pass", "passed", "1"})
FALSE_WORDS = frozenset({"false", "no", "incorrect", "wrong", "fail", "failed", "0"})


@dataclass(frozen=True)
class Judged:
    """What the judge sees of one answer."""

    question: str
    references: list[str]
    answer: str
    question_type: str | None = None  # Giskard's; "out of scope" asks for a refusal

    @property
    def out_of_scope(self) -> bool:
        return is_out_of_scope(self.question_type)


@dataclass(frozen=True)
class Verdict:
    """The judge's verdict on one answer, or why there is none."""

    correct: bool | None = None
    reason: str | None = None
    error: str | None = None
    score: float | None = None  # answer_relevance in [0, 1], when that was asked
    llm_calls: int = 0
    cached: bool = False


def parse_verdict(reply: str) -> tuple[bool, str]:
    """(correct, reason) from a judge's reply; ``ValueError`` saying what is missing.

    Reads the first JSON object that holds a verdict, wherever it is in the reply: bare,
    in a ```json fence, after or before prose, nested in another object, or written with
    Python literals (``True``, single quotes). The verdict may be a boolean, ``"yes"`` /
    ``"no"``-like words or 0/1, under ``correctness`` (or ``correct``, ``is_correct``,
    Giskard's ``eval_passed``); the reason under ``correctness_reason`` or ``reason``.
    """
    objects = _objects(reply)
    if not objects:
        raise ValueError("it holds no JSON object")
    for obj in objects:
        found = _find_verdict(obj)
        if found is not None:
            return found
    raise ValueError('its JSON has no "correctness" true or false')


def parse_relevance(reply: str) -> tuple[float, str]:
    """(answer_relevance, rationale) from a reply holding ``{"score": 1..5}``: the score
    scaled to [0, 1] as ai4rag scales it, (score - 1) / 4; ``ValueError`` otherwise."""
    for obj in _objects(reply):
        if isinstance(obj, dict) and "score" in obj:
            try:
                score = int(obj["score"])
            except (TypeError, ValueError):
                continue
            if 1 <= score <= 5 and score == obj["score"]:
                return (score - 1) / 4, str(obj.get("rationale") or "").strip()
    raise ValueError('it holds no JSON object with a "score" from 1 to 5')


def _objects(text: str) -> list[Any]:
    """Every JSON object that starts at a ``{`` of ``text``, outermost first."""
    decoder, found, start = json.JSONDecoder(), [], text.find("{")
    while start >= 0:
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        found.append(obj)
        start = text.find("{", end)
    if not found and "{" in text and "}" in text:
        with suppress(ValueError, SyntaxError, MemoryError, RecursionError):
            found.append(ast.literal_eval(text[text.find("{") : text.rfind("}") + 1]))
    return found


def _truth(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().strip(".").lower()
        return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None
    return None


def _find_verdict(obj: Any) -> tuple[bool, str] | None:
    if isinstance(obj, dict):
        lowered = {str(k).strip().lower(): v for k, v in obj.items()}
        for key in VERDICT_KEYS:
            if key in lowered and (truth := _truth(lowered[key])) is not None:
                reason = next((lowered[k] for k in REASON_KEYS if k in lowered), "")
                return truth, str(reason or "").strip()
        children = list(obj.values())
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    return next((v for child in children if (v := _find_verdict(child)) is not None), None)


class Judge:
    """A judge model at ``RAGSWEEP_JUDGE_BASE_URL`` (or the generator's endpoint)."""

    def __init__(self, model: str, settings: LLMSettings) -> None:
        self.endpoint = Endpoint.from_env(model, role="JUDGE")
        check_reachable(self.endpoint)
        self.chat = Chat(self.endpoint, settings.for_judge())
        self.max_tokens = settings.max_tokens
        self.system_prompt = settings.judge_system_prompt

    def record(self) -> dict[str, str]:
        """The judge and its prompt, as a run records them."""
        return {
            "model": self.endpoint.model,
            "endpoint": self.endpoint.where,
            "system_prompt": self.system_prompt,
            "template": JUDGE_TEMPLATE,
            "out_of_scope_note": JUDGE_OUT_OF_SCOPE,
        }

    def judge(self, items: list[Judged]) -> list[Verdict]:
        """A verdict per item, in order; each distinct item is judged once."""
        return self._each(items, "judgment", self._ask)

    def relevance(self, items: list[Judged]) -> list[Verdict]:
        """AutoRAG's answer_relevance of each item (``score``), in order: how well the answer
        addresses the question, rated 1 to 5 and scaled to [0, 1]; references not shown."""
        return self._each(items, "relevance", self._rate)

    def _each(self, items: list[Judged], kind: str, ask) -> list[Verdict]:
        """``ask`` each distinct item once, through the reply cache."""
        keys = [self._key(item, kind) for item in items]
        pairs = {digest(key): (key, item) for key, item in zip(keys, items, strict=True)}
        distinct = list(pairs.values())
        cache = ReplyCache()

        async def one(pair: tuple[dict, Judged]) -> Verdict:
            key, item = pair
            if (hit := cache.get(key)) is not None:
                return Verdict(**hit, cached=True)
            verdict = await ask(item)
            if verdict.error is None:
                value = {"correct": verdict.correct, "reason": verdict.reason}
                if verdict.score is not None:
                    value["score"] = verdict.score
                cache.put(key, {**value, "llm_calls": verdict.llm_calls})
            return verdict

        try:
            verdicts = self.chat.run(distinct, one, f"{kind}s")
        finally:
            cache.close()
        by_key = {digest(key): v for (key, _), v in zip(distinct, verdicts, strict=True)}
        log.info(
            "judge %s, %s: %d distinct answers, %d from the cache, %d without a verdict",
            self.endpoint.model,
            kind,
            len(distinct),
            sum(v.cached for v in verdicts),
            sum(v.error is not None for v in verdicts),
        )
        return [by_key[digest(key)] for key in keys]

    def _key(self, item: Judged, kind: str) -> dict:
        scope = {"out_of_scope": True} if item.out_of_scope and kind == "judgment" else {}
        prompts = [self.system_prompt, JUDGE_TEMPLATE, JUDGE_OUT_OF_SCOPE, JUDGE_CORRECTION]
        prompts = prompts + [JUDGE_STRICT] if kind == "judgment" else [RELEVANCE_PROMPT]
        return {
            **scope,
            "kind": kind,
            "model": self.endpoint.identity,
            "prompt": digest(prompts),
            "question": item.question,
            "references": item.references,
            "answer": item.answer,
        }

    async def _ask(self, item: Judged) -> Verdict:
        references = "\n".join(f"- {ref}" for ref in item.references)
        user = JUDGE_TEMPLATE.format(
            question=item.question, references=references, answer=item.answer
        )
        if item.out_of_scope:
            user += JUDGE_OUT_OF_SCOPE
        messages = [("system", self.system_prompt), ("user", user)]
        corrections = list(CORRECTIONS)
        calls = 0
        while True:
            reply = await self._request(messages)
            calls += reply.calls
            if reply.error is not None:
                return Verdict(error=f"judge request failed: {reply.error}", llm_calls=calls)
            try:
                correct, reason = parse_verdict(reply.text)
                return Verdict(correct=correct, reason=reason, llm_calls=calls)
            except ValueError as problem:
                if not corrections:
                    excerpt = " ".join(reply.text.split())[:200]
                    return Verdict(
                        error=f"judge reply unreadable after {len(CORRECTIONS)} corrective "
                        f"retries: {problem}: {excerpt!r}",
                        llm_calls=calls,
                    )
                correction = corrections.pop(0).format(problem=problem)
                messages += [("assistant", reply.text), ("user", correction)]

    async def _rate(self, item: Judged) -> Verdict:
        """One answer_relevance request: a score read, or none (as ai4rag, no retry)."""
        prompt = RELEVANCE_PROMPT.format(question=item.question, answer=item.answer)
        reply = await self._request([("user", prompt)], RELEVANCE_SCHEMA)
        if reply.error is not None:
            return Verdict(error=f"judge request failed: {reply.error}", llm_calls=reply.calls)
        try:
            score, rationale = parse_relevance(reply.text)
        except ValueError as problem:
            excerpt = " ".join(reply.text.split())[:200]
            return Verdict(
                error=f"relevance unreadable: {problem}: {excerpt!r}", llm_calls=reply.calls
            )
        return Verdict(score=score, reason=rationale, llm_calls=reply.calls)

    async def _request(
        self, messages: list[tuple[str, str]], schema: dict = VERDICT_SCHEMA
    ) -> Reply:
        return await self.chat.ask(
            messages, temperature=0.0, max_tokens=self.max_tokens, schema=schema
        )
