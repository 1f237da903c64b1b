"""Vector stores and their indexes as sweep dimensions: the space's fields, retrieval into
every (store, index) with its recall against exact search and its costs, the leaderboard.

The stores besides ``memory`` are the test-only ones of ``approximate_store``, registered
for each test; the real stores have their own contract tests (``test_stores``)."""

import logging
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from approximate_store import EVENTS, SECRET, register
from builders import complete

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import (
    CONFIG_DEFAULTS,
    METRICS,
    RETRIEVALS,
    TESTSET,
    read_table,
)
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models.llm import LLMSettings
from ragsweep.patterns import write_patterns
from ragsweep.reporting.exports import render
from ragsweep.reporting.report import cost_axis, render_html
from ragsweep.retrieval import store_search
from ragsweep.sweep.settings import RunSettings, read_settings, write_settings
from ragsweep.sweep.space import LEADERBOARD, SearchSpace, configs_table
from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

DOCS = pa.table(
    {
        "doc_id": ["ports.md", "plans.md", "auth.md"],
        "source": ["ports.md", "plans.md", "auth.md"],
        "format": ["md"] * 3,
        "text": [
            "Tidewater listens on port 8443 by default. The admin console uses port 9000. "
            "Metrics are exported on port 9102. Health checks answer on port 8080.",
            "The Basic plan keeps backups for 30 days. The Pro plan keeps backups for 90 days. "
            "Enterprise customers choose their own retention. Backups run every night.",
            "Users sign in with single sign-on. API keys expire after one year. "
            "Admins can revoke a key at any time. Two-factor login is required for admins.",
        ],
    }
)
QUESTIONS = complete(
    pa.table(
        {
            "question_id": ["q1", "q2", "q3"],
            "question": [
                "Which port does the console use?",
                "How long does Pro keep backups?",
                "When do API keys expire?",
            ],
            "reference_answers": [["9000"], ["90 days"], ["after one year"]],
            "reference_doc_ids": [["ports.md"], ["plans.md"], ["auth.md"]],
        }
    ),
    TESTSET,
)
CHUNKS = {"chunk_sizes": [16], "chunk_overlaps": [0], "top_ks": [1, 3]}
TWO_STORES = {
    **CHUNKS,
    "vector_stores": ["memory", "approximate"],
    "indexes": {"approximate": {"hnsw": {"m": [2, 3]}}},
}


@pytest.fixture
def stores(plugins):
    register(plugins)


# --- the search space --------------------------------------------------------------------


def test_configurations_searched_exactly_in_memory_keep_their_ids_labels_and_sweep_key():
    # values computed on main before vector stores were swept (commit bbc1727)
    space = SearchSpace()
    first = space.all_configs()[0]
    assert first["config_id"] == "6cffbb11aa7a"
    assert first["label"] == "sentence-64/16 all-MiniLM-L6-v2 k=1 similarity extractive"
    assert not {"vector_store", "index", "distance"} & set(first)
    assert not {"vector_stores", "indexes", "distance"} & set(space.to_dict())
    assert RunSettings("docs", "testset.json").record()["sweep_key"] == "0dcf3e86d319"
    explicit = SearchSpace.from_dict({"vector_stores": ["memory"], "distance": "cosine"})
    assert explicit.all_configs() == space.all_configs()


def test_indexes_sweep_every_combination_of_their_parameters_over_the_kinds_defaults(stores):
    space = SearchSpace.from_dict(
        {
            "vector_stores": ["memory", "approximate"],
            # JSON numbers from a pipeline parameter: 2.0 means 2
            "indexes": {"approximate": {"hnsw": {"m": [2.0, 4], "ef_search": 32}, "exact": None}},
        }
    )
    assert [(store, spec.label()) for store, spec in space.targets()] == [
        ("memory", "exact"),
        ("approximate", "hnsw(ef_search=32,m=2)"),
        ("approximate", "hnsw(ef_search=32,m=4)"),
        ("approximate", "exact"),
    ]
    # a store the space gives no index: its hnsw with the defaults (memory: exact search)
    alone = SearchSpace.from_dict({"vector_stores": ["approximate", "memory"]})
    assert [(s, i.label()) for s, i in alone.targets()] == [
        ("approximate", "hnsw(ef_search=64,m=16)"),
        ("memory", "exact"),
    ]
    listed = SearchSpace.from_dict(
        {"vector_stores": ["approximate"], "indexes": {"approximate": ["exact", "hnsw"]}}
    )
    assert [i.label() for _, i in listed.targets()] == ["exact", "hnsw(ef_search=64,m=16)"]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"vector_stores": ["faiss"]}, "field 'vector_stores': unknown value 'faiss'"),
        ({"distance": "manhattan"}, "field 'distance': unknown value 'manhattan'"),
        ({"distance": ["dot"]}, "field 'distance': expected text values"),
        ({"indexes": ["hnsw"]}, "field 'indexes': expected a mapping of vector store"),
        ({"indexes": {"faiss": {"hnsw": {}}}}, "field 'indexes': unknown vector store 'faiss'"),
        ({"indexes": {"approximate": {"hnsw": {}}}}, "'approximate' is not in vector_stores"),
        ({"indexes": {"approximate": {"hnsw": 16}}}, "approximate hnsw: expected a mapping"),
        ({"indexes": {"approximate": {"ivf": {}}}}, "approximate has no index 'ivf'"),
        ({"indexes": {"approximate": {"hnsw": {"M": [8]}}}}, r"unknown parameter\(s\) \['M'\]"),
        ({"indexes": {"approximate": {"hnsw": {"m": ["big"]}}}}, "hnsw m: expected numbers"),
        ({"indexes": {"approximate": {"hnsw": {"m": []}}}}, "hnsw m: expected a non-empty list"),
        ({"indexes": {"approximate": {"hnsw": {"m": [True]}}}}, "expected numbers or texts"),
    ],
)
def test_bad_store_fields_give_a_clear_error_naming_the_field(stores, data, message):
    if "indexes" in data and "is not in" not in message:
        data = {"vector_stores": ["approximate"], **data}
    with pytest.raises(RagsweepError, match=message) as caught:
        SearchSpace.from_dict(data, source="space.yaml")
    assert str(caught.value).startswith("space.yaml: field '")


def test_store_index_and_distance_name_a_configuration_when_not_the_defaults(stores):
    space = SearchSpace.from_dict({**TWO_STORES, "search_types": ["mmr"], "distance": "dot"})
    labels = [c["label"] for c in space.all_configs()]
    assert labels[0] == "sentence-16/0 all-MiniLM-L6-v2 k=1 mmr:0.5 distance=dot extractive"
    assert labels[2] == (
        "sentence-16/0 all-MiniLM-L6-v2 k=1 mmr:0.5 approximate:hnsw(ef_search=64,m=2) "
        "distance=dot extractive"
    )
    assert len(labels) == 3 * 2  # (memory, two indexes) x Top K
    configs = space.all_configs()
    assert len({c["config_id"] for c in configs}) == len(configs)
    cosine = SearchSpace.from_dict({**TWO_STORES, "search_types": ["mmr"]}).all_configs()
    assert {c["config_id"] for c in cosine}.isdisjoint(c["config_id"] for c in configs)
    assert cosine[0]["label"].endswith("k=1 mmr:0.5 extractive")


def test_a_configuration_round_trips_through_the_space_that_holds_only_it(stores):
    space = SearchSpace.from_dict({**TWO_STORES, "distance": "euclidean"})
    for config in space.all_configs():
        assert SearchSpace.of_config(config).all_configs() == [config], config["label"]
    # a leaderboard row carries the defaults filled in: still the default space
    one = SearchSpace.from_dict({**CHUNKS, "top_ks": [3], "search_types": ["similarity"]})
    [memory] = one.all_configs()
    row = {**CONFIG_DEFAULTS, **memory}
    assert SearchSpace.of_config(row).all_configs() == [memory]
    assert "vector_stores" not in SearchSpace.of_config(row).to_dict()
    # through plain data, and as kfp hands a dict parameter over (numbers as floats)
    data = space.to_dict()
    assert data["indexes"] == {"approximate": {"hnsw": {"m": [2, 3]}}}
    assert SearchSpace.from_dict(data) == space
    data["indexes"]["approximate"]["hnsw"]["m"] = [2.0, 3.0]
    assert SearchSpace.from_dict(data).all_configs() == space.all_configs()


def test_the_settings_artifact_fills_in_the_store_defaults_and_keeps_the_space(stores, tmp_path):
    space = SearchSpace.from_dict(TWO_STORES)
    write_settings(RunSettings("docs", "", space), tmp_path / "settings")
    table = read_table(tmp_path / "settings", "settings")
    assert table["config_id"].to_pylist() == [c["config_id"] for c in space.all_configs()]
    targets = set(zip(table["vector_store"].to_pylist(), table["index"].to_pylist(), strict=True))
    assert targets == {
        ("memory", "exact"),
        ("approximate", "hnsw(ef_search=64,m=2)"),
        ("approximate", "hnsw(ef_search=64,m=3)"),
    }
    assert set(table["distance"].to_pylist()) == {"cosine"}
    assert read_settings(tmp_path / "settings").space == space


def test_the_sweep_key_tells_runs_of_other_stores_apart(stores):
    plain = RunSettings("docs", "testset.json", SearchSpace.from_dict(CHUNKS))
    other = RunSettings("docs", "testset.json", SearchSpace.from_dict(TWO_STORES))
    assert plain.record()["sweep_key"] != other.record()["sweep_key"]


# --- retrieval into every store and index --------------------------------------------------


def retrieved(space, **options):
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache()
    chunks = build_chunks(DOCS, chunk_config, cache)
    return chunks, chunk_config, retrieve(chunks, QUESTIONS, space, chunk_config, cache, **options)


def expected_recall(chunks, m, k):
    """Per question: the share of exact search's top k that the approximate store (which
    lost every chunk whose row is a multiple of ``m``) finds, computed here directly."""
    vectors = np.stack(chunks["embedding"].to_numpy(zero_copy_only=False))
    questions = EmbeddingCache().embed("all-MiniLM-L6-v2", QUESTIONS["question"].to_pylist())
    order = np.argsort(-(questions @ vectors.T), axis=1, kind="stable")
    out = []
    for ranked in order:
        kept = [int(i) for i in ranked if i % m != 0]
        out.append(len(set(ranked[:k].tolist()) & set(kept[:k])) / k)
    return out


def rows_of(table, config):
    return table.filter(pc.equal(table["config_id"], config["config_id"])).to_pylist()


def test_retrieve_loads_the_chunk_set_into_every_store_and_index(stores, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_RUN_ID", "20261130-234144-000001")
    monkeypatch.setattr(store_search, "LATENCY_SAMPLE", 2)  # of 3 questions
    space = SearchSpace.from_dict(TWO_STORES)
    chunks, chunk_config, table = retrieved(space)
    assert chunks.num_rows >= 6
    table = table.select(RETRIEVALS.names).cast(RETRIEVALS)  # as the artifact holds it
    configs = space.configs(chunk_config)
    assert table.num_rows == len(configs) * 3 == 3 * 2 * 2 * 3  # indexes x k x searches x q
    builds = {}
    for config in configs:
        rows = rows_of(table, config)
        recall = [r["recall_vs_exact"] for r in rows]
        if "vector_store" not in config:
            assert recall == [1.0] * 3
        elif config["search_type"] == "similarity":
            m = int(re.search(r"m=(\d+)", config["index"]).group(1))
            assert recall == pytest.approx(expected_recall(chunks, m, config["top_k"]))
        else:
            assert all(0 <= r <= 1 for r in recall)
        latency = [r["query_latency_ms"] for r in rows]
        assert latency[2] is None and all(v >= 0 for v in latency[:2])
        build = {r["index_build_s"] for r in rows}
        assert len(build) == 1 and build.pop() >= 0
        builds.setdefault(config.get("index", "exact"), set()).add(rows[0]["index_build_s"])
    assert all(len(times) == 1 for times in builds.values())  # one build per index
    similarity_k3 = [
        np.mean([r["recall_vs_exact"] for r in rows_of(table, c)])
        for c in configs
        if c["search_type"] == "similarity" and c["top_k"] == 3 and "vector_store" in c
    ]
    assert min(similarity_k3) < 1.0  # the approximate index lost chunks it would find
    # one collection per index, named for the run, the chunk set and the index; all dropped
    created = [name for event, name in EVENTS if event == "created"]
    assert len(created) == len(set(created)) == 2
    pattern = rf"rs_{chunk_config['chunk_config_id']}_[0-9a-f]{{8}}_20261130_234144_000001"
    assert all(re.fullmatch(pattern, name) for name in created), created
    assert sorted(name for event, name in EVENTS if event == "dropped") == sorted(created)


def test_collections_are_kept_on_request_and_their_names_logged(stores, caplog):
    space = SearchSpace.from_dict(TWO_STORES)
    with caplog.at_level(logging.INFO, logger="ragsweep"):
        retrieved(space, keep_collections=True)
    created = [name for event, name in EVENTS if event == "created"]
    assert len(created) == 2 and not [e for e in EVENTS if e[0] == "dropped"]
    for name in created:  # named with a random run id when RAGSWEEP_RUN_ID is not set
        assert re.fullmatch(r"rs_[0-9a-f]{12}_[0-9a-f]{8}_[0-9a-f]{8}", name)
        assert f"kept collection {name} in approximate" in caplog.text


def test_a_failing_store_stops_retrieval_naming_it_without_its_secret_and_drops_it(stores):
    space = SearchSpace.from_dict({**CHUNKS, "vector_stores": ["memory", "broken"]})
    with pytest.raises(RagsweepError) as caught:
        retrieved(space, keep_collections=True)
    message = str(caught.value)
    assert message.startswith("vector store broken (hnsw(ef_search=64,m=16), collection rs_")
    assert "ConnectionError: cannot reach http://***@127.0.0.1:1/" in message
    assert SECRET not in message
    [(_, created)] = [e for e in EVENTS if e[0] == "created"]
    assert ("dropped", created) in EVENTS  # a failed collection is not kept


def test_collection_names_fit_every_stores_identifiers(monkeypatch):
    from ragsweep.retrieval.vector_stores import IndexSpec
    from ragsweep.store.database import RUN_ID_ENV

    assert store_search.RUN_ID_ENV == RUN_ID_ENV  # the run id `ragsweep run` sets
    hnsw = IndexSpec("hnsw", {"m": 16})
    monkeypatch.setenv(RUN_ID_ENV, "0f8e2d4c-7b1a-4c3e-9d2f-5a6b7c8d9e0f")  # a KFP run id
    named = store_search.collection_name
    name = named("445ccd537c28", "milvus", hnsw, "cosine")
    # letters, digits and underscores, a letter first, within PostgreSQL's 63 characters
    assert re.fullmatch(r"rs_445ccd537c28_[0-9a-f]{8}_[0-9a-f]{12}", name) and len(name) <= 63
    assert name == named("445ccd537c28", "milvus", hnsw, "cosine")
    others = {
        named("445ccd537c28", "milvus", IndexSpec("hnsw", {"m": 32}), "cosine"),
        named("445ccd537c28", "milvus", hnsw, "dot"),
        named("445ccd537c28", "pgvector", hnsw, "cosine"),
        named("6cffbb11aa7a", "milvus", hnsw, "cosine"),
    }
    assert name not in others and len(others) == 4


# --- answers, scores, leaderboard ------------------------------------------------------------


def test_the_leaderboard_ranks_both_stores_with_recall_and_retrieval_costs(stores):
    space = SearchSpace.from_dict({**TWO_STORES, "search_types": ["similarity"]})
    chunks, _, table = retrieved(space)
    configs = space.all_configs()
    answers, scores = evaluate(table, QUESTIONS, configs, "auto")
    columns = ["recall_vs_exact", "query_latency_ms", "index_build_s"]

    def keyed(t, names):
        return {(r["config_id"], r["question_id"]): [r[n] for n in names] for r in t.to_pylist()}

    assert keyed(answers, columns) == keyed(table, columns)
    assert keyed(scores, columns[:1]) == keyed(table, columns[:1])
    assert "recall_vs_exact" in METRICS
    board = build_board(scores, answers, QUESTIONS, configs_table(configs)).leaderboard
    assert board.schema.names == LEADERBOARD.names and board.num_rows == 3 * 2
    rows = {r["config_id"]: r for r in board.to_pylist()}
    for config in configs:
        row = rows[config["config_id"]]
        assert row["vector_store"] == config.get("vector_store", "memory")
        assert row["index"] == config.get("index", "exact") and row["distance"] == "cosine"
        recall = 1.0  # memory: exact search itself
        if "vector_store" in config:
            m = int(re.search(r"m=(\d+)", config["index"]).group(1))
            recall = np.mean(expected_recall(chunks, m, config["top_k"]))
        assert row["recall_vs_exact"] == pytest.approx(recall)
        assert row["recall_vs_exact_low"] <= row["recall_vs_exact"] <= row["recall_vs_exact_high"]
        assert 0 <= row["query_latency_p50_ms"] <= row["query_latency_p95_ms"]
        assert row["index_build_s"] >= 0
    assert min(r["recall_vs_exact"] for r in rows.values()) < 1.0
    # with a store other than memory the tables show recall and search latency, and the
    # report plots score against search latency (no LLM latency to plot)
    text = render(board, "table")
    assert "recall vs exact" in text and "search ms p50/p95" in text
    assert cost_axis(board)[0] == "query_latency_p50_ms"
    memory = board.filter(pc.equal(board["vector_store"], "memory"))
    assert "recall vs exact" not in render(memory, "table")
    assert cost_axis(memory)[0] == "context_chars"


def test_the_report_of_a_sweep_over_stores_shows_them(stores):
    space = SearchSpace.from_dict({**TWO_STORES, "search_types": ["similarity"]})
    _, _, table = retrieved(space)
    configs = space.all_configs()
    answers, scores = evaluate(table, QUESTIONS, configs, "auto")
    html = render_html(build_board(scores, answers, QUESTIONS, configs_table(configs)))
    assert "approximate:hnsw(ef_search=64,m=2)" in html
    assert "search ms (p50 / p95)" in html and "recall vs exact" in html


def test_a_store_without_pattern_code_gets_no_pattern_and_a_warning_never_another_stores(
    stores, tmp_path, caplog
):
    """The approximate store brings no pattern code: its configurations are not written as
    patterns (the scripts would deploy exact search in memory instead), the run says why,
    and the memory configurations still are."""
    space = SearchSpace.from_dict({**TWO_STORES, "search_types": ["similarity"]})
    _, _, table = retrieved(space)
    configs = space.all_configs()
    answers, scores = evaluate(table, QUESTIONS, configs, "auto")
    board = build_board(scores, answers, QUESTIONS, configs_table(configs))
    leaderboard = board.leaderboard
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        written = write_patterns(
            tmp_path, leaderboard, board.results, answers, QUESTIONS, DOCS, space,
            LLMSettings(), count=leaderboard.num_rows,
        )  # fmt: skip
    rows = leaderboard.to_pylist()
    skipped = [r for r in rows if r["vector_store"] == "approximate"]
    assert len(skipped) == 4 and len(written) == 2
    assert [p.name for p in written] == [
        f"{r['rank']}-{r['config_id']}" for r in rows if r["vector_store"] == "memory"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)
    for row in skipped:
        assert (
            f"pattern {row['rank']}-{row['config_id']} ({row['label']}) not written: vector "
            "store approximate brings no pattern code (PATTERN_CODE)"
        ) in caplog.text
