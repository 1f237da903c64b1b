"""Per-question results, the ranked leaderboard with intervals, breakdowns and failures.

Every figure is computed on configs x questions matrices (``ragsweep.evaluation.statistics``): the
mean of each metric with a cluster-bootstrap interval, a selection-aware test of each
configuration against the leader (``statistics.worse_than_best_pvalues``), and
``tied_with_best`` for those not significantly worse. Metrics are the registered ones
(``schemas.METRICS``), so a new metric flows through without changes here; the ranking
follows its declared direction (``Metric.higher_is_better``).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.answering.answerers import uses_model
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import (
    BREAKDOWN,
    COSTS,
    FAILURES,
    METRICS,
    RESULTS,
    SCORES,
    SETTINGS_KEY,
    leaderboard_schema,
)
from ragsweep.evaluation import clusters, statistics
from ragsweep.evaluation.metrics import is_out_of_scope
from ragsweep.evaluation.metrics import metric as declared

DEFAULT_METRIC = "answer_correctness"
AUTO_METRIC = "auto"  # the judge's correctness when there are verdicts, else DEFAULT_METRIC
JUDGE_METRIC = "correctness"
PASS_MARK = 0.5  # an answer metric below this counts as a failure
ERRORS_FLAG = 0.1  # a configuration with errors on more of its answered questions is flagged
BREAKDOWN_DIMENSIONS = ("topic", "question_type")
NO_VALUE = "(none)"


# Red Hat AutoRAG's optimization_metric values are ragsweep metrics of the same name and
# meaning: faithfulness, answer_correctness and context_correctness (token precision of the
# answer against its context, token recall against the reference answers, reciprocal rank of
# the first chunk from a reference document), and answer_relevance and overall_score, scored
# when a run ranks by them (ragsweep.evaluation.scoring.AUTORAG_METRICS).
RELEVANCE = "answer_relevance"  # needs a judge


def metric_intervals(
    name: str, values: np.ndarray, cluster_ids: np.ndarray, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: metric ``name``'s mean and 95% interval. A metric with both bounds declared
    (``Metric.low``, ``high``) is scaled to [0, 1] for ``score_intervals`` (whose
    Clopper-Pearson floor assumes that range) and back; an unbounded one (a count, a cost)
    gets the cluster bootstrap alone: a binomial bound would put its interval near 0 or 1,
    far from its mean."""
    declared_range = declared(name)
    low, high = declared_range.low, declared_range.high
    if low is None or high is None:
        return statistics.bootstrap_intervals(values, cluster_ids, resamples, seed)
    scale = high - low
    scaled = statistics.score_intervals((values - low) / scale, cluster_ids, resamples, seed)
    center, lower, upper = (low + scale * column for column in scaled)
    return center, lower, upper


def gold_span_record(testset: pa.Table) -> dict[str, int]:
    """What the span metrics rest on: of the ``questions``, how many have a gold span
    (``located``), and how many of those a span located approximately (``approximate``: an
    answer reworded in its document, ``documents.locating``) rather than found verbatim."""
    rows = testset["gold_spans"].to_pylist() if "gold_spans" in testset.column_names else []
    located = [spans for spans in rows if spans]
    approximate = sum(any(s.get("found") == "approximate" for s in spans) for spans in located)
    return {"questions": testset.num_rows, "located": len(located), "approximate": approximate}


def check_metric(metric: str) -> None:
    if metric not in METRICS and metric != AUTO_METRIC:
        choices = sorted(METRICS) + [AUTO_METRIC]
        raise RagsweepError(f"unknown metric {metric!r}; choose from {choices}")


def resolve_metric(metric: str, judged: bool, missing: dict[str, str] | None = None) -> str:
    """``auto``: the judge's correctness when answers were judged, else the default. A
    metric that cannot tell the configurations apart (``missing``: ``unmeasured``) is
    refused."""
    check_metric(metric)
    if metric == RELEVANCE and not judged:
        raise RagsweepError(f"metric {metric!r}: needs a judge (--judge MODEL)")
    if metric in (missing or {}):
        raise RagsweepError(
            f"metric {metric!r} cannot rank these configurations: {missing[metric]}"
        )
    if metric != AUTO_METRIC:
        return metric
    return JUDGE_METRIC if judged else DEFAULT_METRIC


@dataclass(frozen=True)
class Board:
    """Everything the rank step produces, as Arrow tables of their declared kinds."""

    leaderboard: pa.Table
    results: pa.Table
    breakdown: pa.Table
    failures: pa.Table


def build_board(
    scores: pa.Table,
    answers: pa.Table,
    testset: pa.Table,
    configs: pa.Table,
    metric: str = DEFAULT_METRIC,
    settings: dict[str, Any] | None = None,
    seed: int = statistics.SEED,
    resamples: int = statistics.RESAMPLES,
) -> Board:
    """Join, aggregate and test: the leaderboard (carrying ``settings`` in its metadata) and
    the tables exported beside it. ``configs``: the configurations, one row each
    (``ragsweep.sweep.space.configs_table``), whose columns the leaderboard repeats."""
    judged = scores.column(JUDGE_METRIC).null_count < scores.num_rows
    missing = unmeasured([a or "" for a in configs["answerer"].to_pylist()])
    metric = resolve_metric(metric, judged, missing)
    results = per_question(scores, answers, testset)
    board = rank_configs(results, testset, configs, metric, seed, resamples)
    settings = {**(settings or {}), "optimization_metric": metric}
    if missing:
        settings["not_measured"] = missing
    settings["clusters"] = clusters.of_testset(testset).record()
    settings["gold_spans"] = gold_span_record(testset)
    if judged:
        settings["judge_unreadable"] = _unreadable(scores, answers)
    recorded = scores.schema.metadata or {}
    if b"ragsweep.judge" in recorded:  # the judge model, endpoint and prompt
        settings["judge"] = json.loads(recorded[b"ragsweep.judge"])
    if b"ragsweep.evaluation" in recorded:  # full grid or successive halving, and calls
        settings["evaluation"] = json.loads(recorded[b"ragsweep.evaluation"])
    board = board.replace_schema_metadata({SETTINGS_KEY: json.dumps(settings, sort_keys=True)})
    return Board(
        leaderboard=board,
        results=results,
        breakdown=breakdown(results, board, testset, seed, resamples),
        failures=failures(results, board, testset),
    )


def _unreadable(scores: pa.Table, answers: pa.Table) -> dict[str, int]:
    """How many answers the judge was shown, and on how many it gave no readable verdict."""
    shown = pc.and_kleene(pc.is_valid(answers["answer"]), pc.is_null(answers["answer_error"]))
    unread = pc.and_kleene(pc.is_valid(scores["judge_error"]), pc.is_null(scores["correctness"]))
    return {
        "answers": int(pc.sum(pc.cast(shown, pa.int64())).as_py() or 0),
        "unreadable": int(pc.sum(pc.cast(unread, pa.int64())).as_py() or 0),
    }


def _keys(table: pa.Table) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(table["config_id"], table["question_id"], "\x1f")


def per_question(scores: pa.Table, answers: pa.Table, testset: pa.Table) -> pa.Table:
    """One row per configuration x question: scores, costs, cluster, topic and answer."""
    at = pc.index_in(_keys(scores), value_set=pa.chunked_array(_keys(answers)).combine_chunks())
    if at.null_count:
        missing = scores.filter(pc.is_null(at)).slice(0, 1).to_pylist()[0]
        raise ValueError(f"no answer for config {missing['config_id']} {missing['question_id']}")
    answered = answers.take(at)
    ids = testset["question_id"].combine_chunks()
    q_at = pc.index_in(scores["question_id"], value_set=ids)
    if q_at.null_count:
        raise ValueError("scores for questions that are not in the test set")
    keys = pa.array(clusters.of_testset(testset).keys, pa.string())
    questions = testset.append_column("cluster", keys).take(q_at)
    columns: dict[str, Any] = {name: scores[name] for name in SCORES.names}
    for name in ("cluster", "topic", "question_type", "question_version"):
        columns[name] = questions[name] if name in questions.column_names else pa.nulls(len(q_at))
    columns["round"] = answered["round"]
    columns["answer"] = answered["answer"]
    columns["retrieved_doc_ids"] = answered["retrieved_doc_ids"]
    columns["answer_error"] = answered["answer_error"]
    for name, kind in COSTS:
        source = next((t for t in (answered, scores) if name in t.column_names), None)
        if source is not None:
            columns[name] = source[name]
        elif name == "context_chars":
            columns[name] = pc.utf8_length(answered["context"])
        else:
            columns[name] = pa.nulls(scores.num_rows, kind)
    columns["retrieved_spans"] = answered["retrieved_spans"]
    columns["retrieved_scores"] = answered["retrieved_scores"]
    columns["searched_query"] = answered["searched_query"]
    return pa.table(columns).cast(RESULTS)


def matrix(results: pa.Table, column: str, config_ids: list[str], question_ids: list[str]):
    """``column`` as a configs x questions float matrix; NaN where absent or null. Rows of
    ``results`` whose configuration or question is not listed are left out."""
    rows = pc.index_in(results["config_id"], value_set=pa.array(config_ids, pa.string()))
    cols = pc.index_in(results["question_id"], value_set=pa.array(question_ids, pa.string()))
    listed = pc.and_(pc.is_valid(rows), pc.is_valid(cols)).to_numpy(zero_copy_only=False)
    out = np.full((len(config_ids), len(question_ids)), np.nan)
    values = pc.cast(results[column], pa.float64()).to_numpy(zero_copy_only=False)
    rows = pc.fill_null(rows, 0).to_numpy()
    cols = pc.fill_null(cols, 0).to_numpy()
    out[rows[listed], cols[listed]] = values[listed]
    return out


def rank_configs(
    results: pa.Table,
    testset: pa.Table,
    configs: pa.Table,
    metric: str = DEFAULT_METRIC,
    seed: int = statistics.SEED,
    resamples: int = statistics.RESAMPLES,
) -> pa.Table:
    """The leaderboard, every metric with its interval: best ``metric`` first (ties by
    label), after successive halving the configurations of later rounds first."""
    check_metric(metric)
    by_id = {c["config_id"]: c for c in configs.to_pylist()}
    config_ids = list(dict.fromkeys(results["config_id"].to_pylist()))
    unknown = sorted(set(config_ids) - set(by_id))
    if unknown:
        raise ValueError(f"scores for unknown configurations: {unknown}")
    question_ids = testset["question_id"].to_pylist()
    chosen = clusters.of_testset(testset)
    data = {m: matrix(results, m, config_ids, question_ids) for m in METRICS}
    round_of = matrix(results, "round", config_ids, question_ids)
    answered = ~np.isnan(round_of)
    rounds = np.max(np.where(answered, round_of, -1), axis=1, initial=-1).astype(int)
    if declared(metric).judged:
        data[metric] = on_shared_verdicts(data[metric], rounds)
    columns: dict[str, np.ndarray] = {}
    for m in METRICS:
        center, low, high = metric_intervals(m, data[m], chosen.ids, resamples, seed)
        columns.update({m: center, f"{m}_low": low, f"{m}_high": high})
    for m in unmeasured([by_id[c].get("answerer") or "" for c in config_ids]):
        columns.update(
            {name: np.full(len(config_ids), np.nan) for name in (m, f"{m}_low", f"{m}_high")}
        )
    labels = [by_id[c]["label"] for c in config_ids]
    sign = declared(metric).sign()  # scores times sign: higher is better
    score = np.nan_to_num(sign * columns[metric], nan=-np.inf)
    order = sorted(range(len(config_ids)), key=lambda i: (-rounds[i], -score[i], labels[i]))
    columns = {name: values[order] for name, values in columns.items()}
    ranked = sign * data[metric][order]
    # a configuration is compared with the leader on the questions both were asked
    asked = (answered | ~np.isnan(data[metric]))[order]
    p_value = statistics.worse_than_best_pvalues(ranked, chosen.ids, 0, resamples, seed, asked)
    verdictless = _verdictless(ranked, asked, chosen.ids)
    p_value[verdictless] = np.nan
    columns["p_value"] = p_value
    leader = np.arange(len(order)) == 0
    columns["tied_with_best"] = leader | verdictless | (p_value >= statistics.ALPHA)
    columns.update(_costs(results, [config_ids[i] for i in order], question_ids))
    columns.update(_errors(results, [config_ids[i] for i in order]))

    rows = {name: [by_id[config_ids[i]][name] for i in order] for name in configs.column_names}
    rows["rank"] = list(range(1, len(order) + 1))
    rows["questions"] = (~np.isnan(ranked)).sum(axis=1).tolist()
    rows["round"] = [int(rounds[i]) if rounds[i] >= 0 else None for i in order]
    last = rounds.max(initial=-1)
    rows["eliminated"] = [bool(0 <= rounds[i] < last) for i in order]
    for name, values in columns.items():
        rows[name] = pa.array(values, from_pandas=True)
    schema = leaderboard_schema(configs.schema)
    return pa.table(rows).select(schema.names).cast(schema)


def on_shared_verdicts(values: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """A judged metric's configs x questions matrix kept only on the questions every
    configuration of the same evaluation round has a verdict for (NaN elsewhere).

    A verdict the judge could not read is missing, not wrong; left out of one configuration's
    mean only, a configuration whose answers trip the judge more would be ranked on the
    questions it was judged on, perhaps the easier ones. So all are ranked, and compared with
    the leader, on the same questions (successive halving asks each round its own questions:
    the configurations that reached the same round are compared on theirs)."""
    out = np.array(values, dtype=np.float64)
    for level in np.unique(rounds):
        rows = rounds == level
        missing = np.isnan(out[rows])
        lacking = missing.any(axis=0) & ~missing.all(axis=0)
        out[np.ix_(rows, lacking)] = np.nan
    return out


def unmeasured(answerers: list[str]) -> dict[str, str]:
    """The registered metrics that cannot tell apart configurations answered by
    ``answerers``, each with why: those that need answers written by a model
    (``Metric.needs_model_answers``) when no answerer is one. The leaderboard shows them as
    not measured; no run or leaderboard ranks by them."""
    answerers = sorted(set(answerers))
    if not answerers or any(uses_model(a) for a in answerers):
        return {}
    return {
        m: f"every configuration answers with {', '.join(answerers)}, which copies the "
        f"retrieved context, so {m} is the same for all; a model's answers (llm:MODEL) "
        "measure it"
        for m in METRICS
        if declared(m).needs_model_answers
    }


def _verdictless(values: np.ndarray, asked: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Rows with values (not the leader, row 0) compared with the leader on questions from
    too few clusters for the test to reach 5% (``statistics.smallest_pvalue``, with the
    levels of ``statistics.worse_than_best_pvalues``): no verdict."""
    if not len(asked):
        return np.zeros(0, dtype=bool)
    shared = asked & asked[0]
    have = ~np.isnan(statistics.means(values))
    keys = [np.packbits(row).tobytes() for row in shared]
    levels = {keys[row]: row for row in range(1, len(keys)) if have[row]}
    # the range of the wild bootstrap over G clusters takes at most 2 ** (G - 1) values
    hopeless = {
        key: statistics.smallest_pvalue(len(np.unique(ids[shared[row]])) - 1, len(levels))
        >= statistics.ALPHA
        for key, row in levels.items()
    }
    return np.array(
        [row > 0 and have[row] and hopeless[key] for row, key in enumerate(keys)], dtype=bool
    )


def _costs(results: pa.Table, config_ids: list[str], question_ids: list[str]) -> dict:
    """Latency percentiles (of the answers, and of the store's similarity searches), token
    and call totals, mean context size, the index's build time; NaN when unmeasured."""
    get = {name: matrix(results, name, config_ids, question_ids) for name, _ in COSTS}
    measured = {name: ~np.isnan(m).all(axis=1) for name, m in get.items()}

    def where(name: str, values: np.ndarray) -> np.ndarray:
        return np.where(measured[name], values, np.nan)

    with warnings.catch_warnings():  # a row with no measured latency is NaN, as wanted
        warnings.simplefilter("ignore", RuntimeWarning)
        p50, p95 = np.nanpercentile(get["latency_s"], [50, 95], axis=1)
        query_p50, query_p95 = np.nanpercentile(get["query_latency_ms"], [50, 95], axis=1)
        build = np.nanmax(get["index_build_s"], axis=1)
        rerank_p50, rerank_p95 = np.nanpercentile(get["rerank_latency_ms"], [50, 95], axis=1)
    out = {"latency_p50_s": p50, "latency_p95_s": p95, "index_build_s": build}
    out.update(query_latency_p50_ms=query_p50, query_latency_p95_ms=query_p95)
    out.update(rerank_latency_p50_ms=rerank_p50, rerank_latency_p95_ms=rerank_p95)
    for name in ("prompt_tokens", "completion_tokens", "llm_calls"):
        out[name] = where(name, np.nansum(get[name], axis=1))
    out["context_chars"] = statistics.means(get["context_chars"])
    return out


def _errors(results: pa.Table, config_ids: list[str]) -> dict:
    """Per configuration: questions whose answer failed or whose verdict could not be read,
    whether they are more than ``ERRORS_FLAG`` of the questions it answered (those with an
    evaluation round), and the verdicts the judge could not give on an answer it was shown
    (``judge_errors``: the judge's failures, not the configuration's), and their share of the
    answers it was shown (``judge_error_rate``; NaN in a run without a judge)."""
    answer_failed = pc.is_valid(results["answer_error"])
    failed = pc.or_kleene(answer_failed, pc.is_valid(results["judge_error"]))
    unread = pc.and_kleene(pc.is_valid(results["judge_error"]), pc.is_null(results["correctness"]))
    shown = pc.and_kleene(pc.is_valid(results["round"]), pc.invert(answer_failed))
    counts = (
        pa.table(
            {
                "config_id": results["config_id"],
                "failed": pc.cast(failed, pa.int64()),
                "unread": pc.cast(unread, pa.int64()),
                "answered": pc.cast(pc.is_valid(results["round"]), pa.int64()),
                "shown": pc.cast(pc.fill_null(shown, False), pa.int64()),
            }
        )
        .group_by("config_id")
        .aggregate([("failed", "sum"), ("unread", "sum"), ("answered", "sum"), ("shown", "sum")])
        .to_pylist()
    )
    by_id = {r["config_id"]: r for r in counts}
    none = {"failed_sum": 0, "unread_sum": 0, "answered_sum": 0, "shown_sum": 0}

    def column(name: str) -> np.ndarray:
        return np.array([by_id.get(c, none)[name] for c in config_ids], dtype=np.int64)

    errors, answered = column("failed_sum"), column("answered_sum")
    unread, shown = column("unread_sum"), column("shown_sum")
    judged = results["correctness"].null_count < results.num_rows or bool(unread.any())
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(judged & (shown > 0), unread / shown, np.nan)
    return {
        "errors": errors,
        "errors_flagged": errors > ERRORS_FLAG * answered,
        "judge_errors": unread,
        "judge_error_rate": rate,
    }


def breakdown(
    results: pa.Table,
    leaderboard: pa.Table,
    testset: pa.Table,
    seed: int = statistics.SEED,
    resamples: int = statistics.RESAMPLES,
) -> pa.Table:
    """Every configuration's metrics per topic and per question type, with counts."""
    config_ids = leaderboard["config_id"].to_pylist()
    labels = leaderboard["label"].to_pylist()
    question_ids = testset["question_id"].to_pylist()
    ids = clusters.of_testset(testset).ids
    data = {m: matrix(results, m, config_ids, question_ids) for m in METRICS}
    rows: dict[str, list] = {name: [] for name in BREAKDOWN.names}
    for dimension in BREAKDOWN_DIMENSIONS:
        values = [v or NO_VALUE for v in testset[dimension].to_pylist()]
        for value in sorted(set(values)):
            mask = np.array([v == value for v in values])
            scored = np.stack([~np.isnan(data[m][:, mask]) for m in METRICS])
            answered = scored.any(axis=0).sum(axis=1)  # scored on any metric
            rows["config_id"] += config_ids
            rows["label"] += labels
            rows["dimension"] += [dimension] * len(config_ids)
            rows["value"] += [value] * len(config_ids)
            rows["questions"] += answered.tolist()
            for m in METRICS:
                stats = metric_intervals(m, data[m][:, mask], ids[mask], resamples, seed)
                for suffix, column in zip(("", "_low", "_high"), stats, strict=True):
                    rows[m + suffix] += column.tolist()
    return pa.table({k: pa.array(v, from_pandas=True) for k, v in rows.items()}).cast(BREAKDOWN)


def failure_reason(row: dict[str, Any]) -> str | None:
    """Why a question counts as failed for a configuration, or None when it does not.

    Failed: no chunk from a reference document retrieved (context correctness 0), or no
    answer (its request failed: ``answer failed: <error>``), or no verdict (``verdict
    unreadable: <error>``), or the answer judged wrong: the LLM judge's ``correctness`` when
    there is one, otherwise an ``answer_correctness`` below ``PASS_MARK``.
    """
    reasons = []
    if row.get("context_correctness") == 0:
        reasons.append("no retrieved chunk comes from a reference document")
    if row.get("answer_error") is not None:
        reasons.append(f"answer failed: {row['answer_error']}")
    elif row.get("judge_error") is not None:
        reasons.append(f"verdict unreadable: {row['judge_error']}")
    elif row.get("correctness") is not None:
        if row["correctness"] < PASS_MARK:
            why = row.get("correctness_reason")
            reasons.append(f"judged wrong: {why}" if why else "judged wrong")
    elif row.get("answer_correctness") is not None and row["answer_correctness"] < PASS_MARK:
        if is_out_of_scope(row.get("question_type")):
            reasons.append("the question is out of scope and the answer does not refuse")
        else:
            share = row["answer_correctness"]
            reasons.append(f"the answer holds {share:.0%} of the reference answer's words")
    return "; ".join(reasons) or None


def failures(results: pa.Table, leaderboard: pa.Table, testset: pa.Table) -> pa.Table:
    """The best configuration's failed questions, with what was asked, expected and given."""
    rows: dict[str, list] = {name: [] for name in FAILURES.names}
    if leaderboard.num_rows:
        best = leaderboard.slice(0, 1).to_pylist()[0]
        questions = {q["question_id"]: q for q in testset.to_pylist()}
        mine = results.filter(pc.equal(results["config_id"], best["config_id"]))
        for row in mine.to_pylist():
            reason = failure_reason(row)
            if reason is None:
                continue
            question = questions[row["question_id"]]
            values = {
                **{m: row[m] for m in METRICS},
                "config_id": best["config_id"],
                "label": best["label"],
                "question_id": row["question_id"],
                "question": question["question"],
                "topic": question["topic"],
                "reference_answer": (question["reference_answers"] or [None])[0],
                "reference_doc_ids": question["reference_doc_ids"],
                "answer": row["answer"],
                "retrieved_doc_ids": row["retrieved_doc_ids"],
                "reason": reason,
                "answer_error": row.get("answer_error"),
                "judge_error": row.get("judge_error"),
            }
            for name in FAILURES.names:
                rows[name].append(values[name])
    return pa.table(rows, schema=FAILURES)
