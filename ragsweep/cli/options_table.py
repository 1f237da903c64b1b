"""The docs' tables of run options, written from the options themselves: ``ragsweep run``'s
(every option its ``--help`` shows) and the names each option is accepted under (canonical,
AutoRAG's, older spellings; on the command line, in a ``--space`` file, on the pipeline).
``make docs-outputs`` writes them into docs/usage.md; the suite checks they are current."""

from __future__ import annotations

import re
from typing import Any

import typer.main

RUN_BEGIN = "<!-- run-options: written by make docs-outputs from ragsweep run's options -->"
RUN_END = "<!-- /run-options -->"
NAMES_BEGIN = "<!-- option-names: written by make docs-outputs from the run options -->"
NAMES_END = "<!-- /option-names -->"
DEFAULT = re.compile(r"\s*\[default: (.*?)\]\s*$")


def run_command() -> Any:
    """``ragsweep run`` as click builds it."""
    from ragsweep.cli import app

    return typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def run_table() -> str:
    """Every option of ``ragsweep run``: its flags, what it does, its default."""
    rows = ["| option | meaning | default |", "| --- | --- | --- |"]
    for param in run_command().params:
        if param.param_type_name != "option" or param.name == "help":
            continue
        text = param.help or ""
        found = DEFAULT.search(text)
        if found:
            default, text = found.group(1), text[: found.start()]
        elif param.default in (None, False, ()) or param.is_flag:
            default = ""
        else:
            default = str(param.default)
        flags = ", ".join(f"`{flag}`" for flag in param.opts)
        rows.append(f"| {flags} | {_cell(text.strip())} | {_cell(default)} |")
    return "\n".join([RUN_BEGIN, *rows, RUN_END])


def names_table() -> str:
    """Each run option's canonical name and the others it is accepted under."""
    from ragsweep.core.option_fields import NESTED, NOT
    from ragsweep.sweep.options import NEST_PARAMETERS, SHAPERS, run_options

    rows = [
        "| option | AutoRAG's name | older spellings | on the pipeline |",
        "| --- | --- | --- | --- |",
    ]
    for option in run_options():
        if option.declared.pipeline == NOT:
            located = option.declared.autorag  # a location: the parameter and its bucket
            pipeline = f"`{located}` and its bucket" if located else "no: a local run's"
        elif option.declared.pipeline == NESTED:
            pipeline = f"`{NEST_PARAMETERS[option.nest]}`'s `{option.field}`"
        else:
            pipeline = f"`{option.parameter}`"
        autorag = f"`{option.declared.autorag}`" if option.declared.autorag else ""
        older = [n for n in option.aliases if n != option.declared.autorag]
        spelled = ", ".join(f"`{n}`" for n in older)
        rows.append(f"| `{option.name}` | {autorag} | {spelled} | {pipeline} |")
    for shaper in SHAPERS:
        rows.append(f"| `{shaper.name}` | `{shaper.name}` |  | `{shaper.name}` |")
    return "\n".join([NAMES_BEGIN, *rows, NAMES_END])


def written(page: str) -> str:
    """``page`` (docs/usage.md's text) with both tables as the options are now."""
    for table in (run_table(), names_table()):
        begin, end = table.splitlines()[0], table.splitlines()[-1]
        start, stop = page.index(begin), page.index(end) + len(end)
        page = page[:start] + table + page[stop:]
    return page
