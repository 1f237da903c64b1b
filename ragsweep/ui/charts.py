"""A run's plots, server-rendered SVG (no script): the metric against each swept parameter
(small multiples, one panel a parameter), and quality against cost and against latency with
the Pareto front; every point links to its configuration's page."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from ragsweep.evaluation.metrics import metric as metric_of
from ragsweep.reporting.report import cost_axis, pareto_front, present
from ragsweep.ui.plots import axis

# the swept parameters a panel may show, in the order a configuration's label reads
PARAMETERS = ("chunker", "chunk_size", "chunk_overlap", "embedding_model", "top_k")
PARAMETERS += ("search_type", "mmr_lambda", "vector_store", "index", "reranker", "answerer")
LATENCIES = (("latency_p50_s", "median answer latency (s)"),)
LATENCIES += (("query_latency_p50_ms", "median search latency (ms)"),)


def compact(value: float) -> str:
    """An axis figure people read: 1.2k, 3.4M, 0.25, 12 (never 1.04e+03)."""
    size = abs(value)
    if size >= 1e6:
        return f"{value / 1e6:.3g}M"
    if size >= 1e4:
        return f"{value / 1e3:.3g}k"
    if size >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.3g}"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values spanning [low, high]."""
    span = high - low if high > low else abs(high) or 1.0
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    return [first + k * step for k in range(int(math.ceil((high - first) / step)) + 1)]


def _link(run_id: str, config_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}/configs/{quote(config_id, safe='')}"


def swept(board: pa.Table) -> list[str]:
    """The parameters with more than one value among the configurations."""
    return [
        p
        for p in PARAMETERS
        if p in board.column_names and len({v for v in board[p].to_pylist()}) > 1
    ]


def _order(values: list[Any]) -> list[Any]:
    numbers = all(isinstance(v, int | float) for v in values if v is not None)
    return sorted(values, key=lambda v: (v is None, v if numbers else str(v)))


def _y_grid(
    lo: float, hi: float, step: float, py: Callable[[float], float], left: float, right: float
) -> list[str]:
    """The metric axis: a grid line from x ``left`` to ``right`` and a label every
    ``step`` from ``lo`` to ``hi`` (``py``: a value's y)."""
    digits = 3 if step < 0.01 else 2 if step < 0.1 else 1
    lines = []
    for t in range(round((hi - lo) / step) + 1):
        v = lo + t * step
        lines.append(
            f'<line x1="{left}" y1="{py(v):.1f}" x2="{right}" y2="{py(v):.1f}" '
            f'stroke="#edf2f7"/><text x="{left - 4}" y="{py(v) + 4:.1f}" font-size="10" '
            f'text-anchor="end">{v:.{digits}f}</text>'
        )
    return lines


def parameter_panels(board: pa.Table, metric: str, run_id: str) -> list[dict[str, str]]:
    """One panel per swept parameter: for each of its values, the best configuration having
    it (its score and 95% interval, linked) and the others as small dots; all on one axis,
    so that the panels compare."""
    rows = [r for r in board.to_pylist() if present(r[metric])]
    names = swept(board)
    if not rows or not names:
        return []
    lows = [r[f"{metric}_low"] if present(r[f"{metric}_low"]) else r[metric] for r in rows]
    highs = [r[f"{metric}_high"] if present(r[f"{metric}_high"]) else r[metric] for r in rows]
    lo, hi, step = axis(lows, highs)
    sign = metric_of(metric).sign()
    return [
        {"parameter": name, "svg": _panel(rows, name, metric, run_id, (lo, hi, step), sign)}
        for name in names
    ]


def _panel(
    rows: list[dict],
    name: str,
    metric: str,
    run_id: str,
    scale: tuple[float, float, float],
    sign: float,
    width: int = 300,
    height: int = 200,
) -> str:
    lo, hi, step = scale
    left, right, top, bottom = 40, 10, 20, 46
    values = _order(list({r[name] for r in rows}))
    slot = (width - left - right) / len(values)

    def px(k: int) -> float:
        return left + slot * (k + 0.5)

    def py(v: float) -> float:
        return top + (hi - v) / (hi - lo) * (height - top - bottom)

    title = escape(name.replace("_", " "))
    parts = [
        f'<svg class="param-plot" data-parameter="{escape(name)}" viewBox="0 0 {width} '
        f'{height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(metric)} by {title}">',
        f'<text x="{width / 2}" y="13" font-size="12" font-weight="600" '
        f'text-anchor="middle">{title}</text>',
    ]
    parts += _y_grid(lo, hi, step, py, left, width - right)
    for k, value in enumerate(values):
        mine = [r for r in rows if r[name] == value]
        best = max(mine, key=lambda r: sign * r[metric])
        text = "-" if value is None else str(value)
        short = text if len(text) <= 14 else text[:13] + "…"
        parts.append(
            f'<text x="{px(k):.1f}" y="{height - bottom + 14}" font-size="10" '
            f'text-anchor="middle"><title>{escape(text)}</title>{escape(short)}</text>'
        )
        for j, r in enumerate(mine):
            if r is best:
                continue
            dx = (j % 5 - 2) * 3.0
            parts.append(
                f'<a href="{_link(run_id, r["config_id"])}"><circle class="other" '
                f'cx="{px(k) + dx:.1f}" cy="{py(r[metric]):.1f}" r="2.5" fill="#a0aec0">'
                f"<title>{escape(r['label'])}: {r[metric]:.3f}</title></circle></a>"
            )
        low = best[f"{metric}_low"] if present(best[f"{metric}_low"]) else best[metric]
        high = best[f"{metric}_high"] if present(best[f"{metric}_high"]) else best[metric]
        parts.append(
            f'<a href="{_link(run_id, best["config_id"])}"><line x1="{px(k):.1f}" '
            f'y1="{py(low):.1f}" x2="{px(k):.1f}" y2="{py(high):.1f}" stroke="#3182ce" '
            f'stroke-width="3"/><circle class="best-of-value" cx="{px(k):.1f}" '
            f'cy="{py(best[metric]):.1f}" r="4.5" fill="#1a365d"><title>best with {title} '
            f"{escape(text)}: #{best['rank']} {escape(best['label'])}, {escape(metric)} "
            f"{best[metric]:.3f} [{low:.3f}, {high:.3f}]</title></circle></a>"
        )
    parts.append("</svg>")
    return "".join(parts)


def pareto_panels(board: pa.Table, metric: str, run_id: str) -> list[dict[str, str]]:
    """Quality against cost (``cost_axis``) and against each measured latency, each with its
    Pareto front; the front's points are labelled by rank, each point links to its
    configuration."""
    axes = [cost_axis(board)]
    axes += [(c, t) for c, t in LATENCIES if c not in {a for a, _ in axes}]
    out = []
    for column, label in axes:
        rows = [r for r in board.to_pylist() if present(r[metric]) and present(r.get(column))]
        if rows:
            svg = _pareto(rows, column, label, metric, run_id, "" if out else "pareto")
            out.append({"cost": column, "svg": svg})
    return out


def _pareto(
    rows: list[dict],
    cost: str,
    label: str,
    metric: str,
    run_id: str,
    element_id: str,
    width: int = 460,
    height: int = 320,
) -> str:
    left, right, top, bottom = 52, 16, 16, 48
    xs = [r[cost] for r in rows]
    x_ticks = nice_ticks(min(xs), max(xs))
    x0, x1 = x_ticks[0], x_ticks[-1] if x_ticks[-1] > x_ticks[0] else x_ticks[0] + 1
    lo, hi, step = axis([r[metric] for r in rows], [r[metric] for r in rows])
    sign = metric_of(metric).sign()
    front = set(pareto_front([(r[cost], sign * r[metric], i) for i, r in enumerate(rows)]))

    def px(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * (width - left - right)

    def py(v: float) -> float:
        return top + (hi - v) / (hi - lo) * (height - top - bottom)

    parts = [
        f'<svg{f" id={element_id!r}" if element_id else ""} class="pareto-plot" '
        f'data-cost="{escape(cost)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(metric)} against {escape(label)}">'
    ]
    for t in x_ticks:
        parts.append(
            f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{height - bottom}" '
            f'stroke="#edf2f7"/><text class="tick" x="{px(t):.1f}" y="{height - bottom + 14}" '
            f'font-size="10" text-anchor="middle">{compact(t)}</text>'
        )
    parts += _y_grid(lo, hi, step, py, left, width - right)
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 10}" font-size="11" '
        f'text-anchor="middle">{escape(label)} →</text><text x="12" y="{height / 2}" '
        f'font-size="11" text-anchor="middle" transform="rotate(-90 12 {height / 2})">'
        f"{escape(metric)} →</text>"
    )
    line = sorted((rows[i] for i in front), key=lambda r: r[cost])
    if len(line) > 1:
        path = " ".join(f"{px(r[cost]):.1f},{py(r[metric]):.1f}" for r in line)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="#dd6b20" stroke-width="1.5" '
            'stroke-dasharray="5 3"/>'
        )
    for i, r in sorted(enumerate(rows), key=lambda p: p[0] in front):
        on_front = i in front
        parts.append(
            f'<a href="{_link(run_id, r["config_id"])}"><circle '
            f'class="{"front" if on_front else "point"}" cx="{px(r[cost]):.1f}" '
            f'cy="{py(r[metric]):.1f}" r="{5.5 if on_front else 3.5}" '
            f'fill="{"#dd6b20" if on_front else "#90cdf4"}" stroke="#1a365d" '
            f'stroke-width="0.6"><title>#{r["rank"]} {escape(r["label"])}: '
            f"{escape(metric)} {r[metric]:.3f}, {escape(cost)} {compact(r[cost])}</title>"
            "</circle></a>"
        )
    placed: list[tuple[float, float]] = []
    for r in line:  # rank labels on the front, skipped where one would overlap another
        x, y = px(r[cost]) + 7, py(r[metric]) - 7
        if all(abs(x - a) > 22 or abs(y - b) > 11 for a, b in placed):
            placed.append((x, y))
            parts.append(
                f'<text class="rank" x="{x:.1f}" y="{y:.1f}" font-size="10" '
                f'fill="#7b341e">#{r["rank"]}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


VERDICT_COLOURS = {"regressed": "#c53030", "improved": "#2f855a"}
LABEL_CHARS = 46  # a forest label's line; a longer label wraps onto more lines, never cut
LABEL_LINE_H = 12


def differing(labels: list[str]) -> tuple[dict[str, str], str]:
    """What tells configurations apart: each label without the words every one of
    ``labels`` shares (the whole label when none is left), and those shared words."""
    words = [label.split(" ") for label in labels]
    shared = set.intersection(*map(set, words)) if words else set()
    short = {
        label: " ".join(w for w in split if w not in shared) or label
        for label, split in zip(labels, words, strict=True)
    }
    common = " ".join(w for w in words[0] if w in shared) if len(set(labels)) > 1 else ""
    return short, common


def forest(series: list[tuple[str, list[dict]]], metric: str, width: int = 760) -> str:
    """The comparisons' per-configuration differences (candidate - baseline) with their 95%
    intervals: one group of lines per configuration, one line per candidate run in
    ``series`` ((candidate run id, its comparison's rows)), zero marked; red: regressed,
    green: improved. A line links to the configuration in its candidate run."""
    groups: dict[str, list[tuple[str, dict]]] = {}
    for candidate, rows in series:
        for r in rows:
            if present(r["difference"]):
                groups.setdefault(r["config_id"], []).append((candidate, r))
    if not groups:
        return '<p class="muted">No shared configuration has a difference to plot.</p>'
    shown, common = differing(sorted({r["label"] for g in groups.values() for _, r in g}))
    many = len(series) > 1
    line_h, top, bottom, right, gap = 22, 10, 34, 20, 8 if many else 0
    left = 420 if many else 300
    lines = [pair for group in groups.values() for pair in group]
    wrapped = {
        key: textwrap.wrap(shown[group[0][1]["label"]], LABEL_CHARS)
        for key, group in groups.items()
    }

    def group_h(key: str) -> int:
        """Its lines, or its label's lines when the label wraps onto more."""
        return max(line_h * len(groups[key]), LABEL_LINE_H * (len(wrapped[key]) - 1) + line_h)

    height = top + bottom + sum(map(group_h, groups)) + gap * (len(groups) - 1)

    def ends(r: dict) -> tuple[float, float]:
        low, high = r["difference_low"], r["difference_high"]
        return (
            low if present(low) else r["difference"],
            high if present(high) else r["difference"],
        )

    bounds = [ends(r) for _, r in lines]
    ticks = nice_ticks(min(0.0, *(b[0] for b in bounds)), max(0.0, *(b[1] for b in bounds)))
    x0, x1 = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1

    def px(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * (width - left - right)

    parts = [
        f'<svg id="forest" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="difference in {escape(metric)} per configuration">'
    ]
    for t in ticks:
        parts.append(
            f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{height - bottom}" '
            f'stroke="{"#4a5568" if t == 0 else "#edf2f7"}"/><text x="{px(t):.1f}" '
            f'y="{height - bottom + 14}" font-size="10" text-anchor="middle">{t:+.2f}</text>'
        )
    against = "each run" if many else "candidate"
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 6}" font-size="11" '
        f'text-anchor="middle">{against} − baseline, {escape(metric)} (95% interval)</text>'
    )
    y = top
    for key, group in groups.items():
        for k, (candidate, r) in enumerate(group):
            label = wrapped[key] if k == 0 else []
            parts.append(
                _forest_line(r, label, candidate, ends(r), px, y + k * line_h + line_h / 2, left)
            )
        y += group_h(key) + gap
    parts.append("</svg>")
    if common:
        parts.append(
            f'<p class="muted" id="forest-common">Every configuration drawn: {escape(common)}; '
            "a line is labelled with what differs (its whole label on hover).</p>"
        )
    return "".join(parts)


def _forest_line(
    r: dict,
    label_lines: list[str],
    candidate: str,
    bounds: tuple[float, float],
    px,
    y: float,
    left: int,
) -> str:
    """One line of the forest plot; on its group's first line, what sets the configuration
    apart (``label_lines``, whole, one ``tspan`` a line; its whole label as the title), the
    candidate run's id beside each line when several candidates are drawn (``left`` 420)."""
    low, high = bounds
    many = left > 300
    colour = VERDICT_COLOURS.get(r["verdict"], "#4a5568")
    x = left - (120 if many else 8)
    spans = "".join(
        f'<tspan x="{x}" dy="{LABEL_LINE_H if k else 0}">{escape(line)}</tspan>'
        for k, line in enumerate(label_lines)
    )
    best = " (baseline's best)" if r["is_best"] else ""
    name = candidate if len(candidate) <= 18 else candidate[:17] + "…"
    run = (
        f'<text class="forest-run" x="{left - 8}" y="{y + 4:.1f}" font-size="10" '
        f'text-anchor="end" fill="#4a5568">{escape(name)}</text>'
        if many
        else ""
    )
    label = (
        f'<text class="forest-label" x="{x}" y="{y + 4:.1f}" '
        f'font-size="10" text-anchor="end" font-weight="{700 if best else 400}">'
        f"<title>{escape(r['label'])}</title>{spans}</text>"
        if label_lines
        else ""
    )
    return (
        f'<a href="{_link(candidate, r["config_id"])}"><g class="forest-row '
        f'{escape(r["verdict"] or "")}" data-candidate="{escape(candidate)}">{label}{run}'
        f'<line x1="{px(low):.1f}" y1="{y:.1f}" x2="{px(high):.1f}" y2="{y:.1f}" '
        f'stroke="{colour}" stroke-width="3"/><circle cx="{px(r["difference"]):.1f}" '
        f'cy="{y:.1f}" r="4" fill="{colour}"><title>{escape(candidate)}: '
        f"{escape(r['label'])}{best}: {r['difference']:+.3f} [{low:+.3f}, {high:+.3f}], "
        f"{escape(r['verdict'] or '')}</title></circle></g></a>"
    )
