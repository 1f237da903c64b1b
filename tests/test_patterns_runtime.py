"""A pattern records the embedding runtime and model identity its sweep used, and its
scripts, which run without ragsweep, embed on that runtime: ONNX Runtime, given the ONNX
file ragsweep exported, for a sweep on ONNX; else they say plainly that they do not."""

import importlib.util
import json
import sys
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from builders import make_answers, make_scores, make_testset

from ragsweep.core.schemas import DOCUMENTS
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models import embedding, onnx_backend
from ragsweep.models.llm import LLMSettings
from ragsweep.patterns import SUPPORT, write_patterns, write_scripts
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table

MODEL = "all-MiniLM-L6-v2"
TEXTS = [
    "The admin console listens on port 9000.",
    "Which port does the console use?",
    "Backups are kept for ninety days on the Pro plan, and thirty on the Basic plan. " * 3,
]


def load_indexing(folder, monkeypatch):
    """A pattern's indexing.py in ``folder``, loaded as a module beside what it imports."""
    monkeypatch.syspath_prepend(str(folder))
    for name in SUPPORT:  # the copies beside the script, not another test's
        monkeypatch.delitem(sys.modules, name.removesuffix(".py"), raising=False)
    spec = importlib.util.spec_from_file_location("pattern_indexing", folder / "indexing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def onnx_pattern(monkeypatch, tmp_path):
    """The indexing.py of a pattern whose sweep ran the bundled model on ONNX Runtime."""
    settings = {"embedding_model": MODEL, "embedding_runtime": "onnx", "vector_store": "memory"}
    settings.update(chunker="sentence", chunk_size=128, chunk_overlap=16, passage_prefix="")
    write_scripts(tmp_path, settings, {})
    yield load_indexing(tmp_path, monkeypatch)
    for name in SUPPORT:
        sys.modules.pop(name.removesuffix(".py"), None)


def test_the_pattern_records_its_sweeps_runtime_and_model_identity(tmp_path):
    space = SearchSpace(top_ks=(1,), search_types=("similarity",), chunk_sizes=(64,))
    [config] = space.all_configs()
    ids, questions = [config["config_id"]], ["q0", "q1"]
    run = RunSettings("docs", "t.json", space, "answer_correctness")
    fixed = replace(
        run,
        embedding_runtimes={MODEL: "onnx"},
        embedding_identities={MODEL: "onnx:0123456789abcdef"},
    )
    board = build_board(
        make_scores(ids, questions, np.ones((1, 2))),
        make_answers(ids, questions),
        make_testset(questions),
        configs_table(space.all_configs()),
        "answer_correctness",
        settings=fixed.record(),
    )
    documents = pa.Table.from_pylist([], schema=DOCUMENTS)
    [folder] = write_patterns(
        tmp_path,
        board.leaderboard,
        board.results,
        make_answers(ids, questions),
        make_testset(questions),
        documents,
        space,
        LLMSettings(),
        1,
    )
    recorded = json.loads((folder / "pattern.json").read_text())["ragsweep"]
    assert recorded["embedding_runtime"] == "onnx"
    assert recorded["embedding_identity"] == "onnx:0123456789abcdef"
    assert "'embedding_runtime': 'onnx'" in (folder / "indexing.py").read_text()


def test_a_pattern_of_an_onnx_sweep_embeds_on_onnx_runtime_as_the_sweep_did(onnx_pattern):
    onnx = onnx_backend.exported(embedding.model_path(MODEL), "onnx")  # the session's export
    swept = embedding.encode(f"{MODEL}@onnx", TEXTS)
    theirs = onnx_pattern.embed(TEXTS, None, str(onnx))
    assert theirs.shape == swept.shape
    assert np.abs(theirs - swept).max() < 1e-5
    note = onnx_pattern.runtime_note(str(onnx))
    assert note == f"embedding: {MODEL} on ONNX Runtime ({onnx}), as the sweep did (onnx)"


def test_a_pattern_of_an_onnx_sweep_run_without_its_onnx_file_says_so_before_embedding(
    onnx_pattern, monkeypatch, tmp_path, capsys
):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ports.md").write_text("The admin console listens on port 9000.\n")
    index = tmp_path / "index"
    monkeypatch.setattr(sys, "argv", ["indexing.py", "--docs", str(docs), "--index", str(index)])
    assert onnx_pattern.main() == 0
    note = capsys.readouterr().err.splitlines()
    said = [line for line in note if line.startswith("embedding: ")]
    assert said == [
        f"embedding: {MODEL} on PyTorch (sentence-transformers), NOT the sweep's runtime "
        "(onnx); give --onnx FILE, its ONNX export, to embed as the sweep did; the vectors "
        "differ slightly (ONNX float32 against PyTorch: mean cosine 1.0000, int8: 0.9996), so "
        "rankings agree but for near-ties"
    ]
    assert np.load(index / "vectors.npy").shape == (1, 384)
