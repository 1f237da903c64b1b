"""Talk to any OpenAI-compatible endpoint through llama-index's ``OpenAILike``.

A model is named on its own; where it is served comes from the environment:
``RAGSWEEP_LLM_BASE_URL`` and ``RAGSWEEP_LLM_API_KEY`` for the answering models, and
``RAGSWEEP_JUDGE_BASE_URL`` / ``RAGSWEEP_JUDGE_API_KEY`` for the judge (the generator's
endpoint and key when unset). Keys never leave the environment: they are not parameters,
and every message that could quote one is redacted.

``Chat`` keeps ``concurrency`` requests in flight, retries 408/409/429/5xx, timeouts and
dropped connections with exponential backoff (honouring ``Retry-After``), and reports each
request's text, token usage, latency and number of calls, or its error: a failed request
is a result, not an exception.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field, replace
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ragsweep.core import progress
from ragsweep.core.errors import RagsweepError
from ragsweep.core.fromdict import build
from ragsweep.models import identity
from ragsweep.models.prompts import ANSWER_SYSTEM_PROMPT, ANSWER_TEMPLATE, JUDGE_SYSTEM_PROMPT

if TYPE_CHECKING:  # imported where used: every pipeline step imports this module
    import httpx

log = logging.getLogger("ragsweep")
logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line (and a URL) per request

T = TypeVar("T")
R = TypeVar("R")

MAX_WAIT_S = 60.0  # the longest back-off or Retry-After we wait before one retry
RETRY_STATUS = frozenset({408, 409, 429})
# Deadlines: a request waits TIMEOUT_S for its answer and is tried 1 + RETRIES times, so a
# hung endpoint fails in about 2 minutes (3 x 40 s and the back-off; with every request in
# flight failing so, the step stops: ``EndpointDown``). The sweep key keeps the values runs
# had before deadlines were options, so that a run's key does not change with its deadlines.
TIMEOUT_S, RETRIES = 40.0, 2
TRANSPORT_KEYED = {"timeout_s": 120.0, "max_retries": 4, "backoff_s": 1.0}


@dataclass(frozen=True)
class LLMSettings:
    """How ragsweep uses models: the answer prompt and sampling, the judge model (empty: no
    judge), and the transport. Plain data, so it travels as a pipeline parameter."""

    temperature: float = 0.0
    max_tokens: int = 512
    system_prompt: str = ANSWER_SYSTEM_PROMPT
    prompt_template: str = ANSWER_TEMPLATE
    judge: str = ""
    concurrency: int = 8
    timeout_s: float = TIMEOUT_S  # seconds a request waits for its answer
    max_retries: int = RETRIES  # tries after the first, on a timeout, 408/409/429 or 5xx
    backoff_s: float = 1.0
    judge_timeout_s: float = TIMEOUT_S  # the judge's
    judge_max_retries: int = RETRIES
    judge_system_prompt: str = JUDGE_SYSTEM_PROMPT  # a version of the judge's instructions

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, source: str = "llm settings") -> LLMSettings:
        """Build and validate settings from plain data; absent or null fields keep defaults."""
        settings = build(cls, data, source)
        settings.validate(source)
        return settings

    def validate(self, source: str = "llm settings") -> None:
        problems = [
            (not 0 <= self.temperature <= 2, "temperature", "must be between 0 and 2"),
            (self.max_tokens < 1, "max_tokens", "must be positive"),
            (self.concurrency < 1, "concurrency", "must be positive"),
            (self.timeout_s <= 0, "timeout_s", "must be positive"),
            (self.max_retries < 0, "max_retries", "must not be negative"),
            (self.judge_timeout_s <= 0, "judge_timeout_s", "must be positive"),
            (self.judge_max_retries < 0, "judge_max_retries", "must not be negative"),
            (self.backoff_s < 0, "backoff_s", "must not be negative"),
            (not self.judge_system_prompt.strip(), "judge_system_prompt", "must not be empty"),
        ]
        for placeholder in ("{context}", "{question}"):
            missing = placeholder not in self.prompt_template
            problems.append((missing, "prompt_template", f"must contain {placeholder}"))
        for failed, name, problem in problems:
            if failed:
                raise RagsweepError(f"{source}: field '{name}': {problem}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def judges(self) -> list[str]:
        """The judge models named: ``judge`` may list several, comma-separated, for the run
        to pick the one that agrees best with people's labels
        (``ragsweep.results.judges.choose_judge``)."""
        return [name.strip() for name in self.judge.split(",") if name.strip()]

    def for_judge(self) -> LLMSettings:
        """The settings the judge's requests use: its own deadlines."""
        return replace(self, timeout_s=self.judge_timeout_s, max_retries=self.judge_max_retries)

    def sweep_dict(self) -> dict[str, Any]:
        """What of the settings identifies a sweep (``RunSettings.record``): the transport
        (deadlines) changes no measurement, so it stays at the values every earlier run
        was keyed with."""
        data = {**self.to_dict(), **TRANSPORT_KEYED}
        for name in ("judge_timeout_s", "judge_max_retries"):
            data.pop(name)
        if self.judge_system_prompt == JUDGE_SYSTEM_PROMPT:  # as keyed before it could change
            data.pop("judge_system_prompt")
        return data

    def answer_settings(self) -> dict[str, Any]:
        """What shapes an answer besides the model, question and context: cache key and record."""
        keys = ("temperature", "max_tokens", "system_prompt", "prompt_template")
        return {key: getattr(self, key) for key in keys}


@dataclass(frozen=True)
class Endpoint:
    """A model at an OpenAI-compatible base URL; the key stays out of reprs and messages."""

    model: str
    base_url: str
    api_key: str = field(default="", repr=False)
    role: str = "LLM"  # what it serves: LLM, JUDGE, EMBEDDING or RERANK
    url_from: str = ""  # the variable its base URL came from; "": RAGSWEEP_<role>_BASE_URL
    key_from: str = ""  # likewise its API key's

    @property
    def url_variable(self) -> str:
        """The variable the base URL was read from, for messages that say what to check."""
        return self.url_from or f"RAGSWEEP_{self.role}_BASE_URL"

    @property
    def key_variable(self) -> str:
        """The variable the API key was read from (its role's when none was set)."""
        return self.key_from or f"RAGSWEEP_{self.role}_API_KEY"

    @classmethod
    def from_env(cls, model: str, role: str = "LLM") -> Endpoint:
        """The endpoint serving ``model`` for ``role`` (``LLM``, ``JUDGE`` or ``EMBEDDING``).

        The judge falls back to the generator's base URL, and to its key only when it falls
        back to its URL too: a key is never sent to a host it was not given for.
        """
        env = os.environ
        url_from, key_from = f"RAGSWEEP_{role}_BASE_URL", f"RAGSWEEP_{role}_API_KEY"
        if role != "LLM" and not env.get(url_from):
            url_from = "RAGSWEEP_LLM_BASE_URL"
            key_from = key_from if env.get(key_from) else "RAGSWEEP_LLM_API_KEY"
        base_url, api_key = env.get(url_from, ""), env.get(key_from, "")
        if not base_url:
            raise RagsweepError(
                f"model {model!r}: no endpoint; set RAGSWEEP_{role}_BASE_URL to an "
                "OpenAI-compatible base URL, e.g. http://localhost:8000/v1"
            )
        return cls(model, base_url.rstrip("/"), api_key, role, url_from, key_from)

    @property
    def where(self) -> str:
        """The base URL without any user:password part, for messages and records."""
        parts = urlsplit(self.base_url)
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))

    @property
    def identity(self) -> str:
        """What this model is (``identity.endpoint``): the URL without credentials and the
        model name. Replies are cached under it: one model name at two URLs is two models."""
        return identity.endpoint(self.base_url, self.model)

    def redact(self, text: str) -> str:
        """``text`` with the API key and the URL's credentials replaced."""
        if self.api_key:
            text = text.replace(self.api_key, "***")
        return text.replace(self.base_url, self.where)


@dataclass(frozen=True)
class Reply:
    """One request's outcome: the text, or the error after the last retry."""

    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None  # of the request that answered
    calls: int = 0  # requests sent, retries included
    error: str | None = None
    # the reply message's fields besides role and content (a deployed assistant's contexts)
    fields: dict[str, Any] = field(default_factory=dict)


def check_reachable(endpoint: Endpoint, timeout_s: float = 10.0) -> None:
    """Fail fast, with one line, when the endpoint cannot be reached or refuses the key.

    Asks ``GET {base_url}/models``; a server without that route is still reachable. A
    served model list that lacks the model is worth a warning, not a failure (gateways list
    only some of what they route).
    """
    import httpx

    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    try:
        response = httpx.get(f"{endpoint.base_url}/models", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        reason = endpoint.redact(str(exc) or type(exc).__name__)
        raise RagsweepError(
            f"the {endpoint.role.lower()} endpoint {endpoint.where} is unreachable ({reason}): "
            f"check {endpoint.url_variable}"
        ) from None
    if response.status_code in (401, 403):
        raise RagsweepError(
            f"the {endpoint.role.lower()} endpoint {endpoint.where} refused the API key "
            f"(HTTP {response.status_code}): check {endpoint.key_variable}"
        )
    try:
        served = [m["id"] for m in response.json()["data"]] if response.is_success else []
    except (ValueError, KeyError, TypeError):
        served = []
    if served and endpoint.model not in served:
        log.warning("%s lists no model %r, only %s", endpoint.where, endpoint.model, served)


def retry_delay(headers: httpx.Headers | dict | None, attempt: int, backoff_s: float) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): the server's ``Retry-After``
    (seconds, an HTTP date, or ``retry-after-ms``) when it gives one, else exponential
    backoff with jitter; never more than ``MAX_WAIT_S``."""
    import httpx

    headers = httpx.Headers(headers or {})
    wait = None
    if "retry-after-ms" in headers:
        try:
            wait = float(headers["retry-after-ms"]) / 1000
        except ValueError:
            wait = None
    if wait is None and "retry-after" in headers:
        value = headers["retry-after"]
        try:
            wait = float(value)
        except ValueError:
            try:
                wait = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                wait = None
    if wait is None:
        wait = backoff_s * 2**attempt * random.uniform(0.5, 1.0)
    return min(max(wait, 0.0), MAX_WAIT_S)


class EndpointDown(RagsweepError):
    """Every request in flight timed out or found no connection, retries spent: the
    endpoint is down or hung, and the step stops rather than wait on each question."""


class Chat:
    """One model at one endpoint: chat requests, retried, many in flight. When as many
    requests in a row as are in flight (``concurrency``) time out or find no connection
    after their retries, with no answer between, the endpoint is taken for down and
    ``EndpointDown`` stops the batch."""

    def __init__(self, endpoint: Endpoint, settings: LLMSettings) -> None:
        self.endpoint = endpoint
        self.settings = settings
        # response_format types the server refused (400/422): asked without them from then on
        self.refused: set[str] = set()
        self._llm = None
        self._unanswered = 0  # requests in a row that timed out or found no connection

    def run(
        self, items: Sequence[T], work: Callable[[T], Awaitable[R]], what: str = "requests"
    ) -> list[R]:
        """``work(item)`` for every item, at most ``concurrency`` at a time; results in order."""
        done = 0
        step = max(1, len(items) // 4)  # a progress line per quarter

        async def one(item: T, slots: asyncio.Semaphore) -> R:
            nonlocal done
            async with slots:
                result = await work(item)
            done += 1
            if done % step == 0 or done == len(items):
                log.info("%s: %d/%d %s", self.endpoint.model, done, len(items), what)
            return result

        async def main() -> list[R]:
            slots = asyncio.Semaphore(self.settings.concurrency)
            async with self._session():
                return list(await asyncio.gather(*(one(item, slots) for item in items)))

        progress.expect(progress.LLM_CALLS, len(items))  # at most: some may be cached
        return run_coroutine(main) if items else []

    def ask_now(self, messages: list[tuple[str, str]], **options: Any) -> Reply:
        """One request, waited for (for callers that are not async)."""
        return self.run([messages], lambda m: self.ask(m, **options))[0]

    @asynccontextmanager
    async def _session(self):
        import httpx
        from llama_index.llms.openai_like import OpenAILike

        limits = httpx.Limits(max_connections=self.settings.concurrency)
        async with httpx.AsyncClient(timeout=self.settings.timeout_s, limits=limits) as http:
            self._llm = OpenAILike(
                model=self.endpoint.model,
                api_base=self.endpoint.base_url,
                # never None: the OpenAI client would read OPENAI_API_KEY and send it here
                api_key=self.endpoint.api_key or "none",
                is_chat_model=True,
                max_retries=0,  # retried here, where calls are counted and Retry-After read
                timeout=self.settings.timeout_s,
                async_http_client=http,
            )
            try:
                yield
            finally:
                self._llm = None

    async def ask(
        self,
        messages: list[tuple[str, str]],
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_object: bool = False,
        schema: dict[str, Any] | None = None,
    ) -> Reply:
        """Send (role, content) messages; retry what can be retried; never raise for HTTP.
        ``schema``: ask for JSON matching this JSON schema (``response_format`` type
        ``json_schema``), falling back to a JSON object, then to none, as the server refuses
        each; ``json_object``: ask for a JSON object. Counted as one of
        ``ragsweep.core.progress.LLM_CALLS`` once answered (retries included)."""
        try:
            return await self._ask(messages, temperature, max_tokens, json_object, schema)
        finally:
            progress.advance(progress.LLM_CALLS)

    async def _ask(
        self,
        messages: list[tuple[str, str]],
        temperature: float,
        max_tokens: int | None,
        json_object: bool,
        schema: dict[str, Any] | None,
    ) -> Reply:
        import openai
        from llama_index.core.llms import ChatMessage

        chat = [ChatMessage(role=role, content=content) for role, content in messages]
        options: dict[str, Any] = {"temperature": temperature}
        if max_tokens:
            options["max_tokens"] = max_tokens
        calls = retries = 0
        while True:
            wanted = self._response_format(json_object, schema)
            extra = {"response_format": wanted} if wanted else {}
            calls += 1
            started = time.monotonic()
            try:
                response = await self._llm.achat(chat, **options, **extra)
            except openai.APIStatusError as exc:
                if wanted and exc.status_code in (400, 422):
                    log.info(
                        "%s refused response_format %s; asking without it",
                        self.endpoint.where,
                        wanted["type"],
                    )
                    self.refused.add(wanted["type"])
                    continue
                status = exc.status_code
                retryable = status in RETRY_STATUS or status >= 500
                if not retryable or retries >= self.settings.max_retries:
                    return Reply(calls=calls, error=self._error(f"HTTP {status}", exc, calls))
                wait = retry_delay(exc.response.headers, retries, self.settings.backoff_s)
            except openai.APIConnectionError as exc:  # timeouts included
                if retries >= self.settings.max_retries:
                    timeout = isinstance(exc, openai.APITimeoutError)
                    kind = "timed out" if timeout else "no connection"
                    self._down(kind)
                    return Reply(calls=calls, error=self._error(kind, exc, calls))
                wait = retry_delay(None, retries, self.settings.backoff_s)
            except (ValueError, LookupError, TypeError, AttributeError) as exc:
                # a 200 whose body is no chat completion (a proxy's page, a cut-off body)
                return Reply(calls=calls, error=self._error("malformed response", exc, calls))
            else:
                self._unanswered = 0
                usage = response.additional_kwargs
                return Reply(
                    text=response.message.content or "",
                    prompt_tokens=usage.get("prompt_tokens"),
                    completion_tokens=usage.get("completion_tokens"),
                    latency_s=time.monotonic() - started,
                    calls=calls,
                    fields=_message_fields(response),
                )
            retries += 1
            await asyncio.sleep(wait)

    def _response_format(
        self, json_object: bool, schema: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The strictest ``response_format`` asked for that the server has not refused."""
        if schema is not None and "json_schema" not in self.refused:
            named = {"name": schema.get("title", "reply"), "schema": schema, "strict": True}
            return {"type": "json_schema", "json_schema": named}
        if (json_object or schema is not None) and "json_object" not in self.refused:
            return {"type": "json_object"}
        return None

    def _down(self, kind: str) -> None:
        """Count a request that got no answer; raise ``EndpointDown`` at ``concurrency`` in a
        row."""
        self._unanswered += 1
        if self._unanswered >= self.settings.concurrency:
            role = self.endpoint.role.lower()
            options = {
                "llm": "--llm-timeout, --llm-retries",
                "judge": "--judge-timeout, --judge-retries",
            }.get(role, "llm settings timeout_s, max_retries")
            raise EndpointDown(
                f"the {role} endpoint {self.endpoint.where} ({self.endpoint.model}): "
                f"{self._unanswered} requests in a row {kind}, each tried "
                f"{1 + self.settings.max_retries} time(s) with a {self.settings.timeout_s:g} s "
                f"timeout; is it up? (the deadlines: {options})"
            )

    def _error(self, kind: str, exc: Exception, calls: int) -> str:
        detail = " ".join(str(exc).split())[:300]
        return self.endpoint.redact(f"{kind} after {calls} call(s): {detail}")


def _message_fields(response: Any) -> dict[str, Any]:
    """The fields of a chat completion's message that the OpenAI API does not define (what
    a deployed RAG application adds, e.g. its ``context``); empty when there are none."""
    try:
        return dict(response.raw.choices[0].message.model_extra or {})
    except (AttributeError, IndexError, TypeError):
        return {}


def run_coroutine(main: Callable[[], Awaitable[R]]) -> R:
    """``asyncio.run(main())``, also from a thread that already runs an event loop (a
    notebook's cell, Playwright's sync API), where ``asyncio.run`` refuses: then in a thread
    of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(main())).result()
