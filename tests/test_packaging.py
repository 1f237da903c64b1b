"""The wheel: setuptools builds it from setup.cfg without a package-discovery warning, and it
carries every module of the library and every file of the web UI's data folders."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UI_DATA = ("ragsweep/ui/templates", "ragsweep/ui/static")


def source_copy(target: Path) -> Path:
    """What the wheel is built from, without this checkout's build leftovers (a build writes
    into its source folder) or the symlinks a worktree may hold."""
    target.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, target / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("components", "pipelines"):
        shutil.copytree(ROOT / folder, target / folder, ignore=skip)
    inner = shutil.ignore_patterns("__pycache__", "*.pyc", "components", "pipelines")
    shutil.copytree(ROOT / "ragsweep", target / "ragsweep", ignore=inner)
    return target


def test_the_wheel_builds_without_warnings_and_carries_the_ui_files(tmp_path):
    source = source_copy(tmp_path / "src")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    command += ["--no-index", "--verbose", "-w", str(tmp_path / "whl"), str(source)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    output = built.stdout + built.stderr
    assert "Building wheel for ragsweep" in output  # --verbose: setuptools' own lines shown
    assert "absent from the `packages` configuration" not in output
    assert "namespace" not in output.lower()

    [wheel] = (tmp_path / "whl").glob("ragsweep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {
        p.relative_to(ROOT).as_posix()
        for folder in UI_DATA
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert any(w.endswith(".html") for w in wanted) and any(w.endswith(".css") for w in wanted)
    assert wanted <= names, sorted(wanted - names)
    assert {"ragsweep/cli/__init__.py", "ragsweep/components/rank.py"} <= names
    # every module of the library: a subpackage setup.cfg's list lacks is left out silently
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ragsweep").rglob("*.py")}
    assert "ragsweep/runner/local.py" in modules
    assert modules <= names, sorted(modules - names)
