"""Judges compared on people's labels: each judge model gives its verdicts on the labelled
answers, and the judges are ranked by Cohen's kappa with the people (``ragsweep judges
compare``; ``best_judge`` picks the pipeline's judge from a list)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ragsweep.core.errors import RagsweepError
from ragsweep.curation import labels
from ragsweep.evaluation import agreement as stats
from ragsweep.evaluation.judge import Judge, Judged
from ragsweep.models.llm import LLMSettings
from ragsweep.store import database

log = logging.getLogger("ragsweep")


@dataclass(frozen=True)
class Labelled:
    """An answer a person labelled, with what a judge needs to see of it."""

    item: Judged
    correct: bool


def _references(value: object, source: str) -> list[str]:
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise RagsweepError(f"{source}: field 'reference_answers': not a JSON list") from None
    if isinstance(value, str):
        value = [value] if value.strip() else []
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise RagsweepError(f"{source}: field 'reference_answers': give one or more answers")
    return value


def read_labelled(path: Path) -> list[Labelled]:
    """Labelled answers from a file ``ragsweep labels export`` wrote (CSV or JSON Lines): the
    label's fields and the ``question``, ``reference_answers`` and ``answer`` texts."""
    path = Path(path)
    found = labels.read_file(path)
    records = labels.read_records(path)
    out = []
    for (source, record), label in zip(records, found, strict=True):
        for name in ("question", "answer"):
            if not str(record.get(name) or "").strip():
                raise RagsweepError(f"{source}: field {name!r} is missing or empty")
        item = Judged(
            question=record["question"],
            references=_references(record.get("reference_answers"), source),
            answer=record["answer"],
            question_type=record.get("question_type") or None,
        )
        out.append(Labelled(item, label.correct))
    if not out:
        raise RagsweepError(f"{path}: no labels")
    return out


def measure(model: str, labelled: list[Labelled], settings: LLMSettings) -> stats.Agreement:
    """The judge ``model``'s agreement with the labels, over the answers it gave a verdict on."""
    verdicts = Judge(model, settings).judge([x.item for x in labelled])
    pairs = [(x.correct, v.correct) for x, v in zip(labelled, verdicts, strict=True)]
    given = np.array([p for p in pairs if p[1] is not None], bool).reshape(-1, 2)
    return stats.agreement(given[:, 0], given[:, 1])


def compare_judges(
    models: list[str],
    labelled: list[Labelled],
    settings: LLMSettings | None = None,
    prompts: Mapping[str, str] | None = None,
) -> list[tuple[str, stats.Agreement]]:
    """Each judge's agreement with the labels, the best kappa first (undefined kappa last).
    With ``prompts`` (a name -> a judge system prompt: its versions), each model is
    measured with each version, named ``model with name``."""
    settings = settings or LLMSettings()
    judges = (
        [(f"{model} with {name}", model, replace(settings, judge_system_prompt=text))
         for model in models for name, text in prompts.items()]
        if prompts
        else [(model, model, settings) for model in models]
    )  # fmt: skip
    measured = [(name, measure(model, labelled, used)) for name, model, used in judges]
    return sorted(measured, key=lambda m: -m[1].kappa if np.isfinite(m[1].kappa) else np.inf)


def stored_labelled(engine) -> list[Labelled]:
    """The labelled answers of the results database whose question and answer it holds."""
    texts = labels.texts_of(engine)
    out = []
    for key, correct in labels.truth(engine).items():
        if key in texts:
            seen = texts[key]
            item = Judged(
                seen["question"],
                list(seen["reference_answers"] or []),
                seen["answer"],
                seen["question_type"],
            )
            out.append(Labelled(item, correct))
    return out


def choose_judge(settings: LLMSettings) -> LLMSettings:
    """``settings`` with one judge: of the several its ``judge`` names, the one whose
    verdicts agree best (kappa) with the labels in the results database
    a step reads (``database.reading_url``); the first named when there is no store or no
    label."""
    names = settings.judges()
    if len(names) < 2:
        return settings
    url = database.reading_url()
    labelled = stored_labelled(database.connect(url)) if url else []
    if not labelled:
        log.info(
            "judges %s: no labels in a results store to choose by; judging with %s", names, names[0]
        )
        return replace(settings, judge=names[0])
    ranked = compare_judges(names, labelled, settings)
    for name, measured in ranked:
        log.info("judge %s against people: %s", name, measured.statement())
    log.info("judging with %s: the best agreement with %d labels", ranked[0][0], len(labelled))
    return replace(settings, judge=ranked[0][0])
