"""The library imports no component, pipeline or CLI: those sit on top of it. Installed from
the wheel, ``ragsweep.components`` and ``ragsweep.pipelines`` are subpackages of their own,
so a library module importing one would be an import cycle (``lint-imports`` sees it only
where they are folders inside ``ragsweep/``, not in this checkout)."""

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent / "ragsweep"
ABOVE = ("ragsweep.components", "ragsweep.pipelines", "ragsweep.cli")


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
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
