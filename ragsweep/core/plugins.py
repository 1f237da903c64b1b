"""Plugins: what a package adds to ragsweep, found by name through entry points.

A registry (vector stores, metrics, chunkers, rerankers) lives in the layer of what it
registers and reads its group here; ragsweep's own built-ins are registered in the same
groups (setup.cfg ``[options.entry_points]``), so a third-party package adds one by
declaring an entry point, with no edit of ragsweep. ``docs/extending.md`` says what each
group's object provides.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, EntryPoints, entry_points
from typing import Any

from ragsweep.core.errors import RagsweepError

VECTOR_STORES = "ragsweep.vector_stores"
METRICS = "ragsweep.metrics"
CHUNKERS = "ragsweep.chunkers"
RERANKERS = "ragsweep.rerankers"


@cache
def _installed() -> EntryPoints:
    """Every installed package's entry points: one scan of the installed packages (~0.1 s
    in ragsweep's environment) serves the four groups."""
    return entry_points()


def forget() -> None:
    """Read the installed packages again at the next question (after an install)."""
    for cached in (_installed, registered, load):
        cached.cache_clear()


@cache
def registered(group: str) -> dict[str, EntryPoint]:
    """The entry points of ``group`` by name, not loaded. Two packages registering one name
    differently is an error: which one ran would depend on the install order."""
    found: dict[str, EntryPoint] = {}
    for point in _installed().select(group=group):
        other = found.get(point.name)
        if other is not None and other.value != point.value:
            raise RagsweepError(
                f"{group}: {point.name!r} is registered twice, as {other.value} and "
                f"{point.value}; uninstall one of the packages"
            )
        found[point.name] = point
    if not found:
        raise RagsweepError(
            f"no {group} entry points: ragsweep is installed without its entry points; "
            "reinstall it (pip install -e . in its checkout)"
        )
    return found


def names(group: str) -> list[str]:
    """The names registered in ``group``, sorted."""
    return sorted(registered(group))


@cache
def load(group: str, name: str) -> Any:
    """The object entry point ``name`` of ``group`` names; one clear line when it is unknown
    or its package cannot be imported."""
    points = registered(group)
    if name not in points:
        raise RagsweepError(f"unknown {kind(group)} {name!r}; choose from {sorted(points)}")
    try:
        return points[name].load()
    except Exception as exc:  # whatever the plugin's import raises
        detail = " ".join(str(exc).split())[:300]
        raise RagsweepError(
            f"{kind(group)} {name!r} ({points[name].value}) cannot be loaded: "
            f"{type(exc).__name__}: {detail}"
        ) from exc


def kind(group: str) -> str:
    """``vector store`` for ``ragsweep.vector_stores``: the group's thing, for messages."""
    return group.removeprefix("ragsweep.").removesuffix("s").replace("_", " ")
