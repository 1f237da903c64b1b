"""Aggregate per-question scores into a ranked leaderboard, and render it for a terminal."""

from __future__ import annotations

import pyarrow as pa

from ragsweep.errors import RagsweepError
from ragsweep.schemas import CONFIG_FIELDS, METRICS

DEFAULT_METRIC = "answer_correctness"
AUTO_METRIC = "auto"  # the judge's correctness when there are verdicts, else DEFAULT_METRIC
JUDGE_METRIC = "correctness"


def rank_configs(scores: pa.Table, configs: list[dict], metric: str = DEFAULT_METRIC) -> pa.Table:
    """Mean of every metric per configuration, best ``metric`` first (ties: by label;
    configurations without a value of ``metric`` last)."""
    check_metric(metric)
    metric = resolve_metric(metric, scores)
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
    rows.sort(key=lambda r: (r[metric] is None, -(r[metric] or 0.0), r["label"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    names = ["rank"] + [name for name, _ in CONFIG_FIELDS] + ["questions", *METRICS]
    table = pa.Table.from_pylist(rows).select(names)
    return table.replace_schema_metadata({"ragsweep.ranked_by": metric})


def check_metric(metric: str) -> None:
    if metric not in METRICS and metric != AUTO_METRIC:
        choices = sorted(METRICS) + [AUTO_METRIC]
        raise RagsweepError(f"unknown metric {metric!r}; choose from {choices}")


def resolve_metric(metric: str, scores: pa.Table) -> str:
    """``auto``: the judge's correctness when the scores hold verdicts, else the default."""
    if metric != AUTO_METRIC:
        return metric
    judged = scores.column(JUDGE_METRIC).null_count < scores.num_rows
    return JUDGE_METRIC if judged else DEFAULT_METRIC


def render(leaderboard: pa.Table, top: int | None = None) -> str:
    """A plain-text table: rank, label and the mean of every metric that has values."""
    table = leaderboard.slice(0, top) if top else leaderboard
    shown = [m for m in METRICS if leaderboard.column(m).null_count < leaderboard.num_rows]
    lines = [
        [str(r["rank"]), r["label"], *("-" if r[m] is None else f"{r[m]:.3f}" for m in shown)]
        for r in table.to_pylist()
    ]
    header = ["rank", "configuration", *(m.replace("_", " ") for m in shown)]
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
