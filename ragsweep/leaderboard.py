"""Aggregate per-question scores into a ranked leaderboard, and render it for a terminal."""

from __future__ import annotations

import pyarrow as pa

from ragsweep.errors import RagsweepError
from ragsweep.metrics import METRICS
from ragsweep.schemas import LEADERBOARD

DEFAULT_METRIC = "answer_correctness"


def rank_configs(scores: pa.Table, configs: list[dict], metric: str = DEFAULT_METRIC) -> pa.Table:
    """Mean of every metric per configuration, best ``metric`` first (ties: by label)."""
    check_metric(metric)
    grouped = scores.group_by("config_id").aggregate(
        [("question_id", "count")] + [(m, "mean") for m in METRICS]
    )
    grouped = grouped.rename_columns(
        {"question_id_count": "questions", **{f"{m}_mean": m for m in METRICS}}
    )
    by_id = {c["config_id"]: c for c in configs}
    missing = set(grouped.column("config_id").to_pylist()) - set(by_id)
    if missing:
        raise ValueError(f"scores for unknown configurations: {sorted(missing)}")
    rows = []
    for row in grouped.to_pylist():
        rows.append({**by_id[row["config_id"]], **row})
    rows.sort(key=lambda r: (-r[metric], r["label"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return pa.Table.from_pylist(rows, schema=LEADERBOARD.remove_metadata())


def check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise RagsweepError(f"unknown metric {metric!r}; choose from {sorted(METRICS)}")


def render(leaderboard: pa.Table, top: int | None = None) -> str:
    """A plain-text table: rank, label and every metric mean."""
    table = leaderboard.slice(0, top) if top else leaderboard
    headers = ["rank", "configuration", *METRICS]
    short = {m: m.replace("_", " ") for m in METRICS}
    lines = [
        [str(r["rank"]), r["label"], *(f"{r[m]:.3f}" for m in METRICS)] for r in table.to_pylist()
    ]
    header = [headers[0], headers[1], *(short[m] for m in METRICS)]
    widths = [
        max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
        for i, h in enumerate(header)
    ]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 1 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [fmt(header), "  ".join("-" * w for w in widths), *(fmt(line) for line in lines)]
    if top and leaderboard.num_rows > top:
        out.append(f"... {leaderboard.num_rows - top} more")
    return "\n".join(out)
