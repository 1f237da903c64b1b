"""Generate a Q&A test set from the documents with Giskard RAGET (giskard 2.19).

Giskard's knowledge base is built from ragsweep's own chunks (a pandas DataFrame, one chunk
a row), embedded with the bundled all-MiniLM-L6-v2, and its LLM calls go through ragsweep's
client (``ragsweep.models.llm``) to the configured endpoint: the same retries and timeouts, no other
host, no litellm. Giskard's telemetry is switched off before it is imported.

Every generated question keeps its source: Giskard's seed chunk maps back to a ragsweep
``doc_id``, and each chunk of the reference context is located in its document as a
character span, so the test set works in both formats and with the ID-based metrics.
"""

from __future__ import annotations

import json
import logging
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from ragsweep.core.errors import RagsweepError, check_at_least
from ragsweep.core.fromdict import build
from ragsweep.core.option_fields import NESTED, option
from ragsweep.core.schemas import TESTSET
from ragsweep.core.text import locate
from ragsweep.documents.chunking import chunk_documents
from ragsweep.documents.testsets import content_id, question_version
from ragsweep.models.embedding import encode, load_tokenizer
from ragsweep.models.llm import Chat, Endpoint, LLMSettings, check_reachable

log = logging.getLogger("ragsweep")

EMBEDDING_MODEL = "all-MiniLM-L6-v2"
MIN_CHUNKS = 4  # Giskard's topic clustering (UMAP + HDBSCAN) fails on fewer
QUESTION_TYPES = {  # our name -> Giskard's generator class
    "simple": "SimpleQuestionsGenerator",
    "complex": "ComplexQuestionsGenerator",
    "distracting": "DistractingQuestionsGenerator",
    "situational": "SituationalQuestionsGenerator",
    "double": "DoubleQuestionsGenerator",
    "conversational": "ConversationalQuestionsGenerator",
    "out-of-scope": "OutOfScopeGenerator",
}
_CONTEXT_BLOCK = re.compile(r"(?:\A|\n\n)Document (chunk-\d+): ")


@dataclass(frozen=True)
class QASettings:
    """What to generate: how many questions of which types, for which agent, in which
    language, with which model; and how to chunk the documents for Giskard."""

    model: str = option(
        "",
        name="qa_llm",
        help="Without a test set: the model that generates one (default: the first "
        "--generation-models model).",
        pipeline=NESTED,
    )
    num_questions: int = option(
        20, help="Without a test set: questions to generate.", pipeline=NESTED
    )
    question_types: tuple[str, ...] = option(
        ("simple", "complex"),
        help="Without a test set: Giskard question types to generate.",
        pipeline=NESTED,
    )
    agent_description: str = "An assistant that answers questions about the documentation."
    language: str = "en"
    chunk_size: int = 256  # in the embedding model's tokens; chunks do not overlap
    seed: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, source: str = "qa generation") -> QASettings:
        settings = build(cls, data, source)
        unknown = sorted(set(settings.question_types) - set(QUESTION_TYPES))
        if unknown or not settings.question_types:
            raise RagsweepError(
                f"{source}: field 'question_types': unknown {unknown or 'none given'}; "
                f"choose from {list(QUESTION_TYPES)}"
            )
        check_at_least(settings.num_questions, 1, f"{source}: field 'num_questions'")
        check_at_least(settings.chunk_size, 1, f"{source}: field 'chunk_size'")
        return settings

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "question_types": list(self.question_types)}


def generate_testset(
    documents: pa.Table, settings: QASettings, llm: LLMSettings | None = None
) -> pa.Table:
    """A TESTSET table of questions Giskard generated from ``documents`` with ``settings``."""
    if not settings.model:
        raise RagsweepError(
            "no test set given and no model to generate one: name a model for Q&A generation "
            "(ragsweep run --qa-llm MODEL, or the pipeline's qa_generation.model)"
        )
    tokenize = load_tokenizer(EMBEDDING_MODEL)
    chunks = chunk_documents(documents, "sentence", settings.chunk_size, 0, tokenize)
    if chunks.num_rows < MIN_CHUNKS:
        raise RagsweepError(too_small(chunks.num_rows, "it needs at least 4"))
    endpoint = Endpoint.from_env(settings.model)
    check_reachable(endpoint)
    chat = Chat(endpoint, llm or LLMSettings())
    giskard = _Giskard()
    client = _client(giskard, chat)
    ids = [f"chunk-{i}" for i in range(chunks.num_rows)]
    frame = giskard.pd.DataFrame({"text": chunks.column("text").to_pylist()}, index=ids)
    knowledge_base = giskard.rag.KnowledgeBase(
        frame,
        columns=["text"],
        seed=settings.seed,
        llm_client=client,
        embedding_model=_embedding(giskard),
    )
    log.info(
        "generating %d questions from %d chunks with %s",
        settings.num_questions,
        chunks.num_rows,
        settings.model,
    )
    with _default_client(giskard, client), _failures() as failures:
        try:
            with warnings.catch_warnings():  # UMAP and HDBSCAN talk about their defaults
                warnings.simplefilter("ignore", UserWarning)
                warnings.simplefilter("ignore", FutureWarning)
                topics = knowledge_base.topics
        except (ValueError, TypeError) as exc:  # scikit-learn / UMAP on too few points
            raise RagsweepError(too_small(chunks.num_rows, str(exc))) from None
        except RuntimeError as exc:  # our client: a request failed after its retries
            raise RagsweepError(f"naming the topics failed: {exc}") from None
        log.info("topics: %s", ", ".join(sorted(topics.values())))
        generators = [
            getattr(giskard.generators, QUESTION_TYPES[name])(llm_client=client)
            for name in settings.question_types
        ]
        try:
            testset = giskard.rag.generate_testset(
                knowledge_base,
                num_questions=settings.num_questions,
                question_generators=generators,
                language=settings.language,
                agent_description=settings.agent_description,
            )
            samples = testset.samples
        except KeyError:  # giskard cannot build a QATestset of no question
            samples = []
    if not samples:
        raise RagsweepError(f"Giskard generated no question: {summary(failures)}")
    if failures:
        log.warning("%d question(s) failed: %s", len(failures), summary(failures))
    table = _to_testset(samples, chunks, documents)
    log.info("generated %d questions", table.num_rows)
    return table


def too_small(chunks: int, detail: str) -> str:
    return (
        f"the knowledge base is too small for Giskard's topic clustering ({chunks} chunks; "
        f"{detail}): add documents or lower qa_generation.chunk_size"
    )


def summary(failures: list[BaseException]) -> str:
    """How many questions failed, by cause, e.g. ``malformed LLM JSON (KeyError: 'question')
    in 3 of them``, and what to try."""
    causes = Counter(_cause(exc) for exc in failures)
    if not causes:
        return "no question was attempted"
    text = "; ".join(f"{cause} in {n} attempt(s)" for cause, n in causes.most_common())
    return f"{text} (a model that follows JSON instructions more closely may help)"


def _cause(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"malformed LLM JSON (KeyError: {exc})"
    if isinstance(exc, json.JSONDecodeError):
        return "malformed LLM JSON (not parseable)"
    if isinstance(exc, (IndexError, TypeError)):
        return f"malformed LLM JSON ({type(exc).__name__}: {exc})"
    return f"{type(exc).__name__}: {exc}"


def _to_testset(samples: list, chunks: pa.Table, documents: pa.Table) -> pa.Table:
    """Giskard's samples as TESTSET rows, chunk ids mapped to doc_ids and spans."""
    doc_ids = chunks.column("doc_id").to_pylist()
    starts = chunks.column("start").to_pylist()
    chunk_texts = chunks.column("text").to_pylist()
    doc_texts = dict(
        zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True)
    )
    rows: dict[str, dict] = {}
    for sample in samples:
        seed = int(sample.metadata["seed_document_id"].removeprefix("chunk-"))
        used = _context_chunks(sample.reference_context) or [(seed, chunk_texts[seed])]
        order = [seed] + [c for c, _ in used if c != seed]
        spans, context = [], []
        for chunk, block in used:
            doc_id = doc_ids[chunk]
            span = locate(doc_texts[doc_id], block, after=starts[chunk])
            if span:
                spans.append({"doc_id": doc_id, "start": span[0], "end": span[1], "found": "exact"})
            context.append(f"Document {doc_id}: {block}")
        row = {
            "question": sample.question,
            "reference_answers": [sample.reference_answer],
            "reference_doc_ids": list(dict.fromkeys(doc_ids[c] for c in order)),
            "reference_context": "\n\n".join(context),
            "gold_spans": spans,
            "question_type": sample.metadata.get("question_type"),
            "topic": sample.metadata.get("topic"),
            "conversation_history": json.dumps(
                list(sample.conversation_history), ensure_ascii=False
            ),
        }
        row["question_id"] = content_id(row["question"], row["reference_answers"])
        row["question_version"] = question_version(row)
        if row["question_id"] in rows:
            log.warning("Giskard wrote a question twice, kept once: %s", row["question"])
        rows.setdefault(row["question_id"], row)
    return pa.Table.from_pylist(list(rows.values()), schema=TESTSET)


def _context_chunks(context: str) -> list[tuple[int, str]]:
    """(chunk number, text) of each ``Document chunk-N: text`` block of Giskard's context."""
    marks = list(_CONTEXT_BLOCK.finditer(context or ""))
    ends = [m.start() for m in marks[1:]] + [len(context or "")]
    return [(int(m.group(1)[6:]), context[m.end() : e]) for m, e in zip(marks, ends, strict=True)]


# ---- Giskard, imported late and pointed at ragsweep's client ---------------------------------


class _Giskard:
    """The Giskard modules ragsweep uses, imported with telemetry off."""

    def __init__(self) -> None:
        os.environ["GSK_DISABLE_ANALYTICS"] = "True"  # read when giskard is first imported
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # should litellm load
        import giskard.llm.client
        import giskard.llm.embeddings.base
        import giskard.rag
        import giskard.rag.question_generators
        import giskard.settings
        import pandas

        giskard.settings.settings.disable_analytics = True  # had giskard been imported before
        self.rag = giskard.rag
        self.llm_client = giskard.llm.client
        self.embeddings = giskard.llm.embeddings.base
        self.generators = giskard.rag.question_generators
        self.pd = pandas


# The keys of the JSON object each Giskard question generator asks for (its prompt names
# them; Giskard's ``caller_id`` is the generator's class name), sent as a ``response_format``
# JSON schema where the endpoint accepts one: small models write JSON Giskard can read only
# so. The double-question generator first asks for a list of two (``LINKED_PAIR``).
REPLY_KEYS = {
    "SimpleQuestionsGenerator": ("question", "answer"),
    "ComplexQuestionsGenerator": ("question",),
    "DistractingQuestionsGenerator": ("question",),
    "SituationalQuestionsGenerator": ("question",),
    "DoubleQuestionsGenerator": ("question", "answer"),
    "ConversationalQuestionsGenerator": ("introduction", "question"),
    "OutOfScopeGenerator": ("selected_fact", "fake_fact", "question"),
}
LINKED_PAIR = "list of exactly two JSON objects"  # in the double generator's first prompt
REPLY_CHARACTERS = 400  # each value bounded, so that the JSON closes within max_tokens


def reply_schema(caller_id: str | None, system_prompt: str) -> dict[str, Any] | None:
    """The JSON schema of the reply Giskard's ``caller_id`` asks for; None for replies in
    prose (topic names, situations) and callers not known here."""
    keys = REPLY_KEYS.get(caller_id or "")
    if keys is None:
        return None
    one = {
        "type": "object",
        "properties": {k: {"type": "string", "maxLength": REPLY_CHARACTERS} for k in keys},
        "required": list(keys),
        "additionalProperties": False,
    }
    if LINKED_PAIR in system_prompt:
        return {"title": "questions", "type": "array", "items": one, "minItems": 2, "maxItems": 2}
    return {"title": "question", **one}


def _client(giskard: _Giskard, chat: Chat):
    """A Giskard ``LLMClient`` that sends Giskard's requests through ``chat``, with the JSON
    schema of the reply where Giskard wants JSON (``reply_schema``)."""

    class RagsweepClient(giskard.llm_client.LLMClient):
        def complete(
            self, messages, temperature=1.0, max_tokens=None, caller_id=None, seed=None, format=None
        ):
            system = messages[0].content if messages and messages[0].role == "system" else ""
            reply = chat.ask_now(
                [(m.role, m.content) for m in messages],
                temperature=temperature,
                # Giskard asks with no limit; a small model in JSON mode may never stop
                max_tokens=max_tokens or chat.settings.max_tokens,
                json_object=format in ("json", "json_object"),
                schema=reply_schema(caller_id, system or ""),
            )
            if reply.error is not None:
                raise RuntimeError(f"{chat.endpoint.model}: {reply.error}")
            return giskard.llm_client.ChatMessage(role="assistant", content=reply.text)

        def get_config(self) -> dict:
            endpoint = chat.endpoint
            return {"client_type": "ragsweep", "model": endpoint.model, "endpoint": endpoint.where}

    return RagsweepClient()


def _embedding(giskard: _Giskard):
    """Giskard's embedding interface over the bundled all-MiniLM-L6-v2."""

    class MiniLM(giskard.embeddings.BaseEmbedding):
        def embed(self, texts):
            if isinstance(texts, str):
                return encode(EMBEDDING_MODEL, [texts])[0]
            return encode(EMBEDDING_MODEL, list(texts))

    return MiniLM()


@contextmanager
def _default_client(giskard: _Giskard, client) -> Iterator[None]:
    """Giskard's default client, which its question modifiers' base generators use."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        giskard.llm_client.set_default_client(client)
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            giskard.llm_client.set_default_client(None)


@contextmanager
def _failures() -> Iterator[list[BaseException]]:
    """The exceptions Giskard's question generators log and skip, kept out of the terminal."""
    failures: list[BaseException] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.exc_info and record.exc_info[1] is not None:
                failures.append(record.exc_info[1])

    logger = logging.getLogger("giskard.rag")
    handler, propagate = Collect(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield failures
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
