"""Answers from a model: the run's system prompt, a conversational question's earlier
messages, and the template filled with the retrieved passages and the question, sent to an
OpenAI-compatible endpoint.

Each distinct (model identity: the endpoint's URL without credentials and the model name,
answer settings, question, history, exact passages) is asked once and cached
(``ragsweep.models.replies``): configurations that retrieve the same context share one call,
and a rerun makes none. A request that fails after its retries becomes an answer with an
error, which is not cached, so the next run asks again.
"""

from __future__ import annotations

import logging

from ragsweep.answering.answers import Answer, Answerer, History, Question, parts
from ragsweep.core.errors import RagsweepError
from ragsweep.models.llm import Chat, Endpoint, LLMSettings, check_reachable
from ragsweep.models.replies import ReplyCache

log = logging.getLogger("ragsweep")


def prompt_messages(
    question: str, passages: list[str], settings: LLMSettings, history: History = ()
) -> list:
    """The (role, content) messages that ask ``question`` over ``passages``: the system
    prompt, the conversation so far (``history``), then the filled template."""
    user = settings.prompt_template.replace("{context}", "\n\n".join(passages))
    user = user.replace("{question}", question)
    return [("system", settings.system_prompt), *history, ("user", user)]


def llm_answerer(model: str, settings: LLMSettings) -> Answerer:
    """An answerer backed by ``model`` at ``RAGSWEEP_LLM_BASE_URL``; checks it is reachable."""
    endpoint = Endpoint.from_env(model)
    check_reachable(endpoint)
    chat = Chat(endpoint, settings)
    where = {"model": endpoint.identity, **settings.answer_settings()}

    def answer_batch(batch: list[Question]) -> list[Answer]:
        cache = ReplyCache()

        async def answer(item: Question) -> Answer:
            question, passages, history = parts(item)
            key = {"kind": "answer", **where, "question": question, "passages": passages}
            if history:
                key["history"] = [list(message) for message in history]
            if (hit := cache.get(key)) is not None:
                return Answer(**hit, cached=True)
            reply = await chat.ask(
                prompt_messages(question, passages, settings, history),
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
            )
            result = Answer.of_reply(reply)
            if reply.error is None:
                cache.put(key, result.cached_fields())
            return result

        try:
            answers = chat.run(batch, answer, "answers")
        finally:
            cache.close()
        failed = [a.error for a in answers if a.error is not None]
        if failed and len(failed) == len(answers):
            raise RagsweepError(
                f"model {model!r} at {endpoint.where} answered none of {len(answers)} "
                f"questions; first error: {failed[0]}"
            )
        log.info(
            "%s: %d answers, %d from the cache, %d calls, %d failed",
            model,
            len(answers),
            sum(a.cached for a in answers),
            sum(a.llm_calls for a in answers if not a.cached),
            len(failed),
        )
        return answers

    return answer_batch
