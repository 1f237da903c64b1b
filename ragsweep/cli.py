"""The ``ragsweep`` command."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ragsweep.cli_openshift import schedule_app, submit
from ragsweep.errors import RagsweepError
from ragsweep.leaderboard import DEFAULT_METRIC, render
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


def int_list(value: str, flag: str) -> list[int]:
    try:
        return [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise RagsweepError(
            f"{flag}: expected whole numbers separated by commas, got {value!r}"
        ) from None


def str_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@app.command()
def run(
    docs: str = typer.Option(..., help="Documents: a folder or s3://bucket/prefix."),
    testset: str = typer.Option(
        ..., help="Test data: AutoRAG .json or Giskard .jsonl, a path or s3://bucket/key."
    ),
    chunk_sizes: str = typer.Option("64,128,256", help="Chunk sizes in model tokens."),
    chunk_overlaps: str = typer.Option("16", help="Chunk overlaps in model tokens."),
    top_k: str = typer.Option("1,3,5", help="Top K values."),
    search_types: str = typer.Option("similarity,mmr", help="Search types."),
    embedding_models: str = typer.Option(DEFAULT_EMBEDDING_MODEL, help="Embedding models."),
    metric: str = typer.Option(DEFAULT_METRIC, help="Metric to rank by."),
    max_configs: int = typer.Option(
        DEFAULT_MAX_CONFIGS, help="Refuse a larger grid (0: no limit)."
    ),
    output: Path = typer.Option(Path("runs"), help="Folder for run folders."),
    top: int = typer.Option(20, help="Leaderboard rows to print."),
) -> None:
    """Sweep the configurations through the pipeline on this machine and print the leaderboard."""
    from ragsweep.runner import run_local

    space = SearchSpace.from_dict(
        {
            "chunk_sizes": int_list(chunk_sizes, "--chunk-sizes"),
            "chunk_overlaps": int_list(chunk_overlaps, "--chunk-overlaps"),
            "top_ks": int_list(top_k, "--top-k"),
            "search_types": str_list(search_types),
            "embedding_models": str_list(embedding_models),
        },
        source="options",
    )
    run_dir = run_local(docs, testset, space, metric, output, max_configs)
    show(run_dir, top)


@app.command()
def leaderboard(
    run_dir: Path = typer.Argument(
        ..., help="A run folder of `ragsweep run`, or a leaderboard artifact file."
    ),
    top: int = typer.Option(20, help="Rows to print (0: all)."),
) -> None:
    """Print the leaderboard of a finished run."""
    show(run_dir, top)


def show(run_dir: Path, top: int) -> None:
    from ragsweep.schemas import read_table

    path = run_dir if run_dir.is_file() else run_dir / "leaderboard.arrow"
    if not path.is_file():
        raise RagsweepError(f"{run_dir}: no leaderboard.arrow here; is it a ragsweep run folder?")
    table = read_table(path, "leaderboard")
    typer.echo(render(table, top or None))
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
