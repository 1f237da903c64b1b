"""Red Hat AutoRAG's pipeline parameters, and what ragsweep does with each.

Read from the AutoRAG pipeline ``documents_rag_optimization_pipeline`` of
red-hat-data-services/pipelines-components (commit dd8d0c0, July 2026) and, for the names
only its upstream uses, of opendatahub-io/pipelines-components (its parameters as
ODH-ADR "AutoRAG Optimization Settings" of August 2026 lists them). Every one is a
parameter of ragsweep's pipeline, so an AutoRAG run's parameters start a ragsweep run as
they are. The table of docs/openshift.md is rendered from ``PARAMETERS``
(``markdown_table``); a test checks it against the compiled pipeline.

What AutoRAG's names need beyond ragsweep's own parameters is here: its Secrets' keys
(``adopt_connections``). Its ``preset`` and ``vector_io_provider_id`` shape the search
space wherever a run's settings are built (``ragsweep.sweep.presets``).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from urllib.parse import quote

from ragsweep.core.errors import RagsweepError

TABLE_BEGIN = "<!-- autorag-parameters: generated from ragsweep/kubeflow/autorag.py -->"
TABLE_END = "<!-- /autorag-parameters -->"


@dataclass(frozen=True)
class Parameter:
    """An AutoRAG parameter (a ragsweep parameter of the same name) and what ragsweep does
    with it, where that differs from AutoRAG."""

    name: str
    note: str


PARAMETERS: tuple[Parameter, ...] = (
    Parameter("test_data_secret_name", "the same S3 connection keys"),
    Parameter("test_data_bucket_name", "the same"),
    Parameter(
        "test_data_key",
        "the same AutoRAG JSON (or Giskard JSONL); empty: generate a test set",
    ),
    Parameter("input_data_secret_name", "the same"),
    Parameter("input_data_bucket_name", "the same"),
    Parameter("input_data_key", "a folder or prefix"),
    Parameter(
        "input_data_keys",
        "(upstream) more folders or prefixes, read with `input_data_key`'s; a document's id "
        "is its path under its own, so two files of one id are refused",
    ),
    Parameter(
        "embedding_models",
        "local model folders (all-MiniLM-L6-v2 in the image) or `openai:<model>` on the "
        "LLM endpoint",
    ),
    Parameter(
        "generation_models",
        "model names answered through the LLM endpoint; `extractive` is the offline answerer",
    ),
    Parameter(
        "optimization_metric",
        "the same five: `faithfulness`, `answer_correctness`, `context_correctness`; "
        "`answer_relevance` (the judge rates the answer's relevance to the question 1-5, "
        "scaled to 0-1; needs `judge`) and `overall_score` (each question's mean of those "
        "four), scored when ranked by",
    ),
    Parameter(
        "optimization_max_rag_patterns",
        "AutoRAG evaluates this many patterns its model-guided search picks; ragsweep "
        "evaluates the whole grid and refuses one larger than this (0: no limit)",
    ),
    Parameter(
        "ogx_secret_name",
        "its `OGX_CLIENT_BASE_URL` (the server's root; ragsweep calls its OpenAI API at "
        "`/v1`) and `OGX_CLIENT_API_KEY` serve the models when `llm_secret_name`'s "
        "`RAGSWEEP_LLM_*` are unset; ragsweep reaches vector stores itself, not through OGX",
    ),
    Parameter(
        "maas_secret_name",
        "(upstream) likewise its `MAAS_BASE_URL` and `MAAS_API_KEY`; one of the two Secrets "
        "may name an endpoint, not both",
    ),
    Parameter(
        "vector_io_provider_id",
        "sweeps the one store it names (`milvus`, `pgvector` or `oracle`, with or without "
        "`remote::`; `faiss` and `sqlite-vec`: exact search in memory) instead of "
        "`vector_stores` of `search_space`; empty: those",
    ),
    Parameter(
        "vector_db_secret_name",
        "(upstream) its `MILVUS_URI`, `MILVUS_TOKEN` and `PGVECTOR_HOST`, `_PORT`, `_DB`, "
        "`_USER`, `_PASSWORD` connect Milvus and pgvector when `vector_store_secret_name`'s "
        "`RAGSWEEP_*` are unset (`MILVUS_URI`: a server's URL, which pymilvus reads too; a Milvus "
        "Lite file goes in `RAGSWEEP_MILVUS_URI`); `MILVUS_SERVER_CERT` is not read",
    ),
    Parameter(
        "preset",
        "`speed` / `balanced` set the chunk lists of `search_space` to AutoRAG's (its sizes "
        "in characters, ragsweep's in tokens: a quarter), `speed` with the sentence chunker, "
        "`balanced` with the heading-aware one (`headings`, in place of Docling's hybrid "
        "chunker: see docs/chunkers.md); Docling's table parsing and LLM enrichment are not "
        "done; the sizes an embedding model cannot read whole are left out, with one warning "
        "naming them and the model (`balanced` on all-MiniLM-L6-v2, 254 tokens: 128 is "
        "kept, 256 and 512 left out), and the run fails only when none is left; empty: "
        "`search_space`'s",
    ),
)

# AutoRAG's Secret keys for the model endpoint: (URL key, API key key, the path of its
# OpenAI-compatible API under that URL).
LLM_ENDPOINTS = {
    "maas_secret_name": ("MAAS_BASE_URL", "MAAS_API_KEY", ""),  # a gateway's OpenAI URL
    "ogx_secret_name": ("OGX_CLIENT_BASE_URL", "OGX_CLIENT_API_KEY", "/v1"),  # the root
}
MILVUS_KEYS = {"MILVUS_URI": "RAGSWEEP_MILVUS_URI", "MILVUS_TOKEN": "RAGSWEEP_MILVUS_TOKEN"}
PGVECTOR_KEYS = (
    "PGVECTOR_HOST",
    "PGVECTOR_PORT",
    "PGVECTOR_DB",
    "PGVECTOR_USER",
    "PGVECTOR_PASSWORD",
)


def adopt_connections(env: MutableMapping[str, str] = os.environ) -> list[str]:
    """Set ragsweep's connection variables from AutoRAG's Secret keys in ``env`` where
    ragsweep's own are unset; return what was taken from where (names, never values)."""
    taken = []
    endpoints = [(name, keys) for name, keys in LLM_ENDPOINTS.items() if env.get(keys[0])]
    if len(endpoints) > 1:
        both = " and ".join(f"{keys[0]} ({name})" for name, keys in endpoints)
        raise RagsweepError(f"both {both} are set: give the model endpoint in one Secret")
    if endpoints and not env.get("RAGSWEEP_LLM_BASE_URL"):
        [(name, (url, key, path))] = endpoints
        base = env[url].rstrip("/")
        env["RAGSWEEP_LLM_BASE_URL"] = base if base.endswith(path) else base + path
        taken.append(f"RAGSWEEP_LLM_BASE_URL from {url}")
        if env.get(key) and not env.get("RAGSWEEP_LLM_API_KEY"):
            env["RAGSWEEP_LLM_API_KEY"] = env[key]
            taken.append(f"RAGSWEEP_LLM_API_KEY from {key}")
    for key, ours in MILVUS_KEYS.items():
        if env.get(key) and not env.get(ours):
            env[ours] = env[key]
            taken.append(f"{ours} from {key}")
    if any(env.get(key) for key in PGVECTOR_KEYS) and not env.get("RAGSWEEP_PGVECTOR_URL"):
        env["RAGSWEEP_PGVECTOR_URL"] = pgvector_url(env)
        taken.append(
            "RAGSWEEP_PGVECTOR_URL from " + ", ".join(k for k in PGVECTOR_KEYS if env.get(k))
        )
    return taken


def pgvector_url(env: MutableMapping[str, str]) -> str:
    """A PostgreSQL URL from AutoRAG's PGVECTOR_* keys (port 5432 when not given; the host
    a name, an address or a Unix socket's folder)."""
    missing = [key for key in ("PGVECTOR_HOST", "PGVECTOR_DB") if not env.get(key)]
    if missing:
        raise RagsweepError(
            f"vector_db_secret_name: {' and '.join(missing)} missing: the PGVECTOR_* keys "
            "need at least PGVECTOR_HOST and PGVECTOR_DB"
        )
    user = quote(env.get("PGVECTOR_USER", ""), safe="")
    if env.get("PGVECTOR_PASSWORD"):
        user += ":" + quote(env["PGVECTOR_PASSWORD"], safe="")
    host = env["PGVECTOR_HOST"]
    if host.startswith("/"):  # a Unix socket's folder, as libpq takes it in a URL
        host = quote(host, safe="")
    elif ":" in host:  # an IPv6 address
        host = f"[{host}]"
    credentials = f"{user}@" if user else ""
    port = env.get("PGVECTOR_PORT") or "5432"
    return f"postgresql://{credentials}{host}:{port}/{quote(env['PGVECTOR_DB'], safe='')}"


def markdown_table() -> str:
    """``PARAMETERS`` as the Markdown table of docs/openshift.md, between its markers."""
    rows = [
        TABLE_BEGIN,
        "| AutoRAG parameter | in ragsweep's pipeline |",
        "| --- | --- |",
    ]
    rows += [f"| `{p.name}` | {p.note} |" for p in PARAMETERS]
    return "\n".join([*rows, TABLE_END])
