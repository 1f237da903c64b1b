"""One embedding runtime per run: the first step fixes each model's runtime (and identity)
in the run's settings, and every step embeds with it, whatever device it lands on."""

from dataclasses import replace

import pytest
from builders import configured
from kfp import dsl

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.ingest import ingest
from ragsweep.components.load_testset import load_testset
from ragsweep.components.merge_shards import merge_shards
from ragsweep.components.plan import plan
from ragsweep.components.retrieve import retrieve
from ragsweep.core.schemas import read_table
from ragsweep.kubeflow.tasks import GPU_ENV
from ragsweep.models import embedding
from ragsweep.sweep.settings import read_settings
from ragsweep.sweep.space import SearchSpace

MODEL = "all-MiniLM-L6-v2"
SPACE = SearchSpace(
    chunk_sizes=(32,), chunk_overlaps=(0,), top_ks=(1,), search_types=("similarity",)
)


@pytest.fixture(autouse=True)
def _runtimes_unfixed():
    """A step run in process fixes its run's runtimes for the process: not for later tests."""
    yield
    embedding.fix_runtimes({})


def device(monkeypatch: pytest.MonkeyPatch, gpu: bool) -> None:
    """This process's device as the embedding module sees it: a GPU node's or a CPU node's."""
    monkeypatch.setattr(embedding, "cuda_usable", lambda: gpu)


def settings_of_run(tmp_path, monkeypatch, gpus: str) -> dsl.Dataset:
    """The configure step's settings on a CPU pod, of a pipeline compiled with ``gpus``."""
    docs = tmp_path / "docs"
    docs.mkdir(parents=True)
    (docs / "ports.md").write_text("The admin console listens on port 9000 by default.\n")
    (docs / "plans.md").write_text("The Pro plan keeps backups for ninety days.\n")
    testset = tmp_path / "testset.json"
    testset.write_text(
        '[{"question": "Which port does the admin console use?",'
        ' "correct_answers": ["9000"], "correct_answer_document_ids": ["ports.md"]},'
        ' {"question": "How long does Pro keep backups?",'
        ' "correct_answers": ["ninety days"], "correct_answer_document_ids": ["plans.md"]}]'
    )
    device(monkeypatch, False)
    monkeypatch.setenv(GPU_ENV, gpus)  # as the compiled pipeline sets it (tasks.step)
    settings = configured(
        tmp_path / "settings",
        **SPACE.to_parameters(),
        input_data_key=str(docs),
        test_data_key=str(testset),
    )
    monkeypatch.delenv(GPU_ENV)
    return settings


def test_configure_fixes_pytorch_for_a_gpu_pipeline_and_the_default_without(tmp_path, monkeypatch):
    gpu_run = read_settings(settings_of_run(tmp_path / "gpu", monkeypatch, "1").path)
    cpu_run = read_settings(settings_of_run(tmp_path / "cpu", monkeypatch, "0").path)
    assert gpu_run.embedding_runtimes == {MODEL: "torch"}
    assert cpu_run.embedding_runtimes == {MODEL: embedding.DEFAULT_BACKEND}
    # the model's identity: its files' digest with the runtime, one per runtime
    torch_id, default_id = gpu_run.embedding_identities[MODEL], cpu_run.embedding_identities[MODEL]
    assert torch_id == embedding.identity(MODEL, "torch") and torch_id.startswith("torch:")
    assert default_id.startswith(f"{embedding.DEFAULT_BACKEND}:") and default_id != torch_id
    # recorded with the results, outside the sweep key: a nightly keeps its baseline
    record = gpu_run.record()
    assert record["embedding_runtimes"] == [[MODEL, "torch"]]  # pairs: one MLflow parameter
    assert record["embedding_identities"] == [[MODEL, torch_id]]
    unfixed = replace(gpu_run, embedding_runtimes={}, embedding_identities={}).record()
    assert "embedding_runtimes" not in unfixed and record["sweep_key"] == unfixed["sweep_key"]


def test_a_gpu_chunk_step_and_a_cpu_retrieve_step_embed_with_the_one_runtime_fixed(
    tmp_path, monkeypatch
):
    """``--gpu``: chunk_embed on a GPU node, retrieve on a CPU node. Each used to choose its
    runtime from its own device (PyTorch, ONNX), so retrieve missed the questions' vectors
    chunk_embed saved and embedded them again with the other runtime, searching one index
    with vectors of two runtimes. Here the device each step sees is simulated."""
    settings = settings_of_run(tmp_path, monkeypatch, "1")
    art = {n: dsl.Dataset(uri=str(tmp_path / n)) for n in ("loaded", "documents", "qs", "sharded")}
    load_testset.python_func(settings=settings, testset=art["loaded"])
    ingest.python_func(
        settings=settings, testset=art["loaded"], documents=art["documents"], questions=art["qs"]
    )
    [group] = plan.python_func(
        settings=settings, questions=art["qs"], documents=art["documents"], groups=1
    )
    merge_shards.python_func(shards=[], embeddings=art["sharded"])
    embedded = []  # (step, runtime, texts) of every call that runs the model
    encode, step = embedding.encode, {"name": ""}

    def counted(name, texts):
        embedded.append((step["name"], embedding.backend(name), len(texts)))
        return encode(name, texts)

    monkeypatch.setattr(embedding, "encode", counted)

    step["name"] = "chunk_embed"
    device(monkeypatch, True)  # a GPU node
    chunks = dsl.Dataset(uri=str(tmp_path / "chunks"))
    chunk_embed.python_func(settings, art["documents"], group, art["sharded"], art["qs"], chunks)
    step["name"] = "retrieve"
    embedding.fix_runtimes({})  # a new process
    device(monkeypatch, False)  # a CPU node
    retrievals = dsl.Dataset(uri=str(tmp_path / "retrievals"))
    retrieve.python_func(settings, chunks, art["qs"], group, retrievals)

    assert read_table(retrievals.path, "retrievals").num_rows == 2
    assert {runtime for _, runtime, _ in embedded} == {"torch"}  # chunks and questions
    assert sum(n for name, _, n in embedded if name == "chunk_embed") > 2  # questions too
    assert not [call for call in embedded if call[0] == "retrieve"]  # read, not embedded
