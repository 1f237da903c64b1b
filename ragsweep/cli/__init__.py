"""The ``ragsweep`` command."""

from __future__ import annotations

import inspect
import logging
import sys
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragsweep.cli.cluster_commands import schedule_app, submit
from ragsweep.cli.label_commands import judges_app, labels_app
from ragsweep.core.errors import RagsweepError, check_at_least, missing_extra, safe_url
from ragsweep.sweep.fanout import LOCAL_SHARD_BYTES

if TYPE_CHECKING:
    from ragsweep.curation.stored_sets import DatabaseStore
    from ragsweep.sweep.options import RunOption
    from ragsweep.sweep.settings import RunSettings

LAST_INTERRUPTED = "last"  # --resume alone
CACHE_VARIABLE = "RAGSWEEP_EMBEDDING_CACHE"  # one embedding cache for a team
KEYWORD = inspect.Parameter.KEYWORD_ONLY

app = typer.Typer(
    help="Find the RAG configuration that works on your documents: sweep, judge, rank.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
testset_app = typer.Typer(
    help="Test sets (Red Hat AutoRAG JSON, Giskard JSONL): convert them, and curate them in "
    "the results database (add, list, show, edit, add-question, delete, export)."
)
app.add_typer(testset_app, name="testset")
app.command()(submit)
app.add_typer(schedule_app, name="schedule")
app.add_typer(labels_app, name="labels")
app.add_typer(judges_app, name="judges")


def main() -> None:
    """Entry point: a user's mistake is one line on stderr and exit status 2. Red Hat
    AutoRAG's Secret keys in the environment stand in for ragsweep's unset ones, as in the
    pipeline's steps."""
    from ragsweep.kubeflow.autorag import adopt_connections

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        adopt_connections()
        sys.argv[1:] = resume_alone(sys.argv[1:])
        app()
    except RagsweepError as exc:
        code = getattr(exc, "exit_code", 2)
        typer.echo(f"error: {exc}" if code < 128 else str(exc), err=True)  # not an error: a stop
        raise SystemExit(code) from None
    except KeyboardInterrupt:  # before or after a run's own handling
        typer.echo("interrupted", err=True)
        raise SystemExit(130) from None


def resume_alone(args: list[str]) -> list[str]:
    """``--resume`` with no run id after it (the last argument, or another option next)
    given the value ``last`` (typer has no option whose value is optional)."""
    out = []
    for i, arg in enumerate(args):
        out.append(arg)
        following = args[i + 1] if i + 1 < len(args) else "-"
        if arg == "--resume" and following.startswith("-"):
            out.append(LAST_INTERRUPTED)
    return out


STORE = typer.Option(
    None,
    help="Results database URL, where test sets are kept "
    "(default: $RAGSWEEP_STORE_URL, else a SQLite file).",
)


def testsets_in(url: str | None) -> DatabaseStore:
    """The test sets of the results database at ``url`` (else the default one)."""
    from ragsweep.curation.stored_sets import DatabaseStore
    from ragsweep.store import database

    return DatabaseStore(database.connect(url))


def check_endpoints(settings: RunSettings) -> None:
    """Fail before the pipeline starts when an endpoint the run needs (an answer model's,
    the test set generator's, the query transformations', the judge's, a ``rerank:<model>``
    reranker's, a deployed assistant's) is unconfigured or does not answer within its
    deadline (at most 10 s)."""
    from ragsweep.models.llm import Endpoint, check_reachable
    from ragsweep.sweep.options import answer_models

    llm = settings.llm
    models = answer_models(list(settings.space.answerers))
    models += [settings.qa_generation.model] if not settings.testset else []
    models += [m for m in [settings.space.transforming_model()] if m]
    endpoints = [Endpoint.from_env(m) for m in models]
    endpoints += [Endpoint.from_env(name, role="JUDGE") for name in llm.judges()]
    endpoints += [
        Endpoint.from_env(name.partition(":")[2], role="RERANK")
        for name in settings.space.rerankers
        if name.startswith("rerank:")
    ]
    endpoints += [agent.endpoint() for agent in settings.deployed()]
    wait = min(10.0, llm.timeout_s, llm.judge_timeout_s if llm.judge else llm.timeout_s)
    for endpoint in {(e.base_url, e.api_key): e for e in endpoints}.values():
        check_reachable(endpoint, wait)


@app.command()
def run(
    ctx: typer.Context,
    testset_name: str = typer.Option(
        "",
        "--testset-name",
        help="Instead of --testset: a test set stored in the results database "
        "(`ragsweep testset list`); the run's results join its versions.",
    ),
    space: Path = typer.Option(
        None,
        help="Search-space YAML file (see examples/space.yaml): the space's fields, and any "
        "option below by its name or AutoRAG's (given options override it).",
    ),
    output: Path = typer.Option(Path("runs"), help="Folder for run folders."),
    top: int = typer.Option(20, help="Leaderboard rows to print."),
    store: str = typer.Option(
        None, help="Results database URL (default: $RAGSWEEP_STORE_URL, else a SQLite file)."
    ),
    no_store: bool = typer.Option(False, "--no-store", help="Do not store the run."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        help="Print kfp.local's lines and every step's output as they come (always in the "
        "run folder's pipeline.log).",
    ),
    mlflow: str = typer.Option(
        None,
        "--mlflow",
        help="Log the sweep to this MLflow tracking URI: a parent run, a child run per "
        "configuration. [default: $MLFLOW_TRACKING_URI, else none]",
    ),
    resume: str = typer.Option(
        None,
        "--resume",
        help="Resume an interrupted run (its id, under --output; alone: the newest "
        "interrupted one) with the settings it started with: the steps that finished are "
        "reused if what they read is unchanged. Only --output, --store, --no-store, --mlflow, "
        "--top, --verbose and --skip-unresolved may be given with it.",
    ),
    **options: Any,
) -> None:
    """Sweep the configurations through the pipeline on this machine and print the leaderboard.

    The run is stored in the results database (unless --no-store); with --baseline the
    exit status is 1 when the best configuration regressed (see `ragsweep compare`).
    Without --testset, one is generated with Giskard (--qa-llm, --num-questions).
    Exit status: 0 succeeded; 1 the best regressed against --baseline; 2 failed (no
    results); 3 partial (results kept in the run folder, a side step or the store failed);
    130 / 143 interrupted by SIGINT / SIGTERM (resume with --resume).
    """
    check_at_least(top, 0, "--top", " (every row)")
    skip_unresolved = bool(options["skip_unresolved"])
    if resume:
        refuse_with_resume(ctx)
        return resume_run(resume, output, store, no_store, mlflow, top, verbose, skip_unresolved)
    from ragsweep.pipelines.sweep_pipeline import sweep
    from ragsweep.runner.local import preflight, run_local

    settings = local_settings(ctx.params)
    preflight(settings.docs, settings.testset, settings.skip_unresolved)  # fails in a moment
    url = checked_store(store, no_store, settings.baseline)
    check_endpoints(settings)
    tracking_uri = checked_tracking_uri(mlflow)
    check_writable(output)
    finish(run_local(sweep, settings, output, url, verbose, tracking_uri), top, settings.patterns)


def local_settings(params: dict[str, Any]) -> RunSettings:
    """The settings of ``ragsweep run`` with ``params`` (its options by name): the
    ``--space`` file's fields and options, the options given over them, and a local run's
    defaults (the user's embedding cache, no shards)."""
    from ragsweep.sweep.options import SHAPERS, build_settings, read_options_file, run_options

    space = params["space"]
    fields, given = read_options_file(space) if space else ({}, {})
    declared = {o.name for o in run_options()} | {s.name for s in SHAPERS}
    given.update({k: v for k, v in params.items() if k in declared and not not_given(v)})
    if not given.get("docs"):
        raise RagsweepError("--docs: missing; the documents to sweep over (or --resume)")
    output, store = params["output"], params["store"]
    testset = resolved_testset(given.get("testset") or "", params["testset_name"], store, output)
    given.update(testset=testset, embedding_cache=local_cache(given.get("embedding_cache")))
    given.setdefault("embedding_shard_bytes", LOCAL_SHARD_BYTES)
    settings = build_settings(given, str(space or "options"), fields)
    if (
        settings.optimization_metric in ("correctness", "answer_relevance")
        and not settings.llm.judge
    ):
        raise RagsweepError(
            f"--metric {settings.optimization_metric}: needs a judge (--judge MODEL)"
        )
    if not settings.testset and not settings.qa_generation.model:
        raise RagsweepError("--testset: none given; to generate one, name a model (--qa-llm)")
    return settings


def not_given(value: Any) -> bool:
    """Whether an option's value is what the command line gives when it is left out: None,
    an unset flag, no repeated value (0 and '' are given values)."""
    return value is None or value is False or (isinstance(value, list | tuple) and not value)


def declared_options() -> list[inspect.Parameter]:
    """``run``'s options from their declarations (``ragsweep.sweep.options``): each under
    its canonical flag, AutoRAG's and older spellings beside it; None when not given."""
    from ragsweep.sweep.options import SHAPERS, run_options

    out = []
    for option in run_options():
        shown = local_default(option)
        help_text = f"{option.declared.help} [default: {shown}]" if shown else option.declared.help
        if option.kind is bool:
            annotation, default = bool, False
        elif option.declared.repeat:
            annotation, default = list[str], None
        else:
            annotation = str if option.kind is list else option.kind
            default = None
        cache = option.field == "embedding_cache"
        extra = {"envvar": CACHE_VARIABLE, "show_envvar": False} if cache else {}
        info = typer.Option(default, *option.flags, help=help_text, show_default=False, **extra)
        out.append(inspect.Parameter(option.name, KEYWORD, default=info, annotation=annotation))
    for shaper in SHAPERS:
        flags = ("--" + shaper.name.replace("_", "-"),)
        info = typer.Option(None, *flags, help=shaper.help, show_default=False)
        out.append(inspect.Parameter(shaper.name, KEYWORD, default=info, annotation=str))
    return out


def local_default(option: RunOption) -> str:
    """An option's default for a run on this machine (``--help``, the docs)."""
    if option.field == "embedding_cache":
        return "~/.cache/ragsweep"
    if option.field == "embedding_shard_bytes":
        return f"{LOCAL_SHARD_BYTES} (never)"
    return option.shown_default()


def local_cache(value: str | None) -> str:
    """The embedding cache of a run on this machine: ``value`` ('none': no cache), else the
    user's cache folder."""
    from ragsweep.models.replies import cache_dir

    if value == "none":
        return ""
    return str(value or cache_dir())


def _run_signature() -> inspect.Signature:
    """``run``'s: the documents and test data first, then ``run``'s own options, then the
    other declared ones."""
    ctx, *own = [p for p in inspect.signature(run).parameters.values() if p.kind != p.VAR_KEYWORD]
    declared = declared_options()
    first = [p for p in declared if p.name in ("docs", "testset")]
    rest = [p for p in declared if p not in first]
    own = [p.replace(kind=KEYWORD) for p in own]
    return inspect.Signature([ctx, *first, *own, *rest])


run.__signature__ = _run_signature()  # type: ignore[attr-defined]


def resolved_testset(testset: str, testset_name: str, store: str | None, output: Path) -> str:
    """The test data file of ``--testset``, or of ``--testset-name`` (a stored set, written
    to a file); '' when neither is given (generate one)."""
    from ragsweep.documents.testsets import STORE_PREFIX

    if testset.startswith(STORE_PREFIX):  # submit's test data; locally, --testset-name
        raise RagsweepError(
            f"--testset {testset!r}: run a stored test set with --testset-name "
            f"{testset.removeprefix(STORE_PREFIX)!r}"
        )
    if not testset_name:
        return testset
    if testset:
        raise RagsweepError("--testset and --testset-name: give one of them")
    return str(stored_testset_file(testset_name, store, output))


def checked_store(store: str | None, no_store: bool, baseline: str) -> str | None:
    """The results database's URL ('' with --no-store), connected to now: a dead database
    fails before the sweep, not after it; and the ``baseline`` run found in it."""
    from ragsweep.store import database

    if baseline and no_store:
        raise RagsweepError("--baseline reads the results database: drop --no-store")
    url = None if no_store else database.resolve_url(store)
    if url:
        engine = database.connect(url)
        if baseline and baseline != "latest":
            database.check_run(engine, baseline)
    return url


# the options of `ragsweep run` that apply to a resumed run; the others are its settings
RESUME_OPTIONS = ("output", "store", "no_store", "mlflow", "top", "verbose", "skip_unresolved")


def refuse_with_resume(ctx: typer.Context) -> None:
    """Refuse, in one line naming them, the options given with ``--resume`` that would
    change the run's settings: it continues with those it started with (``--skip-unresolved``
    applies: it leaves out questions from then on)."""
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name not in (*RESUME_OPTIONS, "resume")
        and getattr(ctx.get_parameter_source(param.name), "name", "") == "COMMANDLINE"
    ]
    if given:
        allowed = [p.opts[0] for p in ctx.command.params if p.name in RESUME_OPTIONS]
        raise RagsweepError(
            f"--resume continues a run with the settings it started with: {', '.join(given)} "
            f"cannot be given with it (start a new run to change them); with --resume, only "
            f"{', '.join(allowed)}"
        )


def resume_run(
    run_id: str,
    output: Path,
    store: str | None,
    no_store: bool,
    mlflow: str | None,
    top: int,
    verbose: bool,
    skip_unresolved: bool = False,
) -> None:
    """``ragsweep run --resume``: the run, continued, with what the store and MLflow checks
    say before it starts."""
    from ragsweep.pipelines.sweep_pipeline import sweep
    from ragsweep.runner.local import resume_local
    from ragsweep.store import database as results_store

    url = None if no_store else results_store.resolve_url(store)
    if url:
        results_store.connect(url)
    tracking_uri = checked_tracking_uri(mlflow)
    which = None if run_id == LAST_INTERRUPTED else run_id
    outcome = resume_local(sweep, output, which, url, verbose, tracking_uri, skip_unresolved)
    finish(outcome, top, patterns=int((outcome.run_dir / "patterns").is_dir()))


def checked_tracking_uri(mlflow: str | None) -> str:
    """The MLflow tracking URI to log to ('' for none), its server checked now."""
    from ragsweep.reporting import tracking

    tracking_uri = tracking.resolve_uri(mlflow)
    if tracking_uri:
        tracking.check_reachable(tracking_uri)  # a dead server fails now, not after the sweep
    return tracking_uri


def check_writable(output: Path) -> None:
    """Fail before the sweep when the run folders cannot be written under ``output``."""
    import tempfile

    try:
        output.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output, prefix=".ragsweep-probe-"):
            pass
    except OSError as exc:
        raise RagsweepError(f"--output: {output}: cannot write there ({exc.strerror})") from None


def finish(outcome, top: int, patterns: int) -> None:
    """Print a run's leaderboard, report, comparison and last line; exit with its status:
    1 when the best regressed, 3 when partial."""
    from ragsweep.core.schemas import read_table, settings_of
    from ragsweep.reporting.regression import render
    from ragsweep.reporting.report import judge_warning

    run_dir = outcome.run_dir
    show(run_dir, top)
    typer.echo(f"report: {run_dir / 'report.html'}")
    if patterns:
        typer.echo(f"patterns: {run_dir / 'patterns'} (indexing.py, inference.py)")
    if outcome.comparison is not None:
        typer.echo(f"\ncompared with run {outcome.baseline} of sweep {outcome.sweep}:")
        typer.echo(render(outcome.comparison))
        typer.echo(f"comparison: {run_dir / 'comparison.md'} (and in the report)")
    elif outcome.no_baseline:
        typer.echo(f"\n{outcome.no_baseline}")
    typer.echo(f"\n{outcome.summary()}", err=outcome.status != "succeeded")
    unreadable = judge_warning(
        settings_of(read_table(run_dir / "leaderboard.arrow", "leaderboard"))
    )
    if unreadable:  # the last line of the output: its verdicts rest on a judge that often failed
        typer.echo(unreadable)
    if outcome.status != "succeeded":
        raise typer.Exit(outcome.exit_code)
    if outcome.comparison is not None and outcome.comparison.best_regressed:
        raise typer.Exit(1)


def stored_testset_file(name: str, url: str | None, output: Path) -> Path:
    """The stored test set ``name`` written losslessly to ``<output>/testsets/<hash>/<name>
    .arrow`` for the pipeline (the folder is named by its content, so a later edit never
    changes the file an earlier run read); a run stores its test set back under ``name``.

    A local run reads the set here, as it starts, rather than as ``store:<name>`` in its
    ``load_testset`` step (as ``submit`` does): the step's ``RAGSWEEP_STORE_URL`` also
    turns publishing on, and ``--no-store`` runs a stored set without publishing."""
    import hashlib
    import json

    from ragsweep.curation.stored_sets import live_questions
    from ragsweep.documents.testsets import check_name, export_testset

    check_name(name, "--testset-name")  # a valid name is a safe file name
    table = live_questions(testsets_in(url), name)
    content = json.dumps(table.to_pylist(), sort_keys=True).encode()
    folder = output / "testsets" / hashlib.sha256(content).hexdigest()[:16]
    return export_testset(table, folder / f"{name}.arrow")


@app.command()
def leaderboard(
    run: str = typer.Argument(
        ..., help="A run folder, a leaderboard artifact file, or a run id in the results database."
    ),
    top: int = typer.Option(20, help="Rows to print (0: all)."),
    sort: str = typer.Option(None, help="Sort by a metric (best first) or a cost column."),
    format: str = typer.Option("table", "--format", help="table, csv, json or markdown."),
    store: str = typer.Option(None, help="Results database URL, for a run id."),
    metric: str = typer.Option(
        None,
        help="correctness_corrected: rank a stored judged run by its judge's correctness "
        "corrected by people's labels (prediction-powered inference).",
    ),
) -> None:
    """Print the leaderboard of a finished run; for a stored judged run, its judge's
    agreement with people's labels."""
    from ragsweep.core.schemas import settings_of
    from ragsweep.evaluation.agreement import CORRECTED_METRIC
    from ragsweep.reporting.exports import render
    from ragsweep.reporting.report import evaluation_summary, statistics_lines

    if metric not in (None, CORRECTED_METRIC):
        raise RagsweepError(f"--metric: only {CORRECTED_METRIC} re-ranks a run; not {metric!r}")
    stored = not (Path(run).exists() or "/" in run or Path(run).suffix)
    if metric and not stored:
        raise RagsweepError(f"--metric {metric}: give a run id in the results database")
    table = load_leaderboard(run, store)
    if metric:
        from ragsweep.curation.labels import corrected_lines

        for line in corrected_lines(store, run, top or None):
            typer.echo(line)
    else:
        typer.echo(render(table, format, top or None, sort))
    if format == "table":
        typer.echo(f"\n{table.num_rows} configurations")
        evaluated = evaluation_summary(settings_of(table))
        for line in ([evaluated] if evaluated else []) + statistics_lines(table):
            typer.echo(line)
        if stored:
            from ragsweep.curation.labels import run_agreement
            from ragsweep.reporting.judge_agreement import agreement_lines
            from ragsweep.store.database import connect

            found = run_agreement(connect(store), run)
            for line in agreement_lines(*found) if found else []:
                typer.echo(line)


@app.command()
def best(
    run: str = typer.Argument(
        ...,
        help="A run folder, or a run id in the results database; or a pattern folder (or its "
        "pattern.json).",
    ),
    store: str = typer.Option(None, help="Results database URL, for a run id."),
) -> None:
    """Print the winning configuration (or a pattern's) as a search-space YAML that
    reproduces it."""
    from ragsweep.reporting.exports import best_spec

    if Path(run).name == "pattern.json" or (Path(run) / "pattern.json").is_file():
        from ragsweep.patterns import pattern_spec

        typer.echo(pattern_spec(Path(run)), nl=False)
        return
    typer.echo(best_spec(load_leaderboard(run, store)), nl=False)


@app.command()
def track(
    run: Path = typer.Argument(..., help="A run folder (`ragsweep run` made it)."),
    mlflow: str = typer.Option(
        None, "--mlflow", help="MLflow tracking URI. [default: $MLFLOW_TRACKING_URI]"
    ),
) -> None:
    """Log a finished run to MLflow: a parent run, a child run per configuration."""
    from ragsweep.core.schemas import read_table
    from ragsweep.reporting.tracking import log_sweep, resolve_uri

    uri = resolve_uri(mlflow)
    if not uri:
        raise RagsweepError("--mlflow: no tracking URI given, and MLFLOW_TRACKING_URI is unset")
    board = run / "leaderboard.arrow"
    if not board.is_file():
        raise RagsweepError(f"{run}: not a run folder (no leaderboard.arrow)")
    report = run / "report.html"
    parent = log_sweep(
        read_table(board, "leaderboard"),
        uri,
        run.resolve().name,
        report=report if report.is_file() else None,
    )
    typer.echo(f"MLflow run {parent.run_id}")


runs_app = typer.Typer(
    help="The runs in the results database (latest first), `runs import RUN_DIR`, and "
    "`runs archive RUN_ID` (`--undo`)."
)
app.add_typer(runs_app, name="runs")


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    store: str = typer.Option(None, help="Results database URL."),
    limit: int = typer.Option(20, help="How many runs, latest first."),
    archived: bool = typer.Option(
        False, "--archived", help="List the archived runs too (marked archived)."
    ),
) -> None:
    """List the runs in the results database, latest first: id, status (succeeded; partial:
    results kept, a side step failed; failed; interrupted), start, metric, best, its sweep
    (its name, or an unnamed sweep's key), and what failed. Archived runs only with
    --archived."""
    if ctx.invoked_subcommand:
        return
    from ragsweep.store import database as results_store

    url = results_store.resolve_url(store)
    engine = results_store.connect(url)
    rows = results_store.list_runs(engine, limit, archived=None if archived else False)
    if not rows:
        hidden = not archived and results_store.list_runs(engine, 1, archived=True)
        more = "; every run is archived: `ragsweep runs --archived` lists them" if hidden else ""
        typer.echo(f"no runs in {safe_url(url)}{more}")
        return
    for r in rows:
        started = r["started_at"].strftime("%Y-%m-%d %H:%M:%S") if r["started_at"] else "-"
        detail = f"  ({r['detail']})" if r.get("detail") else ""
        detail += "  [archived]" if r["archived_at"] else ""
        typer.echo(
            f"{r['run_id']:<28} {r['status']:<11} {started}  {r['optimization_metric'] or '-'}: "
            f"{r['best_label'] or '-'}  (sweep {r['sweep']}){detail}"
        )


@runs_app.command("archive")
def runs_archive(
    run_id: str = typer.Argument(..., help="A stored run's id."),
    undo: bool = typer.Option(False, "--undo", help="Unarchive it."),
    store: str = typer.Option(
        None, help="Results database URL (default: $RAGSWEEP_STORE_URL, else a SQLite file)."
    ),
) -> None:
    """Archive a run: `ragsweep runs` and the UI's runs list hide it unless asked. Its
    results, its comparisons and its use as `baseline=latest` stay as they were."""
    from ragsweep.store import database as results_store
    from ragsweep.store.annotations import archive_run

    url = results_store.resolve_url(store)
    archive_run(results_store.connect(url), run_id, archived=not undo)
    typer.echo(f"{'unarchived' if undo else 'archived'} run {run_id} in {safe_url(url)}")


@runs_app.command("import")
def runs_import(
    run_dir: Path = typer.Argument(..., help="A complete run folder (`ragsweep run` made it)."),
    store: str = typer.Option(
        None, help="Results database URL (default: $RAGSWEEP_STORE_URL, else a SQLite file)."
    ),
) -> None:
    """Store a run folder that was not stored (the store was down at the end of the run, or
    it ran with --no-store), with the status its folder records; a run stored before under
    the folder's name is replaced."""
    from ragsweep.runner.closing import import_folder
    from ragsweep.store import database as results_store

    if not run_dir.is_dir():
        raise RagsweepError(f"{run_dir}: no such run folder")
    url = results_store.resolve_url(store)
    status = import_folder(run_dir, url)
    typer.echo(f"stored run {run_dir.resolve().name} ({status}) in {safe_url(url)}")


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="Baseline: a run folder or a stored run id."),
    candidate: str = typer.Argument(..., help="Candidate: a run folder or a stored run id."),
    metric: str = typer.Option(
        None, help="Metric to compare (default: the baseline's ranking metric)."
    ),
    format: str = typer.Option("table", "--format", help="table or markdown."),
    store: str = typer.Option(None, help="Results database URL, for run ids."),
    deployed: Annotated[
        str,
        typer.Option(
            help="The configuration you deployed, whose regression is the alarm: a config id, "
            "the YAML file `ragsweep best` prints, or agent:NAME (a deployed assistant's "
            "row, run --agent); without it, the alarm is whether the "
            "sweep's best got worse."
        ),
    ] = "",
) -> None:
    """Paired comparison per configuration on what both runs share, with verdicts.

    Configurations are paired by config id, questions by id and version; what only one run
    holds is listed, and what changed since the baseline: documents added, removed and
    edited (by id), the test set, the grid and the settings. The alarm tests one hypothesis
    decided in advance: the --deployed configuration (one-sided paired sign-flip test, 5%),
    else "the sweep's best got worse" (best of sweep against best of sweep, a permutation
    test that swaps the nights, 5%).

    Exit status: 0 when the alarm did not fire, 1 when it did (a significant regression),
    2 on a usage error (unknown run, nothing shared, metric without values).
    """
    from ragsweep.reporting.regression import compare_runs, render, resolve_deployed
    from ragsweep.store.database import open_run

    if format not in ("table", "markdown"):
        raise RagsweepError(f"--format: unknown format {format!r}; choose from table, markdown")
    config = resolve_deployed(deployed) if deployed else None
    result = compare_runs(open_run(baseline, store), open_run(candidate, store), metric, config)
    typer.echo(render(result, format))
    if result.best_regressed:
        raise typer.Exit(1)


@app.command()
def ui(
    store: str = typer.Option(
        None, help="Results database URL [default: $RAGSWEEP_STORE_URL, else a SQLite file]."
    ),
    host: str = typer.Option(
        "127.0.0.1", help="Address to listen on (IPv6 too: ::1); beyond loopback a token."
    ),
    port: int = typer.Option(8765, help="Port to listen on."),
    token: str = typer.Option(
        None,
        envvar="RAGSWEEP_UI_TOKEN",
        help="Access token every request must carry (required with a non-loopback --host).",
    ),
    output: Path = typer.Option(Path("runs"), help="Folder for runs started from the page."),
    docs_root: list[str] = typer.Option(
        None,
        "--docs-root",
        help="A folder or s3://bucket/prefix under which runs started from the page may read "
        "documents; repeatable ('s3://' alone: every bucket). [default: the current folder]",
    ),
    https: bool = typer.Option(
        False,
        "--https",
        help="Browsers reach this ui over HTTPS (e.g. an OpenShift Route): Secure __Host- "
        "cookies, HSTS, and POSTs only from https pages.",
    ),
) -> None:
    """Serve the web app over the results database: runs, trends, leaderboards, drill-downs,
    comparisons, test sets, local runs."""
    from ragsweep.store import database as results_store

    try:
        import uvicorn

        from ragsweep.ui import create_app
        from ragsweep.ui.roots import DocRoots
        from ragsweep.ui.security import check_exposure, is_loopback
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("ragsweep"):
            raise
        raise missing_extra(exc.name, "ui", "ragsweep ui") from None
    check_exposure(host, token)
    roots = DocRoots.of(docs_root) if docs_root else DocRoots.default()

    url = results_store.resolve_url(store)
    bind = host.strip("[]")
    loopback = [bind, "127.0.0.1", "localhost", "::1"] if is_loopback(bind) else None
    app = create_app(
        results_store.connect(url),
        token,
        allowed_hosts=loopback,
        runs_dir=output,
        docs_roots=roots,
        https=https,
    )
    shown = f"[{bind}]" if ":" in bind else bind
    typer.echo(
        f"ragsweep ui on http://{shown}:{port}/ over {safe_url(url)}; runs started from the "
        f"page read documents under: {roots.describe()}"
    )
    uvicorn.run(app, host=bind, port=port, log_level="warning")


def load_leaderboard(run: str, store: str | None):
    from ragsweep.core.schemas import read_table
    from ragsweep.store.database import connect, load_leaderboard

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
    from ragsweep.core.schemas import read_table, settings_of
    from ragsweep.reporting.exports import render
    from ragsweep.reporting.report import evaluation_summary, statistics_lines

    table = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    typer.echo(render(table, top=top or None))
    settings = settings_of(table)
    judge = settings.get("judge")
    judged = (
        f"; judged by {judge['model']} at {judge['endpoint']}" if isinstance(judge, dict) else ""
    )
    typer.echo(
        f"\n{table.num_rows} configurations ranked by {settings.get('optimization_metric')}"
        f"{judged}; results in {run_dir}"
    )
    evaluated = evaluation_summary(settings)
    # the judge's warning is the run's last line (``run``)
    for line in ([evaluated] if evaluated else []) + statistics_lines(table, judge=False):
        typer.echo(line)


@testset_app.command("convert")
def convert(
    source: str = typer.Argument(..., help="AutoRAG .json or Giskard .jsonl (path or s3://)."),
    target: Path = typer.Argument(..., help="Output file: .json (AutoRAG) or .jsonl (Giskard)."),
    docs: str = typer.Option(
        None, help="Documents to resolve IDs against and locate reference spans in."
    ),
) -> None:
    """Convert a test set between the AutoRAG and Giskard formats (every answer and document
    ID kept; a warning on stderr counts the fields the target format has none for)."""
    from ragsweep.documents.sources import read_documents
    from ragsweep.documents.testsets import export_testset, left_out, load_testset

    table = load_testset(source)
    if docs:
        from ragsweep.documents.testsets import resolve_testset

        read = read_documents(docs)
        table = resolve_testset(table, read.table, skipped=read.skipped)
    export_testset(table, target)
    if lost := left_out(table, target):  # one line: the fields the format has none for
        typer.echo(f"warning: {lost}", err=True)
    typer.echo(f"wrote {table.num_rows} questions to {target}")


@app.command()
def generate(
    docs: str = typer.Option(..., help="Documents: a folder or s3://bucket/prefix."),
    out: Path = typer.Option(
        None, help="Test set to write: .jsonl (Giskard), .json (AutoRAG) or .arrow."
    ),
    name: str = typer.Option(
        None, help="Store it in the results database under this name (`ragsweep testset`)."
    ),
    store: str = STORE,
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
    from ragsweep.documents.qagen import QASettings, generate_testset
    from ragsweep.documents.sources import read_documents
    from ragsweep.documents.testsets import check_name, export_testset

    if out is None and not name:
        raise RagsweepError("generate: give --out FILE and/or --name NAME (to store it)")
    if name:
        check_name(name, "--name")
    if out is not None and out.suffix.lower() not in (".json", ".jsonl", ".arrow"):
        raise RagsweepError(
            f"--out: {out}: use .jsonl (Giskard), .json (Red Hat AutoRAG) or .arrow"
        )
    testsets = testsets_in(store) if name else None  # a dead database fails now
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
    topics = ", ".join(sorted({t for t in table.column("topic").to_pylist() if t}))
    if out is not None:
        export_testset(table, out)
        typer.echo(f"wrote {table.num_rows} questions to {out}; topics: {topics}")
    if testsets is not None:
        testsets.save(name, table)
        typer.echo(f"stored {table.num_rows} questions as {name!r}; topics: {topics}")


@testset_app.command("add")
def testset_add(
    name: str = typer.Argument(..., help="Name to store it under."),
    source: str = typer.Argument(
        ..., help="AutoRAG .json, Giskard .jsonl or a ragsweep .arrow test set (path or s3://)."
    ),
    docs: str = typer.Option(
        None, help="Documents to resolve IDs against and locate reference spans in."
    ),
    replace: bool = typer.Option(
        False, "--replace", help="Store it as the new version of the set stored under NAME."
    ),
    store: str = STORE,
) -> None:
    """Store a test set in the results database for curation.

    A name already stored is refused unless --replace: then the file becomes the set's new
    version (a new version of each question that changed, a deletion of each question it no
    longer has), which `ragsweep testset revert NAME` undoes.
    """
    from ragsweep.documents.sources import read_documents
    from ragsweep.documents.testsets import load_testset, resolve_testset

    stored = testsets_in(store)
    if name in stored.names() and not replace:
        raise RagsweepError(
            f"test set {name!r} is stored already ({len(stored.load(name))} questions); "
            "give --replace to store this file as its new version (`ragsweep testset revert "
            f"{name}` goes back), or another name"
        )
    table = load_testset(source)
    if docs:
        read = read_documents(docs)
        table = resolve_testset(table, read.table, skipped=read.skipped)
    stored.save(name, table, comment=f"imported from {PurePosixPath(source).name}")
    typer.echo(f"stored {table.num_rows} questions as {name!r}")


@testset_app.command("versions")
def testset_versions(
    name: str = typer.Argument(..., help="A stored test set."),
    store: str = STORE,
) -> None:
    """List the set's versions (each save of it), newest first: number, time, how many
    questions it stored anew or deleted, how many the set held after it, who and why."""
    from ragsweep.curation import set_versions

    for v in set_versions.versions(testsets_in(store), name):
        why = "  ".join(x for x in (v["author"], v["comment"]) if x)
        typer.echo(
            f"{v['number']:>4}  {v['created_at']:%Y-%m-%d %H:%M:%S} UTC  {v['changed']} stored, "
            f"{v['deleted']} deleted, {v['questions']} question{'s' * (v['questions'] != 1)}"
            + (f"  {why}" if why else "")
        )


@testset_app.command("revert")
def testset_revert(
    name: str = typer.Argument(..., help="A stored test set."),
    to: int = typer.Option(
        None,
        "--to",
        help="The version to go back to (`testset versions`); default: the one "
        "before the latest change.",
    ),
    store: str = STORE,
) -> None:
    """Store the set as it was after an earlier version, as its newest version: the history
    keeps what was reverted, and reverting again undoes the revert."""
    from ragsweep.curation import set_versions

    stored = testsets_in(store)
    number = to if to is not None else set_versions.previous(stored, name)
    set_versions.revert(stored, name, number)
    typer.echo(f"reverted {name!r} to version {number}: {len(stored.load(name))} questions")


@testset_app.command("list")
def testset_list(
    name: str = typer.Argument(None, help="A stored test set: list its questions."),
    store: str = STORE,
) -> None:
    """List the stored test sets, or the questions of one."""
    stored = testsets_in(store)
    if name is None:
        summaries = stored.summaries()
        if not summaries:
            typer.echo("no test sets stored; `ragsweep testset add NAME FILE` stores one")
        for each in summaries:
            when = f"{each['changed_at']:%Y-%m-%d %H:%M} UTC" if each["changed_at"] else "-"
            versions = f"{each['versions']} version{'s' * (each['versions'] != 1)}"
            typer.echo(f"{each['name']}  {each['questions']} questions  {versions}  {when}")
        return
    for row in stored.load(name).to_pylist():
        kind = row["question_type"] or "-"
        typer.echo(f"{row['question_id']}  {kind:<12} {row['topic'] or '-'}: {row['question']}")


def _show(row: dict) -> None:
    spans = ", ".join(
        f"{s['doc_id']}[{s['start']}:{s['end']}]"
        + (f" (approximate, {s['score']:.2f})" if s.get("found") == "approximate" else "")
        for s in row["gold_spans"] or []
    )
    for label, value in [
        ("id", row["question_id"]),
        ("question", row["question"]),
        ("reference answers", " | ".join(row["reference_answers"] or [])),
        ("reference documents", ", ".join(row["reference_doc_ids"] or [])),
        ("type", row["question_type"]),
        ("topic", row["topic"]),
        ("gold spans", spans),
        ("reference context", row["reference_context"]),
        ("version", row["question_version"]),
    ]:
        typer.echo(f"{label}: {value or '-'}")


@testset_app.command("show")
def testset_show(
    name: str = typer.Argument(..., help="A stored test set."),
    question_id: str = typer.Argument(..., help="The question's id."),
    history: bool = typer.Option(
        False, "--history", help="Every stored version of the question, newest first."
    ),
    store: str = STORE,
) -> None:
    """Show one question with its references and metadata (or its every version)."""
    from ragsweep.curation.stored_sets import row_of

    stored = testsets_in(store)
    if history:
        for number, each in enumerate(stored.history(name, question_id)):
            typer.echo(
                ("\n" if number else "") + f"# version {each['version']}, "
                f"{each['created_at']:%Y-%m-%d %H:%M:%S} UTC"
                + (": deleted" if each["deleted"] else "")
            )
            if not each["deleted"]:
                _show(each)
        return
    table = stored.load(name)
    _show(table.slice(row_of(table, question_id), 1).to_pylist()[0])


@testset_app.command("add-question")
def testset_add_question(
    name: str = typer.Argument(..., help="A stored test set."),
    question: str = typer.Option(..., help="The question."),
    answer: list[str] = typer.Option(..., help="A reference answer (repeat for several)."),
    doc: list[str] = typer.Option(
        [], help="A reference document id, as the documents name it (repeat for several)."
    ),
    topic: str = typer.Option(None, help="Its topic."),
    question_type: str = typer.Option(None, "--type", help="Its question type, e.g. simple."),
    store: str = STORE,
) -> None:
    """Add a question to a stored test set; its id is derived from its text and answers."""
    from ragsweep.curation.stored_sets import add_question

    stored = testsets_in(store)
    table = add_question(stored.load(name), question, answer, doc, topic, question_type)
    stored.save(name, table)
    added = table["question_id"][-1].as_py()
    typer.echo(f"added {added}; {table.num_rows} questions in {name!r}")


@testset_app.command("delete")
def testset_delete(
    name: str = typer.Argument(..., help="A stored test set."),
    question_id: str = typer.Argument(..., help="The question to delete."),
    store: str = STORE,
) -> None:
    """Delete a question from a stored test set (kept in its history)."""
    from ragsweep.curation.stored_sets import delete_question

    stored = testsets_in(store)
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
    store: str = STORE,
) -> None:
    """Edit a question's text or reference answers; its context and metadata stay."""
    from ragsweep.curation.stored_sets import edit_question

    if question is None and not answer:
        raise RagsweepError("edit: give --question and/or --answer")
    stored = testsets_in(store)
    stored.save(name, edit_question(stored.load(name), question_id, question, answer or None))
    typer.echo(f"edited {question_id} in {name!r}")


@testset_app.command("export")
def testset_export(
    name: str = typer.Argument(..., help="A stored test set."),
    target: Path = typer.Argument(
        ..., help="Output file: .json (AutoRAG), .jsonl (Giskard) or .arrow (everything)."
    ),
    store: str = STORE,
) -> None:
    """Export a stored test set as AutoRAG JSON, Giskard JSONL or a ragsweep .arrow file."""
    from ragsweep.documents.testsets import export_testset, left_out

    table = testsets_in(store).load(name)
    export_testset(table, target)
    if lost := left_out(table, target):  # one line: the fields the format has none for
        typer.echo(f"warning: {lost}", err=True)
    typer.echo(f"wrote {table.num_rows} questions to {target}")
