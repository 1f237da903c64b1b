"""Patterns you can run: the top configurations of a sweep, each as a folder a user deploys.

``patterns/<rank>-<config_id>/`` holds ``pattern.json`` (Red Hat AutoRAG's fields where
they mean the same, and ragsweep's own under ``ragsweep``; its ``schema_version`` and the
``producer`` that wrote it, read back by ``read_pattern``), ``evaluation_results.json``
(AutoRAG's per-question shape), and ``indexing.py`` / ``inference.py``: the scripts beside
this module, with the pattern's settings written into their ``SETTINGS`` line. The scripts
use llama-index, the embedding model and the store's client, never ragsweep: what they share
with the sweep (text extraction, the tokenizer and chunk spans, the prompts) are ragsweep's
own standalone modules, copied beside them (``SUPPORT``).

The scripts build and search the memory store and the llama-index chunkers themselves
(``SCRIPT_STORES``, ``SCRIPT_CHUNKERS``); any other store or chunker, built-in or a
plugin's, brings its pattern code (its ``PATTERN_CODE``: a standalone file, for the
built-in ones the very module the sweep uses), copied beside them as ``vector_store.py``
or ``chunker.py``. A configuration whose store,
chunker or reranker has no pattern code is not written as a pattern, with a warning saying
why: never deployed as something else.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import yaml

from ragsweep import __version__
from ragsweep.answering.agents import is_agent
from ragsweep.core import text
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import CONFIG_DEFAULTS, METRICS, settings_of
from ragsweep.documents import extraction
from ragsweep.documents.chunking import get_chunker
from ragsweep.models import prompts
from ragsweep.models.llm import LLMSettings
from ragsweep.retrieval.vector_stores import store_class
from ragsweep.sweep.settings import DEFAULT_PATTERNS, check_count
from ragsweep.sweep.space import CONFIG_FIELDS, SearchSpace, parse_index_label

log = logging.getLogger("ragsweep")

# pattern.json's layout, raised when a field changes meaning or goes: a reader refuses a
# newer one rather than misread it; an older one, without the field, reads as version 0
PATTERN_SCHEMA_VERSION = 1
SCRIPTS = ("indexing.py", "inference.py")
SETTINGS_LINE = "SETTINGS: dict = {}  # ragsweep writes this pattern's settings here\n"
RRF_K = 60  # ragsweep.retrieval.search.hybrid's default
NO_RERANKER = "none"
# what the scripts build themselves; a plugin's pattern code is copied beside them
SCRIPT_STORES = ("memory",)
SCRIPT_CHUNKERS = ("sentence", "token")
SCRIPT_RERANKERS = ("cross-encoder", "rerank")  # kinds, besides none
STORE_CODE, CHUNKER_CODE = "vector_store.py", "chunker.py"
# ragsweep's standalone modules the scripts import, copied beside them under these names
SUPPORT = {"extraction.py": extraction, "text.py": text, "prompts.py": prompts}


def pattern_code(row: dict[str, Any]) -> tuple[dict[str, Path], str | None]:
    """The plugin files configuration ``row`` needs beside the scripts (file name -> its
    source), or why it cannot be a pattern: a store, chunker or reranker the scripts do not
    build themselves and that brings no pattern code."""
    code: dict[str, Path] = {}
    store = row.get("vector_store") or "memory"
    for what, name, target, get, builtin in (
        ("vector store", store, STORE_CODE, store_class, SCRIPT_STORES),
        ("chunker", row["chunker"], CHUNKER_CODE, get_chunker, SCRIPT_CHUNKERS),
    ):
        if name in builtin:
            continue
        try:
            source = getattr(get(name), "PATTERN_CODE", None)
        except RagsweepError as exc:
            return {}, str(exc)
        if not source:
            return {}, f"{what} {name} brings no pattern code (PATTERN_CODE)"
        if not Path(source).is_file():
            return {}, f"{what} {name}: its pattern code {source} is not a file"
        code[target] = Path(source)
    kind = (row.get("reranker") or NO_RERANKER).partition(":")[0]
    if kind != NO_RERANKER and kind not in SCRIPT_RERANKERS:
        return {}, f"the pattern scripts cannot rerank with {kind} (plugin rerankers bring none)"
    return code, None


# the configuration's columns the scripts always read; the others only where they apply
SCRIPT_CONFIG = [
    name
    for name, _ in CONFIG_FIELDS
    if name not in ("label", "mmr_lambda", "mmr_fetch_k", "query_transform", "query_model")
]


def script_settings(row: dict[str, Any], space: SearchSpace, llm: LLMSettings) -> dict[str, Any]:
    """What the scripts need to rebuild configuration ``row`` (a leaderboard row): its
    columns (the defaults where a row leaves one out) and the answer model's settings."""
    settings: dict[str, Any] = {name: row.get(name) for name in SCRIPT_CONFIG}
    settings.update({k: row.get(k) or v for k, v in CONFIG_DEFAULTS.items() if k in settings})
    store = settings["vector_store"]
    settings.update(
        query_prefix=row.get("query_prefix") or "",
        passage_prefix=row.get("passage_prefix") or "",
        temperature=llm.temperature,
        max_tokens=llm.max_tokens,
        system_prompt=llm.system_prompt,
        prompt_template=llm.prompt_template,
    )
    if row["search_type"] == "mmr":
        # the sweep's MMR picks from as many candidates as its deepest Top K, if more
        fetch_k = max(row["mmr_fetch_k"], *space.top_ks)
        settings.update(mmr_lambda=row["mmr_lambda"], mmr_fetch_k=fetch_k)
    if row["search_type"] == "hybrid":
        settings["rrf_k"] = RRF_K
    if (row.get("query_transform") or "none") != "none":
        # the sweep fused rankings as deep as its largest Top K
        settings.update(
            query_transform=row["query_transform"],
            query_model=row["query_model"],
            query_fusion_depth=max(space.top_ks),
        )
    if row["chunker"] not in SCRIPT_CHUNKERS:  # its factory's name in chunker.py
        settings["chunker_factory"] = get_chunker(row["chunker"]).__name__
    describe = getattr(store_class(store), "pattern_settings", None)
    if describe is not None:  # what the store's pattern code needs of its index
        settings.update(describe(parse_index_label(settings["index"]), settings["distance"]))
    return settings


def model_record(row: dict[str, Any], recorded: dict[str, Any]) -> dict[str, str]:
    """The runtime the sweep ran configuration ``row``'s embedding model on and the model's
    identity, from the run's recorded settings (none for a run that did not record them):
    the scripts run the model on that runtime when they can, and say when they cannot."""
    model = row["embedding_model"]
    runtime = dict(recorded.get("embedding_runtimes") or []).get(model)
    identity = dict(recorded.get("embedding_identities") or []).get(model)
    return {"embedding_runtime": runtime, "embedding_identity": identity} if runtime else {}


def pattern_json(
    row: dict[str, Any], settings: dict[str, Any], metric: str, configs: int
) -> dict[str, Any]:
    """``pattern.json``: AutoRAG's ``name``, ``settings`` (vector_store, chunking, embedding,
    retrieval, generation), ``scores`` (mean, ci_low, ci_high) and ``final_score``, with
    ragsweep's settings, rank and statistics under ``ragsweep``, its ``schema_version`` and
    the ``producer`` (ragsweep and its version) that wrote it."""
    answerer = row["answerer"]
    scores = {
        m: {"mean": row[m], "ci_low": row[f"{m}_low"], "ci_high": row[f"{m}_high"]}
        for m in METRICS
        if row.get(m) is not None
    }
    return {
        "schema_version": PATTERN_SCHEMA_VERSION,
        "producer": {"name": "ragsweep", "version": __version__},
        "name": f"{row['rank']}-{row['config_id']}",
        "max_combinations": configs,
        "settings": {
            "vector_store": {"datasource_type": settings["vector_store"]},
            "chunking": {
                "method": settings["chunker"],
                "chunk_size": settings["chunk_size"],
                "chunk_overlap": settings["chunk_overlap"],
            },
            "embedding": {
                "model_id": settings["embedding_model"],
                "distance_metric": settings["distance"],
            },
            "retrieval": {
                "method": "simple" if row["search_type"] == "similarity" else row["search_type"],
                "number_of_chunks": settings["top_k"],
            },
            "generation": {
                "model_id": answerer.removeprefix("llm:") if answerer.startswith("llm:") else "",
                "context_template_text": "{document}",
                "user_message_text": settings["prompt_template"],
                "system_message_text": settings["system_prompt"],
            },
        },
        "scores": scores,
        "final_score": row[metric],
        "ragsweep": {
            "rank": row["rank"],
            "label": row["label"],
            "optimization_metric": metric,
            "questions": row["questions"],
            "tied_with_best": row["tied_with_best"],
            "p_value": row["p_value"],
            **settings,
        },
    }


def read_pattern(path: Path) -> dict[str, Any]:
    """A pattern's ``pattern.json`` (``path``: the file or its folder), checked: one an older
    ragsweep wrote, without ``schema_version`` or ``producer``, reads as it is; one of a
    newer schema is refused with one line, never misread."""
    path = path / "pattern.json" if path.is_dir() else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RagsweepError(f"{path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise RagsweepError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("ragsweep"), dict):
        raise RagsweepError(f"{path}: not a ragsweep pattern.json (no 'ragsweep' object)")
    version = data.get("schema_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise RagsweepError(f"{path}: field 'schema_version': expected a whole number")
    if version > PATTERN_SCHEMA_VERSION:
        producer = data.get("producer")
        made = producer.get("version") if isinstance(producer, dict) else None
        raise RagsweepError(
            f"{path}: schema_version {version} is newer than ragsweep {__version__} reads "
            f"({PATTERN_SCHEMA_VERSION})"
            + (f"; ragsweep {made} wrote it" if made else "")
            + ": upgrade ragsweep to read it"
        )
    return data


def pattern_spec(path: Path) -> str:
    """The configuration of the pattern at ``path`` (its folder or pattern.json) as a
    search-space YAML that holds exactly it, as ``ragsweep best`` prints a run's winner."""
    pattern = read_pattern(path)
    settings = pattern["ragsweep"]
    try:
        spec = SearchSpace.spec_of(settings)
    except KeyError as exc:
        raise RagsweepError(f"{path}: field 'ragsweep.{exc.args[0]}' is missing") from None
    head = (
        f"# pattern {pattern.get('name')}: {settings.get('label')} "
        f"(config id {settings.get('config_id')})"
    )
    return head + "\n" + yaml.safe_dump(spec, sort_keys=False)


def evaluation_results(
    config_id: str, results: pa.Table, answers: pa.Table, testset: pa.Table, documents: pa.Table
) -> list[dict[str, Any]]:
    """AutoRAG's ``evaluation_results.json`` of one configuration: per question, the
    question, its correct answers, the answer, the retrieved chunks (``answer_contexts``:
    text and document id, best first) and its scores (the metrics it has). Only the
    retrieved documents' texts are read from ``documents``."""
    asked = {
        r["question_id"]: r
        for r in testset.select(["question_id", "question", "reference_answers"]).to_pylist()
    }
    spans = {
        r["question_id"]: r["retrieved_spans"] or []
        for r in answers.filter(pc.equal(answers["config_id"], config_id))
        .select(["question_id", "retrieved_spans"])
        .to_pylist()
    }
    retrieved = {s["doc_id"] for found in spans.values() for s in found}
    kept = documents.filter(pc.is_in(documents["doc_id"], pa.array(sorted(retrieved), pa.string())))
    texts = dict(zip(kept["doc_id"].to_pylist(), kept["text"].to_pylist(), strict=True))
    mine = results.filter(pc.equal(results["config_id"], config_id))
    out = []
    for r in mine.select(["question_id", "answer", *METRICS]).to_pylist():
        question = asked[r["question_id"]]
        out.append(
            {
                "question_id": r["question_id"],
                "question": question["question"],
                "correct_answers": question["reference_answers"],
                "answer": r["answer"],
                "answer_contexts": [
                    {"text": texts[s["doc_id"]][s["start"] : s["end"]], "document_id": s["doc_id"]}
                    for s in spans.get(r["question_id"], [])
                ],
                "scores": {m: r[m] for m in METRICS if r[m] is not None},
            }
        )
    return out


def write_patterns(
    folder: Path,
    leaderboard: pa.Table,
    results: pa.Table,
    answers: pa.Table,
    testset: pa.Table,
    documents: pa.Table,
    space: SearchSpace,
    llm: LLMSettings,
    count: int = DEFAULT_PATTERNS,
) -> list[Path]:
    """Write the ``count`` best configurations of ``leaderboard`` as pattern folders under
    ``folder``; return them, best first. One the scripts cannot rebuild (``pattern_code``)
    is left out with a warning, its place not given to another; a deployed assistant's row
    (``--agent``) is no configuration to write, and is passed over."""
    recorded = settings_of(leaderboard)
    metric = recorded["optimization_metric"]
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    swept = [row for row in leaderboard.to_pylist() if not is_agent(row)]
    for row in swept[: check_count(count)]:
        name = f"{row['rank']}-{row['config_id']}"
        code, problem = pattern_code(row)
        if problem:
            log.warning("pattern %s (%s) not written: %s", name, row["label"], problem)
            continue
        settings = {**script_settings(row, space, llm), **model_record(row, recorded)}
        where = folder / name
        write_scripts(where, settings, code)
        pattern = pattern_json(row, settings, metric, leaderboard.num_rows)
        dump(pattern, where / "pattern.json")
        evaluated = evaluation_results(row["config_id"], results, answers, testset, documents)
        dump(evaluated, where / "evaluation_results.json")
        written.append(where)
    return written


def write_scripts(where: Path, settings: dict[str, Any], code: dict[str, Path]) -> None:
    """A pattern's runnable part in folder ``where``: the scripts with ``settings``, the
    modules they import from ragsweep (``SUPPORT``) and ``code`` (``pattern_code``'s)."""
    where.mkdir(parents=True, exist_ok=True)
    for target, source in [*code.items(), *((t, m.__file__) for t, m in SUPPORT.items())]:
        shutil.copyfile(str(source), where / target)
    for script in SCRIPTS:
        (where / script).write_text(fill(script, settings), encoding="utf-8")


def fill(script: str, settings: dict[str, Any]) -> str:
    """The script ``script`` beside this module with ``settings`` in its SETTINGS line."""
    template = (Path(__file__).parent / script).read_text(encoding="utf-8")
    if SETTINGS_LINE not in template:
        raise RuntimeError(f"{script}: the template has no SETTINGS line")
    lines = "".join(f"    {key!r}: {value!r},\n" for key, value in settings.items())
    return template.replace(SETTINGS_LINE, f"SETTINGS: dict = {{\n{lines}}}\n")


def dump(data: Any, path: Path) -> None:
    """``data`` as JSON, NaN as null (a metric nothing measured)."""
    text = json.dumps(plain(data), indent=2, ensure_ascii=False, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def plain(data: Any) -> Any:
    if isinstance(data, float) and math.isnan(data):
        return None
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [plain(v) for v in data]
    return data
