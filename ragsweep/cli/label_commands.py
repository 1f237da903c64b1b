"""``ragsweep labels`` (people's labels of judged answers) and ``ragsweep judges`` (judges
measured against them)."""

from __future__ import annotations

from pathlib import Path

import typer

from ragsweep.core.errors import RagsweepError

labels_app = typer.Typer(
    help="People's labels of judged answers in the results database: add, import, export, "
    "the labelling queue, and the judge's agreement with them.",
    no_args_is_help=True,
)
judges_app = typer.Typer(help="Judges measured against people's labels.", no_args_is_help=True)

STORE = typer.Option(None, "--store", help="Results database URL. [default: $RAGSWEEP_STORE_URL]")


def _engine(store: str | None):
    from ragsweep.store.database import connect

    return connect(store)


@labels_app.command("add")
def add(
    run: str = typer.Argument(..., help="A run id in the results database."),
    config: str = typer.Option(..., "--config", help="The configuration's id."),
    question: str = typer.Option(..., "--question", help="The question's id."),
    label: str = typer.Option(
        ..., "--label", help="agree or disagree (with the judge), or correct or incorrect."
    ),
    note: str = typer.Option(None, help="Why, in a sentence."),
    author: str = typer.Option(..., "--author", help="Who labels."),
    store: str = STORE,
) -> None:
    """Label one judged answer of a stored run."""
    from ragsweep.curation import labels

    engine = _engine(store)
    found = labels.label_result(engine, run, config, question, label.lower(), author, note)
    typer.echo(
        f"labelled {question} of {config}: the answer is "
        f"{'correct' if found.correct else 'incorrect'} (judge {found.judge_model})"
    )


@labels_app.command("import")
def import_(
    path: Path = typer.Argument(..., help="A .csv (with a header) or .jsonl file of labels."),
    store: str = STORE,
) -> None:
    """Store the labels of a file; a bad record stops the import, naming its line and field,
    and nothing is stored."""
    from ragsweep.curation import labels

    typer.echo(f"imported {labels.add(_engine(store), labels.read_file(path))} labels")


@labels_app.command("export")
def export(
    path: Path = typer.Argument(..., help="A .csv or .jsonl file to write."),
    store: str = STORE,
) -> None:
    """Write every stored label to a file."""
    from ragsweep.curation import labels

    typer.echo(f"exported {labels.export_file(_engine(store), path)} labels to {path}")


@labels_app.command("queue")
def queue(
    run: str = typer.Argument(..., help="A run id in the results database."),
    size: int = typer.Option(20, help="How many answers to propose."),
    store: str = STORE,
) -> None:
    """The run's judged answers to label next, the most telling first."""
    from ragsweep.curation import labels

    for p in labels.queue(_engine(store), run, size):
        verdict = "correct" if p.verdict else "incorrect"
        typer.echo(f"{p.config_id}  {p.question_id}  judge: {verdict}  ({p.why})")


@labels_app.command("agreement")
def agreement(
    run: str = typer.Argument(..., help="A run id in the results database."),
    report: Path = typer.Option(
        None, help="A run's report.html to write the agreement into (its judge section)."
    ),
    mlflow: str = typer.Option(
        None, "--mlflow", help="Log the agreement to this MLflow tracking URI's run of RUN."
    ),
    store: str = STORE,
) -> None:
    """The run's judge against the stored labels: labels, accuracy, Cohen's kappa with its
    interval, the confusion matrix; in the report and MLflow on request."""
    from ragsweep.curation import labels
    from ragsweep.reporting.judge_agreement import agreement_lines, insert_agreement

    found = labels.run_agreement(_engine(store), run)
    if found is None:
        raise RagsweepError(f"run {run!r} was not judged by an LLM: no verdicts to measure")
    measured, judge = found
    for line in agreement_lines(measured, judge):
        typer.echo(line)
    if report is not None:
        insert_agreement(report, measured, judge)
    if mlflow:
        from ragsweep.reporting.tracking import log_agreement

        log_agreement(mlflow, run, measured, judge)


@judges_app.command("compare")
def compare(
    judges: str = typer.Option(
        ..., "--judges", help="Judge models, comma-separated (served at RAGSWEEP_JUDGE_BASE_URL)."
    ),
    labels_file: Path = typer.Option(
        ..., "--labels", help="Labelled answers: .csv or .jsonl with question, references, answer."
    ),
    prompts: list[str] = typer.Option(
        None,
        "--prompt",
        help="A version of the judge's instructions (system prompt): text, or @file; "
        "repeat to compare versions: each judge model runs with each.",
    ),
) -> None:
    """Run each judge on the labelled answers (the file holds what the judges see) and rank
    the judges by Cohen's kappa."""
    from ragsweep.curation.judge_choice import compare_judges, read_labelled
    from ragsweep.sweep.options import text_or_file

    names = [j.strip() for j in judges.split(",") if j.strip()]
    if not names:
        raise RagsweepError("--judges: name at least one judge model")
    versions: dict[str, str] = {}
    for i, given in enumerate(prompts or [], 1):
        name = Path(given[1:]).name if given.startswith("@") else f"prompt {i}"
        if name in versions:
            raise RagsweepError(f"--prompt: two versions named {name}; give files other names")
        versions[name] = text_or_file(given, "--prompt")
    ranked = compare_judges(names, read_labelled(labels_file), prompts=versions)
    for rank, (name, measured) in enumerate(ranked, 1):
        typer.echo(f"{rank}. {name}: {measured.statement()}")
