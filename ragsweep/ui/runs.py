"""The run pages: a run, a configuration, a configuration x question drill-down, and the
comparison of two runs (the runs list: ``ragsweep.ui.runlist``)."""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import urlencode

import pyarrow.compute as pc
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import METRICS, settings_of
from ragsweep.evaluation.leaderboard import Board, failure_reason
from ragsweep.reporting import report
from ragsweep.reporting.changes import lines as change_lines
from ragsweep.reporting.exports import (
    COST_COLUMNS,
    eliminated_cell,
    has_eliminated,
    has_errors,
    number,
    ranking_metric,
    sorted_board,
)
from ragsweep.reporting.regression import cannot_fire
from ragsweep.reporting.tracking import run_link
from ragsweep.store.database import find_runs, run_info, sweep_names
from ragsweep.ui import labelling
from ragsweep.ui.charts import forest, parameter_panels, pareto_panels
from ragsweep.ui.documents import retrieved_chunks, score_name

FILTERS = ("vector_store", "chunker", "search_type")  # the leaderboard's filters
COSTS_SHOWN = ("context_chars", "latency_p50_s", "query_latency_p50_ms", "llm_calls")
COSTS_SHOWN += ("rerank_latency_p50_ms", "rerank_latency_p95_ms")  # when a reranker ran


def fmt(value: Any, digits: int = 3) -> str:
    """A figure for a cell: integers as they are, floats to ``digits``, '-' when missing."""
    return (
        str(value)
        if isinstance(value, int) and not isinstance(value, bool)
        else number(value, digits)
    )


def run_of(request: Request):
    try:
        return request.app.state.data.run(request.path_params["run_id"])
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None


def _present_metrics(board) -> list[str]:
    return [m for m in METRICS if board.num_rows and board[m].null_count < board.num_rows]


def run_page(request: Request) -> Response:
    """A run: leaderboard (sortable, filterable), score against cost, breakdown, failures,
    settings."""
    run, q = run_of(request), request.query_params
    board = run.board
    metric = ranking_metric(board)
    sort = q.get("sort", "rank")
    try:
        shown = sorted_board(board, sort)
    except RagsweepError as exc:
        raise HTTPException(400, str(exc)) from None
    options = {f: sorted({v for v in board[f].to_pylist() if v}) for f in FILTERS}
    chosen = {f: q.get(f, "") for f in FILTERS}
    for name, value in chosen.items():
        if value:
            shown = shown.filter(pc.equal(shown[name], value))
    breakdown, failures = request.app.state.data.derived(run.info["run_id"])
    metrics = [metric] + [m for m in _present_metrics(board) if m != metric]
    costs = [c for c in COSTS_SHOWN if board[c].null_count < board.num_rows]
    costs += ["errors"] if has_errors(board) else []
    rows = []
    for r in shown.to_pylist():
        r["bar"] = report.interval_bar(r[metric], r[metric + "_low"], r[metric + "_high"])
        rows.append(r)

    def sort_link(column: str) -> str:
        return "?" + urlencode({k: v for k, v in {**chosen, "sort": column}.items() if v})

    return request.app.state.render(
        request,
        "run.html",
        sort_link=sort_link,
        run=run.info,
        tags=[t for t in (run.info.get("tags") or "").split(",") if t],
        patterns=(request.app.state.jobs.folder / run.info["run_id"] / "patterns").is_dir(),
        mlflow=run.info.get("mlflow"),
        mlflow_link=run_link(run.info["mlflow"]) if run.info.get("mlflow") else None,
        metric=metric,
        best=board.slice(0, 1).to_pylist()[0] if board.num_rows else None,
        configs=board.num_rows,
        tied=sum(board["tied_with_best"].to_pylist()),
        rows=rows,
        metrics=metrics,
        costs=costs,
        sort=sort,
        sortable=["rank", *METRICS, *COST_COLUMNS],
        options=options,
        chosen=chosen,
        parameters=parameter_panels(board, metric, run.info["run_id"]),
        paretos=pareto_panels(board, metric, run.info["run_id"]),
        breakdown=report.breakdown_tables(breakdown, board, metric),
        failures=failures.to_pylist(),
        settings=report.settings_list(settings_of(board)),
        evaluation=report.evaluation_summary(settings_of(board)),
        statistics=report.statistics_lines(board),
        eliminated=has_eliminated(board),
        eliminated_cell=eliminated_cell,
        errors=report.errors_section(Board(board, run.results, breakdown, failures)),
        missing=run.missing(),
        fmt=fmt,
    )


def _config(run, config_id: str) -> dict[str, Any]:
    found = run.board.filter(pc.equal(run.board["config_id"], config_id)).to_pylist()
    if not found:
        raise HTTPException(404, f"run {run.info['run_id']!r} has no configuration {config_id!r}")
    return found[0]


def _results_of(run, config_id: str) -> list[dict]:
    mine = run.results.filter(pc.equal(run.results["config_id"], config_id)).to_pylist()
    for r in mine:
        r["reason"] = failure_reason(r)
    return sorted(mine, key=lambda r: r["question_id"])


def config_page(request: Request) -> Response:
    """One configuration of a run: its settings, figures and every question's result."""
    run = run_of(request)
    config = _config(run, request.path_params["config_id"])
    metric = ranking_metric(run.board)
    questions = run.questions()
    return request.app.state.render(
        request,
        "config.html",
        run=run.info,
        config=config,
        metric=metric,
        metrics=_present_metrics(run.board),
        results=_results_of(run, config["config_id"]),
        questions=questions,
        missing=run.missing(),
        fmt=fmt,
    )


def question_page(request: Request) -> Response:
    """A configuration x question: question, references, answer, verdict, retrieved
    documents in order; the previous and next failure of the configuration."""
    run = run_of(request)
    config = _config(run, request.path_params["config_id"])
    question_id = request.path_params["question_id"]
    results = _results_of(run, config["config_id"])
    found = [r for r in results if r["question_id"] == question_id]
    if not found:
        raise HTTPException(
            404, f"configuration {config['label']!r} has no result for {question_id!r}"
        )
    result = found[0]
    failed = [r["question_id"] for r in results if r["reason"]]
    before = [f for f in failed if f < question_id]
    after = [f for f in failed if f > question_id]
    question = run.questions().get(question_id, {})
    docs = list(run.locations)
    chunks = retrieved_chunks(result, question, docs)
    return request.app.state.render(
        request,
        "question.html",
        run=run.info,
        config=config,
        result=result,
        question=question,
        chunks=chunks,
        score_name=score_name(config),
        docs=docs,
        documents_changed=request.app.state.data.documents_changed(run.info["run_id"]),
        metrics=_present_metrics(run.board),
        previous_failure=before[-1] if before else None,
        next_failure=after[0] if after else None,
        fmt=fmt,
        **labelling.context(request, run.info["run_id"], result),
    )


COMPARED = 5  # runs on one comparison page, the baseline first


def chosen_runs(request: Request) -> list[str]:
    """The run selectors' values in order (blank: none chosen): ``runs`` (repeated), or
    ``baseline`` and ``candidate`` (the links of the trend and of a run page)."""
    q = request.query_params
    picked = q.getlist("runs") or [q.get("baseline", ""), q.get("candidate", "")]
    chosen = [r for r in picked if r]
    if len(chosen) > COMPARED:
        raise HTTPException(400, f"compare takes at most {COMPARED} runs, not {len(chosen)}")
    if len(set(chosen)) < len(chosen):
        raise HTTPException(400, "compare names a run twice: " + ", ".join(chosen))
    return picked[:COMPARED] + [""] * (COMPARED - len(picked))


def compare_page(request: Request) -> Response:
    """Up to five runs against the first (the baseline), chosen among the succeeded runs
    (of one sweep, ``sweep``): a forest plot of every candidate's
    per-configuration differences; per candidate, the alarm, what changed since the baseline
    (documents, test set, grid), per-configuration verdicts with intervals, the questions
    that flipped, what only one of the two holds. A candidate that cannot be compared is
    said instead of its section."""
    data = request.app.state.data
    picked = chosen_runs(request)
    chosen = [r for r in picked if r]  # the baseline first
    sweep = request.query_params.get("sweep", "")
    succeeded = find_runs(data.engine, sweep=sweep or None, status="succeeded", limit=1000)
    offered = {r["run_id"] for r in succeeded}
    for run_id in chosen:  # a chosen run of another sweep stays chosen
        if run_id not in offered:
            with contextlib.suppress(RagsweepError):  # unknown: said by the comparison
                succeeded.append(run_info(data.engine, run_id))
    comparisons, errors = [], []
    for candidate in chosen[1:]:  # one run that cannot be compared hides no other
        try:
            comparisons.append((candidate, data.compare(chosen[0], candidate)))
        except RagsweepError as exc:
            errors.append(str(exc))
    shown = [
        {
            "candidate": candidate,
            "comparison": comparison,
            "changes": change_lines(comparison.changes),
            "rows": comparison.table.to_pylist(),
            "flips": comparison.flips.to_pylist(),
        }
        for candidate, comparison in comparisons
    ]
    series = [(c["candidate"], c["rows"]) for c in shown]
    return request.app.state.render(
        request,
        "compare.html",
        runs=succeeded,
        sweeps=sweep_names(data.engine),
        sweep=sweep,
        chosen=picked,
        baseline=chosen[0] if chosen else "",
        comparisons=shown,
        metric=shown[0]["comparison"].metric if shown else "",
        forest=forest(series, shown[0]["comparison"].metric) if shown else "",
        errors=errors,
        fmt=fmt,
        cannot_fire=cannot_fire,
    )
