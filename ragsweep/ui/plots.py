"""The UI's plots, server-rendered SVG in the report's inline style (no script): the trend of
a sweep (ragsweep/reporting/report.py draws the report's plots)."""

from __future__ import annotations

import math
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from ragsweep.reporting.report import present

STEPS = (0.01, 0.02, 0.025, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0)  # tick spacings, for 0-1 scores


def axis(lows: list[float], highs: list[float], ticks: int = 5) -> tuple[float, float, float]:
    """(bottom, top, tick step) of an axis over the values, padded a little, on round ticks
    and within 0-1 when the values are: a drop of 0.02 shows, and a flat line is not
    stretched over the whole plot."""
    lo, hi = min(lows), max(highs)
    span = max(hi - lo, 0.04)
    lo, hi = lo - span * 0.1, hi + span * 0.1
    if min(lows) >= 0:
        lo = max(lo, 0.0)
    if max(highs) <= 1:
        hi = min(hi, 1.0)
    step = next((s for s in STEPS if (hi - lo) / s <= ticks), STEPS[-1])
    return math.floor(lo / step) * step, math.ceil(hi / step) * step, step


def _when(point: dict[str, Any]) -> Any:
    return point.get("started_at") or point.get("finished_at")


def trend(points: list[dict[str, Any]], width: int = 560, height: int = 220) -> str:
    """``points`` oldest first, each with run_id, score, low, high, ``regressed`` and its
    dates: the scores with their intervals over the runs' dates, each point a link to its
    comparison with the run before (the first: to its run)."""
    shown = [p for p in points if present(p["score"])]
    if not shown:
        return '<p class="muted">No succeeded run with a score yet.</p>'
    left, right, top, bottom = 48, 40, 14, 40
    lows = [p["low"] if present(p["low"]) else p["score"] for p in shown]
    highs = [p["high"] if present(p["high"]) else p["score"] for p in shown]
    lo, hi, step = axis(lows, highs)
    x_step = (width - left - right) / max(len(shown) - 1, 1)

    def px(i: int) -> float:
        return left + i * x_step if len(shown) > 1 else (left + width - right) / 2

    def py(v: float) -> float:
        return top + (hi - v) / (hi - lo) * (height - top - bottom)

    metric = escape(shown[0]["metric"] or "")
    parts = [
        f'<svg class="trend" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="best {metric} per run, last {len(shown)} runs">',
        f'<text x="4" y="{top - 2}" font-size="11" fill="#4a5568">{metric}</text>',
    ]
    for k in range(round((hi - lo) / step) + 1):
        v = lo + k * step
        digits = 3 if step < 0.01 else 2 if step < 0.1 else 1
        parts.append(
            f'<line x1="{left}" y1="{py(v):.1f}" x2="{width - right}" y2="{py(v):.1f}" '
            f'stroke="#e2e8f0"/><text x="{left - 6}" y="{py(v) + 4:.1f}" font-size="11" '
            f'text-anchor="end">{v:.{digits}f}</text>'
        )
    dates = [_when(p) for p in shown]
    years = {d.year for d in dates if d}
    labels = max(1, math.ceil(len(shown) / 6))  # at most about six dates
    for i, when in enumerate(dates):
        if when and (i % labels == 0 or i == len(shown) - 1):
            text = when.strftime("%Y-%m-%d" if len(years) > 1 else "%b %d")
            parts.append(
                f'<text class="date" x="{px(i):.1f}" y="{height - bottom + 16}" font-size="10" '
                f'text-anchor="middle">{escape(text)}</text>'
            )
    line = " ".join(f"{px(i):.1f},{py(p['score']):.1f}" for i, p in enumerate(shown))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#3182ce" stroke-width="1.5"/>')
    for i, p in enumerate(shown):
        regressed = bool(p.get("regressed"))
        color = "#c53030" if regressed else "#1a365d"
        href = (
            "/compare?" + urlencode({"baseline": shown[i - 1]["run_id"], "candidate": p["run_id"]})
            if i
            else f"/runs/{quote(p['run_id'], safe='')}"
        )
        when = _when(p)
        title = (
            f"{p.get('title') or p['run_id']} ({when:%Y-%m-%d %H:%M}): "
            if when
            else f"{p['run_id']}: "
        )
        title += f"{p['metric'] or ''} {p['score']:.3f} [{lows[i]:.3f}, {highs[i]:.3f}] "
        title += p["label"] or ""
        title += " — regressed against the run before" if regressed else ""
        parts.append(
            f'<a href="{escape(href)}"><line x1="{px(i):.1f}" y1="{py(lows[i]):.1f}" '
            f'x2="{px(i):.1f}" y2="{py(highs[i]):.1f}" stroke="{color}" stroke-width="3" '
            f'opacity="0.45"/><circle class="{"regressed" if regressed else "night"}" '
            f'cx="{px(i):.1f}" cy="{py(p["score"]):.1f}" r="{6 if regressed else 4}" '
            f'fill="{color}"><title>{escape(title)}</title></circle></a>'
        )
        if regressed:
            parts.append(
                f'<text x="{px(i):.1f}" y="{py(highs[i]) - 6:.1f}" font-size="11" '
                'fill="#c53030" text-anchor="middle">regressed</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
