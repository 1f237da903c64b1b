"""A Red Hat AutoRAG run's parameters, as AutoRAG names them, run ragsweep's pipeline through
kfp.local: the documents of two keys, AutoRAG's preset and vector store, and the model
endpoint and pgvector from AutoRAG's Secret keys (the environment kfp.local's steps inherit)
against the scripted OpenAI-compatible server and a real PostgreSQL with pgvector."""

import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from conftest import TEST_API_KEY
from kfp import local
from test_pipeline import example_subset

from ragsweep.core.schemas import read_table, settings_of
from ragsweep.kubeflow.tasks import for_local_run
from ragsweep.pipelines.sweep_pipeline import sweep


def split(docs: Path, into: tuple[Path, Path]) -> None:
    """The documents dealt in turn into two folders, each keeping its relative paths."""
    for i, source in enumerate(sorted(p for p in docs.rglob("*") if p.is_file())):
        target = into[i % 2] / source.relative_to(docs)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def test_an_autorag_runs_parameters_and_secret_keys_run_the_sweep(
    llm_server, pgvector_server, tmp_path, monkeypatch
):
    docs, testset = example_subset(tmp_path)
    first, second = tmp_path / "documents", tmp_path / "policies"
    split(docs, (first, second))
    for name in ("RAGSWEEP_LLM_BASE_URL", "RAGSWEEP_LLM_API_KEY", "RAGSWEEP_PGVECTOR_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MAAS_BASE_URL", llm_server.url)  # maas_secret_name's keys
    monkeypatch.setenv("MAAS_API_KEY", TEST_API_KEY)
    server = urlsplit(pgvector_server)  # vector_db_secret_name's keys: its socket's folder
    monkeypatch.setenv("PGVECTOR_HOST", parse_qs(server.query)["host"][0])
    monkeypatch.setenv("PGVECTOR_DB", server.path.lstrip("/"))
    monkeypatch.setenv("PGVECTOR_USER", server.username)
    arguments = {  # an AutoRAG run's parameters, and one of ragsweep's to keep the grid small
        "test_data_secret_name": "minio",
        "test_data_bucket_name": "",
        "test_data_key": str(testset),
        "input_data_secret_name": "minio",
        "input_data_bucket_name": "",
        "input_data_key": str(first),
        "input_data_keys": [str(second)],
        "embedding_models": ["all-MiniLM-L6-v2"],
        "generation_models": ["granite-3.3"],
        "optimization_metric": "answer_correctness",
        "optimization_max_rag_patterns": 8,
        "preset": "speed",
        "vector_io_provider_id": "remote::pgvector",
        "ogx_secret_name": "ogx",
        "maas_secret_name": "maas",
        "vector_db_secret_name": "pgvector",
        "search_space": {"top_ks": [3], "search_types": ["similarity"]},
    }
    local.init(
        runner=local.SubprocessRunner(use_venv=False),
        pipeline_root=str(tmp_path / "pipeline"),
        raise_on_error=True,
    )
    task = for_local_run(sweep)(**arguments)

    board = read_table(task.outputs["leaderboard"].path, "leaderboard")
    # speed: 128, 256, 512 characters with overlaps 32, 64: 32/8 is kept, 32/16 pruned
    chunks = set(
        zip(board["chunk_size"].to_pylist(), board["chunk_overlap"].to_pylist(), strict=True)
    )
    assert chunks == {(32, 8), (64, 8), (64, 16), (128, 8), (128, 16)}
    assert set(board["chunker"].to_pylist()) == {"sentence"}
    assert set(board["vector_store"].to_pylist()) == {"pgvector"}
    assert set(board["answerer"].to_pylist()) == {"llm:granite-3.3"}
    assert board["answer_correctness"].null_count == 0

    settings = settings_of(board)
    assert (settings["docs"], settings["more_docs"]) == (str(first), [str(second)])
    results = read_table(task.outputs["results"].path, "results")
    retrieved = {d for ids in results["retrieved_doc_ids"].to_pylist() for d in ids}
    in_first = {p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file()}
    assert retrieved & in_first and retrieved - in_first  # documents of both keys

    # the answers came from the MaaS endpoint, with its key
    assert {r["model"] for r in llm_server.requests} == {"granite-3.3"}
    assert 0 < len(llm_server.requests) <= results.num_rows  # same prompts answered once
    assert set(llm_server.authorizations) == {f"Bearer {TEST_API_KEY}"}
