"""Regression verdicts: a candidate run against a baseline run, paired on shared questions.

Per configuration evaluated in both runs: the mean paired difference (candidate - baseline)
with a cluster-bootstrap interval, and one-sided sign-flip tests for "worse" and "better".
The baseline's best configuration is the one decided in advance: its own test at 5% decides
the alarm. The other configurations are a family, Holm-adjusted per direction. Questions
whose outcome flipped (passing to failing, or back; ``leaderboard.failure_reason``) are
listed for every configuration.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import Engine

from ragsweep import statistics
from ragsweep.errors import RagsweepError
from ragsweep.exports import number, ranking_metric
from ragsweep.leaderboard import check_metric, failure_reason, matrix
from ragsweep.schemas import COMPARISON, FLIPS, settings_of

log = logging.getLogger("ragsweep")

REGRESSED, IMPROVED, UNCHANGED = "regressed", "improved", "unchanged"


@dataclass(frozen=True)
class Comparison:
    table: pa.Table  # kind comparison, the best configuration first
    flips: pa.Table  # kind flips
    metric: str

    @property
    def best(self) -> dict | None:
        rows = self.table.filter(self.table["is_best"]).to_pylist()
        return rows[0] if rows else None

    @property
    def best_regressed(self) -> bool:
        best = self.best
        return best is not None and best["verdict"] == REGRESSED


def compare_runs(
    baseline: tuple[pa.Table, pa.Table],
    candidate: tuple[pa.Table, pa.Table],
    metric: str | None = None,
    seed: int = statistics.SEED,
    resamples: int = statistics.RESAMPLES,
) -> Comparison:
    """Compare two runs, each given as (leaderboard, results)."""
    (base_board, base_results), (cand_board, cand_results) = baseline, candidate
    metric = metric or ranking_metric(base_board)
    check_metric(metric)
    cand_configs = set(cand_board["config_id"].to_pylist())
    config_ids = [c for c in base_board["config_id"].to_pylist() if c in cand_configs]
    shared = set(base_results["question_id"].to_pylist())
    question_ids = [
        q for q in dict.fromkeys(cand_results["question_id"].to_pylist()) if q in shared
    ]
    if not config_ids or not question_ids:
        raise RagsweepError(
            "compare: the runs share no configuration or no question; were they run on the "
            "same test set and search space?"
        )
    clusters = _clusters(cand_results, question_ids)
    before = matrix(base_results, metric, config_ids, question_ids)
    after = matrix(cand_results, metric, config_ids, question_ids)
    diff = after - before
    center, low, high = statistics.bootstrap_intervals(diff, clusters, resamples, seed)
    worse = statistics.sign_flip_pvalues(diff, clusters, "less", seed)
    better = statistics.sign_flip_pvalues(diff, clusters, "greater", seed)
    if len(config_ids) > 1:  # the best (row 0) is tested alone; the rest as a family
        worse[1:], better[1:] = statistics.holm(worse[1:]), statistics.holm(better[1:])
    verdicts = np.where(
        worse < statistics.ALPHA,
        REGRESSED,
        np.where(better < statistics.ALPHA, IMPROVED, UNCHANGED),
    )
    flips = _flips(base_results, cand_results, config_ids, set(question_ids), metric, base_board)
    to_wrong = pc.equal(flips["direction"], "to wrong")
    counts = {
        direction: dict(zip(*np.unique(ids.to_numpy(), return_counts=True), strict=True))
        for direction, ids in (
            ("to wrong", flips.filter(to_wrong)["config_id"]),
            ("to right", flips.filter(pc.invert(to_wrong))["config_id"]),
        )
    }
    labels = dict(
        zip(base_board["config_id"].to_pylist(), base_board["label"].to_pylist(), strict=True)
    )
    table = pa.table(
        {
            "config_id": config_ids,
            "label": [labels[c] for c in config_ids],
            "is_best": [i == 0 for i in range(len(config_ids))],
            "questions": (~np.isnan(diff)).sum(axis=1),
            "baseline": pa.array(statistics.means(before), from_pandas=True),
            "candidate": pa.array(statistics.means(after), from_pandas=True),
            "difference": pa.array(center, from_pandas=True),
            "difference_low": pa.array(low, from_pandas=True),
            "difference_high": pa.array(high, from_pandas=True),
            "p_value": np.where(center < 0, worse, better),
            "verdict": verdicts,
            "flipped_to_wrong": [int(counts["to wrong"].get(c, 0)) for c in config_ids],
            "flipped_to_right": [int(counts["to right"].get(c, 0)) for c in config_ids],
        }
    ).cast(COMPARISON)
    return Comparison(table, flips, metric)


def _clusters(results: pa.Table, question_ids: list[str]) -> np.ndarray:
    docs: dict[str, str | None] = {}
    for qid, doc in zip(
        results["question_id"].to_pylist(), results["cluster"].to_pylist(), strict=True
    ):
        docs.setdefault(qid, doc)
    return statistics.cluster_ids([[docs[q]] if docs[q] else [] for q in question_ids])


def _flips(
    base: pa.Table,
    cand: pa.Table,
    config_ids: list[str],
    questions: set[str],
    metric: str,
    board: pa.Table,
) -> pa.Table:
    wanted = set(config_ids)
    before = {
        (r["config_id"], r["question_id"]): r
        for r in base.to_pylist()
        if r["config_id"] in wanted and r["question_id"] in questions
    }
    labels = dict(zip(board["config_id"].to_pylist(), board["label"].to_pylist(), strict=True))
    rows: dict[str, list] = {name: [] for name in FLIPS.names}
    for r in cand.to_pylist():
        old = before.get((r["config_id"], r["question_id"]))
        if old is None:
            continue
        was_ok, reason = failure_reason(old) is None, failure_reason(r)
        if was_ok == (reason is None):
            continue
        values = {
            "config_id": r["config_id"],
            "label": labels[r["config_id"]],
            "question_id": r["question_id"],
            "direction": "to wrong" if was_ok else "to right",
            "baseline": old[metric],
            "candidate": r[metric],
            "reason": reason,
        }
        for name in FLIPS.names:
            rows[name].append(values[name])
    return pa.table(rows, schema=FLIPS)


def render(comparison: Comparison, fmt: str = "table") -> str:
    """The verdicts as a terminal or Markdown table, the best configuration's flips below."""
    header = ["verdict", "configuration", "baseline", "candidate", "difference [95% CI]", "p"]
    header += ["to wrong", "to right"]
    rows = []
    for r in comparison.table.to_pylist():
        rows.append(
            [
                r["verdict"].upper() if r["is_best"] else r["verdict"],
                ("best: " if r["is_best"] else "") + r["label"],
                number(r["baseline"]),
                number(r["candidate"]),
                f"{number(r['difference'])} [{number(r['difference_low'])}, "
                f"{number(r['difference_high'])}]",
                number(r["p_value"], 4),
                str(r["flipped_to_wrong"]),
                str(r["flipped_to_right"]),
            ]
        )
    if fmt == "markdown":
        lines = [header, ["---"] * len(header), *rows]
        out = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in lines]
    else:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        out = [
            "  ".join(
                c.ljust(w) if i < 2 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in [header, ["-" * w for w in widths], *rows]
        ]
    best = comparison.best
    if best:
        mine = comparison.flips.filter(pc.equal(comparison.flips["config_id"], best["config_id"]))
        wrong = [r for r in mine.to_pylist() if r["direction"] == "to wrong"]
        if wrong:
            out.append("")
            out.append(f"questions the best configuration now fails ({len(wrong)}):")
            out += [f"  {r['question_id']}: {r['reason']}" for r in wrong]
        verdict = "REGRESSED" if comparison.best_regressed else f"{best['verdict']}"
        out.append("")
        out.append(
            f"best configuration {best['label']}: {verdict} on {comparison.metric} "
            f"({number(best['difference'])}, one-sided p = {number(best['p_value'], 4)})"
        )
    return "\n".join(out)


def resolve_baseline(engine: Engine, baseline: str, leaderboard: pa.Table, run_id: str) -> str:
    """A baseline run id: as given, or for ``latest`` the latest successful run of the same
    sweep as ``leaderboard``'s other than ``run_id``."""
    from ragsweep import store

    if baseline != "latest":
        return baseline
    sweep_key = settings_of(leaderboard).get("sweep_key", "")
    return store.latest_successful(engine, sweep_key, exclude=run_id)


def compare_with_store(
    baseline: str, current: tuple[pa.Table, pa.Table], pipeline_run_id: str
) -> Comparison:
    """The compare step: this run against ``baseline`` (a run id, or ``latest``: the latest
    successful run of the same sweep) from the store named by ``RAGSWEEP_STORE_URL``."""
    import os

    from ragsweep import store

    url = os.environ.get(store.ENV)
    if not url:
        raise RagsweepError(
            f"compare: baseline {baseline!r} is read from the results store, but "
            f"{store.ENV} is unset; configure the results-store secret"
        )
    engine = store.connect(url)
    baseline = resolve_baseline(engine, baseline, current[0], store.current_run_id(pipeline_run_id))
    log.info("comparing with baseline run %s", baseline)
    stored = (store.load_leaderboard(engine, baseline), store.load_results(engine, baseline))
    return compare_runs(stored, current)


def verdict_metrics(comparison: Comparison) -> dict[str, float]:
    """The figures the compare step logs as KFP metrics."""
    table, best = comparison.table, comparison.best
    verdicts = table["verdict"].to_pylist()
    out = {
        "best_regressed": float(comparison.best_regressed),
        "configurations_regressed": float(verdicts.count(REGRESSED)),
        "configurations_improved": float(verdicts.count(IMPROVED)),
    }
    if best:
        out.update(
            best_difference=best["difference"],
            best_p_value=best["p_value"],
            best_flipped_to_wrong=float(best["flipped_to_wrong"]),
        )
    return {k: float(v) for k, v in out.items() if v is not None}
