"""Each benchmark writes its results into benchmarks/README.md between its own markers,
``<!-- name: start -->`` and ``<!-- name: end -->``; the text around them is kept."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"


def write_section(name: str, text: str) -> None:
    """Replace section ``name``'s results with ``text``."""
    start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
    content = README.read_text()
    if start not in content or end not in content:
        raise SystemExit(f"{README}: no {start} ... {end} markers to write between")
    head, _, rest = content.partition(start)
    _, _, tail = rest.partition(end)
    README.write_text(f"{head}{start}\n{text}\n{end}{tail}")
