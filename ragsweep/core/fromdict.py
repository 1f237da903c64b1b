"""Settings dataclasses built from plain data (pipeline parameters, CLI options), checked
field by field with messages that name the field."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from ragsweep.core.errors import RagsweepError

S = TypeVar("S")

_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}
_LIST = "tuple[str, ...]"


def build(cls: type[S], data: dict[str, Any] | None, source: str) -> S:
    """An instance of the dataclass ``cls`` from ``data``; absent or null fields keep their
    defaults. Fields may be ``str``, ``int``, ``float`` or ``tuple[str, ...]`` (a list, or
    one comma-separated string)."""
    kinds = {f.name: f.type for f in fields(cls)}
    unknown = sorted(set(data or {}) - set(kinds))
    if unknown:
        raise RagsweepError(f"{source}: unknown field(s) {unknown}; known: {sorted(kinds)}")
    values = {}
    for name, value in (data or {}).items():
        if value is None:
            continue
        kind = kinds[name]
        if kind == _LIST:
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise RagsweepError(f"{source}: field '{name}': expected a list of strings")
            values[name] = tuple(value)
            continue
        if kind == "int" and isinstance(value, float) and value.is_integer():
            value = int(value)  # pipeline parameters arrive as JSON numbers: 8.0 means 8
        if not isinstance(value, _TYPES[kind]) or isinstance(value, bool):
            raise RagsweepError(f"{source}: field '{name}': expected {kind}, got {value!r}")
        values[name] = float(value) if kind == "float" else value
    return cls(**values)
