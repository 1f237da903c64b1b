"""The library imports no component, pipeline or CLI: those sit on top of it; and a component
imports no other component and no pipeline. Installed from the wheel, ``ragsweep.components``
and ``ragsweep.pipelines`` are subpackages of their own; in this checkout ``lint-imports``
analyses them as the top-level ``components`` and ``pipelines`` (``.importlinter``), so an
import written with an installed name is checked here."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "ragsweep"
COMPONENTS = ROOT / "components"
ABOVE = ("ragsweep.components", "ragsweep.pipelines", "ragsweep.cli")
# the one place the library imports a pipeline: `ragsweep run` (and `--resume`) runs it
# with kfp.local, in the function that does, so no other command pays for kfp
RUNS_THE_PIPELINE = {"ragsweep/cli/__init__.py": "ragsweep.pipelines.sweep_pipeline"}


def imported(path: Path) -> set[str]:
    """The absolute names ``path`` imports: each module, and each name a ``from`` takes
    from one (``from ragsweep.components import plan`` imports ragsweep.components.plan)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_no_library_module_imports_a_component_a_pipeline_or_the_cli():
    modules = [p for p in LIBRARY.rglob("*.py") if "cli" not in p.relative_to(LIBRARY).parts]
    assert len(modules) > 50
    wrong = {
        f"{path.relative_to(LIBRARY.parent)}: {name}"
        for path in modules
        for name in imported(path)
        if name.startswith(ABOVE)
    }
    assert not wrong


def test_the_cli_imports_the_pipeline_only_where_it_runs_it_and_no_component():
    wrong = {}
    for path in (LIBRARY / "cli").rglob("*.py"):
        where = str(path.relative_to(ROOT))
        allowed = RUNS_THE_PIPELINE.get(where, "(nothing)")
        above = {n for n in imported(path) if n.startswith(ABOVE[:2])}
        if any(name != allowed and not name.startswith(f"{allowed}.") for name in above):
            wrong[where] = above
    assert not wrong


def test_no_component_imports_another_component_or_a_pipeline_by_its_installed_name():
    components = {f"ragsweep.components.{p.stem}" for p in COMPONENTS.glob("*.py")}
    assert len(components) > 10
    wrong = {
        f"{path.name}: {name}"
        for path in COMPONENTS.glob("*.py")
        for name in imported(path)
        if (name in components and name != f"ragsweep.components.{path.stem}")
        or name.startswith("ragsweep.pipelines")
    }
    assert not wrong


def test_each_module_of_the_library_has_a_name_of_its_own():
    """A module's file name says what it holds, once: two ``options.py`` (or ``labels.py``)
    in two subpackages leave a reader guessing which one an import means."""
    from collections import Counter

    names = Counter(p.name for p in LIBRARY.rglob("*.py") if p.name != "__init__.py")
    assert [name for name, count in names.items() if count > 1] == []
