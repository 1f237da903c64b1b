"""Red Hat AutoRAG's pipeline parameters: the compiled pipeline takes every one, the tables
of docs/openshift.md are the code's, and AutoRAG's values (metric names, presets,
vector_io provider ids, its Secrets' keys, several document keys) mean what AutoRAG means
by them."""

import re
from pathlib import Path

import psycopg
import pytest
import yaml

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.sources import locations, read_locations
from ragsweep.evaluation.leaderboard import check_metric
from ragsweep.kubeflow.autorag import (
    PARAMETERS,
    TABLE_BEGIN,
    TABLE_END,
    adopt_connections,
    markdown_table,
)
from ragsweep.sweep.presets import shaped, store_of
from ragsweep.sweep.space import SearchSpace

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "openshift.md"  # the pipeline's parameters, AutoRAG's among them
# documents_rag_optimization_pipeline's parameters: Red Hat's (red-hat-data-services
# pipelines-components dd8d0c0), then those only Open Data Hub's upstream adds
RED_HAT = {
    "test_data_secret_name", "test_data_bucket_name", "test_data_key",
    "input_data_secret_name", "input_data_bucket_name", "ogx_secret_name",
    "vector_io_provider_id", "input_data_key", "embedding_models", "generation_models",
    "optimization_metric", "optimization_max_rag_patterns", "preset",
}  # fmt: skip
UPSTREAM = {"maas_secret_name", "vector_db_secret_name", "input_data_keys"}


def compiled_parameters() -> dict[str, dict]:
    spec, *_ = yaml.safe_load_all((REPO / "pipelines/sweep_pipeline.yaml").read_text())
    return spec["root"]["inputDefinitions"]["parameters"]


def test_the_compiled_pipeline_has_every_autorag_parameter_of_the_table():
    named = {p.name for p in PARAMETERS}
    assert named == RED_HAT | UPSTREAM
    assert named <= set(compiled_parameters()), sorted(named - set(compiled_parameters()))
    assert compiled_parameters()["input_data_keys"]["parameterType"] == "LIST"


def test_the_autorag_table_is_the_one_generated_from_the_code():
    page = PAGE.read_text()
    assert page.count(TABLE_BEGIN) == 1 and page.count(TABLE_END) == 1
    assert markdown_table() in page, (
        f"{PAGE.name} out of date: paste ragsweep.kubeflow.autorag.markdown_table()"
    )


def test_the_parameter_table_names_every_pipeline_parameter():
    page = PAGE.read_text()
    start = page.index("| parameter | meaning | default |")
    rows = page[start : page.index("\n\n", start)].splitlines()[2:]
    named = {n for row in rows for n in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert set(compiled_parameters()) == named


def test_every_row_says_what_ragsweep_does_with_it():
    assert len({p.name for p in PARAMETERS}) == len(PARAMETERS)
    for p in PARAMETERS:
        assert p.note.strip(), p.name


SPACE = {"chunkers": ["token"], "chunk_sizes": [64], "chunk_overlaps": [16], "top_ks": [3]}


def test_a_preset_sets_autorags_chunk_lists_in_tokens():
    speed = shaped(SPACE, "speed", "")
    assert speed == {**SPACE, "chunkers": ["sentence"], "chunk_sizes": [32, 64, 128],
                     "chunk_overlaps": [8, 16]}  # fmt: skip
    balanced = shaped(SPACE, "balanced", "")
    assert balanced["chunkers"] == ["headings"]  # sections first, as Docling's hybrid chunker
    assert balanced["chunk_sizes"] == [128, 256, 512]
    assert balanced["chunk_overlaps"] == [0, 32, 64]
    assert shaped(SPACE, "", "") == SPACE


def preset_settings(preset: str, *more: str):
    """The settings the pipeline's configure step builds (``run_settings``) for a run with
    ``preset`` and the compiled pipeline's defaults otherwise (the bundled model)."""
    from ragsweep.kubeflow import openshift

    params = [f"preset={preset}", *more]
    arguments = openshift.run_arguments("s3://b/kb/", "s3://b/t.json", "s", None, params)
    return openshift.preflight(openshift.packaged_pipeline(), arguments)


def test_a_preset_leaves_out_the_chunk_sizes_the_model_cannot_read_with_one_warning(caplog):
    # all-MiniLM-L6-v2 reads 254 text tokens; balanced asks for 128, 256 and 512
    settings = preset_settings("balanced")

    assert {c["chunk_size"] for c in settings.space.chunk_configs()} == {128}
    warned = [r.getMessage() for r in caplog.records if "maximum input" in r.getMessage()]
    assert warned == [
        "pruned: chunk sizes 256, 512 exceed all-MiniLM-L6-v2's maximum input of 254 tokens"
    ]


def test_a_preset_the_model_reads_whole_keeps_every_chunk_size(caplog):
    settings = preset_settings("speed")

    assert {c["chunk_size"] for c in settings.space.chunk_configs()} == {32, 64, 128}
    assert not [r for r in caplog.records if "maximum input" in r.getMessage()]


def test_a_preset_fails_only_when_no_chunk_size_is_left():
    tight = 'search_space={"passage_prefix": "' + "word " * 200 + '"}'

    with pytest.raises(RagsweepError) as refused:
        preset_settings("balanced", tight)
    message = str(refused.value)
    assert message.startswith("pipeline parameters: no valid chunk configuration: ")
    assert "chunk sizes 128, 256, 512 and the passage prefix" in message


def test_an_unknown_preset_is_refused():
    with pytest.raises(RagsweepError, match="preset 'fast': expected one of speed, balanced"):
        shaped(SPACE, "fast", "")


@pytest.mark.parametrize(
    ("provider", "store"),
    [
        ("milvus", "milvus"),
        ("remote::milvus", "milvus"),
        ("ls_milvus", "milvus"),
        ("remote::pgvector", "pgvector"),
        ("oracle", "oracle"),
        ("inline::faiss", "memory"),
        ("inline::sqlite-vec", "memory"),
    ],
)
def test_a_vector_io_provider_id_names_the_store_swept(provider, store):
    assert store_of(provider) == store
    indexes = {"milvus": {"hnsw": {"ef": [64]}}, "pgvector": {"hnsw": {"ef_search": [40]}}}
    space = shaped({**SPACE, "vector_stores": ["memory"], "indexes": indexes}, "", provider)
    assert space["vector_stores"] == [store]
    assert set(space["indexes"]) == ({store} & set(indexes))


def test_an_unknown_vector_io_provider_is_refused():
    with pytest.raises(RagsweepError, match="vector_io_provider_id 'remote::qdrant': names no"):
        store_of("remote::qdrant")


def test_autorags_maas_secret_is_the_model_endpoint():
    env = {"MAAS_BASE_URL": "https://maas.example/v1/", "MAAS_API_KEY": "k-1"}
    taken = adopt_connections(env)
    assert env["RAGSWEEP_LLM_BASE_URL"] == "https://maas.example/v1"
    assert env["RAGSWEEP_LLM_API_KEY"] == "k-1"
    assert taken == [
        "RAGSWEEP_LLM_BASE_URL from MAAS_BASE_URL",
        "RAGSWEEP_LLM_API_KEY from MAAS_API_KEY",
    ]
    assert "k-1" not in " ".join(taken)


@pytest.mark.parametrize("root", ["http://ogx:8321", "http://ogx:8321/", "http://ogx:8321/v1"])
def test_autorags_ogx_secret_names_the_servers_root_whose_openai_api_is_at_v1(root):
    env = {"OGX_CLIENT_BASE_URL": root, "OGX_CLIENT_API_KEY": "k-2"}
    adopt_connections(env)
    assert env["RAGSWEEP_LLM_BASE_URL"] == "http://ogx:8321/v1"


def test_ragsweeps_own_variables_win_and_two_autorag_endpoints_are_refused():
    env = {"RAGSWEEP_LLM_BASE_URL": "http://mine/v1", "MAAS_BASE_URL": "http://maas/v1"}
    assert adopt_connections(env) == [] and env["RAGSWEEP_LLM_BASE_URL"] == "http://mine/v1"
    both = {"MAAS_BASE_URL": "http://maas/v1", "OGX_CLIENT_BASE_URL": "http://ogx"}
    with pytest.raises(RagsweepError, match=r"both MAAS_BASE_URL \(maas_secret_name\) and "):
        adopt_connections(both)


def test_autorags_milvus_keys_connect_milvus():
    env = {"MILVUS_URI": "http://milvus:19530", "MILVUS_TOKEN": "root:Milvus"}
    adopt_connections(env)
    assert env["RAGSWEEP_MILVUS_URI"] == "http://milvus:19530"
    assert env["RAGSWEEP_MILVUS_TOKEN"] == "root:Milvus"


def test_autorags_pgvector_keys_make_a_url_that_connects(postgres_server):
    host_port = postgres_server.split("@")[1].split("/")[0]
    host, port = host_port.split(":")
    env = {
        "PGVECTOR_HOST": host,
        "PGVECTOR_PORT": port,
        "PGVECTOR_DB": "postgres",
        "PGVECTOR_USER": "ragsweep",
        "PGVECTOR_PASSWORD": "p@ss:w/rd %",  # trust authentication takes any password
    }
    adopt_connections(env)
    url = env["RAGSWEEP_PGVECTOR_URL"]
    assert url == f"postgresql://ragsweep:p%40ss%3Aw%2Frd%20%25@{host}:{port}/postgres"
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("ragsweep",)


def test_a_pgvector_host_may_be_a_unix_sockets_folder(pgvector_server):
    from urllib.parse import parse_qs, urlsplit

    server = urlsplit(pgvector_server)
    env = {
        "PGVECTOR_HOST": parse_qs(server.query)["host"][0],
        "PGVECTOR_DB": server.path.lstrip("/"),
        "PGVECTOR_USER": server.username,
    }
    adopt_connections(env)
    assert env["RAGSWEEP_PGVECTOR_URL"].startswith(f"postgresql://{server.username}@%2F")
    with psycopg.connect(env["RAGSWEEP_PGVECTOR_URL"]) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_pgvector_keys_without_a_host_are_refused():
    with pytest.raises(RagsweepError, match="PGVECTOR_HOST missing"):
        adopt_connections({"PGVECTOR_DB": "rag", "PGVECTOR_PASSWORD": "secret-pw"})


def test_several_document_keys_are_read_together_and_an_id_in_two_is_refused(tmp_path):
    for folder, name in (("a", "one.md"), ("b", "two.md"), ("c", "one.md")):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_text(f"{folder}: some text.\n")
    uris = locations("", str(tmp_path / "a"), [str(tmp_path / "b"), str(tmp_path / "a")])
    assert uris == [str(tmp_path / "a"), str(tmp_path / "b")]
    table = read_locations(uris).table
    assert table["doc_id"].to_pylist() == ["one.md", "two.md"]
    assert locations("bkt", "", ["x/", "y"]) == ["s3://bkt/x/", "s3://bkt/y"]
    with pytest.raises(RagsweepError, match="'one.md' is both in .*/a and in .*/c"):
        read_locations([str(tmp_path / "a"), str(tmp_path / "c")])
    with pytest.raises(RagsweepError, match="give input_data_key or input_data_keys"):
        locations("bkt", "", [])


def parameters_space(*parameters) -> SearchSpace:
    return SearchSpace.from_dict(SearchSpace.data_of_parameters(*parameters))


def test_generation_models_are_answered_through_the_llm_endpoint():
    space = parameters_space({}, ["all-MiniLM-L6-v2"], ["granite-3.3", "extractive"])
    assert space.answerers == ("llm:granite-3.3", "extractive")
    parameters = space.to_parameters()
    assert parameters["generation_models"] == ["granite-3.3", "extractive"]
    assert "answerers" not in parameters["search_space"]
    again = parameters_space(
        parameters["search_space"], parameters["embedding_models"], ["granite-3.3", "extractive"]
    )
    assert again == space


def test_search_space_answerers_still_work_when_generation_models_is_empty():
    old = parameters_space({"answerers": ["llm:m1"]}, ["all-MiniLM-L6-v2"], [])
    assert old.answerers == ("llm:m1",)
    assert parameters_space({}, ["all-MiniLM-L6-v2"], []).answerers == ("extractive",)


def test_answer_models_given_twice_are_refused():
    with pytest.raises(RagsweepError, match="once, as the generation_models parameter"):
        parameters_space({"answerers": ["llm:m1"]}, ["all-MiniLM-L6-v2"], ["m2"])


@pytest.mark.parametrize(
    "metric",
    [
        "faithfulness",
        "answer_correctness",
        "context_correctness",
        "answer_relevance",
        "overall_score",
    ],
)
def test_autorag_optimization_metrics_are_ragsweep_metrics(metric):
    check_metric(metric)


def test_generation_models_and_the_older_llm_option_are_one_option(kb, monkeypatch):
    from test_cli import assert_user_error, ragsweep

    monkeypatch.delenv("RAGSWEEP_LLM_BASE_URL", raising=False)
    _, docs, testset = kb
    base = ["run", "--docs", str(docs), "--testset", str(testset), "--no-store"]
    new = ragsweep(*base, "--generation-models", "extractive,granite")
    old = ragsweep(*base, "--llm", "extractive,granite")
    assert_user_error(new, "RAGSWEEP_LLM_BASE_URL")
    assert new.stderr == old.stderr
