"""Code as it was at an earlier commit, for a benchmark's "before" side (read from git)."""

from __future__ import annotations

import importlib.util
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def git_show(commit: str, path: str) -> str:
    """File ``path`` of the repository as it was at ``commit``."""
    return subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def module_at(commit: str, path: str, name: str, edits: dict[str, str] | None = None) -> ModuleType:
    """Module ``path`` as it was at ``commit``, imported as ``name``; ``edits`` (old text ->
    new) follow the moves of the modules it imports since."""
    source = git_show(commit, path)
    for old, new in (edits or {}).items():
        source = source.replace(old, new)
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
