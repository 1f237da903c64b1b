"""Instruction-tuned embedding models read the query and passage prefixes of their family."""

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import config_id, read_table
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models.embedding import WEB_SEARCH, Prefixes, family_prefixes
from ragsweep.sweep import steps
from ragsweep.sweep.settings import RunSettings, read_settings, write_settings
from ragsweep.sweep.space import SearchSpace

E5 = Prefixes("query: ", "passage: ")
BGE = Prefixes("Represent this sentence for searching relevant passages: ")
NOMIC = Prefixes("search_query: ", "search_document: ")
GTE_QWEN2 = Prefixes(f"Instruct: {WEB_SEARCH}\nQuery: ")
QWEN3 = Prefixes(f"Instruct: {WEB_SEARCH}\nQuery:")  # the card's template has no space
NONE = Prefixes()


@pytest.mark.parametrize(
    ("name", "family", "prefixes"),
    [
        ("intfloat/e5-base-v2", "E5", E5),
        ("openai:intfloat/E5-Large-v2", "E5", E5),
        ("openai:multilingual-e5-small", "E5", E5),
        ("/models/models--intfloat--e5-small-v2/snapshots/ffb93f3", "E5", E5),
        ("intfloat/multilingual-e5-large-instruct", "E5 instruct", GTE_QWEN2),
        ("openai:e5-mistral-7b-instruct", "E5 instruct", GTE_QWEN2),
        ("BAAI/bge-base-en-v1.5", "BGE English", BGE),
        ("~/models/bge-small-en", "BGE English", BGE),
        ("openai:bge-m3", None, NONE),
        ("openai:nomic-embed-text:latest", "nomic-embed-text", NOMIC),
        ("nomic-ai/nomic-embed-text-v1.5", "nomic-embed-text", NOMIC),
        ("Alibaba-NLP/gte-Qwen2-1.5B-instruct", "gte-Qwen2", GTE_QWEN2),
        ("openai:Qwen/Qwen3-Embedding-0.6B", "Qwen3-Embedding", QWEN3),
        ("thenlper/gte-base", None, NONE),
        ("all-MiniLM-L6-v2", None, NONE),
        ("openai:text-embedding-3-small", None, NONE),
        ("/data/re5-models/minilm", None, NONE),
    ],
)
def test_the_table_resolves_model_families_from_their_names(name, family, prefixes):
    assert family_prefixes(name) == (family, prefixes)


def test_a_chunk_config_carries_its_models_prefixes_and_only_when_there_are_some():
    space = SearchSpace(
        chunk_sizes=(128,), embedding_models=("openai:e5-small-v2", "all-MiniLM-L6-v2")
    )
    e5, minilm = space.chunk_configs()
    assert (e5["query_prefix"], e5["passage_prefix"]) == ("query: ", "passage: ")
    assert "query_prefix" not in minilm and "passage_prefix" not in minilm
    # a model without prefixes keeps the configuration id it had before prefixes existed
    plain = {"chunker": "sentence", "chunk_size": 128, "chunk_overlap": 16}
    assert minilm["chunk_config_id"] == config_id({**plain, "embedding_model": "all-MiniLM-L6-v2"})
    assert e5["chunk_config_id"] != config_id({**plain, "embedding_model": "openai:e5-small-v2"})
    # the family's own prefixes are not spelled out in the label
    assert (
        space.configs(e5)[0]["label"]
        == "sentence-128/16 openai:e5-small-v2 k=1 similarity extractive"
    )


def test_the_space_overrides_the_table_for_every_model_and_says_so_in_the_label():
    default = SearchSpace(chunk_sizes=(128,), top_ks=(1,), embedding_models=("openai:e5-small-v2",))
    changed = SearchSpace.from_dict(
        {**default.to_dict(), "query_prefix": "", "passage_prefix": "doc: "}, "space.yaml"
    )
    [config] = changed.chunk_configs()
    assert "query_prefix" not in config and config["passage_prefix"] == "doc: "
    [before], [after] = default.all_configs()[:1], changed.all_configs()[:1]
    assert before["config_id"] != after["config_id"]
    assert "openai:e5-small-v2 query_prefix='' passage_prefix='doc: ' k=1" in after["label"]
    minilm = SearchSpace(chunk_sizes=(128,), query_prefix="query: ").all_configs()[0]
    assert minilm["query_prefix"] == "query: " and "passage_prefix" not in minilm
    assert "all-MiniLM-L6-v2 query_prefix='query: ' k=" in minilm["label"]


def test_prefixes_are_kept_exactly_as_given_and_must_be_text():
    space = SearchSpace.from_dict({"query_prefix": "  ask: ", "passage_prefix": ""})
    assert space.query_prefix == "  ask: " and space.passage_prefix == ""
    assert SearchSpace.from_dict(space.to_dict()) == space
    assert "query_prefix" not in SearchSpace().to_dict()  # None: each model's own
    with pytest.raises(RagsweepError, match="space.yaml: field 'query_prefix': expected text"):
        SearchSpace.from_dict({"query_prefix": 5}, "space.yaml")


def test_a_chunk_and_its_passage_prefix_must_fit_the_models_input():
    # all-MiniLM-L6-v2 reads 254 text tokens; "passage: " takes 2 of them
    space = SearchSpace(chunk_sizes=(252, 253), passage_prefix="passage: ")
    assert [c["chunk_size"] for c in space.chunk_configs()] == [252]
    assert space.pruned() == [
        "chunk size 253 and the passage prefix 'passage: ' (2 tokens) exceed "
        "all-MiniLM-L6-v2's maximum input of 254 tokens"
    ]
    assert [c["chunk_size"] for c in SearchSpace(chunk_sizes=(252, 253)).chunk_configs()] == [
        252,
        253,
    ]


@pytest.mark.parametrize(
    "space",
    [
        SearchSpace(chunk_sizes=(128,), top_ks=(3,), embedding_models=("openai:e5-small-v2",)),
        SearchSpace(
            chunk_sizes=(128,),
            top_ks=(3,),
            embedding_models=("openai:e5-small-v2",),
            query_prefix="",
        ),
        SearchSpace(chunk_sizes=(128,), top_ks=(3,)),
    ],
)
def test_the_space_of_a_leaderboard_row_reproduces_its_prefixes(space):
    config = space.all_configs()[0]
    row = {
        **config,
        "query_prefix": config.get("query_prefix"),
        "passage_prefix": config.get("passage_prefix"),
    }
    again = SearchSpace.of_config(row)
    assert again.all_configs()[0]["config_id"] == config["config_id"]
    spec = again.to_dict()
    if space.embedding_models == ("all-MiniLM-L6-v2",):
        assert "query_prefix" not in spec  # nothing to carry
    else:
        assert spec["query_prefix"] == config.get("query_prefix", "")
        assert spec["passage_prefix"] == "passage: "


def test_the_settings_artifact_carries_the_validated_space(tmp_path):
    space = SearchSpace.from_dict(
        SearchSpace.data_of_parameters(
            {"chunk_sizes": [256, 512], "top_ks": [1, 3]}, ["openai:e5-small-v2"]
        )
    )
    write_settings(RunSettings("docs", "", space=space), tmp_path / "settings")
    table = read_table(tmp_path / "settings", "settings")
    assert table["chunk_size"].to_pylist() == [256] * 4 + [512] * 4  # x 2 top_ks x 2 searches
    assert set(table["query_prefix"].to_pylist()) == {"query: "}
    assert read_settings(tmp_path / "settings").space == space
    # the same lists with the default model's limits are not a valid space
    with pytest.raises(RagsweepError, match="no valid chunk configuration"):
        SearchSpace.from_dict({"chunk_sizes": [256, 512], "top_ks": [1, 3]})


def test_an_endpoint_e5_model_reads_query_for_questions_and_passage_for_chunks(
    llm_server, monkeypatch
):
    llm_server.models.append("e5-small-v2")
    documents = pa.table(
        {
            "doc_id": ["ports.md"],
            "source": ["ports.md"],
            "format": ["md"],
            "text": ["The admin console uses port 9000. Backups are kept 30 days."],
        }
    )
    questions = pa.table({"question_id": ["q1"], "question": ["Which port does the console use?"]})
    space = SearchSpace(chunk_sizes=(64,), top_ks=(1,), embedding_models=("openai:e5-small-v2",))
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache()
    chunks = steps.build_chunks(documents, chunk_config, cache)
    steps.retrieve(chunks, questions, space, chunk_config, cache)
    chunk_texts = chunks["text"].to_pylist()
    assert llm_server.embedded == [f"passage: {t}" for t in chunk_texts] + [
        "query: Which port does the console use?"
    ]
    # with the space's own prefixes, the same model reads the plain texts
    plain = SearchSpace(chunk_sizes=(64,), top_ks=(1,), embedding_models=("openai:e5-small-v2",),
                        query_prefix="", passage_prefix="")  # fmt: skip
    [plain_config] = plain.chunk_configs()
    steps.retrieve(
        steps.build_chunks(documents, plain_config, cache), questions, plain, plain_config, cache
    )
    assert llm_server.embedded[len(chunk_texts) + 1 :] == chunk_texts + [
        "Which port does the console use?"
    ]


def test_the_run_options_set_the_prefixes_of_the_space():
    ragsweep = str(Path(sys.executable).parent / "ragsweep")
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [
            ragsweep,
            "run",
            "--docs",
            str(root / "examples" / "docs"),
            "--testset",
            str(root / "examples" / "testset.json"),
            "--no-store",
            "--chunk-sizes",
            "254",
            "--query-prefix",
            "",
            "--passage-prefix",
            "passage: ",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: options: no valid chunk configuration: chunk size 254 and the passage prefix "
        "'passage: ' (2 tokens) exceed all-MiniLM-L6-v2's maximum input of 254 tokens"
    )
