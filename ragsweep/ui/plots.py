"""The nightly trend: the best configuration's score per run with its interval, in the
report's inline-SVG style (ragsweep/results/report.py draws the other plots)."""

from __future__ import annotations

from html import escape
from typing import Any

from ragsweep.results.report import present


def trend(points: list[dict[str, Any]], width: int = 720, height: int = 220) -> str:
    """``points`` oldest first, each with run_id, score, low, high and ``regressed``."""
    shown = [p for p in points if present(p["score"])]
    if not shown:
        return '<p class="muted">No succeeded run with a score yet.</p>'
    pad = 40
    step = (width - 2 * pad) / max(len(shown) - 1, 1)

    def px(i: int) -> float:
        return pad + i * step if len(shown) > 1 else width / 2

    def py(v: float) -> float:
        return height - pad - max(0.0, min(1.0, v)) * (height - 2 * pad)

    metric = escape(shown[0]["metric"])
    parts = [
        f'<svg class="trend" width="{width}" height="{height}" role="img" '
        f'aria-label="best {metric} per run">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#4a5568"/>',
    ]
    for v in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{pad - 6}" y="{py(v) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{v:.1f}</text>"
            f'<line x1="{pad}" y1="{py(v):.1f}" x2="{width - pad}" y2="{py(v):.1f}" '
            'stroke="#e2e8f0"/>'
        )
    line = " ".join(f"{px(i):.1f},{py(p['score']):.1f}" for i, p in enumerate(shown))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#3182ce" stroke-width="1.5"/>')
    for i, p in enumerate(shown):
        low = p["low"] if present(p["low"]) else p["score"]
        high = p["high"] if present(p["high"]) else p["score"]
        color = "#c53030" if p.get("regressed") else "#1a365d"
        mark = "regressed against the run before" if p.get("regressed") else ""
        parts.append(
            f'<line x1="{px(i):.1f}" y1="{py(low):.1f}" x2="{px(i):.1f}" y2="{py(high):.1f}" '
            f'stroke="{color}" stroke-width="3" opacity="0.45"/>'
            f'<circle class="{"regressed" if p.get("regressed") else "night"}" cx="{px(i):.1f}" '
            f'cy="{py(p["score"]):.1f}" r="{6 if p.get("regressed") else 4}" fill="{color}">'
            f"<title>{escape(p['run_id'])}: {metric} {p['score']:.3f} "
            f"[{low:.3f}, {high:.3f}] {escape(p['label'] or '')} {mark}</title></circle>"
        )
        if p.get("regressed"):
            parts.append(
                f'<text x="{px(i):.1f}" y="{py(p["score"]) - 10:.1f}" font-size="11" '
                f'fill="#c53030" text-anchor="middle">regressed</text>'
            )
    parts.append("</svg>")
    return "".join(parts)
