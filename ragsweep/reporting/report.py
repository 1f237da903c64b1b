"""The run's report: one self-contained HTML file (inline CSS and SVG, no script, no network)
and a short Markdown summary.

The HTML holds the leaderboard with interval bars (and the rerankers' latency when a
configuration has one), quality against cost with the Pareto front, the metrics by topic
and question type, the best configuration's failures with what was asked, expected,
answered and retrieved, the answers that failed and the verdicts that could not be read
(when there are any), and the run's settings.
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ragsweep.core.schemas import METRICS, settings_of
from ragsweep.evaluation import clusters
from ragsweep.evaluation.leaderboard import Board
from ragsweep.evaluation.metrics import metric as metric_of
from ragsweep.reporting.exports import (
    ERRORS_LEGEND,
    JUDGE_LEGEND,
    NOT_MEASURED,
    eliminated_cell,
    errors_cell,
    exact_only,
    has_eliminated,
    has_errors,
    has_judge,
    judge_rate_cell,
    not_measured,
    not_measured_lines,
    number,
    ranking_metric,
    render,
)
from ragsweep.reporting.judge_agreement import AGREEMENT_SLOT

if TYPE_CHECKING:
    from ragsweep.reporting.regression import Comparison

TOP_CONFIGS_BY_TOPIC = 5
# where the compare step (or `ragsweep run --baseline`) puts the comparison with the baseline
COMPARISON_SLOT = "<!-- ragsweep: comparison with the baseline -->"
ERRORS_SHOWN = 100  # rows of the table of failed answers and verdicts

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2433;
background:#f6f7f9}
main{max-width:1320px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:32px 0 8px;border-bottom:2px solid #d9dee7;
padding-bottom:4px}
p.lead{color:#4a5568;margin:0 0 16px}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #d9dee7;border-radius:8px;padding:10px 14px;min-width:150px}
.card b{display:block;font-size:20px}.card span{color:#4a5568;font-size:12px}
table{border-collapse:collapse;background:#fff;border:1px solid #d9dee7;min-width:60%}
th,td{padding:4px 6px;border-bottom:1px solid #e6e9ef;text-align:left;vertical-align:top}
th{background:#eef1f6;font-weight:600;font-size:12px;white-space:nowrap}
th.wrap{white-space:normal;min-width:70px}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.label{white-space:nowrap;font-family:ui-monospace,monospace;font-size:11px}
.scroll{overflow-x:auto}
tr.tied td:first-child{border-left:4px solid #2f855a}
tr.best{background:#f0fff4}
tr.flagged td.errors{color:#c53030;font-weight:700}
tr.eliminated{color:#718096}tr.eliminated td.out{font-style:italic}
.tie{color:#2f855a;font-weight:700}
.muted{color:#718096;font-size:12px}
.chart{background:#fff;border:1px solid #d9dee7;border-radius:8px;padding:8px;margin:8px 0}
td.text{max-width:360px;white-space:pre-wrap;word-break:break-word}
dl{display:grid;grid-template-columns:220px 1fr;background:#fff;border:1px solid #d9dee7;
margin:0;padding:8px 12px}
dt{font-weight:600}dd{margin:0 0 4px;font-family:ui-monospace,monospace;word-break:break-all}
"""


def fmt(value: Any, digits: int = 3) -> str:
    return escape(number(value, digits))


def present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def interval_bar(
    mean: Any, low: Any, high: Any, scale: tuple[float, float] = (0.0, 1.0), width: int = 110
) -> str:
    """A small inline SVG: the ``scale`` axis, the interval as a bar, the mean as a dot."""
    if not all(present(v) for v in (mean, low, high)):
        return ""

    def x(v: float) -> float:
        share = (v - scale[0]) / (scale[1] - scale[0])
        return 4 + max(0.0, min(1.0, share)) * (width - 8)

    return (
        f'<svg class="ci" width="{width}" height="14" role="img" '
        f'aria-label="95% interval {low:.3f} to {high:.3f}">'
        f'<line x1="4" y1="7" x2="{width - 4}" y2="7" stroke="#e2e8f0" stroke-width="2"/>'
        f'<line x1="{x(low):.1f}" y1="7" x2="{x(high):.1f}" y2="7" stroke="#3182ce" '
        f'stroke-width="4" stroke-linecap="round"/>'
        f'<circle cx="{x(mean):.1f}" cy="7" r="4" fill="#1a365d"/></svg>'
    )


def cost_axis(board: pa.Table) -> tuple[str, str]:
    """The cost to plot: the answers' measured latency when there is one, else the vector
    stores' similarity-search latency when stores were swept, else the context size."""
    if board.num_rows and board["latency_p50_s"].null_count < board.num_rows:
        return "latency_p50_s", "median latency per question (s)"
    timed = board.num_rows and board["query_latency_p50_ms"].null_count < board.num_rows
    if timed and not exact_only(board):
        return "query_latency_p50_ms", "median similarity-search latency per question (ms)"
    return "context_chars", "retrieved context per question (characters; what an LLM reads)"


def reranked(board: pa.Table) -> bool:
    """Whether some configuration has a reranker whose latency was measured."""
    return bool(board.num_rows) and board["rerank_latency_p50_ms"].null_count < board.num_rows


def scale_of(board: pa.Table, metric: str) -> tuple[float, float]:
    """The interval bars' axis: the metric's declared range, on a side it leaves unbounded
    the widest interval of the board."""
    declared = metric_of(metric)
    lows = [v for v in board[f"{metric}_low"].to_pylist() if present(v)]
    highs = [v for v in board[f"{metric}_high"].to_pylist() if present(v)]
    low = declared.low if declared.low is not None else min(lows, default=0.0)
    high = declared.high if declared.high is not None else max(highs, default=low + 1.0)
    return low, high if high > low else low + 1.0


def pareto_front(points: list[tuple[float, float, int]]) -> list[int]:
    """Indices of the points no other point beats on both cost (lower) and quality (higher)."""
    front, best = [], -math.inf
    for _, quality, index in sorted(points, key=lambda p: (p[0], -p[1])):
        if quality > best:
            front.append(index)
            best = quality
    return front


def scatter(board: pa.Table, metric: str) -> str:
    """Quality against cost, one dot per configuration, the Pareto front drawn through."""
    cost, axis_label = cost_axis(board)
    rows = [
        (r[cost], r[metric], i, r)
        for i, r in enumerate(board.to_pylist())
        if present(r[cost]) and present(r[metric])
    ]
    if not rows:
        return '<p class="muted">No configuration has both a cost and a score to plot.</p>'
    width, height, pad = 860, 380, 56
    xs, ys = [r[0] for r in rows], [r[1] for r in rows]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(min(ys), 0.0), max(max(ys), 1e-9)
    x1 = x1 if x1 > x0 else x0 + 1

    def px(v: float) -> float:
        return pad + (v - x0) / (x1 - x0) * (width - 2 * pad)

    def py(v: float) -> float:
        return height - pad - (v - y0) / (y1 - y0) * (height - 2 * pad)

    sign = metric_of(metric).sign()  # the front of the metric's better direction
    front = set(pareto_front([(c, sign * q, i) for c, q, i, _ in rows]))
    parts = [
        f'<svg id="pareto" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(metric)} against cost">',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#4a5568"/>',
        f'<line x1="{pad}" y1="{pad / 2}" x2="{pad}" y2="{height - pad}" stroke="#4a5568"/>',
    ]
    for k in range(5):
        yv = y0 + (y1 - y0) * k / 4
        xv = x0 + (x1 - x0) * k / 4
        parts.append(
            f'<text x="{pad - 6}" y="{py(yv) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{yv:.2f}</text>"
            f'<text x="{px(xv):.1f}" y="{height - pad + 16}" font-size="11" '
            f'text-anchor="middle">{xv:.3g}</text>'
        )
    parts.append(
        f'<text x="{width / 2}" y="{height - 12}" font-size="12" text-anchor="middle">'
        f"{escape(axis_label)}</text>"
        f'<text x="14" y="{height / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {height / 2})">{escape(metric)}</text>'
    )
    line = sorted((r for r in rows if r[2] in front), key=lambda r: r[0])
    if len(line) > 1:
        path = " ".join(f"{px(c):.1f},{py(q):.1f}" for c, q, _, _ in line)
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="#dd6b20" stroke-width="2" '
            'stroke-dasharray="5 3"/>'
        )
    for c, q, i, r in sorted(rows, key=lambda r: r[2] in front):
        on_front = i in front
        parts.append(
            f'<circle class="{"front" if on_front else "point"}" cx="{px(c):.1f}" '
            f'cy="{py(q):.1f}" r="{6 if on_front else 4}" '
            f'fill="{"#dd6b20" if on_front else "#90cdf4"}" stroke="#1a365d" stroke-width="0.6">'
            f"<title>#{r['rank']} {escape(r['label'])}: {metric} {q:.3f}, "
            f"{escape(cost)} {c:.4g}</title></circle>"
        )
    for c, q, _, r in line:
        parts.append(
            f'<text x="{px(c) + 8:.1f}" y="{py(q) - 8:.1f}" font-size="11" fill="#7b341e">'
            f"#{r['rank']}</text>"
        )
    parts.append("</svg>")
    legend = (
        '<p class="muted">Orange: the Pareto front, configurations that no other beats on '
        "both score and cost (labels are ranks). Hover a dot for its configuration.</p>"
    )
    return "".join(parts) + legend


def leaderboard_table(board: pa.Table, metric: str) -> str:
    hidden = {"recall_vs_exact"} if exact_only(board) else set()
    others = [m for m in METRICS if m != metric and m not in hidden]
    cost, _ = cost_axis(board)
    short_cost = {
        "latency_p50_s": "latency s (p50 / p95)",
        "query_latency_p50_ms": "search ms (p50 / p95)",
        "context_chars": "context chars",
    }
    with_errors = has_errors(board)
    with_rerank = reranked(board)
    scale = scale_of(board, metric)
    better = "" if metric_of(metric).higher_is_better else ", lower is better"
    with_eliminated = has_eliminated(board)
    head = (
        "<tr><th>rank</th><th>tied</th><th>configuration</th>"
        f"<th>{escape(metric)}{better}</th><th>95% CI</th>"
        f"<th>interval ({scale[0]:.3g} to {scale[1]:.3g})</th>"
        + judged_head(board, metric, None)
        + "".join(
            f'<th class="wrap">{escape(m.replace("_", " "))}</th>' + judged_head(board, metric, m)
            for m in others
        )
        + "<th>questions</th>"
        + ("<th>eliminated</th>" if with_eliminated else "")
        + ("<th>errors</th>" if with_errors else "")
        + f"<th>p vs best</th><th>{escape(short_cost[cost])}</th>"
        + ("<th>rerank ms (p50 / p95)</th>" if with_rerank else "")
        + "</tr>"
    )
    lines = []
    for r in board.to_pylist():
        classes = ["config-row"] + (["tied"] if r["tied_with_best"] else [])
        classes += ["best"] if r["rank"] == 1 else []
        classes += ["flagged"] if r["errors_flagged"] else []
        classes += ["eliminated"] if r.get("eliminated") else []
        errors = f'<td class="num errors">{escape(errors_cell(r))}</td>' if with_errors else ""
        out = f'<td class="out">{eliminated_cell(r)}</td>' if with_eliminated else ""
        cost_cell = fmt(r[cost], 0 if cost == "context_chars" else 3)
        if cost != "context_chars":
            p95 = cost.replace("p50", "p95")
            cost_cell += f" / {fmt(r[p95], 3)} p95"
        rerank_cell = ""
        if with_rerank:  # a configuration without a reranker shows "-"
            p50 = r["rerank_latency_p50_ms"]
            shown = f"{fmt(p50)} / {fmt(r['rerank_latency_p95_ms'])} p95" if present(p50) else "-"
            rerank_cell = f'<td class="num rerank">{shown}</td>'
        lines.append(
            f'<tr class="{" ".join(classes)}" data-config-id="{escape(r["config_id"])}">'
            f'<td class="num">{r["rank"]}</td>'
            f'<td class="tie">{"=" if r["tied_with_best"] else ""}</td>'
            f'<td class="label">{escape(r["label"])}</td>'
            f'<td class="num"><b>{fmt(r[metric])}</b></td>'
            f'<td class="num">{fmt(r[metric + "_low"])} – {fmt(r[metric + "_high"])}</td>'
            f"<td>{interval_bar(r[metric], r[metric + '_low'], r[metric + '_high'], scale)}</td>"
            + judged_cell(board, metric, None, r)
            + "".join(metric_cell(board, m, r) + judged_cell(board, metric, m, r) for m in others)
            + f'<td class="num">{r["questions"]}</td>{out}{errors}'
            f'<td class="num">{fmt(r["p_value"], 4)}</td><td class="num">{cost_cell}</td>'
            f"{rerank_cell}</tr>"
        )
    legend = f'<p class="muted">{escape(ERRORS_LEGEND)}.</p>' if with_errors else ""
    legend += "".join(f'<p class="muted">{escape(line)}.</p>' for line in judged_legend(board))
    table = f'<table id="leaderboard">{head}{"".join(lines)}</table>'
    return f'<div class="scroll">{table}</div>{legend}'


def _judged_column(board: pa.Table, metric: str) -> str | None:
    """The metric the judge-error column follows: the ranking metric when the judge gives it,
    else correctness; None when the run had no judge."""
    if not has_judge(board):
        return None
    return metric if metric_of(metric).judged else "correctness"


def judged_head(board: pa.Table, metric: str, after: str | None) -> str:
    """The judge-error column's header where it follows ``after`` (None: the ranking
    metric's interval bar; a metric: that metric's column)."""
    return "<th>judge errors</th>" if _judged_column(board, metric) == (after or metric) else ""


def judged_cell(board: pa.Table, metric: str, after: str | None, row: dict) -> str:
    if _judged_column(board, metric) != (after or metric):
        return ""
    return f'<td class="num judge-errors">{escape(judge_rate_cell(row))}</td>'


def metric_cell(board: pa.Table, m: str, row: dict) -> str:
    """A metric's mean, or ``n/a`` where the run could not measure it."""
    shown = NOT_MEASURED if m in not_measured(board) else fmt(row[m])
    return f'<td class="num">{shown}</td>'


def judged_legend(board: pa.Table) -> list[str]:
    """The footnotes of the judge-error column and of the metrics not measured."""
    return ([JUDGE_LEGEND] if has_judge(board) else []) + not_measured_lines(board)


def breakdown_tables(breakdown: pa.Table, board: pa.Table, metric: str) -> str:
    """Per topic (and question type): the top configurations' means, shaded, with counts."""
    top = board["config_id"].to_pylist()[:TOP_CONFIGS_BY_TOPIC]
    labels = dict(zip(board["config_id"].to_pylist(), board["label"].to_pylist(), strict=True))
    cells: dict[tuple[str, str, str], dict] = {
        (r["dimension"], r["value"], r["config_id"]): r for r in breakdown.to_pylist()
    }
    out = []
    for dimension in ("topic", "question_type"):
        values = sorted({v for d, v, _ in cells if d == dimension})
        if not values:
            continue
        head = f"<tr><th>{escape(dimension.replace('_', ' '))}</th><th>questions</th>" + "".join(
            f'<th class="wrap">#{i + 1} <span class="muted">{escape(labels[c])}</span></th>'
            for i, c in enumerate(top)
        )
        rows = []
        for value in values:
            count = cells[(dimension, value, top[0])]["questions"]
            tds = []
            for c in top:
                r = cells[(dimension, value, c)]
                shade = r[metric] if present(r[metric]) else 0.0
                tds.append(
                    f'<td class="num" style="background:rgba(49,130,206,{0.08 + 0.5 * shade:.2f})">'
                    f"{fmt(r[metric])} <span class=muted>[{fmt(r[metric + '_low'], 2)}, "
                    f"{fmt(r[metric + '_high'], 2)}]</span></td>"
                )
            rows.append(
                f'<tr class="{dimension}-row"><td>{escape(value)}</td>'
                f'<td class="num">{count}</td>{"".join(tds)}</tr>'
            )
        out.append(
            f'<div class="scroll"><table id="by-{dimension}">{head}</tr>{"".join(rows)}'
            "</table></div><br>"
        )
    return "".join(out)


def failures_table(failures: pa.Table) -> str:
    if not failures.num_rows:
        return '<p class="muted">The best configuration failed no question.</p>'
    head = (
        "<tr><th>question</th><th>reference answer</th><th>answer</th><th>reason</th>"
        "<th>retrieved documents</th><th>reference documents</th></tr>"
    )
    rows = []
    for r in failures.to_pylist():
        retrieved = ", ".join(dict.fromkeys(r["retrieved_doc_ids"] or []))
        rows.append(
            '<tr class="failure-row">'
            f'<td class="text"><b>{escape(r["question_id"])}</b> {escape(r["question"])}'
            f"{'<br><span class=muted>' + escape(r['topic']) + '</span>' if r['topic'] else ''}"
            f'</td><td class="text">{escape(r["reference_answer"] or "")}</td>'
            f'<td class="text">{escape(r["answer"] or "")}</td>'
            f'<td class="text">{escape(r["reason"] or "")}</td>'
            f'<td class="text">{escape(retrieved)}</td>'
            f'<td class="text">{escape(", ".join(r["reference_doc_ids"] or []))}</td></tr>'
        )
    return f'<table id="failures">{head}{"".join(rows)}</table>'


def errors_table(board: Board) -> str:
    """Every answer that failed and every verdict that could not be read, by configuration."""
    lb = board.leaderboard
    labels = dict(zip(lb["config_id"].to_pylist(), lb["label"].to_pylist(), strict=True))
    rows = []
    for r in board.results.to_pylist():
        if r["answer_error"] is not None:
            what, error = "answer", r["answer_error"]
        elif r["judge_error"] is not None:
            what, error = "verdict", r["judge_error"]
        else:
            continue
        rows.append(
            '<tr class="error-row">'
            f'<td class="label">{escape(labels.get(r["config_id"], r["config_id"]))}</td>'
            f"<td>{escape(r['question_id'])}</td><td>{what}</td>"
            f'<td class="text">{escape(error)}</td></tr>'
        )
    more = len(rows) - ERRORS_SHOWN
    head = "<tr><th>configuration</th><th>question</th><th>failed</th><th>error</th></tr>"
    tail = f'<p class="muted">… and {more} more (the results table lists them all).</p>'
    return f'<table id="errors">{head}{"".join(rows[:ERRORS_SHOWN])}</table>' + (
        tail if more > 0 else ""
    )


def evaluation_summary(settings: dict) -> str | None:
    """How the configurations were evaluated, when it is more than the free full grid."""
    record = settings.get("evaluation") or {}
    calls = f"{record.get('llm_calls', 0)} LLM calls made"
    if record.get("strategy") == "model-based search":
        return model_summary(record, calls)
    if record.get("strategy") != "successive halving":
        return f"Full grid: {calls}." if record.get("llm_calls") else None
    rounds = " → ".join(f"{r['configs']} × {r['questions']}" for r in record["rounds"])
    return (
        f"Successive halving under max_llm_calls={record['max_llm_calls']}: {rounds} "
        f"(configurations × questions), promoted by {record['promoted_by']}; {calls}. "
        "Configurations dropped in an earlier round rank below those of later rounds and "
        "are scored on fewer questions; their retrieval metrics cover every question."
    )


def model_summary(record: dict, calls: str) -> str:
    """Which configurations the model-based search answered, in order, and why."""
    trials = record.get("trials") or []
    tried = "; ".join(
        f"{n}. {t['label']}: {t['reason']}, scored "
        + ("none" if t.get("score") is None else f"{t['score']:.3f}")
        for n, t in enumerate(trials, 1)
    )
    return (
        f"Model-based search (at most {record.get('max_configs') or 'every'} configurations "
        f"answered, by {record['promoted_by']}): {len(trials)} answered every question, "
        f"chosen one at a time by a LinearGAM of the retrieval metrics every configuration "
        f"has for free; {calls}. The others rank by their retrieval metrics only."
        f"{warm_summary(record.get('warm_start') or {})} Tried: {tried}."
    )


def warm_summary(warm: dict) -> str:
    """What the model-based search started from: earlier runs' scores, or why none; which of
    them were answered again, and which could win but were not (``unchecked_warm``)."""
    if not warm.get("configurations"):
        return f" {warm['note'][0].upper()}{warm['note'][1:]}." if warm.get("note") else ""
    again = warm.get("answered_again") or []
    text = (
        f" Warm start: {warm['configurations']} configurations scored by earlier runs of "
        f"the sweep ({', '.join(warm['runs'])})"
    )
    if again:
        text += (
            f"; {len(again)} of them, scored by an earlier run at least as high as this run's "
            "best, answered again in this run, the others not answered again."
        )
    else:
        text += ", not answered again."
    unchecked = unchecked_warm(warm)
    return text + (f" {unchecked}" if unchecked else "")


def unchecked_warm(warm: dict) -> str | None:
    """A line when configurations an earlier run scored at least as high as this run's best
    were not answered again (more than ``steps.RECHECKED`` of them): this run's best may not
    be the sweep's."""
    left = warm.get("not_answered_again") or []
    if not left:
        return None
    shown = ", ".join(f"{w['label'] or w['config_id']} ({w['score']:.3f})" for w in left)
    return (
        f"Not answered again, though an earlier run of the sweep ({', '.join(warm['runs'])}) "
        f"scored them at least as high as this run's best: {shown}; the sweep's best may be "
        "among them, and this run's rank 1, patterns and best are this run's only."
    )


JUDGE_UNREADABLE_SHARE = 0.05  # above this share of answers, the run says the judge failed


def statistics_lines(board: pa.Table, judge: bool = True) -> list[str]:
    """What the intervals and tests rest on (the cluster unit and count), and what they
    cannot show: a small test set, configurations with no verdict, eliminated ones, and
    (``judge``) a judge that often could not be read."""
    settings = settings_of(board)
    record = settings.get("clusters")
    out = []
    if record:
        out.append(clusters.statement_of(record))
        out += clusters.cautions_of(record)
    spans = gold_span_line(settings.get("gold_spans"))
    if spans:
        out.append(spans)
    rows = board.to_pylist()
    verdictless = [r for r in rows if r["rank"] > 1 and r["p_value"] is None and r["questions"]]
    if verdictless:
        out.append(
            f"{len(verdictless)} configuration{'s share' if len(verdictless) > 1 else ' shares'}"
            " too few clusters with the best for the test to reach 5%: no verdict (p: -)."
        )
    out_early = [r for r in rows if r.get("eliminated")]
    if out_early:
        out.append(
            f"{len(out_early)} configuration{'s were' if len(out_early) > 1 else ' was'} "
            "eliminated by successive halving ('out after round N'); each is compared with the "
            "best on the questions both answered."
        )
    unreadable = judge_warning(settings) if judge else None
    return out + ([unreadable] if unreadable else [])


def gold_span_line(record: dict | None) -> str | None:
    """How many questions the span metrics rest on, and how many of their gold spans were
    located approximately; None when every question has a span found verbatim."""
    if not record or (record["located"] == record["questions"] and not record["approximate"]):
        return None
    if not record["located"]:
        return (
            f"Span recall and span precision: none of the {record['questions']} questions has a "
            "gold span (its answer or reference context located in its documents)."
        )
    approximate = record["approximate"]
    how = (
        f"; {approximate} of them located approximately (the answer is said in other words: "
        "the passage that best matches it, not a verbatim quote)"
        if approximate
        else ", found verbatim"
    )
    return (
        f"Span recall and span precision rest on the {record['located']} of "
        f"{record['questions']} questions with a gold span{how}."
    )


def judge_warning(settings: dict) -> str | None:
    """A line when the judge gave no readable verdict on more than 5% of the answers."""
    record = settings.get("judge_unreadable") or {}
    answers, unread = record.get("answers", 0), record.get("unreadable", 0)
    if not answers or unread <= JUDGE_UNREADABLE_SHARE * answers:
        return None
    return (
        f"warning: the judge's verdict could not be read on {unread / answers:.1%} of the "
        f"answers ({unread} of {answers}): those questions are left out of the comparisons of "
        "each configuration lacking a verdict (judge_errors); check the judge model and prompt"
    )


def settings_list(settings: dict) -> str:
    items = []
    for key, value in settings.items():
        shown = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        if key == "document_hashes":  # one per document: the count says enough here
            shown = f"{len(value)} documents, each one's content hash"
        items.append(f"<dt>{escape(key)}</dt><dd>{escape(shown)}</dd>")
    return f'<dl id="settings">{"".join(items)}</dl>'


def errors_section(board: Board) -> str:
    if not has_errors(board.leaderboard):
        return ""
    return (
        "<h2>Failed answers and verdicts</h2>\n"
        '<p class="muted">An answer whose request still failed after its retries counts as a '
        "wrong answer of its configuration: 0 on the answer metrics (and on correctness under "
        "a judge). A verdict the judge could not give is the judge's failure: that question "
        "has no correctness for the configuration and is left out of its comparisons. "
        "Retrieval metrics stand as measured.</p>\n" + errors_table(board)
    )


def render_html(board: Board) -> str:
    """The whole report as one HTML document."""
    lb = board.leaderboard
    settings = settings_of(lb)
    metric = ranking_metric(lb)
    best = lb.slice(0, 1).to_pylist()[0] if lb.num_rows else None
    tied = sum(lb["tied_with_best"].to_pylist())
    cards = [
        (str(lb.num_rows), "configurations"),
        (str(best["questions"]) if best else "0", "questions"),
        (str(tied), "tied with the best"),
        (str(board.failures.num_rows), "failures of the best"),
    ]
    if best:
        cards.insert(
            0,
            (
                f"{fmt(best[metric])} [{fmt(best[metric + '_low'], 2)}, "
                f"{fmt(best[metric + '_high'], 2)}]",
                f"best {escape(metric)}, 95% CI",
            ),
        )
    if has_errors(lb):
        failed = sum(e or 0 for e in lb["errors"].to_pylist())
        cards.append((str(failed), "answers or verdicts failed"))
    card_html = "".join(f'<div class="card"><b>{v}</b><span>{k}</span></div>' for v, k in cards)
    title = f"ragsweep report: {escape(best['label']) if best else 'no configuration'}"
    evaluated = evaluation_summary(settings)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{CSS}</style></head>
<body><main>
<h1>ragsweep report</h1>
<p class="lead">Best configuration by <b>{escape(metric)}</b>:
<b>{escape(best["label"]) if best else "none"}</b>. Intervals are 95% cluster-bootstrap
intervals, never narrower than the exact binomial interval; "=" marks the configurations not
shown worse than the best (a max-statistic test aware that the best was selected, on the
questions both answered, 5%).</p>
{f'<p class="lead" id="evaluation">{escape(evaluated)}</p>' if evaluated else ""}
{"".join(f'<p class="lead statistics">{escape(line)}</p>' for line in statistics_lines(lb))}
<div class="cards">{card_html}</div>
{COMPARISON_SLOT}
{AGREEMENT_SLOT}
<h2>Leaderboard</h2>
{leaderboard_table(lb, metric)}
<h2>Score against cost</h2>
<div class="chart">{scatter(lb, metric)}</div>
<h2>By topic and question type</h2>
<p class="muted">{escape(metric)} of the top {TOP_CONFIGS_BY_TOPIC} configurations, with
95% intervals and the number of questions in each group.</p>
{breakdown_tables(board.breakdown, lb, metric)}
<h2>Failures of the best configuration</h2>
{failures_table(board.failures)}
{errors_section(board)}
<h2>Run settings</h2>
{settings_list(settings)}
</main></body></html>
"""


def render_markdown(board: Board, top: int = 5) -> str:
    """A short summary: the best configuration with its interval and the top rows."""
    lb = board.leaderboard
    metric = ranking_metric(lb)
    if not lb.num_rows:
        return "# ragsweep\n\nNo configuration was evaluated.\n"
    best = lb.slice(0, 1).to_pylist()[0]
    tied = sum(lb["tied_with_best"].to_pylist())
    evaluated = evaluation_summary(settings_of(lb))
    return (
        f"# ragsweep: best configuration\n\n**{best['label']}** (`{best['config_id']}`): "
        f"{metric} {number(best[metric])} (95% CI {number(best[metric + '_low'])}"
        f"–{number(best[metric + '_high'])}) over {best['questions']} questions; "
        f"{tied} of {lb.num_rows} configurations are statistically tied with it; "
        f"{board.failures.num_rows} failed questions.\n\n"
        + (f"{errors_note(lb)}\n\n" if has_errors(lb) else "")
        + (f"{evaluated}\n\n" if evaluated else "")
        + "".join(f"{line}\n\n" for line in statistics_lines(lb))
        + render(lb, "markdown", top=top)
        + "\n"
    )


def errors_note(lb: pa.Table) -> str:
    """How many answers and verdicts failed, and which configurations are flagged."""
    flagged = [r["label"] for r in lb.to_pylist() if r["errors_flagged"]]
    note = f"{sum(e or 0 for e in lb['errors'].to_pylist())} answers or verdicts failed"
    if flagged:
        note += f"; flagged, failing on more than 10% of their questions: {', '.join(flagged)}"
    return note + "."


def best_metrics(board: Board) -> dict[str, float]:
    """The figures of the best configuration logged as KFP metrics."""
    lb = board.leaderboard
    if not lb.num_rows:
        return {}
    best = lb.slice(0, 1).to_pylist()[0]
    metric = ranking_metric(lb)
    out = {m: best[m] for m in METRICS if present(best[m])}
    out[f"{metric}_low"] = best[metric + "_low"]
    out[f"{metric}_high"] = best[metric + "_high"]
    out["configurations_tied_with_best"] = float(sum(lb["tied_with_best"].to_pylist()))
    out["questions"] = float(best["questions"])
    settings = settings_of(lb)
    out["clusters"] = (settings.get("clusters") or {}).get("count")
    unread = settings.get("judge_unreadable") or {}
    if unread.get("answers"):  # the share of answers the judge gave no readable verdict on
        out["judge_unreadable_share"] = unread["unreadable"] / unread["answers"]
    return {k: float(v) for k, v in out.items() if present(v)}


def comparison_section(comparison: Comparison | None, none_found: str = "") -> str:
    """The comparison with the baseline as a report section: the alarm's verdict, what
    changed since the baseline, what only one run holds, and each shared configuration's
    verdict; or, without a comparison, ``none_found`` (why there is none)."""
    from ragsweep.reporting.changes import lines as change_lines
    from ragsweep.reporting.regression import alarm_line, overlap_lines, verdict_rows

    if comparison is None:
        return (
            f'<h2>Since the baseline</h2>\n<p class="lead" id="comparison">{escape(none_found)}</p>'
        )
    header, rows = verdict_rows(comparison)
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)

    def items(lines: list[str]) -> str:
        return "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ul>"

    return (
        f'<h2>Since the baseline</h2>\n<div id="comparison">'
        f'<p class="lead"><b>{escape(alarm_line(comparison))}</b></p>\n'
        f"<p>What changed:</p>{items(change_lines(comparison.changes))}\n"
        f"{items(overlap_lines(comparison))}\n"
        f'<div class="scroll"><table><tr>{head}</tr>{body}</table></div></div>'
    )


def with_comparison(report: str, section: str) -> str:
    """The report with ``section`` (``comparison_section``) in its place, after the cards."""
    return report.replace(COMPARISON_SLOT, section, 1)


def insert_comparison(path: Path, comparison: Comparison | None, none_found: str = "") -> None:
    """Put the comparison with the baseline (or ``none_found``, why there is none) into the
    report file at ``path``."""
    section = comparison_section(comparison, none_found)
    path.write_text(with_comparison(path.read_text(encoding="utf-8"), section), "utf-8")
