"""Talk to any OpenAI-compatible endpoint: ``POST /chat/completions`` over httpx, streamed.

A model is named on its own; where it is served comes from the environment:
``RAGSWEEP_LLM_BASE_URL`` and ``RAGSWEEP_LLM_API_KEY`` for the answering models, and
``RAGSWEEP_JUDGE_BASE_URL`` / ``RAGSWEEP_JUDGE_API_KEY`` for the judge (the generator's
endpoint and key when unset). Keys never leave the environment: they are not parameters,
and every message that could quote one is redacted.

``Chat`` streams each reply (where the server refuses to, it waits for the whole), so that
its deadlines measure progress: a request queued behind others at a busy server waits, a
hung server fails as fast as a whole-request deadline would. It keeps up to
``concurrency`` requests in flight, fewer while the endpoint queues or refuses
(``ragsweep.models.concurrency``), retries 408/409/429/5xx, timeouts and dropped
connections with exponential backoff (honouring ``Retry-After``), and reports each
request's text, token usage, latency and number of calls, or its error: a failed request
is a result, not an exception.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
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
from ragsweep.core.option_fields import ANSWERS, NESTED, option
from ragsweep.models import identity
from ragsweep.models.concurrency import Limit
from ragsweep.models.prompts import ANSWER_SYSTEM_PROMPT, ANSWER_TEMPLATE, JUDGE_SYSTEM_PROMPT

if TYPE_CHECKING:  # imported where used: every pipeline step imports this module
    import httpx

log = logging.getLogger("ragsweep")
logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line (and a URL) per request

T = TypeVar("T")
R = TypeVar("R")

MAX_WAIT_S = 60.0  # the longest back-off or Retry-After we wait before one retry
RETRY_STATUS = frozenset({408, 409, 429})
# Deadlines: a request waits TIMEOUT_S for the endpoint to send anything and is tried
# 1 + RETRIES times, so a hung endpoint fails in about 2 minutes (3 x 40 s and the back-off;
# with every request in flight failing so, the step stops: ``EndpointDown``). The sweep key
# keeps the values runs had before deadlines were options, so that a run's key does not
# change with its deadlines.
TIMEOUT_S, RETRIES = 40.0, 2
TRANSPORT_KEYED = {"timeout_s": 120.0, "max_retries": 4, "backoff_s": 1.0}
# A 400/422 that names what it refuses: structured output, or streaming. Any other (a prompt
# longer than the context window, say) fails that request alone.
NAMES_FORMAT = re.compile(r"response_format|json_schema|json_object|schema|grammar", re.I)
NAMES_STREAM = re.compile(r"\bstream", re.I)
# the fields of a reply's message the OpenAI API defines: the others are the server's own
# (``Reply.fields``: a deployed assistant's ``context``)
DEFINED = frozenset(
    {"role", "content", "refusal", "annotations", "audio", "function_call", "tool_calls"}
)


@dataclass(frozen=True)
class LLMSettings:
    """How ragsweep uses models: the answer prompt and sampling, the judge model (empty: no
    judge), and the transport. Plain data, so it travels as a pipeline parameter."""

    temperature: float = option(0.0, help="Answer temperature.", pipeline=NESTED, form=ANSWERS)
    max_tokens: int = option(512, help="Longest answer, in tokens.", pipeline=NESTED, form=ANSWERS)
    system_prompt: str = option(
        ANSWER_SYSTEM_PROMPT,
        help="Answer system prompt: text, or @file.",
        pipeline=NESTED,
        from_file=True,
    )
    prompt_template: str = option(
        ANSWER_TEMPLATE,
        help="Answer prompt with {context} and {question}: text, or @file.",
        pipeline=NESTED,
        from_file=True,
    )
    judge: str = option(
        "",
        help="Judge every answer with this model (RAGSWEEP_JUDGE_BASE_URL, else the LLM's).",
        pipeline=NESTED,
        form=ANSWERS,
    )
    concurrency: int = option(
        8,
        help="Most requests in flight per endpoint: fewer while it queues, refuses (429, 503) "
        "or times out, never more than the slots a llama.cpp server says it has.",
        pipeline=NESTED,
        form=ANSWERS,
    )
    timeout_s: float = option(  # seconds a request waits without a byte (Chat._post)
        TIMEOUT_S,
        name="llm_timeout",
        help="Seconds an answer request waits for the endpoint to send anything: for its "
        "first token while the endpoint sends nothing to any request, then between two "
        "chunks of its streamed answer.",
        pipeline=NESTED,
    )
    max_retries: int = option(  # tries after the first, on a timeout, 408/409/429 or 5xx
        RETRIES,
        name="llm_retries",
        help="Tries after the first of an answer request that timed out or failed (429, 5xx).",
        pipeline=NESTED,
    )
    backoff_s: float = 1.0
    judge_timeout_s: float = option(
        TIMEOUT_S,
        name="judge_timeout",
        help="Seconds a judge request waits for the endpoint to send anything (as --llm-timeout).",
        pipeline=NESTED,
    )
    judge_max_retries: int = option(
        RETRIES,
        name="judge_retries",
        help="Tries after the first of a judge request.",
        pipeline=NESTED,
    )
    judge_system_prompt: str = option(  # a version of the judge's instructions
        JUDGE_SYSTEM_PROMPT,
        name="judge_prompt",
        help="The judge's instructions (system prompt): text, or @file.",
        pipeline=NESTED,
        from_file=True,
    )

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
        (``ragsweep.curation.judge_choice.choose_judge``)."""
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
    """A request timed out or found no connection, retries spent, and the endpoint answered
    no other request meanwhile: it is down or hung, and the step stops rather than wait on
    each question."""


class EndpointSilent(Exception):
    """A request got nothing from the endpoint within its deadline."""


class StatusError(Exception):
    """The endpoint answered a request with an error status."""

    def __init__(self, status: int, text: str, headers: httpx.Headers) -> None:
        super().__init__(f"{status} {text}")
        self.status, self.text, self.headers = status, text, headers

    def worded(self) -> str:
        """The error as the OpenAI client words it, as answers recorded before this client
        spoke HTTP itself keep it (``Error code: 400 - {...}``)."""
        text = self.text.strip()
        try:
            return f"Error code: {self.status} - {json.loads(text)}"
        except ValueError:
            return text or f"Error code: {self.status}"


class Chat:
    """One model at one endpoint: chat requests, streamed, retried, several in flight
    (``ragsweep.models.concurrency.Limit``). A request waits for its first token as long as
    the endpoint answers others (it is queued, not hung), and fails after ``timeout_s``
    without a byte from the endpoint, or ``timeout_s`` of silence in its own stream. When a
    request times out or finds no connection after its retries and the endpoint answered no
    other request meanwhile, the endpoint is taken for down and ``EndpointDown`` stops the
    batch."""

    def __init__(self, endpoint: Endpoint, settings: LLMSettings) -> None:
        self.endpoint = endpoint
        self.settings = settings
        # response_format types the server refused by name: asked without them from then on
        self.refused: set[str] = set()
        self.streaming = True  # until the server refuses stream=true
        self.limit = Limit(settings.concurrency)
        self._http: httpx.AsyncClient | None = None
        self._probed = False
        self._said = ""  # the last summary of the requests in flight logged
        self._heard = 0.0  # when the endpoint last sent anything, to any request
        self._answered = 0.0  # when the endpoint last answered a request

    def run(
        self, items: Sequence[T], work: Callable[[T], Awaitable[R]], what: str = "requests"
    ) -> list[R]:
        """``work(item)`` for every item, at most ``limit.value`` at a time; results in
        order. Says how many it settled on keeping in flight, when it asked the endpoint
        (once per ``Chat``, and again when that changed: ``ask_now`` runs one at a time)."""
        done = 0
        step = max(1, len(items) // 4)  # a progress line per quarter
        sent = self.limit.sent

        async def one(item: T) -> R:
            nonlocal done
            async with self.limit.slot():
                result = await work(item)
            done += 1
            if done % step == 0 or done == len(items):
                log.info("%s: %d/%d %s", self.endpoint.model, done, len(items), what)
            return result

        async def main() -> list[R]:
            async with self._session():
                tasks = [asyncio.ensure_future(one(item)) for item in items]
                try:
                    return list(await asyncio.gather(*tasks))
                finally:  # one raised (EndpointDown): end the others' requests first
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)

        progress.expect(progress.LLM_CALLS, len(items))  # at most: some may be cached
        results = run_coroutine(main) if items else []
        summary = self.limit.summary()
        if self.limit.sent > sent and summary != self._said:  # once, unless it changed
            log.info("%s at %s: %s", self.endpoint.model, self.endpoint.where, summary)
            self._said = summary
        return results

    def ask_now(self, messages: list[tuple[str, str]], **options: Any) -> Reply:
        """One request, waited for (for callers that are not async)."""
        return self.run([messages], lambda m: self.ask(m, **options))[0]

    @asynccontextmanager
    async def _session(self):
        import httpx

        timeout = httpx.Timeout(self.settings.timeout_s, read=None)  # reads: see _post
        async with httpx.AsyncClient(timeout=timeout, headers=self._headers()) as http:
            self._http = http
            try:
                if not self._probed:
                    self._probed = True
                    self.limit.cap(await self._slots())
                yield
            finally:
                self._http = None

    def _headers(self) -> dict[str, str]:
        key = self.endpoint.api_key
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def _slots(self) -> int | None:
        """The slots the server says it has: llama.cpp's ``GET /props`` (``total_slots``),
        beside its ``/v1``; None from a server that does not say."""
        import httpx

        root = self.endpoint.base_url.removesuffix("/v1")
        try:
            wait = min(5.0, self.settings.timeout_s)
            response = await self._http.get(f"{root}/props", timeout=wait)
            slots = response.json().get("total_slots") if response.is_success else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return slots if isinstance(slots, int) and slots > 0 else None

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
        each by name; ``json_object``: ask for a JSON object. Counted as one of
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
        import httpx

        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": [{"role": role, "content": content} for role, content in messages],
            "temperature": temperature,
        }
        if max_tokens:
            body["max_tokens"] = max_tokens
        calls = retries = 0
        first_sent = time.monotonic()
        while True:
            wanted = self._response_format(json_object, schema)
            asked = {**body, **({"response_format": wanted} if wanted else {})}
            if self.streaming:
                asked |= {"stream": True, "stream_options": {"include_usage": True}}
            calls += 1
            self.limit.sent += 1
            sent_in, started = self.limit.round, time.monotonic()
            try:
                data, first_token_s = await self._post(asked, started)
                message = data["choices"][0]["message"]
                text = message["content"] or ""
                usage = data.get("usage") or {}
            except StatusError as exc:
                if exc.status in (400, 422) and self._refused(asked, exc.text):
                    continue
                if exc.status in (429, 503):
                    self.limit.lower(sent_in, f"HTTP {exc.status}")
                retryable = exc.status in RETRY_STATUS or exc.status >= 500
                if not retryable or retries >= self.settings.max_retries:
                    kind = f"HTTP {exc.status}"
                    return Reply(calls=calls, error=self._error(kind, exc.worded(), calls))
                wait = retry_delay(exc.headers, retries, self.settings.backoff_s)
            except (EndpointSilent, httpx.TransportError) as exc:
                timeout = isinstance(exc, EndpointSilent | httpx.TimeoutException)
                if timeout:
                    self.limit.lower(sent_in, "timeout")
                if retries >= self.settings.max_retries:
                    kind = "timed out" if timeout else "no connection"
                    self._down(kind, first_sent)
                    reason = str(exc) or type(exc).__name__
                    return Reply(calls=calls, error=self._error(kind, reason, calls))
                wait = retry_delay(None, retries, self.settings.backoff_s)
            except (ValueError, LookupError, TypeError, AttributeError, httpx.HTTPError) as exc:
                # a 200 whose body is no chat completion (a proxy's page, a cut-off body)
                reason = str(exc) or type(exc).__name__
                return Reply(calls=calls, error=self._error("malformed response", reason, calls))
            else:
                self._answered = time.monotonic()
                latency = time.monotonic() - started
                rest = None if first_token_s is None else latency - first_token_s
                self.limit.answered(sent_in, first_token_s, rest, usage.get("prompt_tokens"))
                return Reply(
                    text=text,
                    prompt_tokens=usage.get("prompt_tokens"),
                    completion_tokens=usage.get("completion_tokens"),
                    latency_s=latency,
                    calls=calls,
                    fields={k: v for k, v in message.items() if k not in DEFINED},
                )
            retries += 1
            await asyncio.sleep(wait)

    async def _post(self, body: dict[str, Any], sent: float) -> tuple[dict, float | None]:
        """POST one chat completion: its JSON (a stream's deltas joined into one message)
        and the seconds to its first token (None: not streamed). Fails (``EndpointSilent``)
        when it has waited ``timeout_s`` for its first token with nothing from the endpoint
        to any request meanwhile, or ``timeout_s`` since the last chunk of its stream."""
        timeout = self.settings.timeout_s
        last: list[float] = []  # when its stream's last chunk came

        def deadline() -> float:
            return (last[-1] if last else max(sent, self._heard)) + timeout

        task = asyncio.ensure_future(self._receive(body, sent, last))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=max(deadline() - time.monotonic(), 0.0))
                if not task.done() and time.monotonic() >= deadline():
                    what = "between two chunks of its stream" if last else "for a first token"
                    raise EndpointSilent(f"nothing from the endpoint in {timeout:g} s {what}")
            return task.result()
        finally:
            task.cancel()  # closes the connection: a server that can, stops its work
            await asyncio.gather(task, return_exceptions=True)

    async def _receive(
        self, body: dict[str, Any], sent: float, last: list[float]
    ) -> tuple[dict, float | None]:
        url = f"{self.endpoint.base_url}/chat/completions"
        async with self._http.stream("POST", url, json=body) as response:
            self._heard = time.monotonic()
            if response.status_code >= 400:
                text = (await response.aread()).decode(errors="replace")
                raise StatusError(response.status_code, text, response.headers)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                return json.loads(await response.aread()), None  # it did not stream
            parts, fields, usage, first = [], {}, {}, None
            async for line in response.aiter_lines():
                data = line.removeprefix("data:").strip()
                if not line.startswith("data:") or not data:
                    continue
                if data == "[DONE]":
                    break
                now = self._heard = time.monotonic()
                last.append(now)
                chunk = json.loads(data)
                if "error" in chunk:
                    raise ValueError(f"error in the stream: {chunk['error']}")
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        first = now - sent if first is None else first
                        parts.append(delta["content"])
                    for name, value in delta.items():  # another field: text joined, else last
                        if name not in DEFINED and value is not None:
                            joined = isinstance(value, str) and isinstance(fields.get(name), str)
                            fields[name] = fields[name] + value if joined else value
            message = {**fields, "role": "assistant", "content": "".join(parts)}
            return {"choices": [{"message": message}], "usage": usage}, first

    def _refused(self, asked: dict[str, Any], text: str) -> bool:
        """Whether a 400/422 refused what was asked rather than this request: a
        ``response_format`` or streaming, named in the error. The refused is not asked for
        again, and the run says so once; any other 400 (a prompt longer than the context
        window) changes nothing."""
        wanted = (asked.get("response_format") or {}).get("type")
        if wanted and NAMES_FORMAT.search(text):
            self.refused.add(wanted)
            log.warning(
                "%s (%s) refused response_format %s: asking without it from now on",
                self.endpoint.where,
                self.endpoint.model,
                wanted,
            )
            return True
        if asked.get("stream") and NAMES_STREAM.search(text):
            self.streaming = False
            log.warning(
                "%s (%s) refused streaming: waiting %g s for each whole answer from now on",
                self.endpoint.where,
                self.endpoint.model,
                self.settings.timeout_s,
            )
            return True
        return False

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

    def _down(self, kind: str, since: float) -> None:
        """Raise ``EndpointDown`` for a request that got no answer after its retries, when
        the endpoint answered no other request ``since`` it was first sent."""
        if self._answered >= since:
            return
        role = self.endpoint.role.lower()
        options = {
            "llm": "--llm-timeout, --llm-retries",
            "judge": "--judge-timeout, --judge-retries",
        }.get(role, "llm settings timeout_s, max_retries")
        raise EndpointDown(
            f"the {role} endpoint {self.endpoint.where} ({self.endpoint.model}): a request "
            f"{kind} {1 + self.settings.max_retries} time(s), each waiting up to "
            f"{self.settings.timeout_s:g} s for the endpoint to send anything, and it "
            f"answered no other request meanwhile; is it up? (the deadlines: {options})"
        )

    def _error(self, kind: str, detail: str, calls: int) -> str:
        detail = " ".join(detail.split())[:300]
        return self.endpoint.redact(f"{kind} after {calls} call(s): {detail}")


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
