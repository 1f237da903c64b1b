"""Every run option, read from the settings fields that declare it
(``ragsweep.core.option_fields``), and the one way a run's settings are built from options'
values: ``ragsweep run``'s, a ``--space`` file's, the web UI's, the pipeline's parameters
(``ragsweep.kubeflow.parameters``).
Each option has one canonical name; AutoRAG's name and older spellings are aliases."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any

from ragsweep.core.errors import RagsweepError
from ragsweep.core.option_fields import NOT, OWN, Option, declared
from ragsweep.documents.qagen import QASettings
from ragsweep.models.llm import LLMSettings
from ragsweep.sweep.presets import shaped
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import (
    FIELD_TYPES,
    SearchSpace,
    answerer_of,
    generation_model_of,
    read_yaml,
)

# the settings a run option may belong to: RunSettings' own fields, and its nested ones
NESTS = {"": RunSettings, "space": SearchSpace, "llm": LLMSettings, "qa_generation": QASettings}
# the pipeline's dict parameter that holds each nest's NESTED options
NEST_PARAMETERS = {"space": "search_space", "llm": "llm", "qa_generation": "qa_generation"}


@dataclass(frozen=True)
class RunOption:
    """A run option: its declaration and the field it sets (``nest``: '' for RunSettings'
    own fields, else the nested settings')."""

    nest: str
    field: str
    declared: Option
    kind: type  # str, int, float, bool, or list (a tuple field: values to sweep)
    default: Any

    @property
    def name(self) -> str:
        """The canonical name: ``--name`` with dashes, a YAML key, a form field."""
        return self.declared.name or self.field

    @property
    def parameter(self) -> str:
        """The pipeline's parameter (OWN options): AutoRAG's name, where it has one."""
        return self.declared.autorag or self.name

    @property
    def aliases(self) -> tuple[str, ...]:
        """The other names it is accepted under: AutoRAG's and older spellings."""
        older = tuple(f.removeprefix("--").replace("-", "_") for f in self.declared.flags)
        autorag = (self.declared.autorag,) if self.declared.autorag else ()
        return tuple(dict.fromkeys(n for n in autorag + older if n != self.name))

    @property
    def flags(self) -> tuple[str, ...]:
        """Its ``ragsweep run`` flags: the canonical one first."""
        return tuple("--" + n.replace("_", "-") for n in (self.name, *self.aliases))

    def plain(self, value: Any) -> Any:
        """``value`` of the field as plain data (lists for tuples; answerers as models)."""
        if self.field == "answerers":
            return [generation_model_of(a) for a in value]
        return list(value) if isinstance(value, tuple) else value

    def pipeline_default(self) -> Any:
        """The pipeline parameter's default: no answer models means the search space's
        answerers (the older spelling), else extractive."""
        return [] if self.field == "answerers" else self.plain(self.default)

    def shown_default(self) -> str:
        """The default as the docs and ``--help`` show it ('' for none, an empty text or
        off)."""
        value = self.plain(self.default)
        if self.field == "docs":
            return "required"
        if isinstance(value, list):
            return ",".join(map(str, value))
        if value is False or value is None or value == "":
            return ""
        return "built-in" if isinstance(value, str) and len(value) > 40 else str(value)


# AutoRAG's choices that shape the search space rather than set a field: declared here
PRESET = Option(
    name="preset",
    help="AutoRAG's preset, speed or balanced: its chunk sizes and overlaps (its characters "
    "/ 4, in tokens; sizes over an embedding model's maximum left out) and chunker "
    "(sentence; headings), instead of the space's; empty: the space's.",
)
PROVIDER = Option(
    name="vector_io_provider_id",
    help="AutoRAG's vector store: sweep the one store it names (milvus, pgvector, oracle; "
    "faiss and sqlite-vec: memory) instead of the space's vector_stores; empty: those.",
)
SHAPERS = (PRESET, PROVIDER)


@cache
def run_options() -> tuple[RunOption, ...]:
    """Every run option, in the order of its settings' fields."""
    out = []
    for nest, settings in NESTS.items():
        hints = typing.get_type_hints(settings)
        for data_field in fields(settings):
            option = declared(data_field)
            if option is None:
                continue
            if data_field.default_factory is not MISSING:
                default = data_field.default_factory()
            else:
                default = None if data_field.default is MISSING else data_field.default
            origin = typing.get_origin(hints[data_field.name])
            kind = list if origin is tuple else _scalar(hints[data_field.name])
            out.append(RunOption(nest, data_field.name, option, kind, default))
    return tuple(out)


def _scalar(hint: Any) -> type:
    """``str`` for ``str | None``; the type itself otherwise."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


@cache
def by_name() -> dict[str, RunOption]:
    """Each option under its canonical name and each alias."""
    return {n: o for o in run_options() for n in (o.name, *o.aliases)}


def pipeline_options() -> tuple[RunOption, ...]:
    """The options that are parameters of the pipeline of their own."""
    return tuple(o for o in run_options() if o.declared.pipeline == OWN)


def build_settings(
    given: Mapping[str, Any],
    source: str,
    space: Mapping[str, Any] | None = None,
    llm: Mapping[str, Any] | None = None,
    qa_generation: Mapping[str, Any] | None = None,
    more_docs: tuple[str, ...] = (),
    nest_sources: Mapping[str, str] | None = None,
) -> RunSettings:
    """A run's settings, validated: ``given`` options' values by canonical name (None or
    absent: not given, the default) over the nests' own data (a ``--space`` file's or the
    pipeline's dict parameters); AutoRAG's ``SHAPERS`` in ``given`` reshape the space
    (``ragsweep.sweep.presets``) before the options given set its fields.
    Lists may be given as comma-separated text. A mistake names ``source`` (or the nest's
    own, ``nest_sources``)."""
    named = {nest: (nest_sources or {}).get(nest, source) for nest in NEST_PARAMETERS}
    nests: dict[str, dict[str, Any]] = {
        "": {},
        "space": shaped(dict(space or {}), *(given.get(s.name) or "" for s in SHAPERS)),
        "llm": dict(llm or {}),
        "qa_generation": dict(qa_generation or {}),
    }
    for option in run_options():
        value = given.get(option.name)
        if value is None:
            continue
        if option.kind is list and isinstance(value, str):
            value = values(value)
        if option.declared.from_file:
            value = text_or_file(value, option.flags[0])
        if option.field == "answerers":
            value = [answerer_of(m) for m in value]
        nests[option.nest][option.field] = value
    models = answer_models(list(nests["space"].get("answerers") or ()))
    if not nests["qa_generation"].get("model") and models:
        nests["qa_generation"]["model"] = models[0]  # the test set's generator: the first
    run = {k: tuple(v) if isinstance(v, list) else v for k, v in nests[""].items()}
    return RunSettings(
        **run,
        more_docs=tuple(more_docs),
        space=SearchSpace.from_dict(nests["space"], source=named["space"]),
        llm=LLMSettings.from_dict(nests["llm"], named["llm"]),
        qa_generation=QASettings.from_dict(nests["qa_generation"], named["qa_generation"]),
    )


def pipeline_arguments(settings: RunSettings) -> dict[str, Any]:
    """The pipeline's parameters for ``settings`` (locations as keys without a bucket):
    the inverse of ``ragsweep.kubeflow.parameters.run_settings``."""
    nested = {"llm": settings.llm.to_dict(), "qa_generation": settings.qa_generation.to_dict()}
    out: dict[str, Any] = {"input_data_key": settings.docs, "test_data_key": settings.testset}
    out.update(settings.space.to_parameters())  # search_space and its models' own
    for option in pipeline_options():
        if option.nest != "space":
            holder = getattr(settings, option.nest) if option.nest else settings
            out[option.parameter] = option.plain(getattr(holder, option.field))
            nested.get(option.nest, {}).pop(option.field, None)
    return {**out, **{NEST_PARAMETERS[nest]: data for nest, data in nested.items()}}


def read_options_file(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ``--space`` YAML file: the search space's fields, and any run option by its
    canonical name or an alias (``generation_models``, ``optimization_metric``,
    ``preset``...): (the space's fields, the options by canonical name)."""
    data = read_yaml(path)
    known = by_name()
    shapers = {s.name for s in SHAPERS}
    space: dict[str, Any] = {}
    given: dict[str, Any] = {}
    for key, value in data.items():
        if key in FIELD_TYPES:
            space[key] = value
        elif key in shapers:
            given[key] = value
        elif key in known and known[key].declared.pipeline != NOT:
            given[known[key].name] = value
        else:
            names = sorted(
                {
                    *FIELD_TYPES,
                    *shapers,
                    *(n for n, o in known.items() if o.declared.pipeline != NOT),
                }
            )
            raise RagsweepError(f"{path}: unknown field {key!r}; known: {', '.join(names)}")
    return space, given


def answer_models(answerers: list[str]) -> list[str]:
    """The models of ``answerers`` that are asked through an LLM endpoint."""
    from ragsweep.answering.answerers import uses_model

    return [a.partition(":")[2] for a in answerers if uses_model(a)]


def values(text: str) -> list:
    """Comma-separated values; numbers become numbers, for the search space to check."""
    out: list = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        try:
            out.append(int(item))
        except ValueError:
            try:
                out.append(float(item))
            except ValueError:
                out.append(item)
    return out


def text_or_file(value: str | None, flag: str) -> str | None:
    """The option's text, or the contents of the file it names as ``@path``."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except OSError as exc:
        raise RagsweepError(f"{flag}: {value[1:]}: {exc.strerror}") from None
