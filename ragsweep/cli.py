"""The ``ragsweep`` command."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ragsweep.errors import RagsweepError
from ragsweep.leaderboard import AUTO_METRIC, render
from ragsweep.llm import LLMSettings
from ragsweep.space import DEFAULT_EMBEDDING_MODEL, SearchSpace

if TYPE_CHECKING:
    from ragsweep.curation import FolderStore

LLM_DEFAULTS = LLMSettings()

app = typer.Typer(
    help="Find the RAG configuration that works on your documents: sweep, judge, rank.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
testset_app = typer.Typer(help="Work with test sets (Red Hat AutoRAG JSON, Giskard JSONL).")
app.add_typer(testset_app, name="testset")


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


def text_or_file(value: str | None, flag: str) -> str | None:
    """The option's text, or the contents of the file it names as ``@path``."""
    if value is None or not value.startswith("@"):
        return value
    try:
        return Path(value[1:]).read_text(encoding="utf-8")
    except OSError as exc:
        raise RagsweepError(f"{flag}: {value[1:]}: {exc.strerror}") from None


def check_endpoints(models: list[str], judge: str) -> None:
    """Fail before the pipeline starts when an endpoint is unconfigured or unreachable."""
    from ragsweep.llm import Endpoint, check_reachable

    endpoints = [Endpoint.from_env(m) for m in models]
    endpoints += [Endpoint.from_env(judge, role="JUDGE")] if judge else []
    for endpoint in {(e.base_url, e.api_key): e for e in endpoints}.values():
        check_reachable(endpoint)


@app.command()
def run(
    docs: str = typer.Option(..., help="Documents: a folder or s3://bucket/prefix."),
    testset: str = typer.Option(
        "",
        help="Test data: AutoRAG .json or Giskard .jsonl, a path or s3://bucket/key. "
        "None: generate one with Giskard (--qa-llm).",
    ),
    chunk_sizes: str = typer.Option("64,128,256", help="Chunk sizes in model tokens."),
    chunk_overlaps: str = typer.Option("16", help="Chunk overlaps in model tokens."),
    top_k: str = typer.Option("1,3,5", help="Top K values."),
    search_types: str = typer.Option("similarity,mmr", help="Search types."),
    embedding_models: str = typer.Option(DEFAULT_EMBEDDING_MODEL, help="Embedding models."),
    metric: str = typer.Option(
        AUTO_METRIC,
        help="Metric to rank by; auto: the judge's correctness with --judge, else "
        "answer_correctness.",
    ),
    output: Path = typer.Option(Path("runs"), help="Folder for run folders."),
    top: int = typer.Option(20, help="Leaderboard rows to print."),
    llm: str = typer.Option(
        "", help="Answer with these models (RAGSWEEP_LLM_BASE_URL) instead of extractively."
    ),
    judge: str = typer.Option(
        "", help="Judge every answer with this model (RAGSWEEP_JUDGE_BASE_URL, else the LLM's)."
    ),
    temperature: float = typer.Option(LLM_DEFAULTS.temperature, help="Answer temperature."),
    max_tokens: int = typer.Option(LLM_DEFAULTS.max_tokens, help="Longest answer, in tokens."),
    system_prompt: str = typer.Option(None, help="Answer system prompt: text, or @file."),
    prompt_template: str = typer.Option(
        None, help="Answer prompt with {context} and {question}: text, or @file."
    ),
    concurrency: int = typer.Option(LLM_DEFAULTS.concurrency, help="Requests in flight."),
    qa_llm: str = typer.Option(
        "", help="Without --testset: the model that generates one (default: the first --llm)."
    ),
    num_questions: int = typer.Option(20, help="Without --testset: questions to generate."),
    question_types: str = typer.Option(
        "simple,complex", help="Without --testset: Giskard question types to generate."
    ),
) -> None:
    """Sweep the configurations through the pipeline on this machine and print the leaderboard."""
    from ragsweep.runner import run_local

    models = str_list(llm)
    space = SearchSpace.from_dict(
        {
            "chunk_sizes": int_list(chunk_sizes, "--chunk-sizes"),
            "chunk_overlaps": int_list(chunk_overlaps, "--chunk-overlaps"),
            "top_ks": int_list(top_k, "--top-k"),
            "search_types": str_list(search_types),
            "embedding_models": str_list(embedding_models),
            "answerers": [f"llm:{m}" for m in models] or None,
        },
        source="options",
    )
    settings = LLMSettings.from_dict(
        {
            "temperature": temperature,
            "max_tokens": max_tokens,
            "system_prompt": text_or_file(system_prompt, "--system-prompt"),
            "prompt_template": text_or_file(prompt_template, "--prompt-template"),
            "judge": judge,
            "concurrency": concurrency,
        },
        source="options",
    )
    if metric == "correctness" and not judge:
        raise RagsweepError("--metric correctness: needs a judge (--judge MODEL)")
    qa_generation = None
    if not testset:
        from ragsweep.qagen import QASettings

        qa_llm = qa_llm or (models[0] if models else "")
        qa_generation = QASettings.from_dict(
            {"model": qa_llm, "num_questions": num_questions, "question_types": question_types},
            source="options",
        ).to_dict()
        if not qa_llm:
            raise RagsweepError("--testset: none given; to generate one, name a model (--qa-llm)")
    check_endpoints(models + ([qa_llm] if not testset else []), judge)
    run_dir = run_local(docs, testset, space, metric, output, settings, qa_generation)
    show(run_dir, top)


@app.command()
def leaderboard(
    run_dir: Path = typer.Argument(..., help="A run folder written by `ragsweep run`."),
    top: int = typer.Option(20, help="Rows to print (0: all)."),
) -> None:
    """Print the leaderboard of a finished run."""
    show(run_dir, top)


def show(run_dir: Path, top: int) -> None:
    from ragsweep.schemas import read_table

    path = run_dir / "leaderboard.arrow"
    if not path.is_file():
        raise RagsweepError(f"{run_dir}: no leaderboard.arrow here; is it a ragsweep run folder?")
    table = read_table(path, "leaderboard")
    typer.echo(render(table, top or None))
    ranked_by = (table.schema.metadata or {}).get(b"ragsweep.ranked_by", b"").decode()
    typer.echo(f"\n{table.num_rows} configurations ranked by {ranked_by}; results in {run_dir}")
    scores = run_dir / "scores.arrow"
    record = (read_table(scores, "scores").schema.metadata or {}) if scores.is_file() else {}
    if b"ragsweep.judge" in record:
        judge = json.loads(record[b"ragsweep.judge"])
        typer.echo(
            f"judged by {judge['model']} at {judge['endpoint']} "
            "(its prompt is in the metadata of scores.arrow: ragsweep.judge)"
        )


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


@app.command()
def generate(
    docs: str = typer.Option(..., help="Documents: a folder or s3://bucket/prefix."),
    out: Path = typer.Option(..., help="Test set to write: .jsonl (Giskard) or .json (AutoRAG)."),
    llm: str = typer.Option(..., help="The model that writes the questions (RAGSWEEP_LLM_*)."),
    num_questions: int = typer.Option(20, help="Questions to generate."),
    question_types: str = typer.Option(
        "simple,complex",
        help="Giskard question types: simple, complex, distracting, situational, double, "
        "conversational, out-of-scope.",
    ),
    agent_description: str = typer.Option(
        None, help="What the assistant under test does; Giskard writes questions for it."
    ),
    language: str = typer.Option("en", help="Language of the questions and answers."),
    chunk_size: int = typer.Option(256, help="Chunk size for Giskard's knowledge base, in tokens."),
) -> None:
    """Generate a Q&A test set from the documents with Giskard RAGET."""
    from ragsweep.qagen import QASettings, generate_testset
    from ragsweep.sources import read_documents
    from ragsweep.testset import export_testset

    if out.suffix.lower() not in (".json", ".jsonl"):
        raise RagsweepError(f"--out: {out}: use .jsonl (Giskard) or .json (Red Hat AutoRAG)")
    settings = QASettings.from_dict(
        {
            "model": llm,
            "num_questions": num_questions,
            "question_types": question_types,
            "agent_description": agent_description,
            "language": language,
            "chunk_size": chunk_size,
        },
        source="options",
    )
    table = generate_testset(read_documents(docs).table, settings)
    export_testset(table, out)
    topics = sorted({t for t in table.column("topic").to_pylist() if t})
    typer.echo(f"wrote {table.num_rows} questions to {out}; topics: {', '.join(topics)}")


STORE = typer.Option(
    None, help="Folder of stored test sets (default: $RAGSWEEP_TESTSETS or ./testsets)."
)


def store_at(folder: Path | None) -> FolderStore:
    from ragsweep.curation import FolderStore

    return FolderStore(folder)


@testset_app.command("add")
def testset_add(
    name: str = typer.Argument(..., help="Name to store it under."),
    source: str = typer.Argument(..., help="AutoRAG .json or Giskard .jsonl (path or s3://)."),
    docs: str = typer.Option(
        None, help="Documents to resolve IDs against and locate reference spans in."
    ),
    store: Path = STORE,
) -> None:
    """Store a test set for curation."""
    from ragsweep.sources import read_documents
    from ragsweep.testset import load_testset, resolve_testset

    table = load_testset(source)
    if docs:
        table = resolve_testset(table, read_documents(docs).table)
    store_at(store).save(name, table)
    typer.echo(f"stored {table.num_rows} questions as {name!r}")


@testset_app.command("list")
def testset_list(
    name: str = typer.Argument(None, help="A stored test set: list its questions."),
    store: Path = STORE,
) -> None:
    """List the stored test sets, or the questions of one."""
    stored = store_at(store)
    if name is None:
        for each in stored.names():
            typer.echo(f"{each}  {stored.load(each).num_rows} questions")
        return
    for row in stored.load(name).to_pylist():
        kind = row["question_type"] or "-"
        typer.echo(f"{row['question_id']}  {kind:<12} {row['topic'] or '-'}: {row['question']}")


@testset_app.command("show")
def testset_show(
    name: str = typer.Argument(..., help="A stored test set."),
    question_id: str = typer.Argument(..., help="The question's id."),
    store: Path = STORE,
) -> None:
    """Show one question with its references and metadata."""
    from ragsweep.curation import row_of

    table = store_at(store).load(name)
    row = table.slice(row_of(table, question_id), 1).to_pylist()[0]
    spans = ", ".join(f"{s['doc_id']}[{s['start']}:{s['end']}]" for s in row["gold_spans"])
    for label, value in [
        ("id", row["question_id"]),
        ("question", row["question"]),
        ("reference answers", " | ".join(row["reference_answers"])),
        ("reference documents", ", ".join(row["reference_doc_ids"])),
        ("type", row["question_type"]),
        ("topic", row["topic"]),
        ("gold spans", spans),
        ("reference context", row["reference_context"]),
    ]:
        typer.echo(f"{label}: {value or '-'}")


@testset_app.command("delete")
def testset_delete(
    name: str = typer.Argument(..., help="A stored test set."),
    question_id: str = typer.Argument(..., help="The question to delete."),
    store: Path = STORE,
) -> None:
    """Delete a question from a stored test set."""
    from ragsweep.curation import delete_question

    stored = store_at(store)
    table = delete_question(stored.load(name), question_id)
    stored.save(name, table)
    typer.echo(f"deleted {question_id}; {table.num_rows} questions left in {name!r}")


@testset_app.command("edit")
def testset_edit(
    name: str = typer.Argument(..., help="A stored test set."),
    question_id: str = typer.Argument(..., help="The question to edit."),
    question: str = typer.Option(None, help="The new question text."),
    answer: list[str] = typer.Option(
        None, help="The new reference answer (repeat for several); replaces the old ones."
    ),
    store: Path = STORE,
) -> None:
    """Edit a question's text or reference answers; its context and metadata stay."""
    from ragsweep.curation import edit_question

    if question is None and not answer:
        raise RagsweepError("edit: give --question and/or --answer")
    stored = store_at(store)
    stored.save(name, edit_question(stored.load(name), question_id, question, answer or None))
    typer.echo(f"edited {question_id} in {name!r}")


@testset_app.command("export")
def testset_export(
    name: str = typer.Argument(..., help="A stored test set."),
    target: Path = typer.Argument(..., help="Output file: .json (AutoRAG) or .jsonl (Giskard)."),
    store: Path = STORE,
) -> None:
    """Export a stored test set as AutoRAG JSON or Giskard JSONL."""
    from ragsweep.testset import export_testset

    table = store_at(store).load(name)
    export_testset(table, target)
    typer.echo(f"wrote {table.num_rows} questions to {target}")
