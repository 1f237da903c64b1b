"""Regression verdicts: a candidate run against a baseline run, on what both share.

Configurations are paired by config id and questions by identity: the question id, and
its ``question_version`` (a content hash) when both runs record one, so an edited question
is reported and not compared with its old self. What only one run holds is counted and
named.

The alarm tests one hypothesis decided in advance, at 5%:

- ``deployed`` given (the configuration in production): that configuration alone, a
  one-sided paired sign-flip test of "worse";
- otherwise "did the sweep's best get worse": best-of-sweep against best-of-sweep, with a
  null distribution that swaps the two nights within clusters
  (``statistics.best_of_sweep_pvalue``). Testing the baseline's post-hoc best instead
  would fire far more often than 5% (the winner's curse: a lucky best regresses to the
  mean the next night).

Every shared configuration also gets a verdict (the mean paired difference with a
cluster-bootstrap interval, sign-flip tests for worse and better, Holm-adjusted as a
family) and the questions whose outcome flipped (``leaderboard.failure_reason``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from sqlalchemy.engine import Engine

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import COMPARISON, FLIPS, settings_of
from ragsweep.evaluation import clusters, statistics
from ragsweep.evaluation.clusters import Clusters
from ragsweep.evaluation.leaderboard import AUTO_METRIC, check_metric, failure_reason, matrix
from ragsweep.evaluation.metrics import metric as declared
from ragsweep.reporting.changes import Changes, changes
from ragsweep.reporting.changes import lines as change_lines
from ragsweep.reporting.exports import number, ranking_metric

log = logging.getLogger("ragsweep")

REGRESSED, IMPROVED, UNCHANGED = "regressed", "improved", "unchanged"
DEPLOYED, BEST_OF_SWEEP = "deployed configuration", "best of sweep"
VERSION = "question_version"
SHOWN = 10  # ids listed per kind of difference; the count is always given


@dataclass(frozen=True)
class Overlap:
    """What the two runs share and what only one of them holds."""

    configs: list[str]  # shared config ids, in the baseline's rank order
    configs_added: list[str]  # labels of the configurations only the candidate evaluated
    configs_removed: list[str]  # only the baseline
    questions: list[str]  # shared question ids (same id, same version where recorded)
    questions_added: list[str]
    questions_removed: list[str]
    questions_edited: list[str]  # same id, different version: not compared

    def counts(self) -> dict[str, int]:
        return {
            "configurations_shared": len(self.configs),
            "configurations_added": len(self.configs_added),
            "configurations_removed": len(self.configs_removed),
            "questions_shared": len(self.questions),
            "questions_added": len(self.questions_added),
            "questions_removed": len(self.questions_removed),
            "questions_edited": len(self.questions_edited),
        }


@dataclass(frozen=True)
class Alarm:
    """The verdict on the hypothesis decided in advance."""

    hypothesis: str  # DEPLOYED or BEST_OF_SWEEP
    subject: str  # the deployed configuration's label, or what the best of sweep means
    baseline: float
    candidate: float
    difference: float  # candidate - baseline
    p_value: float  # one-sided, "worse"
    test: str

    @property
    def regressed(self) -> bool:
        return self.p_value < statistics.ALPHA


@dataclass(frozen=True)
class Comparison:
    table: pa.Table  # kind comparison, in the baseline's rank order
    flips: pa.Table  # kind flips
    metric: str
    overlap: Overlap
    alarm: Alarm
    changes: Changes  # documents, test set, grid and settings since the baseline
    baseline_best: dict = field(default_factory=dict)  # the baseline leaderboard's first row
    clusters: Clusters | None = None  # of the shared questions: what the tests resample

    @property
    def alarm_can_fire(self) -> bool:
        """Whether the alarm's test can reach 5% at all over these clusters: an exact
        sign-flip or swap test over G clusters gives p >= 2 ** -G."""
        count = self.clusters.count if self.clusters else len(self.overlap.questions)
        return statistics.smallest_pvalue(count) < statistics.ALPHA

    @property
    def best(self) -> dict | None:
        """The baseline's best configuration's row, when the candidate evaluated it too."""
        rows = self.table.filter(self.table["is_best"]).to_pylist()
        return rows[0] if rows else None

    @property
    def deployed(self) -> dict | None:
        rows = self.table.filter(self.table["deployed"]).to_pylist()
        return rows[0] if rows else None

    @property
    def best_regressed(self) -> bool:
        """The alarm: the deployed configuration, or the sweep's best, regressed."""
        return self.alarm.regressed


def compare_runs(
    baseline: tuple[pa.Table, pa.Table],
    candidate: tuple[pa.Table, pa.Table],
    metric: str | None = None,
    deployed: str | None = None,
    seed: int = statistics.SEED,
    resamples: int = statistics.RESAMPLES,
) -> Comparison:
    """Compare two runs, each given as (leaderboard, results), on what they share.

    ``deployed``: the config id of the configuration in production, whose regression is
    the alarm; without it, the alarm is "the sweep's best got worse".
    """
    (base_board, base_results), (cand_board, cand_results) = baseline, candidate
    metric = ranking_metric(base_board) if metric in (None, "", AUTO_METRIC) else metric
    check_metric(metric)
    overlap = _overlap(base_board, base_results, cand_board, cand_results)
    _check_shared(overlap, deployed, base_board, cand_board)
    config_ids, question_ids = overlap.configs, overlap.questions
    before, after = (
        matrix(results, metric, config_ids, question_ids)
        if metric in results.column_names
        else np.full((len(config_ids), len(question_ids)), np.nan)
        for results in (base_results, cand_results)
    )
    for name, values in (("baseline", before), ("candidate", after)):
        if np.isnan(values).all():
            raise RagsweepError(
                f"compare: the {name} run has no values of {metric} on the shared configurations "
                f"and questions (was it judged?); choose another metric with --metric"
            )
    # paired: a question without a value on one night (a verdict the judge could not give)
    # is left out of that configuration's comparison on both nights
    missing = np.isnan(before) | np.isnan(after)
    before, after = np.where(missing, np.nan, before), np.where(missing, np.nan, after)
    chosen = _clusters(cand_board, cand_results, question_ids)
    clusters = chosen.ids
    # a regression is a move in the metric's declared bad direction: the tests run on
    # differences made higher-is-better, the figures are reported in the metric's own terms
    sign = declared(metric).sign()
    diff = sign * (after - before)
    center, low, high = statistics.bootstrap_intervals(diff, clusters, resamples, seed)
    center, low, high = (sign * center, low, high) if sign > 0 else (-center, -high, -low)
    worse = statistics.sign_flip_pvalues(diff, clusters, "less", seed)
    better = statistics.sign_flip_pvalues(diff, clusters, "greater", seed)
    alone = np.array([c == deployed for c in config_ids])
    family = ~alone  # the deployed configuration is tested alone; the rest as a family
    if family.sum() > 1:
        worse[family] = statistics.holm(worse[family])
        better[family] = statistics.holm(better[family])
    verdicts = np.where(
        worse < statistics.ALPHA,
        REGRESSED,
        np.where(better < statistics.ALPHA, IMPROVED, UNCHANGED),
    )
    labels = _labels(base_board, cand_board)
    if deployed is not None:
        row = config_ids.index(deployed)
        alarm = Alarm(
            DEPLOYED,
            labels[deployed],
            *statistics.means(np.stack([before[row], after[row]])),
            float(center[row]),
            float(worse[row]),
            "one-sided paired sign-flip test",
        )
    else:
        alarm = _best_of_sweep(sign * before, sign * after, clusters, seed, sign)
    flips = _flips(base_results, cand_results, config_ids, set(question_ids), metric, labels)
    to_wrong, to_right = _flip_counts(flips)
    best = base_board.slice(0, 1).to_pylist()[0] if base_board.num_rows else {}
    table = pa.table(
        {
            "config_id": config_ids,
            "label": [labels[c] for c in config_ids],
            "is_best": [c == best.get("config_id") for c in config_ids],
            "questions": (~np.isnan(diff)).sum(axis=1),
            "baseline": pa.array(statistics.means(before), from_pandas=True),
            "candidate": pa.array(statistics.means(after), from_pandas=True),
            "difference": pa.array(center, from_pandas=True),
            "difference_low": pa.array(low, from_pandas=True),
            "difference_high": pa.array(high, from_pandas=True),
            "p_value": np.where(sign * center < 0, worse, better),
            "verdict": verdicts,
            "flipped_to_wrong": [to_wrong.get(c, 0) for c in config_ids],
            "flipped_to_right": [to_right.get(c, 0) for c in config_ids],
            "deployed": alone,
        }
    ).cast(COMPARISON)
    since = changes(settings_of(base_board), settings_of(cand_board))
    return Comparison(table, flips, metric, overlap, alarm, since, best, chosen)


def _check_shared(
    overlap: Overlap, deployed: str | None, base_board: pa.Table, cand_board: pa.Table
) -> None:
    """Refuse a comparison of nothing, or of a deployed configuration one run lacks."""
    if not overlap.configs or not overlap.questions:
        counts = overlap.counts()
        raise RagsweepError(
            f"compare: nothing to compare: the runs share {counts['configurations_shared']} "
            f"configurations and {counts['questions_shared']} questions (only in the baseline: "
            f"{counts['configurations_removed']} configurations, {counts['questions_removed']} "
            f"questions; only in the candidate: {counts['configurations_added']}, "
            f"{counts['questions_added']}; edited: {counts['questions_edited']}); were they run "
            "on the same test set and search space?"
        )
    if deployed is not None and deployed not in overlap.configs:
        where = [
            name
            for name, board in (("baseline", base_board), ("candidate", cand_board))
            if deployed not in board["config_id"].to_pylist()
        ]
        raise RagsweepError(
            f"compare: the deployed configuration {deployed} is not in the "
            f"{' nor the '.join(where)} run; shared configurations: {', '.join(overlap.configs)}"
        )


def _best_of_sweep(
    before: np.ndarray, after: np.ndarray, clusters: np.ndarray, seed: int, sign: float
) -> Alarm:
    """The alarm on the best of each night; ``before`` and ``after`` higher-is-better (the
    metric times ``sign``), the alarm's figures in the metric's own terms."""
    with np.errstate(invalid="ignore"):
        best_before = np.nanmax(statistics.means(before))
        best_after = np.nanmax(statistics.means(after))
    difference, p = statistics.best_of_sweep_pvalue(before, after, clusters, seed=seed)
    return Alarm(
        BEST_OF_SWEEP,
        "the best shared configuration of each run",
        sign * float(best_before),
        sign * float(best_after),
        sign * difference,
        p,
        "one-sided permutation test swapping the nights within clusters",
    )


def _flip_counts(flips: pa.Table) -> tuple[dict[str, int], dict[str, int]]:
    """Per config id, how many questions flipped to wrong, and to right."""
    to_wrong = flips["direction"].to_pylist()
    ids = flips["config_id"].to_pylist()
    wrong: dict[str, int] = {}
    right: dict[str, int] = {}
    for config, direction in zip(ids, to_wrong, strict=True):
        counts = wrong if direction == "to wrong" else right
        counts[config] = counts.get(config, 0) + 1
    return wrong, right


def _labels(*boards: pa.Table) -> dict[str, str]:
    out: dict[str, str] = {}
    for board in reversed(boards):
        out.update(zip(board["config_id"].to_pylist(), board["label"].to_pylist(), strict=True))
    return out


def _versions(results: pa.Table) -> dict[str, str | None]:
    """Each question id with its version (None when the run does not record one)."""
    ids = results["question_id"].to_pylist()
    if VERSION not in results.column_names:
        return dict.fromkeys(ids)
    out: dict[str, str | None] = {}
    for qid, version in zip(ids, results[VERSION].to_pylist(), strict=True):
        if out.get(qid) is None:
            out[qid] = version
    return out


def _overlap(
    base_board: pa.Table, base_results: pa.Table, cand_board: pa.Table, cand_results: pa.Table
) -> Overlap:
    labels = _labels(base_board, cand_board)
    base_configs = list(dict.fromkeys(base_board["config_id"].to_pylist()))
    cand_configs = list(dict.fromkeys(cand_board["config_id"].to_pylist()))
    before, after = _versions(base_results), _versions(cand_results)
    common = [q for q in after if q in before]
    edited = [q for q in common if None not in (before[q], after[q]) and before[q] != after[q]]
    return Overlap(
        configs=[c for c in base_configs if c in set(cand_configs)],
        configs_added=[labels[c] for c in cand_configs if c not in set(base_configs)],
        configs_removed=[labels[c] for c in base_configs if c not in set(cand_configs)],
        questions=[q for q in common if q not in set(edited)],
        questions_added=[q for q in after if q not in before],
        questions_removed=[q for q in before if q not in after],
        questions_edited=edited,
    )


def resolve_deployed(value: str) -> str:
    """The config id of a deployed configuration given as a config id, as ``agent:NAME``
    (a deployed assistant's row, ``--agent``), as the path of the YAML ``ragsweep best``
    prints, or as that YAML's text."""
    from ragsweep.answering.agents import PREFIX, row_id
    from ragsweep.sweep.space import SearchSpace

    value = value.strip()
    if value.startswith(PREFIX) and "\n" not in value:
        return row_id(value.removeprefix(PREFIX))
    path = Path(value)
    if "\n" not in value and path.is_file():
        space = SearchSpace.from_yaml(path)
        source = str(path)
    elif "\n" in value or value.endswith((".yaml", ".yml")):
        if "\n" not in value:
            raise RagsweepError(f"--deployed: {value}: no such file")
        try:
            space = SearchSpace.from_dict(yaml.safe_load(value) or {}, source="--deployed")
        except yaml.YAMLError:
            raise RagsweepError("--deployed: malformed YAML") from None
        source = "--deployed"
    else:
        return value
    configs = space.all_configs()
    if len(configs) != 1:
        raise RagsweepError(
            f"{source}: names {len(configs)} configurations; the deployed one must be exactly "
            "one (the YAML `ragsweep best` prints)"
        )
    return configs[0]["config_id"]


def _clusters(board: pa.Table, results: pa.Table, question_ids: list[str]) -> Clusters:
    """The shared questions' clusters as the candidate run recorded them (its unit), or
    each question alone when they are too few (``clusters.of_keys``)."""
    keys: dict[str, str | None] = {}
    for qid, key in zip(
        results["question_id"].to_pylist(), results["cluster"].to_pylist(), strict=True
    ):
        keys.setdefault(qid, key)
    record = settings_of(board).get("clusters") or {}
    documents = (record.get("documents", 0), record.get("documents_effective", 0.0))
    return clusters.of_keys(
        [keys[q] for q in question_ids], record.get("unit", "document"), documents
    )


def _flips(
    base: pa.Table,
    cand: pa.Table,
    config_ids: list[str],
    questions: set[str],
    metric: str,
    labels: dict[str, str],
) -> pa.Table:
    wanted = set(config_ids)
    before = {
        (r["config_id"], r["question_id"]): r
        for r in base.to_pylist()
        if r["config_id"] in wanted and r["question_id"] in questions
    }
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


def verdict_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """The verdicts table as text cells: its header and one row per shared configuration."""
    header = ["verdict", "configuration", "baseline", "candidate", "difference [95% CI]", "p"]
    header += ["to wrong", "to right"]
    rows = []
    for r in comparison.table.to_pylist():
        role = "deployed: " if r["deployed"] else "baseline best: " if r["is_best"] else ""
        rows.append(
            [
                r["verdict"].upper() if r["deployed"] else r["verdict"],
                role + r["label"],
                number(r["baseline"]),
                number(r["candidate"]),
                f"{number(r['difference'])} [{number(r['difference_low'])}, "
                f"{number(r['difference_high'])}]",
                number(r["p_value"], 4),
                str(r["flipped_to_wrong"]),
                str(r["flipped_to_right"]),
            ]
        )
    return header, rows


def render(comparison: Comparison, fmt: str = "table") -> str:
    """The verdicts as a terminal or Markdown table; below it what changed since the
    baseline (``ragsweep.reporting.changes``), what only one run holds, the flips of the
    alarm's configuration, and the alarm."""
    header, rows = verdict_rows(comparison)
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
    bullet = "- " if fmt == "markdown" else ""
    out += ["", "since the baseline:"]
    out += [bullet + line for line in change_lines(comparison.changes)]
    out += ["", *(bullet + line for line in overlap_lines(comparison))]
    out += flip_lines(comparison, bullet)
    out.append(bullet + alarm_line(comparison))
    return "\n".join(out)


def flip_lines(comparison: Comparison, bullet: str = "") -> list[str]:
    """The questions the alarm's configuration (deployed, else the baseline's best) now
    fails: a heading line, then one indented line each (Markdown list items with ``- ``)."""
    subject = comparison.deployed or comparison.best
    if not subject:
        return []
    mine = comparison.flips.filter(pc.equal(comparison.flips["config_id"], subject["config_id"]))
    wrong = [r for r in mine.to_pylist() if r["direction"] == "to wrong"]
    if not wrong:
        return []
    who = "deployed" if subject["deployed"] else "baseline's best"
    return [f"{bullet}questions the {who} configuration now fails ({len(wrong)}):"] + [
        f"  {bullet}{r['question_id']}: {r['reason']}" for r in wrong
    ]


def alarm_line(comparison: Comparison) -> str:
    """The verdict on the hypothesis decided in advance, in one line."""
    alarm = comparison.alarm
    name = (
        f"deployed configuration {alarm.subject}"
        if alarm.hypothesis == DEPLOYED
        else "best of sweep (the best shared configuration of each run)"
    )
    verdict = "REGRESSED" if alarm.regressed else "not regressed"
    figures = (
        f"{comparison.metric}: {number(alarm.baseline)} -> {number(alarm.candidate)} "
        f"({number(alarm.difference)})"
    )
    if not comparison.alarm_can_fire:
        return f"alarm, {name}: no verdict on {figures}: {cannot_fire(comparison)}"
    return f"alarm, {name}: {verdict} on {figures}, {alarm.test}, p = {number(alarm.p_value, 4)}"


def cannot_fire(comparison: Comparison) -> str:
    """Why the alarm gives no verdict, in words (``Comparison.alarm_can_fire`` is false)."""
    count = comparison.clusters.count if comparison.clusters else len(comparison.overlap.questions)
    resampled = f" ({comparison.clusters.describe()})" if comparison.clusters else ""
    return (
        f"with {count} cluster{'' if count == 1 else 's'}{resampled} this alarm cannot fire at "
        "5% (a test over G clusters gives p >= 2^-G); compare on more questions, documents or "
        "sections"
    )


def overlap_lines(comparison: Comparison) -> list[str]:
    """What the runs share (and in which clusters), and what only one of them holds, as
    lines."""
    o, best = comparison.overlap, comparison.baseline_best

    def some(items: list[str]) -> str:
        more = f", ... {len(items) - SHOWN} more" if len(items) > SHOWN else ""
        return f": {', '.join(items[:SHOWN])}{more}" if items else ""

    out = [
        f"compared on what both runs share: {_count(o.configs, 'configuration')}, "
        f"{_count(o.questions, 'question')}"
    ]
    if comparison.clusters:
        out += [comparison.clusters.statement(), *comparison.clusters.cautions()]
    for who, configs, questions in (
        ("only in the baseline", o.configs_removed, o.questions_removed),
        ("only in the candidate", o.configs_added, o.questions_added),
    ):
        if configs:
            out.append(f"{who}: {_count(configs, 'configuration')}{some(configs)}")
        if questions:
            out.append(f"{who}: {_count(questions, 'question')}{some(questions)}")
    if o.questions_edited:
        out.append(
            "edited (same id, new version; not compared): "
            f"{_count(o.questions_edited, 'question')}{some(o.questions_edited)}"
        )
    if best and comparison.best is None:
        out.append(
            f"the baseline's best configuration, {best['label']}, is not in the candidate run: "
            "it has no verdict"
        )
    return out


def _count(items: list, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


# What ``latest`` finds when a sweep has no earlier run: not a failure (a nightly schedule's
# first night; for an unnamed sweep, also the night after its documents, test set or space
# changed).
_NO_BASELINE = (
    "No earlier successful run of this sweep ({sweep}) to compare with: this run is its "
    "first, and the baseline of the next"
)


def sweep_of(leaderboard: pa.Table) -> str:
    """The sweep a run belongs to, as ``latest`` follows it: its name when given, else its
    sweep key (the same documents, test set, search space and metric)."""
    settings = settings_of(leaderboard)
    return settings.get("sweep_name") or settings.get("sweep_key", "")


def no_baseline(leaderboard: pa.Table) -> str:
    """What ``latest`` says when the sweep of ``leaderboard`` has no earlier run."""
    sweep = sweep_of(leaderboard)
    unnamed = sweep == settings_of(leaderboard).get("sweep_key")
    what = (
        f"unnamed, key {sweep}: the same documents, test set, search space and metric; "
        "name it with --sweep to follow it across changes"
        if unnamed
        else f"'{sweep}'"
    )
    return _NO_BASELINE.format(sweep=what)


def resolve_baseline(
    engine: Engine, baseline: str, leaderboard: pa.Table, run_id: str
) -> str | None:
    """A baseline run id: as given, or for ``latest`` the latest successful run of the same
    sweep (``sweep_of``) as ``leaderboard``'s other than ``run_id`` (None when there is
    none)."""
    from ragsweep.store import database

    if baseline != "latest":
        return baseline
    return database.latest_successful(engine, sweep_of(leaderboard), exclude=run_id)


def compare_with_store(
    baseline: str, current: tuple[pa.Table, pa.Table], pipeline_run_id: str, deployed: str = ""
) -> Comparison | None:
    """The compare step: this run against ``baseline`` (a run id, or ``latest``: the latest
    successful run of the same sweep; None when there is none) from the store named by
    ``RAGSWEEP_STORE_URL``; ``deployed``, when given, is the configuration the alarm tests
    (``resolve_deployed``)."""
    import os

    from ragsweep.store import database

    url = os.environ.get(database.ENV)
    if not url:
        raise RagsweepError(
            f"compare: baseline {baseline!r} is read from the results store, but "
            f"{database.ENV} is unset; configure the results-store secret"
        )
    engine = database.connect(url)
    baseline = resolve_baseline(
        engine, baseline, current[0], database.current_run_id(pipeline_run_id)
    )
    if baseline is None:
        log.warning(no_baseline(current[0]))
        return None
    log.info("comparing with baseline run %s", baseline)
    stored = (database.load_leaderboard(engine, baseline), database.load_results(engine, baseline))
    return compare_runs(stored, current, deployed=resolve_deployed(deployed) if deployed else None)


def verdict_metrics(comparison: Comparison) -> dict[str, float]:
    """The figures the compare step logs as KFP metrics: the alarm (``best_regressed``: 1
    when the alarm's hypothesis regressed), verdict counts, and what the runs share."""
    verdicts = comparison.table["verdict"].to_pylist()
    alarm = comparison.alarm
    out = {
        "baseline_found": 1.0,
        "best_regressed": float(alarm.regressed),
        "alarm_difference": alarm.difference,
        "alarm_p_value": alarm.p_value,
        "configurations_regressed": float(verdicts.count(REGRESSED)),
        "configurations_improved": float(verdicts.count(IMPROVED)),
        "baseline_best_missing": float(comparison.best is None),
        "alarm_can_fire": float(comparison.alarm_can_fire),
        "clusters": float(comparison.clusters.count if comparison.clusters else 0),
        **{name: float(n) for name, n in comparison.overlap.counts().items()},
        **{name: float(n) for name, n in comparison.changes.counts().items()},
    }
    best = comparison.best
    if best:
        out.update(
            best_difference=best["difference"],
            best_flipped_to_wrong=float(best["flipped_to_wrong"]),
        )
    return {k: float(v) for k, v in out.items() if v is not None and not np.isnan(v)}
