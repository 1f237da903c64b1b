"""The judge's agreement with people, shown: as lines (``ragsweep leaderboard``, ``ragsweep
labels agreement``), as an HTML section (the report, the UI's drill-down) and as MLflow
metrics (``ragsweep.reporting.tracking.log_agreement``)."""

from __future__ import annotations

import logging
from html import escape
from pathlib import Path

import pyarrow as pa

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation.agreement import Agreement

log = logging.getLogger("ragsweep")

# where the report takes the judge's agreement with people (``insert_agreement``)
AGREEMENT_SLOT = "<!-- ragsweep: the judge's agreement with people -->"


def agreement_lines(measured: Agreement, judge: str) -> list[str]:
    """The statement and the confusion matrix, as text."""
    m = measured
    return [
        f"judge {judge} against people: {m.statement()}",
        f"  confusion (person x judge): both correct {m.both_correct}, judge only correct "
        f"{m.judge_only_correct}, person only correct {m.person_only_correct}, both incorrect "
        f"{m.both_incorrect}",
    ]


def agreement_section(measured: Agreement, judge: str) -> str:
    """The agreement as HTML: the statement, marked bad when the judge is not shown to be
    reliable, and the confusion matrix."""
    m = measured
    mark = "good" if m.reliable else "bad"
    rows = (
        ("person: correct", m.both_correct, m.person_only_correct),
        ("person: incorrect", m.judge_only_correct, m.both_incorrect),
    )
    body = "".join(
        f"<tr><th>{escape(name)}</th><td class='num'>{a}</td><td class='num'>{b}</td></tr>"
        for name, a, b in rows
    )
    return (
        f'<div id="agreement"><p class="{mark}"><b>Judge {escape(judge)}</b> against people: '
        f"{escape(m.statement())}.</p>"
        f"<table class='confusion'><tr><th></th><th>judge: correct</th>"
        f"<th>judge: incorrect</th></tr>{body}</table></div>"
    )


def with_agreement(html: str, measured: Agreement, judge: str) -> str:
    """The report ``html`` with the agreement: in its slot (a report rendered since the slot
    was added), else before the leaderboard; once (a report that has it gets it replaced)."""
    section = f"<h2>The judge against people</h2>\n{agreement_section(measured, judge)}"
    start = html.find("<h2>The judge against people</h2>")
    if start >= 0:
        end = html.find("</div>", html.find('<div id="agreement">', start)) + len("</div>")
        return html[:start] + section + html[end:]
    if AGREEMENT_SLOT in html:
        return html.replace(AGREEMENT_SLOT, section, 1)
    return html.replace("<h2>Leaderboard</h2>", section + "\n<h2>Leaderboard</h2>", 1)


def with_stored_labels(html: str, url: str, board: pa.Table, results: pa.Table) -> str:
    """The report ``html`` of a run (its ``board`` and ``results``) with its judge's
    agreement with the labels the store at ``url`` holds for its answers (labels given on
    earlier runs whose answers it reproduced); as it is when none is labelled, or when the
    store cannot be read (a warning: the report is whole without it)."""
    from ragsweep.curation import labels
    from ragsweep.store import database

    try:
        found = labels.board_agreement(database.connect(url), board, results)
    except RagsweepError as exc:
        log.warning("the report lacks the judge's agreement with people: %s", exc)
        return html
    return with_agreement(html, *found) if found and found[0].labels else html


def insert_agreement(path: Path, measured: Agreement, judge: str) -> None:
    """Write the agreement into the report at ``path`` (``with_agreement``)."""
    html = path.read_text(encoding="utf-8")
    path.write_text(with_agreement(html, measured, judge), encoding="utf-8")
