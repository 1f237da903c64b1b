"""The OpenShift AI commands: ``ragsweep submit`` and ``ragsweep schedule``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ragsweep.core.errors import RagsweepError, check_at_least
from ragsweep.kubeflow import openshift
from ragsweep.kubeflow.cron import normalise
from ragsweep.kubeflow.tasks import DEFAULT_CONNECTION, load_resources

if TYPE_CHECKING:
    from ragsweep.sweep.settings import RunSettings

schedule_app = typer.Typer(
    help="Recurring (nightly) runs on OpenShift AI: create, list, pause, resume, delete.",
    no_args_is_help=True,
)

# Where the pipelines are (flags, then environment, then the kubeconfig: see
# ragsweep.kubeflow.openshift)
HOST = typer.Option(
    None, help="Pipelines API URL (default: RAGSWEEP_KFP_HOST, or found from the kubeconfig)"
)
TOKEN = typer.Option(
    None, help="Bearer token (default: RAGSWEEP_KFP_TOKEN, or the kubeconfig's)", show_default=False
)
NAMESPACE = typer.Option(
    None, "--namespace", "-n", help="Project (default: the kubeconfig context's)"
)
DSPA = typer.Option(None, help="Pipeline server, when the project has several.")
KUBECONFIG = typer.Option(None, help="kubeconfig file (default: KUBECONFIG, ~/.kube/config)")
CA_CERT = typer.Option(None, help="CA bundle that signed the pipelines route's certificate.")
# What to run
DOCS = typer.Option(..., help="Documents: s3://bucket/prefix, or a folder inside the image.")
TESTSET = typer.Option(
    None, help="Test data: s3://bucket/key.json(l), or a file in the image.", show_default=False
)
TESTSET_NAME = typer.Option(
    None,
    "--testset-name",
    help="Instead of --testset: a test set stored in the results database, read as it is "
    "when each run starts (test_data_key store:NAME; the results-store Secret names the "
    "database).",
    show_default=False,
)
DOCS_SECRET = typer.Option(DEFAULT_CONNECTION, help="S3 connection (Secret) for the documents.")
TESTSET_SECRET = typer.Option(
    None, help="S3 connection for the test data (default: --docs-secret)", show_default=False
)
PARAM = typer.Option(
    [],
    "--param",
    "-p",
    help="NAME=VALUE pipeline parameter, VALUE as JSON or else text (docs/openshift.md)",
)
AGENT = typer.Option(
    [],
    "--agent",
    help="A deployed RAG application to evaluate beside the sweep, NAME=URL (pipeline "
    "parameter agents; its key RAGSWEEP_AGENT_API_KEY in the LLM endpoint's Secret). "
    "Repeatable.",
)
EXPERIMENT = typer.Option("ragsweep", help="Experiment to file the runs under.")
SWEEP = typer.Option(
    None,
    "--sweep",
    help="The sweep's name (pipeline parameter sweep_name; letters, digits, . _ -), which "
    "baseline=latest follows across changed documents, test sets and grids.",
    show_default=False,
)
IMAGE = typer.Option(
    None,
    help="Image for the steps (default: RAGSWEEP_IMAGE, else the project's ragsweep ImageStream)",
)
RESOURCES = typer.Option(None, help="YAML file of per-step CPU and memory (RAGSWEEP_RESOURCES).")
PACKAGE = typer.Option(None, help="A compiled pipeline YAML to use instead of compiling one.")
PARALLELISM = typer.Option(
    0, help="Chunk configurations run at once (0: no bound); compiled into the pipeline."
)
GPU = typer.Option(
    0,
    "--gpu",
    help="NVIDIA GPUs for each embedding step (0: none); compiled into the pipeline.",
)


DRY_RUN = typer.Option(
    False,
    "--dry-run",
    help="Check the parameters, print what would be submitted, and stop: no cluster is asked.",
)


def checked(
    package: Path | None,
    resources: str | None,
    parallelism: int,
    gpus: int,
    arguments: dict,
) -> RunSettings:
    """Check everything that needs no cluster, before one is asked: ``--parallelism``,
    ``--gpu``, ``--package`` or ``--resources``, and the pipeline's arguments, with the
    settings the pipeline's first step builds from them (the run's settings)."""
    check_at_least(parallelism, 0, "--parallelism", " (no bound)")
    check_at_least(gpus, 0, "--gpu", " (none)")
    if package is not None:
        if not package.is_file():
            raise RagsweepError(f"--package {package}: no such file")
        if parallelism or gpus:
            raise RagsweepError(
                "--parallelism and --gpu are compiled into the pipeline: "
                "drop them with --package, or drop --package"
            )
    else:
        load_resources(resources)
    return openshift.preflight(package or openshift.packaged_pipeline(), arguments)


@contextmanager
def prepared(
    package: Path | None,
    image: str | None,
    resources: str | None,
    namespace: str | None,
    parallelism: int = 0,
    gpus: int = 0,
) -> Iterator[Path]:
    """The compiled pipeline: ``package`` as given (``checked`` first), or one compiled for
    the image (with the fan-out's ``parallelism`` and each embedding step's ``gpus``)."""
    if package is not None:
        yield package
        return
    with tempfile.TemporaryDirectory() as tmp:
        image = image or openshift.default_image(namespace)
        target = Path(tmp) / "ragsweep.yaml"
        yield openshift.compile_pipeline(target, image, resources, parallelism, gpus)


def test_data_location(testset: str | None, testset_name: str | None) -> str:
    """The test data of ``--testset`` (a file), or of ``--testset-name`` (``store:<name>``)."""
    from ragsweep.documents.testsets import STORE_PREFIX, check_name

    if testset is not None and testset_name is not None:
        raise RagsweepError("--testset and --testset-name: give one of them")
    if testset_name is not None:
        if not testset_name.strip():
            raise RagsweepError("--testset-name: name a test set stored in the results database")
        return STORE_PREFIX + check_name(testset_name, "--testset-name")
    if testset is None:
        raise RagsweepError(
            "no test data: give --testset (a file) or --testset-name (a stored test set)"
        )
    return testset


def submit(
    docs: str = DOCS,
    testset: str = TESTSET,
    testset_name: str = TESTSET_NAME,
    docs_secret: str = DOCS_SECRET,
    testset_secret: str = TESTSET_SECRET,
    param: list[str] = PARAM,
    agent: list[str] = AGENT,
    experiment: str = EXPERIMENT,
    run_name: str = typer.Option(None, help="Run name (default: ragsweep and the UTC time)"),
    sweep: str = SWEEP,
    wait: bool = typer.Option(False, help="Follow the run to its end."),
    poll_seconds: float = typer.Option(30.0, help="With --wait: seconds between looks."),
    image: str = IMAGE,
    resources: str = RESOURCES,
    parallelism: int = PARALLELISM,
    gpu: int = GPU,
    package: Path = PACKAGE,
    host: str = HOST,
    token: str = TOKEN,
    namespace: str = NAMESPACE,
    dspa: str = DSPA,
    kubeconfig: str = KUBECONFIG,
    ca_cert: str = CA_CERT,
    dry_run: bool = DRY_RUN,
) -> None:
    """Run the sweep on OpenShift AI Data Science Pipelines; print the run id and its URL.
    Every parameter is checked before the cluster is asked (``--dry-run``: only that)."""
    check_at_least(poll_seconds, 0, "--poll-seconds")
    test_data = test_data_location(testset, testset_name)
    arguments = openshift.run_arguments(docs, test_data, docs_secret, testset_secret, param)
    openshift.name_sweep(arguments, sweep)
    openshift.add_agents(arguments, agent)
    settings = checked(package, resources, parallelism, gpu, arguments)
    if dry_run:
        show_submission(settings, arguments, package, image, parallelism, gpu, experiment)
        return
    endpoint = openshift.connect(host, token, namespace, dspa, kubeconfig, ca_cert)
    pipelines = openshift.Pipelines(endpoint)
    with prepared(package, image, resources, endpoint.namespace, parallelism, gpu) as compiled:
        run_id = pipelines.submit(compiled, arguments, experiment, run_name or openshift.run_name())
    typer.echo(f"run {run_id} in experiment '{experiment}'")
    typer.echo(f"  {endpoint.run_url(run_id)}")
    if not wait:
        return
    run = pipelines.wait(run_id, poll_seconds, lambda line: typer.echo(f"  {line}"))
    if run.state != "SUCCEEDED":
        raise RagsweepError(f"run {run_id} ended {run.state}: {openshift.failure(run)}")
    typer.echo(
        "the leaderboard is output 'leaderboard' of step 'rank' (every score: output 'results'): "
        "download it from the run's page and print it with `ragsweep leaderboard FILE`"
    )


def show_submission(
    settings: RunSettings,
    arguments: dict,
    package: Path | None,
    image: str | None,
    parallelism: int,
    gpus: int,
    experiment: str,
) -> None:
    """What ``submit`` would send: the pipeline, the experiment and the arguments (Secrets
    travel by name, so none of their values is among them)."""
    if package is not None:
        typer.echo(f"pipeline: {package}")
    else:
        image = image or os.environ.get("RAGSWEEP_IMAGE") or "the project's ragsweep ImageStream"
        typer.echo(f"pipeline: compiled for {image} (parallelism {parallelism}, GPUs {gpus})")
    configs = len(settings.all_configs())
    typer.echo(f"experiment: {experiment}; {configs} configuration(s)")
    typer.echo("parameters: " + json.dumps(arguments, indent=2, sort_keys=True))
    typer.echo("dry run: parameters valid; nothing submitted, no cluster asked")


@schedule_app.command("create")
def schedule_create(
    cron: str = typer.Option(
        ..., help="When, in UTC: '0 2 * * *' (5 fields) or '0 0 2 * * *' (seconds first)."
    ),
    name: str = typer.Option(
        "ragsweep-nightly", help="Schedule name; also its sweep's name unless --sweep gives one."
    ),
    sweep: str = SWEEP,
    docs: str = DOCS,
    testset: str = TESTSET,
    testset_name: str = TESTSET_NAME,
    docs_secret: str = DOCS_SECRET,
    testset_secret: str = TESTSET_SECRET,
    param: list[str] = PARAM,
    agent: list[str] = AGENT,
    experiment: str = EXPERIMENT,
    image: str = IMAGE,
    resources: str = RESOURCES,
    parallelism: int = PARALLELISM,
    gpu: int = GPU,
    package: Path = PACKAGE,
    host: str = HOST,
    token: str = TOKEN,
    namespace: str = NAMESPACE,
    dspa: str = DSPA,
    kubeconfig: str = KUBECONFIG,
    ca_cert: str = CA_CERT,
) -> None:
    """Run the sweep on a cron schedule, one run at a time, never catching up missed runs.
    Its runs are one sweep, named after the schedule (or --sweep), so that a run's
    baseline=latest is the schedule's last successful run whatever changed since."""
    schedule = normalise(cron)
    if schedule.note:
        typer.echo(f"note: {schedule.note}")
    test_data = test_data_location(testset, testset_name)
    arguments = openshift.run_arguments(docs, test_data, docs_secret, testset_secret, param)
    openshift.name_sweep(arguments, sweep, schedule=name)
    openshift.add_agents(arguments, agent)
    checked(package, resources, parallelism, gpu, arguments)
    endpoint = openshift.connect(host, token, namespace, dspa, kubeconfig, ca_cert)
    pipelines = openshift.Pipelines(endpoint)
    with prepared(package, image, resources, endpoint.namespace, parallelism, gpu) as compiled:
        created = pipelines.create_schedule(name, schedule, compiled, arguments, experiment)
    typer.echo(
        f"schedule '{name}' ({created.recurring_run_id}) runs {schedule.describe()}: "
        f"cron '{schedule.expression}'"
    )


@schedule_app.command("list")
def schedule_list(
    host: str = HOST,
    token: str = TOKEN,
    namespace: str = NAMESPACE,
    dspa: str = DSPA,
    kubeconfig: str = KUBECONFIG,
    ca_cert: str = CA_CERT,
) -> None:
    """List the schedules of the pipeline server."""
    endpoint = openshift.connect(host, token, namespace, dspa, kubeconfig, ca_cert)
    schedules = openshift.Pipelines(endpoint).schedules()
    for s in schedules:
        state = "paused" if str(s.mode).endswith("DISABLE") else "active"
        cron = s.trigger.cron_schedule.cron if s.trigger and s.trigger.cron_schedule else "-"
        typer.echo(f"{s.display_name}  {s.recurring_run_id}  {state}  cron '{cron}' (UTC)")
    typer.echo(f"{len(schedules)} schedule(s)")


def _change(action: str):
    def command(
        schedule: str = typer.Argument(..., help="Schedule name or id."),
        host: str = HOST,
        token: str = TOKEN,
        namespace: str = NAMESPACE,
        dspa: str = DSPA,
        kubeconfig: str = KUBECONFIG,
        ca_cert: str = CA_CERT,
    ) -> None:
        endpoint = openshift.connect(host, token, namespace, dspa, kubeconfig, ca_cert)
        changed = openshift.Pipelines(endpoint).set_schedule(schedule, action)
        done = {"pause": "paused", "resume": "resumed", "delete": "deleted"}[action]
        typer.echo(f"{done} schedule '{changed.display_name}' ({changed.recurring_run_id})")

    command.__doc__ = {
        "pause": "Pause a schedule: no runs until it is resumed, and none to catch up then.",
        "resume": "Resume a paused schedule.",
        "delete": "Delete a schedule (its past runs stay).",
    }[action]
    return command


for _action in ("pause", "resume", "delete"):
    schedule_app.command(_action)(_change(_action))
