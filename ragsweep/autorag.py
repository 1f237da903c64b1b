"""Red Hat AutoRAG's pipeline parameters and ragsweep's equivalent of each.

Read from the AutoRAG pipeline ``documents_rag_optimization_pipeline`` of
red-hat-data-services/pipelines-components (commit dd8d0c0, July 2026) and, for the names
only its upstream uses, of opendatahub-io/pipelines-components (commit 015bcd0). The
README's table is rendered from ``PARAMETERS`` (``readme_table``), and a test checks that
every ragsweep parameter named here is a parameter of the compiled pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

README_BEGIN = "<!-- autorag-parameters: generated from ragsweep/autorag.py -->"
README_END = "<!-- /autorag-parameters -->"


@dataclass(frozen=True)
class Equivalent:
    """An AutoRAG parameter, ragsweep's pipeline parameter for it (None: none), and how they
    differ."""

    autorag: str
    ragsweep: str | None
    note: str


PARAMETERS: tuple[Equivalent, ...] = (
    Equivalent("test_data_secret_name", "test_data_secret_name", "the same S3 connection keys"),
    Equivalent("test_data_bucket_name", "test_data_bucket_name", "the same"),
    Equivalent(
        "test_data_key",
        "test_data_key",
        "the same AutoRAG JSON (or Giskard JSONL); empty: generate a test set",
    ),
    Equivalent("input_data_secret_name", "input_data_secret_name", "the same"),
    Equivalent("input_data_bucket_name", "input_data_bucket_name", "the same"),
    Equivalent("input_data_key", "input_data_key", "a file, folder or prefix, as in AutoRAG"),
    Equivalent(
        "input_data_keys",
        "input_data_key",
        "upstream (Open Data Hub) only: a list of which AutoRAG reads the first; give that one",
    ),
    Equivalent(
        "embedding_models",
        "embedding_models",
        "local model folders (all-MiniLM-L6-v2 in the image) or `openai:<model>` on the "
        "LLM endpoint",
    ),
    Equivalent(
        "generation_models",
        "generation_models",
        "model names answered through the LLM endpoint; `extractive` is the offline answerer",
    ),
    Equivalent(
        "optimization_metric",
        "optimization_metric",
        "`faithfulness`, `answer_correctness` and `context_correctness` mean the same; "
        "`answer_relevance` and `overall_score` have no counterpart (refused with a message)",
    ),
    Equivalent(
        "optimization_max_rag_patterns",
        "optimization_max_rag_patterns",
        "AutoRAG evaluates this many patterns its model-guided search picks; ragsweep "
        "evaluates the whole grid and refuses one larger than this (0: no limit)",
    ),
    Equivalent(
        "ogx_secret_name",
        "llm_secret_name",
        "keys `RAGSWEEP_LLM_BASE_URL`, `RAGSWEEP_LLM_API_KEY` for any OpenAI-compatible "
        "endpoint, not `OGX_CLIENT_BASE_URL`, `OGX_CLIENT_API_KEY`",
    ),
    Equivalent(
        "maas_secret_name",
        "llm_secret_name",
        "upstream only; likewise, not `MAAS_BASE_URL`, `MAAS_API_KEY`",
    ),
    Equivalent(
        "vector_io_provider_id",
        "search_space",
        "ragsweep talks to each store itself, not through OGX: `vector_stores` in "
        "`search_space` names the stores to sweep",
    ),
    Equivalent(
        "vector_db_secret_name",
        "vector_store_secret_name",
        "upstream only; keys `RAGSWEEP_MILVUS_URI`, `RAGSWEEP_PGVECTOR_URL`, ... "
        "(see Vector stores), not `MILVUS_*`, `PGVECTOR_*`",
    ),
    Equivalent(
        "preset",
        None,
        "`speed` / `balanced` choose Docling table parsing, hybrid chunking and LLM "
        "enrichment; ragsweep extracts plain text and sweeps `chunkers` in `search_space`",
    ),
)


def readme_table() -> str:
    """``PARAMETERS`` as the README's Markdown table, between its markers."""
    rows = [
        README_BEGIN,
        "| AutoRAG parameter | ragsweep parameter | difference |",
        "| --- | --- | --- |",
    ]
    for p in PARAMETERS:
        ours = f"`{p.ragsweep}`" if p.ragsweep else "none"
        rows.append(f"| `{p.autorag}` | {ours} | {p.note} |")
    return "\n".join([*rows, README_END])
