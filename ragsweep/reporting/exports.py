"""Leaderboards and result tables as files (Arrow, Parquet, CSV, JSON) and as text."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv
import pyarrow.parquet as pq
import yaml

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import CONFIG_DEFAULTS, METRICS, read_table, settings_of
from ragsweep.evaluation.leaderboard import DEFAULT_METRIC
from ragsweep.evaluation.metrics import metric as metric_of
from ragsweep.sweep.space import SearchSpace

FORMATS = ("table", "csv", "json", "markdown")
# sortable columns: metrics best-high, costs best-low
COST_COLUMNS = ("latency_p50_s", "latency_p95_s", "prompt_tokens", "completion_tokens")
COST_COLUMNS += ("llm_calls", "context_chars")
COST_COLUMNS += ("query_latency_p50_ms", "query_latency_p95_ms", "index_build_s")
COST_COLUMNS += ("rerank_latency_p50_ms", "rerank_latency_p95_ms")


def flat(table: pa.Table) -> pa.Table:
    """Lists joined with '; ' so that the table fits CSV; a span as ``doc_id:start-end``."""
    for i, field in enumerate(table.schema):
        if not pa.types.is_list(field.type):
            continue
        if pa.types.is_string(field.type.value_type):
            joined = pc.binary_join(table.column(i), "; ")
        else:
            joined = pa.array(
                [
                    None if row is None else "; ".join(_cell(v) for v in row)
                    for row in table.column(i).to_pylist()
                ],
                pa.string(),
            )
        table = table.set_column(i, field.name, joined)
    return table


def _cell(value: Any) -> str:
    if isinstance(value, dict) and {"doc_id", "start", "end"} <= value.keys():
        return f"{value['doc_id']}:{value['start']}-{value['end']}"
    return json.dumps(value, default=str)


def csv_text(table: pa.Table) -> str:
    out = io.BytesIO()
    csv.write_csv(flat(table), out)
    return out.getvalue().decode()


def plain(value: Any) -> Any:
    """A JSON-safe value: NaN becomes null."""
    return None if isinstance(value, float) and math.isnan(value) else value


def json_text(table: pa.Table) -> str:
    rows = [{k: plain(v) for k, v in row.items()} for row in table.to_pylist()]
    return json.dumps(rows, indent=1, ensure_ascii=False, default=str) + "\n"


def export(artifact: Path, stem: Path, kind: str) -> pa.Table:
    """Copy an Arrow artifact to ``stem.arrow`` and write ``.parquet``, ``.csv``, ``.json``."""
    table = read_table(artifact, kind)
    shutil.copyfile(artifact, stem.with_suffix(".arrow"))
    pq.write_table(table, stem.with_suffix(".parquet"))
    stem.with_suffix(".csv").write_text(csv_text(table), encoding="utf-8")
    stem.with_suffix(".json").write_text(json_text(table), encoding="utf-8")
    return table


def sorted_board(leaderboard: pa.Table, sort: str | None = None) -> pa.Table:
    """The leaderboard sorted by a metric (best first, as its direction says) or a cost
    (lowest first)."""
    if not sort or sort == "rank":
        return leaderboard
    if sort in METRICS:
        order = "descending" if metric_of(sort).higher_is_better else "ascending"
        return leaderboard.sort_by([(sort, order), ("rank", "ascending")])
    if sort in COST_COLUMNS:
        return leaderboard.sort_by([(sort, "ascending"), ("rank", "ascending")])
    raise RagsweepError(
        f"--sort: unknown column {sort!r}; choose from rank, {', '.join([*METRICS, *COST_COLUMNS])}"
    )


def ranking_metric(leaderboard: pa.Table) -> str:
    return settings_of(leaderboard).get("optimization_metric", DEFAULT_METRIC)


def render(
    leaderboard: pa.Table, fmt: str = "table", top: int | None = None, sort: str | None = None
) -> str:
    """The leaderboard as a terminal table, CSV, JSON or a Markdown table."""
    if fmt not in FORMATS:
        raise RagsweepError(f"--format: unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    table = sorted_board(leaderboard, sort)
    shown = table.slice(0, top) if top else table
    if fmt == "csv":
        return csv_text(shown)
    if fmt == "json":
        return json_text(shown)
    header, rows = cells(shown, ranking_metric(leaderboard))
    if fmt == "markdown":
        lines = [header, ["---"] * len(header), *rows]
        return "\n".join("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in lines)
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)
    ]
    text_columns = {1, 2}

    def fmt_line(row: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in text_columns else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()

    out = [fmt_line(header), "  ".join("-" * w for w in widths), *(fmt_line(r) for r in rows)]
    if top and table.num_rows > top:
        out.append(f"... {table.num_rows - top} more")
    out.append("= : statistically tied with the best (selection-aware max-statistic test, 5%)")
    if has_errors(shown):
        out.append(ERRORS_LEGEND)
    if has_judge(shown):
        out.append(JUDGE_LEGEND)
    out += not_measured_lines(shown)
    return "\n".join(out)


ERRORS_LEGEND = (
    "errors: answers that failed (scored as wrong) or verdicts that could not be read (left "
    "out of the comparisons); "
    "! : errors on more than 10% of the configuration's answered questions"
)


def has_errors(table: pa.Table) -> bool:
    """Whether any configuration of the leaderboard had a failed answer or verdict."""
    return bool(table.num_rows and (pc.max(table["errors"]).as_py() or 0) > 0)


def errors_cell(row: dict[str, Any]) -> str:
    """``3`` or ``5 !`` (flagged: errors on more than 10% of its answered questions)."""
    return f"{row['errors'] or 0}{' !' if row['errors_flagged'] else ''}"


def eliminated_cell(row: dict[str, Any]) -> str:
    """``out after round 2`` for a configuration successive halving dropped, else ''."""
    return f"out after round {row['round'] + 1}" if row.get("eliminated") else ""


def has_eliminated(table: pa.Table) -> bool:
    """Whether successive halving dropped any configuration of the leaderboard."""
    return "eliminated" in table.column_names and any(table["eliminated"].to_pylist())


def number(value: float | None, digits: int = 3) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else (f"{value:.{digits}f}")
    )


def exact_only(table: pa.Table) -> bool:
    """Whether every configuration searched exactly in memory (or was stored before vector
    stores were swept): its recall against exact search is 1 by construction and its
    search latency no figure to choose by."""
    return set(table["vector_store"].to_pylist()) <= {None, CONFIG_DEFAULTS["vector_store"]}


def shown_metrics(table: pa.Table, metric: str) -> list[str]:
    """The metrics to show beside ``metric``: those measured, but recall against exact
    search only when a vector store other than memory was swept."""
    hidden = {"recall_vs_exact"} if exact_only(table) else set()
    missing = not_measured(table)
    return [
        m
        for m in METRICS
        if m != metric
        and m not in hidden
        and (table[m].null_count < table.num_rows or m in missing)
    ]


NOT_MEASURED = "n/a"


def not_measured(table: pa.Table) -> dict[str, str]:
    """The metrics the run could not measure (``leaderboard.unmeasured``), each with why:
    shown as ``n/a`` with a footnote, never as a figure to rank by."""
    return settings_of(table).get("not_measured") or {}


def not_measured_lines(table: pa.Table) -> list[str]:
    return [f"{NOT_MEASURED} : {m} not measured: {why}" for m, why in not_measured(table).items()]


def judge_rate_cell(row: dict[str, Any]) -> str:
    """The share of a configuration's answers the judge gave no readable verdict on."""
    rate = row.get("judge_error_rate")
    return "-" if rate is None or math.isnan(rate) else f"{rate:.1%}"


def has_judge(table: pa.Table) -> bool:
    """Whether the leaderboard's run had a judge (a judge-error rate to show)."""
    return (
        "judge_error_rate" in table.column_names
        and table["judge_error_rate"].null_count < table.num_rows
    )


JUDGE_LEGEND = (
    "judge errors: the share of the configuration's answers the judge gave no readable "
    "verdict on; a judged score ranks every configuration on the questions all of them have a "
    "verdict for"
)


def cells(table: pa.Table, metric: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the text and Markdown tables: the ranking metric with its 95%
    interval, the other metrics' means (``shown_metrics``), questions, failed answers and
    verdicts when there are any, latency when it was measured, and the similarity-search
    latency when vector stores were swept, the reranking latency when a reranker was."""
    others = shown_metrics(table, metric)
    with_latency = table.num_rows and table["latency_p50_s"].null_count < table.num_rows
    with_search = table.num_rows and not exact_only(table)
    with_rerank = table.num_rows and table["rerank_latency_p50_ms"].null_count < table.num_rows
    missing = not_measured(table)
    header = ["rank", "=", "configuration", f"{metric.replace('_', ' ')} [95% CI]"]
    header += [m.replace("_", " ") for m in others] + ["questions"]
    with_errors = has_errors(table)
    header += ["errors"] if with_errors else []
    with_eliminated = has_eliminated(table)
    header += ["eliminated"] if with_eliminated else []
    header += ["latency p50/p95 s"] if with_latency else []
    header += ["search ms p50/p95"] if with_search else []
    header += ["rerank ms p50/p95"] if with_rerank else []
    rows = []
    for r in table.to_pylist():
        row = [str(r["rank"]), "=" if r["tied_with_best"] else "", r["label"]]
        row.append(
            f"{number(r[metric])} [{number(r[f'{metric}_low'])}, {number(r[f'{metric}_high'])}]"
        )
        row += [NOT_MEASURED if m in missing else number(r[m]) for m in others]
        row.append(str(r["questions"]))
        row += [errors_cell(r)] if with_errors else []
        row += [eliminated_cell(r)] if with_eliminated else []
        if with_latency:
            row.append(f"{number(r['latency_p50_s'], 2)}/{number(r['latency_p95_s'], 2)}")
        if with_search:
            p50, p95 = r["query_latency_p50_ms"], r["query_latency_p95_ms"]
            row.append(f"{number(p50, 2)}/{number(p95, 2)}")
        if with_rerank:
            p50, p95 = r["rerank_latency_p50_ms"], r["rerank_latency_p95_ms"]
            row.append(f"{number(p50, 2)}/{number(p95, 2)}")
        rows.append(row)
    return _with_judge_errors(table, metric, others, header, rows)


def _with_judge_errors(
    table: pa.Table, metric: str, others: list[str], header: list[str], rows: list[list[str]]
) -> tuple[list[str], list[list[str]]]:
    """The header and rows with a ``judge errors`` column right after the judged score (the
    ranking metric, else correctness), when the run had a judge."""
    if not has_judge(table):
        return header, rows
    judged = metric if metric_of(metric).judged else "correctness"
    at = 4 if judged == metric else (5 + others.index(judged) if judged in others else None)
    if at is None:
        return header, rows
    header = header[:at] + ["judge errors"] + header[at:]
    shown = [judge_rate_cell(r) for r in table.to_pylist()]
    return header, [row[:at] + [cell] + row[at:] for row, cell in zip(rows, shown, strict=True)]


def best_spec(leaderboard: pa.Table) -> str:
    """The winning configuration as a search-space YAML that reproduces exactly it (of the
    sweep's: a deployed assistant's row, ``--agent``, is passed over)."""
    from ragsweep.answering.agents import is_agent

    swept = [row for row in sorted_board(leaderboard).to_pylist() if not is_agent(row)]
    if not swept:
        raise RagsweepError("the leaderboard is empty: no configuration to recommend")
    best = swept[0]
    metric = ranking_metric(leaderboard)
    spec = SearchSpace.spec_of(best)
    settings = settings_of(leaderboard)
    head = [
        f"# best configuration: {best['label']} (config id {best['config_id']})",
        f"# {metric}: {number(best[metric])} "
        f"[95% CI {number(best[f'{metric}_low'])}, {number(best[f'{metric}_high'])}] "
        f"over {best['questions']} questions",
    ]
    if settings.get("docs"):
        docs = ", ".join([settings["docs"], *settings.get("more_docs", [])])
        head.append(f"# documents: {docs}; test set: {settings.get('testset')}")
    left = ((settings.get("evaluation") or {}).get("warm_start") or {}).get("not_answered_again")
    if left:  # the sweep's best may be a configuration this run did not answer
        ids = ", ".join(w["config_id"] for w in left)
        head.append(
            f"# note: {len(left)} configurations an earlier run of the sweep scored at least "
            f"as high were not answered again in this run: {ids}"
        )
    return "\n".join(head) + "\n" + yaml.safe_dump(spec, sort_keys=False)
