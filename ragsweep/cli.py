"""The ``ragsweep`` command."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ragsweep.cli_openshift import schedule_app, submit
from ragsweep.errors import RagsweepError
from ragsweep.leaderboard import DEFAULT_METRIC
from ragsweep.space import DEFAULT_EMBEDDING_MODEL, DEFAULT_MAX_CONFIGS, SearchSpace

app = typer.Typer(
    help="Find the RAG configuration that works on your documents: sweep, judge, rank.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
testset_app = typer.Typer(help="Work with test sets (Red Hat AutoRAG JSON, Giskard JSONL).")
app.add_typer(testset_app, name="testset")
app.command()(submit)
app.add_typer(schedule_app, name="schedule")


def main() -> None:
    """Entry point: a user's mistake is one line on stderr and exit status 2."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        app()
    except RagsweepError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


def values(text: str) -> list:
    """Comma-separated values; numbers become numbers, for the search space to check."""
    out: list = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        try:
            out.append(int(item))
        except ValueError:
            try:
                out.append(float(item))
            except ValueError:
                out.append(item)
    return out


@app.command()
def run(
    docs: str = typer.Option(..., help="Documents: a folder or s3://bucket/prefix."),
    testset: str = typer.Option(
        ..., help="Test data: AutoRAG .json or Giskard .jsonl, a path or s3://bucket/key."
    ),
    space: Path = typer.Option(None, help="Search-space YAML file (see examples/space.yaml)."),
    chunkers: str = typer.Option(None, help="Chunkers: sentence, token. [default: sentence]"),
    chunk_sizes: str = typer.Option(
        None, help="Chunk sizes in model tokens. [default: 64,128,192]"
    ),
    chunk_overlaps: str = typer.Option(
        None, help="Overlaps: tokens, or a fraction of the size below 1. [default: 16]"
    ),
    embedding_models: str = typer.Option(None, help=f"[default: {DEFAULT_EMBEDDING_MODEL}]"),
    top_k: str = typer.Option(None, help="Top K values. [default: 1,3,5]"),
    search_types: str = typer.Option(
        None, help="similarity, mmr, hybrid (BM25 + vector). [default: similarity,mmr]"
    ),
    mmr_lambdas: str = typer.Option(None, help="MMR relevance weights. [default: 0.5]"),
    metric: str = typer.Option(DEFAULT_METRIC, help="Metric to rank by."),
    max_configs: int = typer.Option(
        DEFAULT_MAX_CONFIGS, help="Refuse a larger grid (0: no limit)."
    ),
    max_document_bytes: int = typer.Option(
        0, help="Document budget in bytes of text; cited documents first. 0: all."
    ),
    max_questions: int = typer.Option(0, help="Evaluate a random sample of questions. 0: all."),
    seed: int = typer.Option(42, help="Seed of both samples."),
    cache: str = typer.Option(
        None,
        help="Embedding cache: a folder or s3://bucket/prefix; 'none' to turn it off. "
        "[default: ~/.cache/ragsweep]",
    ),
    output: Path = typer.Option(Path("runs"), help="Folder for run folders."),
    top: int = typer.Option(20, help="Leaderboard rows to print."),
    store: str = typer.Option(
        None, help="Results database URL [default: $RAGSWEEP_STORE_URL, else a SQLite file]."
    ),
    no_store: bool = typer.Option(False, "--no-store", help="Do not store the run."),
    baseline: str = typer.Option(
        "", help="Compare with this stored run id, or `latest` run of the same sweep."
    ),
) -> None:
    """Sweep the configurations through the pipeline on this machine and print the leaderboard.

    The run is stored in the results database (unless --no-store); with --baseline the
    exit status is 1 when the best configuration regressed (see `ragsweep compare`).
    """
    from ragsweep import store as results_store
    from ragsweep.embedcache import default_location
    from ragsweep.runner import run_local
    from ragsweep.settings import RunSettings

    options = {  # search-space field -> the option's text; an option given overrides --space
        "chunkers": chunkers,
        "chunk_sizes": chunk_sizes,
        "chunk_overlaps": chunk_overlaps,
        "embedding_models": embedding_models,
        "top_ks": top_k,
        "search_types": search_types,
        "mmr_lambdas": mmr_lambdas,
    }
    data = SearchSpace.from_yaml(space).to_dict() if space else {}
    data.update({field: values(text) for field, text in options.items() if text is not None})
    settings = RunSettings(
        docs=docs,
        testset=testset,
        space=SearchSpace.from_dict(data, source=str(space or "options")),
        optimization_metric=metric,
        max_configs=max_configs,
        max_document_bytes=max_document_bytes,
        max_questions=max_questions,
        seed=seed,
        embedding_cache="" if cache == "none" else str(cache or default_location()),
        baseline=baseline,
    )
    if baseline and no_store:
        raise RagsweepError("--baseline reads the results database: drop --no-store")
    url = None if no_store else results_store.resolve_url(store)
    if url:
        results_store.connect(url)  # a dead database fails now, not after the sweep
    run_dir = run_local(settings, output, store_url=url)
    show(run_dir, top)
    typer.echo(f"report: {run_dir / 'report.html'}")
    if baseline:
        from ragsweep.regression import resolve_baseline
        from ragsweep.schemas import read_table

        board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
        engine = results_store.connect(url)
        baseline = resolve_baseline(engine, baseline, board, run_dir.name)
        typer.echo(f"\ncompared with run {baseline}:")
        compare(baseline, str(run_dir), metric=None, format="table", store=url)


@app.command()
def leaderboard(
    run: str = typer.Argument(
        ..., help="A run folder, a leaderboard artifact file, or a run id in the results database."
    ),
    top: int = typer.Option(20, help="Rows to print (0: all)."),
    sort: str = typer.Option(None, help="Sort by a metric (best first) or a cost column."),
    format: str = typer.Option("table", "--format", help="table, csv, json or markdown."),
    store: str = typer.Option(None, help="Results database URL, for a run id."),
) -> None:
    """Print the leaderboard of a finished run."""
    from ragsweep.exports import render

    table = load_leaderboard(run, store)
    typer.echo(render(table, format, top or None, sort))
    if format == "table":
        typer.echo(f"\n{table.num_rows} configurations")


@app.command()
def best(
    run: str = typer.Argument(..., help="A run folder, or a run id in the results database."),
    store: str = typer.Option(None, help="Results database URL, for a run id."),
) -> None:
    """Print the winning configuration as a search-space YAML that reproduces it."""
    from ragsweep.exports import best_spec

    typer.echo(best_spec(load_leaderboard(run, store)), nl=False)


@app.command()
def runs(
    store: str = typer.Option(None, help="Results database URL."),
    limit: int = typer.Option(20, help="How many runs, latest first."),
) -> None:
    """List the runs in the results database, latest first."""
    from ragsweep import store as results_store

    url = results_store.resolve_url(store)
    rows = results_store.list_runs(results_store.connect(url), limit)
    if not rows:
        typer.echo(f"no runs in {results_store.safe_url(url)}")
        return
    for r in rows:
        started = r["started_at"].strftime("%Y-%m-%d %H:%M:%S") if r["started_at"] else "-"
        typer.echo(
            f"{r['run_id']:<28} {r['status']:<9} {started}  {r['optimization_metric'] or '-'}: "
            f"{r['best_label'] or '-'}"
        )


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="Baseline: a run folder or a stored run id."),
    candidate: str = typer.Argument(..., help="Candidate: a run folder or a stored run id."),
    metric: str = typer.Option(None, help="Metric to compare [default: the baseline's]."),
    format: str = typer.Option("table", "--format", help="table or markdown."),
    store: str = typer.Option(None, help="Results database URL, for run ids."),
) -> None:
    """Paired comparison per configuration on the shared questions, with verdicts.

    Exit status: 0 when the best configuration (the baseline's) did not regress, 1 when it
    regressed significantly (one-sided paired sign-flip test, 5%), 2 on a usage error.
    """
    from ragsweep.regression import compare_runs, render
    from ragsweep.store import open_run

    result = compare_runs(open_run(baseline, store), open_run(candidate, store), metric)
    typer.echo(render(result, format))
    if result.best_regressed:
        raise typer.Exit(1)


def load_leaderboard(run: str, store: str | None):
    from ragsweep.schemas import read_table
    from ragsweep.store import connect, load_leaderboard

    folder = Path(run)
    if folder.is_file():  # a leaderboard artifact downloaded from a pipeline run
        return read_table(folder, "leaderboard")
    if folder.is_dir():
        path = folder / "leaderboard.arrow"
        if not path.is_file():
            raise RagsweepError(f"{run}: no leaderboard.arrow here; is it a ragsweep run folder?")
        return read_table(path, "leaderboard")
    if "/" in run or folder.suffix:
        raise RagsweepError(f"{run}: no such run folder")
    return load_leaderboard(connect(store), run)


def show(run_dir: Path, top: int) -> None:
    from ragsweep.exports import render
    from ragsweep.schemas import read_table

    table = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    typer.echo(render(table, top=top or None))
    typer.echo(f"\n{table.num_rows} configurations; results in {run_dir}")


@testset_app.command("convert")
def convert(
    source: str = typer.Argument(..., help="AutoRAG .json or Giskard .jsonl (path or s3://)."),
    target: Path = typer.Argument(..., help="Output file: .json (AutoRAG) or .jsonl (Giskard)."),
    docs: str = typer.Option(
        None, help="Documents to resolve IDs against and locate reference spans in."
    ),
) -> None:
    """Convert a test set between the AutoRAG and Giskard formats."""
    from ragsweep.sources import read_documents
    from ragsweep.testset import export_testset, load_testset

    table = load_testset(source)
    if docs:
        from ragsweep.testset import resolve_testset

        table = resolve_testset(table, read_documents(docs).table)
    export_testset(table, target)
    typer.echo(f"wrote {table.num_rows} questions to {target}")
