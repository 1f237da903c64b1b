"""A run option, declared once: as a field of the settings it sets (``RunSettings``,
``SearchSpace``, ``LLMSettings``, ``QASettings``), with its help text, bounds and Red Hat
AutoRAG's name for it. ``ragsweep run``'s options, the pipeline's parameters, the
``--space`` YAML's fields, the web UI's start form and the docs' tables are all read from
these fields (``ragsweep.sweep.declared``): an option added is one field plus the code that
uses it."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Any

# where a field's value comes from on the pipeline: its own parameter, or a key of one of
# the pipeline's dict parameters (search_space, llm, qa_generation)
OWN, NESTED, NOT = "own", "nested", "not"
# the web UI start form's groups (``Option.form``), in its order
FORM_GROUPS = CHUNKING, RETRIEVAL, ANSWERS, BUDGET, SWEEP = (
    "Chunking",
    "Embedding and retrieval",
    "Answers and judge",
    "Budget and ranking",
    "Sweep",
)


@dataclass(frozen=True)
class Option:
    """What a settings field is as an option. ``name``: its canonical name (the field's,
    unless given), ``--name`` with dashes on the command line; ``autorag``: AutoRAG's name
    for it, accepted everywhere as an alias; ``flags``: older command-line spellings, still
    accepted; ``least``: the smallest value, ``meaning`` what that value means;
    ``pipeline``: OWN (a parameter of the pipeline, under AutoRAG's name if it has one),
    NESTED (a key of the dict parameter of its settings) or NOT (a local run's alone);
    ``form``: the group of the web UI's start form it appears in ("": not there);
    ``repeat``: given once per value on the command line (else comma-separated values);
    ``from_file``: a text that ``@path`` reads from a file."""

    help: str
    name: str = ""
    autorag: str = ""
    flags: tuple[str, ...] = ()
    least: float | None = None
    meaning: str = ""
    pipeline: str = OWN
    form: str = ""
    repeat: bool = False
    from_file: bool = False  # the text, or @path: the file's


def option(default: Any = MISSING, *, default_factory: Any = MISSING, **declared: Any) -> Any:
    """A dataclass field that is a run option (``Option``'s arguments as keywords)."""
    return field(
        default=default, default_factory=default_factory, metadata={"option": Option(**declared)}
    )


def declared(data_field: Any) -> Option | None:
    """The ``Option`` a dataclass field declares, if it is one."""
    return data_field.metadata.get("option")
