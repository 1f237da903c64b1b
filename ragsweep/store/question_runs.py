"""One question across the stored runs that asked it: per run, how its best configuration
answered (``ragsweep ui``'s question page), and the question's text in each version."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ragsweep.store.database import WITH_RESULTS, results, runs, testset_items, testsets


def runs_asking(
    engine: Engine, question_id: str, question_version: str | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    """The runs with results for ``question_id`` (in that ``question_version`` when given),
    newest first, at most ``limit``: each run's id, name, times, metric, best
    configuration (``best_config_id``, ``best_label``) and that configuration's result for
    the question (``question_version``, ``item_version``, ``topic``, ``question_type``,
    ``answer`` and ``scores``: every metric and judge field by name)."""
    query = (
        sa.select(
            runs.c.run_id,
            runs.c.title,
            runs.c.started_at,
            runs.c.finished_at,
            runs.c.optimization_metric.label("metric"),
            runs.c.best_config_id,
            runs.c.best_label,
            results.c.question_version,
            results.c.item_version,
            results.c.topic,
            results.c.question_type,
            results.c.answer,
            results.c.scores,
        )
        .select_from(
            results.join(
                runs,
                sa.and_(
                    results.c.run_pk == runs.c.id, results.c.config_id == runs.c.best_config_id
                ),
            )
        )
        .where(results.c.question_id == question_id, runs.c.status.in_(WITH_RESULTS))
        .order_by(runs.c.finished_at.desc(), runs.c.id.desc())
        .limit(limit)
    )
    if question_version:
        query = query.where(results.c.question_version == question_version)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(query).mappings()]


def question_texts(engine: Engine, question_id: str) -> dict[str, dict[str, Any]]:
    """Every stored wording of ``question_id`` by its question version (the content hash a
    result names): the question, its reference answers and the test sets holding it."""
    query = (
        sa.select(
            testset_items.c.question_version,
            testset_items.c.question,
            testset_items.c.reference_answers,
            testsets.c.name.label("testset"),
        )
        .select_from(testset_items.join(testsets, testset_items.c.testset_id == testsets.c.id))
        .where(testset_items.c.question_id == question_id, ~testset_items.c.deleted)
        .order_by(testset_items.c.id)
    )
    texts: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for r in conn.execute(query).mappings():
            if not r["question_version"]:
                continue
            text = texts.setdefault(
                r["question_version"],
                {"question": r["question"], "answers": r["reference_answers"], "testsets": []},
            )
            if r["testset"] not in text["testsets"]:
                text["testsets"].append(r["testset"])
    return texts
