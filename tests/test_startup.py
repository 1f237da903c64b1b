"""What a process pays to start: every pipeline step and every CLI command is a new Python
process, so a heavy package imported at the top of a module they all import is paid by each
of them (a local run starts about fifteen steps). Those packages are imported where used."""

import json
import subprocess
import sys

import pytest

HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "llama_index",
    "giskard",
    "mlflow",
    "pymilvus",
    "sqlalchemy",
    "httpx",
    "boto3",
    "botocore",
    "scipy",
    "kfp",
)
# what the steps' components import (components/*.py) before they do any work
STEP_MODULES = (
    "ragsweep.kubeflow.step",
    "ragsweep.kubeflow.parameters",
    "ragsweep.core.schemas",
    "ragsweep.sweep.space",
    "ragsweep.sweep.settings",
    "ragsweep.sweep.steps",
    "ragsweep.sweep.fanout",
    "ragsweep.embeddings.cache",
    "ragsweep.models.llm",
    "ragsweep.documents.sources",
    "ragsweep.documents.testsets",
    "ragsweep.evaluation.leaderboard",
)


def loaded_after(*modules: str) -> list[str]:
    """The HEAVY packages a new interpreter holds after importing ``modules``."""
    found = f"sorted(set({HEAVY}) & set(sys.modules))"
    code = f"import json, sys, {', '.join(modules)}; print(json.dumps({found}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    "modules", [STEP_MODULES, ("ragsweep.cli",)], ids=["pipeline steps", "the CLI"]
)
def test_starting_a_step_or_a_command_imports_no_heavy_package(modules):
    assert loaded_after(*modules) == []


def test_the_check_sees_a_package_imported_at_the_top_of_a_module():
    """The results database needs SQLAlchemy from its first line (only the steps that store
    a run import it): the check above would see a package imported so."""
    assert loaded_after("ragsweep.store.database") == ["sqlalchemy"]
