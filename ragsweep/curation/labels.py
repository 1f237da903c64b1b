"""People's labels of judged answers, in the results database, and what they tell of a judge.

A label says, of one answer to one question version, whether it is correct: given as
``agree`` / ``disagree`` with the judge's verdict the person saw, or as the person's own
``correct`` / ``incorrect``. It is keyed by the question version, the SHA-256 of the
answer text and the judge (model and prompt version), so it holds for every run that
reproduces the answer; a second label by the same author replaces the first. What an
answer's correctness is does not depend on the judge: any judge's verdicts on a labelled
answer are measured against it (``agreement_of``, ``ragsweep judges compare``).

Files (``import_file`` / ``export_file``): CSV with a header, or JSON Lines, with the
fields of ``FIELDS``; ``answer`` (the text) may stand in for ``answer_hash``.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation import agreement as stats
from ragsweep.models.replies import digest
from ragsweep.store import database

KINDS = ("agree", "disagree", "correct", "incorrect")
NO_JUDGE = "none"  # the judge of a label given where no judge gave a verdict
FORMATS = (".csv", ".jsonl")


def answer_hash(answer: str) -> str:
    return hashlib.sha256((answer or "").encode("utf-8")).hexdigest()


def judge_of(settings: dict[str, Any]) -> tuple[str, str]:
    """(model, prompt version) of the judge a run's settings record, or (``none``, ``none``)."""
    record = settings.get("judge") or {}
    if not isinstance(record, dict) or not record.get("model"):
        return NO_JUDGE, NO_JUDGE
    return record["model"], prompt_version(record)


def prompt_version(record: dict[str, Any]) -> str:
    """12 hex of the judge's prompts, as a run records them (``Judge.record``)."""
    prompts = [record.get(k) for k in ("system_prompt", "template", "out_of_scope_note")]
    return digest(prompts)[:12]


@dataclass(frozen=True)
class Label:
    question_version: str
    answer_hash: str
    judge_model: str
    judge_prompt: str
    kind: str
    correct: bool
    judge_verdict: bool | None = None
    note: str | None = None
    author: str = "unknown"
    question_id: str | None = None

    @classmethod
    def given(
        cls,
        kind: str,
        judge_verdict: bool | None,
        source: str = "label",
        **key: Any,
    ) -> Label:
        """A label from what a person gave; ``agree`` / ``disagree`` need the verdict seen."""
        if kind not in KINDS:
            raise RagsweepError(f"{source}: field 'label': {kind!r} is not one of {list(KINDS)}")
        if kind in ("agree", "disagree"):
            if judge_verdict is None:
                raise RagsweepError(
                    f"{source}: field 'judge_verdict': '{kind}' needs the judge's verdict "
                    "(true or false); label the answer 'correct' or 'incorrect' instead"
                )
            correct = judge_verdict if kind == "agree" else not judge_verdict
        else:
            correct = kind == "correct"
        for name in ("question_version", "answer_hash", "judge_model", "judge_prompt", "author"):
            if not str(key.get(name) or "").strip():
                raise RagsweepError(f"{source}: field {name!r} is missing or empty")
        return cls(kind=kind, correct=correct, judge_verdict=judge_verdict, **key)


FIELDS = [f.name for f in fields(Label)]


def add(engine: Engine, labels: list[Label]) -> int:
    """Store ``labels`` in one transaction, each replacing the same author's earlier label of
    the same answer under the same judge. Returns how many were stored."""
    table = database.labels
    now = datetime.now(UTC)
    with engine.begin() as conn:
        for label in labels:
            key = [
                table.c.question_version == label.question_version,
                table.c.answer_hash == label.answer_hash,
                table.c.judge_model == label.judge_model,
                table.c.judge_prompt == label.judge_prompt,
                table.c.author == label.author,
            ]
            conn.execute(table.delete().where(*key))
            row = asdict(label)
            row["note"] = row["note"] or None
            conn.execute(table.insert().values(**row, created_at=now))
    return len(labels)


def load(engine: Engine) -> list[Label]:
    """Every stored label, oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(sa.select(database.labels).order_by(database.labels.c.id)).mappings()
        return [Label(**{k: r[k] for k in FIELDS}) for r in rows]


def truth(engine: Engine) -> dict[tuple[str, str], bool]:
    """What people say of each labelled (question version, answer hash): correct or not.
    Where people differ, the latest label stands."""
    return {(lb.question_version, lb.answer_hash): lb.correct for lb in load(engine)}


def label_result(
    engine: Engine,
    run_id: str,
    config_id: str,
    question_id: str,
    kind: str,
    author: str,
    note: str | None = None,
) -> Label:
    """Label the answer a stored run's configuration gave to a question, under the run's
    judge and against the verdict it gave there; stored, and returned."""
    board = database.load_leaderboard(engine, run_id)
    settings = json.loads((board.schema.metadata or {}).get(b"ragsweep.settings", b"{}"))
    model, prompt = judge_of(settings)
    results = database.load_results(engine, run_id)
    found = [
        r
        for r in results.select(
            ["config_id", "question_id", "question_version", "answer", "correctness"]
        ).to_pylist()
        if r["config_id"] == config_id and r["question_id"] == question_id
    ]
    if not found:
        raise RagsweepError(
            f"run {run_id!r}: configuration {config_id!r} has no answer to {question_id!r}"
        )
    row = found[0]
    verdict = None if row["correctness"] is None else row["correctness"] >= 0.5
    label = Label.given(
        kind,
        verdict,
        source=f"run {run_id} {config_id} {question_id}",
        question_version=row["question_version"] or "",
        answer_hash=answer_hash(row["answer"] or ""),
        judge_model=model,
        judge_prompt=prompt,
        note=note or None,
        author=author,
        question_id=question_id,
    )
    add(engine, [label])
    return label


# ---------------------------------------------------------------- files


def _boolean(value: Any, source: str, name: str) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("true", "1", "yes", "correct"):
        return True
    if word in ("false", "0", "no", "incorrect", "wrong"):
        return False
    raise RagsweepError(f"{source}: field {name!r}: {value!r} is not true or false")


def _from_record(record: Any, source: str) -> Label:
    if not isinstance(record, dict):
        raise RagsweepError(f"{source}: expected an object with the fields {FIELDS}")
    record = {k: (v.strip() if isinstance(v, str) else v) for k, v in record.items()}
    if not record.get("answer_hash") and record.get("answer") is not None:
        record["answer_hash"] = answer_hash(record["answer"])
    kind = str(record.get("label") or record.get("kind") or "").strip().lower()
    verdict = _boolean(record.get("judge_verdict"), source, "judge_verdict")
    key = {
        name: (str(record[name]) if record.get(name) not in (None, "") else None)
        for name in ("question_version", "answer_hash", "judge_model", "judge_prompt")
        + ("note", "author", "question_id")
    }
    return Label.given(kind, verdict, source=source, **key)


def read_records(path: Path) -> list[tuple[str, Any]]:
    """(``file:line``, record) of each record of a CSV (header row) or JSON Lines file."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise RagsweepError(f"{path}: labels are read from {' or '.join(FORMATS)} files")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RagsweepError(f"{path}: cannot read: {exc}") from None
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        return [(f"{path}:{reader.line_num}", record) for record in reader]
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise RagsweepError(f"{path}:{number}: not JSON: {exc.msg}") from None
    return out


def read_file(path: Path) -> list[Label]:
    """Labels from a CSV (header row) or JSON Lines file; a bad record fails with its file,
    line and field, and nothing is stored."""
    return [_from_record(record, source) for source, record in read_records(path)]


def export_file(engine: Engine, path: Path) -> int:
    """Every stored label to ``path`` (CSV or JSON Lines by its suffix). Returns the count."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise RagsweepError(f"{path}: labels are written to {' or '.join(FORMATS)} files")
    texts = texts_of(engine)
    rows = [
        {**asdict(lb), "label": lb.kind, **texts.get((lb.question_version, lb.answer_hash), {})}
        for lb in load(engine)
    ]
    columns = ["label"] + [f for f in FIELDS if f != "kind"] + list(TEXTS)
    with path.open("w", encoding="utf-8", newline="") as out:
        if path.suffix.lower() == ".csv":
            writer = csv.DictWriter(out, columns, extrasaction="ignore")
            writer.writeheader()
            for row in rows:
                listed = row.get("reference_answers")
                writer.writerow({**row, "reference_answers": json.dumps(listed) if listed else ""})
        else:
            for row in rows:
                out.write(json.dumps({c: row.get(c) for c in columns}) + "\n")
    return len(rows)


TEXTS = ("question", "reference_answers", "question_type", "answer")


def texts_of(engine: Engine) -> dict[tuple[str, str], dict[str, Any]]:
    """What the judges saw of each stored (question version, answer hash): the question, its
    references and type, and the answer text, from the stored results and test sets (for
    ``ragsweep judges compare`` on an exported file)."""
    results, items = database.results, database.testset_items
    out: dict[tuple[str, str], dict[str, Any]] = {}
    with engine.connect() as conn:
        questions = {
            r.question_version: r
            for r in conn.execute(
                sa.select(
                    items.c.question_version,
                    items.c.question,
                    items.c.reference_answers,
                    items.c.question_type,
                ).where(items.c.question_version.is_not(None))
            )
        }
        for version, answer in conn.execute(
            sa.select(results.c.question_version, results.c.answer).distinct()
        ):
            item = questions.get(version)
            if item is not None:
                out[(version, answer_hash(answer or ""))] = {
                    "question": item.question,
                    "reference_answers": item.reference_answers,
                    "question_type": item.question_type,
                    "answer": answer or "",
                }
    return out


# ---------------------------------------------------------------- a run against the labels


@dataclass(frozen=True)
class Judged:
    """A run's judged answers: per result row, its configuration, key and verdict."""

    config_id: list[str]
    question_id: list[str]
    key: list[tuple[str, str]]  # (question version, answer hash)
    verdict: np.ndarray  # float: 1, 0, NaN where no verdict
    token_correct: np.ndarray  # answer_correctness >= 0.5: a second opinion for the queue
    cluster: list[str]  # the question's cluster (its own id when it has none)

    def stratum(self, i: int) -> int:
        """The labelling queue's stratum of row ``i`` (``STRATA``): its verdict, and whether
        the verdict disagrees with answer_correctness. Both follow from the answer and the
        judge, so the stratum is the same in every configuration giving that answer, and
        the same when the corrected score is computed as when the queue drew the label."""
        said = bool(self.verdict[i] >= 0.5)
        return 2 * said + (said != bool(self.token_correct[i]))


# the queue's strata, as ``Judged.stratum`` numbers them
STRATA = {
    0: "judged incorrect, answer_correctness agrees",
    1: "judged incorrect, answer_correctness disagrees",
    2: "judged correct, answer_correctness agrees",
    3: "judged correct, answer_correctness disagrees",
}


def judged_of(engine: Engine, run_id: str) -> tuple[Judged, tuple[str, str]]:
    """The stored run's judged answers and its judge (model, prompt version)."""
    return judged_from(
        database.load_leaderboard(engine, run_id), database.load_results(engine, run_id)
    )


def judged_from(board: pa.Table, results: pa.Table) -> tuple[Judged, tuple[str, str]]:
    """A run's judged answers and its judge (model, prompt version), from its leaderboard
    and results tables."""
    settings = json.loads((board.schema.metadata or {}).get(b"ragsweep.settings", b"{}"))
    rows = results.select(
        ["config_id", "question_id", "question_version", "answer", "correctness"]
        + ["answer_correctness", "cluster"]
    ).to_pydict()
    verdict = np.array([np.nan if v is None else v for v in rows["correctness"]], float)
    tokens = np.array([v is not None and v >= 0.5 for v in rows["answer_correctness"]])
    keys = [
        (qv or "", answer_hash(a or ""))
        for qv, a in zip(rows["question_version"], rows["answer"], strict=True)
    ]
    cluster = [c or q for c, q in zip(rows["cluster"], rows["question_id"], strict=True)]
    found = Judged(rows["config_id"], rows["question_id"], keys, verdict, tokens, cluster)
    return found, judge_of(settings)


def agreement_of(judged: Judged, known: dict[tuple[str, str], bool]) -> stats.Agreement:
    """The judge's agreement with the labels, over each distinct labelled answer once."""
    seen: dict[tuple[str, str], tuple[bool, bool]] = {}
    for key, verdict in zip(judged.key, judged.verdict, strict=True):
        if key in known and not np.isnan(verdict):
            seen[key] = (known[key], bool(verdict >= 0.5))
    pairs = np.array(list(seen.values()), bool).reshape(-1, 2)
    return stats.agreement(pairs[:, 0], pairs[:, 1])


def run_agreement(engine: Engine, run_id: str) -> tuple[stats.Agreement, str] | None:
    """The stored run's judge's agreement with the stored labels, and the judge's name;
    None when the run has no judge."""
    return board_agreement(
        engine, database.load_leaderboard(engine, run_id), database.load_results(engine, run_id)
    )


def board_agreement(
    engine: Engine, board: pa.Table, results: pa.Table
) -> tuple[stats.Agreement, str] | None:
    """The judge's agreement with the labels ``engine`` holds for the answers of a run's
    ``board`` and ``results`` (stored or not), and the judge's name; None without a judge."""
    judged, (model, prompt) = judged_from(board, results)
    if model == NO_JUDGE:
        return None
    return agreement_of(judged, truth(engine)), f"{model} (prompt {prompt})"


def corrected_scores(
    judged: Judged, known: dict[tuple[str, str], bool]
) -> dict[str, dict[str, Any]]:
    """Per configuration: the judged ``correctness`` corrected by the labels of its answers
    (``agreement.corrected``, stratified as the queue draws), its interval, the labels used,
    and ``missing``: why there is no estimate (a stratum with too few labels)."""
    by_config: dict[str, list[int]] = defaultdict(list)
    for i, config in enumerate(judged.config_id):
        if not np.isnan(judged.verdict[i]):
            by_config[config].append(i)
    out = {}
    name = stats.CORRECTED_METRIC
    for config, rows in by_config.items():
        person = np.array([float(known.get(judged.key[i], np.nan)) for i in rows])
        found = stats.corrected(
            np.array([judged.stratum(i) for i in rows]),
            person,
            np.array([judged.cluster[i] for i in rows]),
            STRATA,
        )
        out[config] = {
            name: found.estimate,
            f"{name}_low": found.low,
            f"{name}_high": found.high,
            "labels": found.labels,
            "missing": found.missing,
        }
    return out


# ---------------------------------------------------------------- the labelling queue


@dataclass(frozen=True)
class Proposal:
    config_id: str
    question_id: str
    verdict: bool
    why: str


def queue(engine: Engine, run_id: str, size: int = 20) -> list[Proposal]:
    """The stored run's labelling queue (``queue_of``) against the stored labels."""
    judged, _ = judged_of(engine, run_id)
    return queue_of(judged, truth(engine), size)


def queue_of(judged: Judged, known: dict[tuple[str, str], bool], size: int = 20) -> list[Proposal]:
    """The run's unlabelled judged answers, each distinct answer once, in the order people
    should label them: round robin over the strata configuration x ``STRATA`` (so every
    configuration and both verdicts are labelled early), the strata where the verdict and
    answer_correctness disagree first in each round (their labels teach the most), and
    within a stratum in the order of a hash of the answer: a random sample of the stratum,
    whatever its answers' correctness. That is what keeps the corrected score unbiased
    however many labels are given (``agreement.corrected`` stratifies the same way)."""
    strata: dict[tuple[str, int], list[tuple[str, Proposal]]] = defaultdict(list)
    seen = set()
    for i, key in enumerate(judged.key):
        if np.isnan(judged.verdict[i]) or key in known or key in seen:
            continue
        seen.add(key)
        stratum, config = judged.stratum(i), judged.config_id[i]
        proposal = Proposal(config, judged.question_id[i], stratum >= 2, STRATA[stratum])
        strata[(config, stratum)].append((digest(list(key)), proposal))
    ordered = sorted(
        ((position, 1 - stratum % 2, config, -stratum), proposal)
        for (config, stratum), items in strata.items()
        for position, (_, proposal) in enumerate(sorted(items, key=lambda item: item[0]))
    )
    return [proposal for _, proposal in ordered[:size]]


def corrected_board(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """The run's configurations ranked by ``correctness_corrected`` (best first; those
    without enough labels last), each with its raw judged ``correctness`` and interval."""
    judged, _ = judged_of(engine, run_id)
    scores = corrected_scores(judged, truth(engine))
    board = database.load_leaderboard(engine, run_id).to_pylist()
    name = stats.CORRECTED_METRIC
    rows = []
    for row in board:
        figures = scores.get(
            row["config_id"], {name: float("nan"), "labels": 0, "missing": "no verdicts"}
        )
        rows.append({**{k: row.get(k) for k in ("config_id", "label", "correctness")}, **figures})
        rows[-1].update(correctness_low=row.get("correctness_low"))
        rows[-1].update(correctness_high=row.get("correctness_high"))
    sign = stats.CORRECTED.sign()
    rows.sort(key=lambda r: -sign * r[name] if np.isfinite(r[name]) else np.inf)
    return rows


def corrected_lines(store: str | None, run_id: str, top: int | None = None) -> list[str]:
    """``corrected_board`` as the lines ``ragsweep leaderboard --metric`` prints."""
    name = stats.CORRECTED_METRIC
    rows = corrected_board(database.connect(store), run_id)[:top]

    def figure(row: dict, metric: str) -> str:
        value, low, high = (row.get(metric), row.get(f"{metric}_low"), row.get(f"{metric}_high"))
        if value is None or not np.isfinite(value):
            return "-"
        return f"{value:.3f} [{low:.3f}, {high:.3f}]"

    width = max([len(r["label"] or "") for r in rows] + [13])
    lines = [f"rank  {'configuration':<{width}}  {name} [95% CI]  labels  correctness (judge)"]
    for rank, row in enumerate(rows, 1):
        lines.append(
            f"{rank:>4}  {row['label'] or row['config_id']:<{width}}  "
            f"{figure(row, name):>32}  {row['labels']:>6}  {figure(row, 'correctness')}"
        )
    lines.append(
        f"{name}: the judge's correctness corrected by people's labels of the same answers "
        "(prediction-powered inference, stratified as the labelling queue draws, clustered)"
    )
    lines += [
        f"  '-' #{rank}: {row['missing']}" for rank, row in enumerate(rows, 1) if row.get("missing")
    ]
    return lines
