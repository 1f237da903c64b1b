"""A scripted OpenAI-compatible server on 127.0.0.1 (``/v1/chat/completions``,
``/v1/embeddings``, ``/v1/models``, and a Cohere-style ``/v1/rerank`` scoring each document
by ``overlap_score``).

Each test scripts the replies it needs (``then``): an answer, an HTTP error with headers (429
with Retry-After), a stall longer than the client's timeout, a slow stream, malformed JSON;
a ``context_window`` answers 400 to longer prompts, as a model server does. A request that
asks to stream (``stream``) is answered as server-sent events, a word per chunk, as
llama.cpp and vLLM do (``streams = False``: a whole completion, as a server that does not
stream); ``slots`` > 0 serves that many requests at a time and queues the rest, as
llama.cpp's ``n_parallel`` (``publish_slots``: its ``GET /props`` says how many). Unscripted
requests get ``responder``'s reply, by default a plausible one for each prompt ragsweep and
Giskard send: RAG answers from the context, judge verdicts by word overlap, Giskard's
question/answer JSON. The server counts requests and the most it had in flight.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ragsweep.core.text import words as text_words


@dataclass
class Step:
    """One scripted reply to a chat completion request."""

    status: int = 200
    content: str | None = None  # the assistant's message; None: the responder's
    headers: dict = field(default_factory=dict)
    stall_s: float = 0.0  # wait this long first (past the client's timeout: a stall)
    token_interval_s: float = 0.0  # streamed: wait this long before each word
    body: str | None = None  # a raw body instead of a completion


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on: a dead endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def words(text: str) -> set[str]:
    return set(text_words(text))


def section(text: str, title: str) -> str:
    """The lines after ``title`` up to the next blank-line-separated title."""
    after = text.split(title, 1)[1] if title in text else ""
    return after.split("\n\n", 1)[0].strip()


def bag_of_words(text: str, dimensions: int = 64) -> list[float]:
    """A deterministic embedding: word counts hashed into ``dimensions`` buckets, so texts
    that share words are similar."""
    vector = [0.0] * dimensions
    for word in words(text):
        vector[zlib.crc32(word.encode()) % dimensions] += 1.0
    return vector


def overlap_score(query: str, document: str) -> float:
    """The scripted reranker's relevance: the query's words the document holds, less a
    thousandth per word of the document (shorter wins a tie)."""
    return len(words(query) & words(document)) - len(document.split()) / 1000


def rag_answer(prompt: str) -> str:
    """The context sentence sharing most words with the question."""
    context = prompt.split("Context:", 1)[1].split("Question:", 1)[0]
    question = words(prompt.split("Question:", 1)[1])
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", context) if s.strip()]
    return max(sentences, key=lambda s: len(words(s) & question), default="I cannot answer.")


def verdict(prompt: str) -> str:
    """Correct when the answer holds at least half of a reference's words."""
    answer = words(section(prompt, "Assistant's answer:"))
    references = [r.strip("- ") for r in section(prompt, "Reference answer(s):").splitlines()]
    best = max((len(words(r) & answer) / max(len(words(r)), 1) for r in references), default=0)
    reason = f"{best:.0%} of the reference's words are in the answer"
    return json.dumps({"correctness": best >= 0.5, "correctness_reason": reason})


def relevance(prompt: str) -> str:
    """AutoRAG's answer_relevance rating, 1 to 5: one more than the question's words the
    answer holds (at most 4)."""
    question = words(prompt.split("Question:", 1)[1].split("Answer:", 1)[0])
    answer = words(prompt.split("Answer:", 1)[1].split("Scores:", 1)[0])
    score = 1 + min(4, len(question & answer))
    return json.dumps({"score": score, "rationale": f"{score - 1} of the question's words"})


def giskard_reply(messages: list[dict]) -> str:
    """A reply that satisfies each of Giskard RAGET's generation prompts."""
    system, user = messages[0]["content"], messages[-1]["content"]
    if "define the topic" in user:
        return f'"Topic {len(user) % 3}"'
    if "creative writer" in system:
        return "A user who is setting up the product for a small team."
    passages = [p.strip() for p in user.split("------") if p.strip() and "<" not in p[:1]]
    source = passages[0] if passages else user
    fact = re.split(r"(?<=[.!?])\s+", source.strip())[0][:300]
    subject = " ".join(fact.split()[:6])
    pair = {"question": f"What does the documentation say about {subject}?", "answer": fact}
    if "two question & answer pairs" in system:
        return json.dumps([pair, {**pair, "question": f"Why {subject}?"}])
    extra = {"introduction": "I use the product.", "selected_fact": fact, "fake_fact": "none"}
    return json.dumps({**pair, **extra})


def hypothetical_passage(question: str) -> str:
    """HyDE's passage: the question's content words, stated."""
    return "The documentation explains " + " ".join(sorted(words(question))) + "."


def paraphrased(question: str, n: int) -> str:
    """Multi-query's rewritings: n numbered lines, each the question's words in an order."""
    kept = sorted(words(question))
    lines = [f"{i + 1}. " + " ".join(kept[i:] + kept[:i]) for i in range(n)]
    return "\n".join(lines)


def default_responder(request: dict) -> str:
    messages = request["messages"]
    system, last = messages[0]["content"], messages[-1]["content"]
    if system.startswith("You grade the answers"):
        return verdict(messages[1]["content"])
    if system.startswith("You write the passage"):
        return hypothetical_passage(last)
    if system.startswith("You rewrite a question"):
        return paraphrased(last, int(re.search(r"exactly (\d+)", system).group(1)))
    if system.startswith("You rate how well an assistant's answer"):
        return relevance(system)
    if "Context:" in last and "Question:" in last:
        return rag_answer(last)
    return giskard_reply(messages)


class ScriptedLLM:
    """The server; ``url`` is its OpenAI-compatible base URL."""

    def __init__(self) -> None:
        self.script: list[Step] = []
        self.responder: Callable[[dict], str] = default_responder
        # fields added to a reply's message besides role and content (an agent's context)
        self.message_fields: Callable[[dict], dict] = lambda request: {}
        self.requests: list[dict] = []  # chat completion bodies, in arrival order
        self.embedded: list[str] = []  # every text sent to /embeddings, in arrival order
        self.reranked: list[dict] = []  # every /rerank body, in arrival order
        self.rerank_script: list[Step] = []  # replies to the next /rerank requests
        self.authorizations: list[str] = []
        self.models = ["answerer", "judge", "writer"]
        self.models_status = 200  # 401: the server refuses the key
        self.refuse_json_mode = False  # answer 400 to response_format, as some servers do
        self.refuse_json_schema = False  # answer 400 to a json_schema response_format only
        self.context_window = 0  # > 0: answer 400 to prompts of more words, as vLLM does
        self.hold_until = 0  # keep the first requests until this many have come (or 10 s)
        self.streams = True  # stream when asked to (False: a whole completion regardless)
        self.refuse_streaming = False  # answer 400 to stream=true, as some gateways do
        self.slots = 0  # > 0: serve this many requests at a time, queue the rest
        self.publish_slots = False  # answer GET /props with total_slots, as llama.cpp does
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Condition()
        self.closing = threading.Event()
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.serving = 0  # requests being answered (the others wait for a slot)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    @property
    def chat_calls(self) -> int:
        return len(self.requests)

    def then(self, *steps: Step) -> None:
        """Reply to the next requests with these steps, in order."""
        with self.lock:
            self.script.extend(steps)

    def start(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.closing.set()
        self.http.shutdown()
        self.http.server_close()

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: dict, authorization: str) -> Step:
        with self.lock:
            self.requests.append(request)
            self.authorizations.append(authorization)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.lock.notify_all()
            self.lock.wait_for(lambda: len(self.requests) >= self.hold_until, timeout=10)
            step = self.script.pop(0) if self.script else Step()
        asked = (request.get("response_format") or {}).get("type")
        if self.refuse_streaming and request.get("stream"):
            return Step(status=400, body=json.dumps({"error": {"message": "stream: unsupported"}}))
        if (self.refuse_json_mode and asked) or (
            self.refuse_json_schema and asked == "json_schema"
        ):
            return Step(status=400, body=json.dumps({"error": {"message": "no response_format"}}))
        length = sum(len(m["content"].split()) for m in request["messages"])
        if self.context_window and length > self.context_window:
            message = (
                f"This model's maximum context length is {self.context_window} tokens. "
                f"However, you requested {length} tokens."
            )
            return Step(status=400, body=json.dumps({"error": {"message": message}}))
        return step

    @contextmanager
    def _slot(self) -> Iterator[None]:
        """Wait for a free slot (``slots``), hold it while answering."""
        with self.lock:
            self.lock.wait_for(lambda: not self.slots or self.serving < self.slots)
            self.serving += 1
        try:
            yield
        finally:
            with self.lock:
                self.serving -= 1
                self.lock.notify_all()

    def _done(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def send(self, status: int, body: str, headers: dict | None = None) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/props" and server.publish_slots:
                    self.send(200, json.dumps({"total_slots": server.slots}))
                elif self.path.rstrip("/").endswith("/models") and server.models_status != 200:
                    self.send(server.models_status, '{"error": {"message": "refused"}}')
                elif self.path.rstrip("/").endswith("/models"):
                    data = [{"id": m, "object": "model"} for m in server.models]
                    self.send(200, json.dumps({"object": "list", "data": data}))
                else:
                    self.send(404, '{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/embeddings"):
                    self.embeddings(request)
                    return
                if self.path.rstrip("/").endswith("/rerank"):
                    self.rerank(request)
                    return
                step = server._next(request, self.headers.get("Authorization", ""))
                try:
                    with server._slot():  # queued until a slot is free
                        if step.stall_s and server.closing.wait(step.stall_s):
                            return
                        self.reply(request, step)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a stall past its timeout)
                finally:
                    server._done()

            def embeddings(self, request: dict) -> None:
                texts = (
                    request["input"] if isinstance(request["input"], list) else [request["input"]]
                )
                with server.lock:
                    server.embedded.extend(texts)
                data = [
                    {"object": "embedding", "index": i, "embedding": bag_of_words(t)}
                    for i, t in enumerate(texts)
                ]
                usage = {"prompt_tokens": 0, "total_tokens": 0}
                body = {"object": "list", "data": data, "model": request["model"], "usage": usage}
                self.send(200, json.dumps(body))

            def rerank(self, request: dict) -> None:
                with server.lock:
                    server.reranked.append(request)
                    server.authorizations.append(self.headers.get("Authorization", ""))
                    step = server.rerank_script.pop(0) if server.rerank_script else Step()
                if step.body is not None or step.status != 200:
                    message = {"error": {"message": f"scripted {step.status}"}}
                    self.send(step.status, step.body or json.dumps(message), step.headers)
                    return
                scores = [overlap_score(request["query"], d) for d in request["documents"]]
                ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
                results = [{"index": i, "relevance_score": scores[i]} for i in ranked]
                top_n = request.get("top_n") or len(results)
                body = {"id": f"rerank-{len(server.reranked)}", "results": results[:top_n]}
                self.send(200, json.dumps(body))

            def reply(self, request: dict, step: Step) -> None:
                if step.body is not None or step.status != 200:
                    message = {"error": {"message": f"scripted {step.status}", "type": "test"}}
                    self.send(step.status, step.body or json.dumps(message), step.headers)
                    return
                content = step.content
                if content is None:
                    content = server.responder(request)
                prompt = sum(len(m["content"].split()) for m in request["messages"])
                if request.get("stream") and server.streams:
                    self.stream(request, step, content, prompt)
                    return
                completion = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": request.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": content,
                                **server.message_fields(request),
                            },
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": len(content.split()),
                        "total_tokens": prompt + len(content.split()),
                    },
                }
                self.send(200, json.dumps(completion), step.headers)

            def stream(self, request: dict, step: Step, content: str, prompt: int) -> None:
                """The reply as server-sent events: a word per chunk, then the usage when
                asked (``stream_options.include_usage``), then ``[DONE]``."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion.chunk"}

                def event(choices: list, **extra) -> None:
                    data = json.dumps({**base, "choices": choices, **extra})
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()

                first = {"role": "assistant", "content": "", **server.message_fields(request)}
                event([{"index": 0, "delta": first}])  # an agent's context comes first
                for word in re.findall(r"\s*\S+", content):
                    if step.token_interval_s and server.closing.wait(step.token_interval_s):
                        return
                    event([{"index": 0, "delta": {"content": word}}])
                event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
                if (request.get("stream_options") or {}).get("include_usage"):
                    n = len(content.split())
                    usage = {"prompt_tokens": prompt, "completion_tokens": n}
                    event([], usage={**usage, "total_tokens": prompt + n})
                self.wfile.write(b"data: [DONE]\n\n")

        return Handler
