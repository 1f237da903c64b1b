"""What a local run's steps read from outside the pipeline, by content, so that a resumed
run reuses a step only if what it read is unchanged.

Each step that reads the settings, the test set, the documents, an embedding model or an
endpoint has the digest of those reads as an environment variable of its task
(``ragsweep.kubeflow.tasks.READS_ENV``), which kfp.local's cache key includes (with the
task's command and inputs): a step whose reads changed misses the cache and runs, and so
does every step after it, whose inputs (its outputs, written anew) are then at new paths.
The reads are identities, never contents: a local file's SHA-256 (remembered by path,
size, mtime and inode, so a folder of documents is read whole once,
``ragsweep.models.identity``), an S3 object's ETag and size, an endpoint's URL without
credentials and its model. The run's marker records them, so that a resume says in one
line what changed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from typing import Any

# the steps that read from outside the pipeline, in the pipeline's order (the task names)
STEPS = (
    "configure",
    "load_testset",
    "ingest",
    "generate_qa",
    "embed_shard",
    "chunk_embed",
    "retrieve",
    "evaluate",
)


def step_reads(pipeline: Callable[..., Any], arguments: dict[str, Any]) -> dict[str, dict]:
    """What each step of a run of ``pipeline`` with ``arguments`` (its settings.json) reads
    now: by step, each read's description (a path, "the documents in ...", "the llm
    endpoint of <model>") and its identity. A location that cannot be read, or an endpoint
    that is not configured, is a ``RagsweepError`` naming it."""
    from ragsweep.documents.sources import document_versions, file_version
    from ragsweep.kubeflow.parameters import run_settings
    from ragsweep.models import embedding
    from ragsweep.models.identity import endpoint
    from ragsweep.models.llm import Endpoint
    from ragsweep.sweep.options import answer_models

    defaults = {
        name: p.default
        for name, p in inspect.signature(pipeline).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    settings = run_settings({**defaults, **arguments})

    def served(models: list[str], role: str = "LLM") -> dict[str, str]:
        found = (Endpoint.from_env(m, role=role) for m in models)
        return {
            f"the {role.lower()} endpoint of {e.model}": endpoint(e.base_url, e.model)
            for e in found
        }

    space = settings.space
    models = {f"the embedding model {m}": embedding.identity(m) for m in space.embedding_models}
    rerankers = [r.partition(":")[2] for r in space.rerankers if r.startswith("rerank:")]
    testset = {settings.testset: file_version(settings.testset)} if settings.testset else {}
    generator = [] if settings.testset else [m for m in [settings.qa_generation.model] if m]
    return {
        "configure": {"the settings": _digest(arguments)},
        "load_testset": testset,
        "ingest": {
            f"the documents in {where}": _digest(document_versions(where))
            for where in (settings.docs, *settings.more_docs)
        },
        "generate_qa": served(generator),
        "embed_shard": models,
        "chunk_embed": models,
        "retrieve": {
            **served([m for m in [space.transforming_model()] if m]),
            **served(rerankers, "RERANK"),
        },
        "evaluate": {
            **served(answer_models(list(space.answerers))),
            **served(settings.llm.judges(), "JUDGE"),
        },
    }


def task_digests(reads: dict[str, dict]) -> dict[str, str]:
    """Each step's ``READS_ENV`` value: a digest of what it reads."""
    return {step: _digest(read)[:16] for step, read in reads.items() if read}


def changes(before: dict[str, dict] | None, after: dict[str, dict]) -> list[str]:
    """One line per read that changed between ``before`` (the marker's record; None: a
    folder from an older ragsweep, which recorded none) and ``after``, naming the steps it
    makes run again."""
    if before is None:
        return [
            "no record of what this run read (started by an older ragsweep): the steps that "
            "read the settings, the test set, the documents or an endpoint run again"
        ]
    lines: dict[str, list[str]] = {}
    detail: dict[str, str] = {}
    for step in STEPS:
        old, new = before.get(step, {}), after.get(step, {})
        for what in sorted(set(old) | set(new)):
            if old.get(what) != new.get(what):
                lines.setdefault(what, []).append(step.replace("_", "-"))
                detail[what] = _change(old.get(what), new.get(what))
    out = []
    for what, steps in lines.items():
        verb = "reruns" if len(steps) == 1 else "rerun"
        out.append(f"{' and '.join(steps)} {verb}: {what} {detail[what]}")
    return out


def _change(old: str | None, new: str | None) -> str:
    if old is None:
        return "is read now and was not when the run read its inputs"
    if new is None:
        return "is no longer read"
    if old.startswith("endpoint:") and new.startswith("endpoint:"):
        return f"changed since the run read it ({_url(old)} -> {_url(new)})"
    return "changed since the run read it"


def _url(identity: str) -> str:
    return identity.removeprefix("endpoint:").rsplit("#", 1)[0]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
