"""Run the pipeline on OpenShift AI Data Science Pipelines: connect, submit, schedule.

Where the pipelines API is, and the bearer token for it, come from (first found):

1. ``--host`` / ``--token``;
2. ``RAGSWEEP_KFP_HOST`` (or kfp's own ``KF_PIPELINES_ENDPOINT``) / ``RAGSWEEP_KFP_TOKEN``;
3. the current kubeconfig (``oc login``): the ``DataSciencePipelinesApplication`` of the
   namespace, its ``ds-pipeline-<name>`` route, and the kubeconfig user's token.

Every failure to connect is one line that says what to check; the token never appears in
one.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import ssl
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow.cron import Cron

if TYPE_CHECKING:
    from ragsweep.sweep.settings import RunSettings

log = logging.getLogger("ragsweep")

HOST_ENVS = ("RAGSWEEP_KFP_HOST", "KF_PIPELINES_ENDPOINT")
TOKEN_ENV = "RAGSWEEP_KFP_TOKEN"
DASHBOARD_ENV = "RAGSWEEP_DASHBOARD_URL"
DSPA_GROUP = "datasciencepipelinesapplications.opendatahub.io"
DSPA_VERSIONS = ("v1", "v1alpha1")
INTERNAL_REGISTRY = "image-registry.openshift-image-registry.svc:5000"
FINAL_STATES = {"SUCCEEDED", "FAILED", "SKIPPED", "CANCELED"}
TIMEOUT = (5, 30)  # seconds to connect, to read


@dataclass(frozen=True)
class Endpoint:
    """A Data Science Pipelines API, the token to use it with, and its namespace if known."""

    host: str
    token: str = field(repr=False)
    namespace: str | None = None
    ca_cert: str | None = None

    def run_url(self, run_id: str) -> str:
        """The run's page in the OpenShift AI dashboard (``RAGSWEEP_DASHBOARD_URL``), else
        its address in the pipelines API."""
        dashboard = os.environ.get(DASHBOARD_ENV, "").rstrip("/")
        if dashboard and self.namespace:
            return f"{dashboard}/develop-train/pipelines/runs/{self.namespace}/runs/{run_id}"
        return f"{self.host}/apis/v2beta1/runs/{run_id}"


# ---- finding the endpoint --------------------------------------------------------------------


def connect(
    host: str | None = None,
    token: str | None = None,
    namespace: str | None = None,
    dspa: str | None = None,
    kubeconfig: str | None = None,
    ca_cert: str | None = None,
) -> Endpoint:
    """The endpoint from flags, then environment, then the kubeconfig (see the module doc)."""
    host = host or next((os.environ[e] for e in HOST_ENVS if os.environ.get(e)), None)
    token = token or os.environ.get(TOKEN_ENV) or None
    if host and token:
        return Endpoint(_with_scheme(host), token, namespace, ca_cert)
    cluster = _Kube(kubeconfig)
    namespace = namespace or cluster.namespace
    if not host:
        if not namespace:
            raise RagsweepError(
                "no namespace: give --namespace, or set one in the kubeconfig (oc project NAME)"
            )
        host = cluster.pipelines_host(namespace, dspa)
    return Endpoint(_with_scheme(host), token or cluster.token(), namespace, ca_cert)


def _with_scheme(host: str) -> str:
    return (host if "://" in host else f"https://{host}").rstrip("/")


class _Kube:
    """The cluster of the current kubeconfig, through the kubernetes client."""

    def __init__(self, kubeconfig: str | None) -> None:
        from kubernetes import client, config

        self.configuration = client.Configuration()
        # no file given: KUBECONFIG, else ~/.kube/config, read now (the client reads it once,
        # when it is imported)
        kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            config.load_kube_config(kubeconfig, client_configuration=self.configuration)
            _, active = config.list_kube_config_contexts(kubeconfig)
        except (config.ConfigException, OSError) as exc:
            raise RagsweepError(
                f"no usable kubeconfig ({exc}): log in with `oc login`, or give --host and "
                "--token (or RAGSWEEP_KFP_HOST and RAGSWEEP_KFP_TOKEN)"
            ) from None
        self.namespace: str | None = (active or {}).get("context", {}).get("namespace")
        self.api = client.ApiClient(self.configuration)

    def token(self) -> str:
        bearer = self.configuration.api_key.get("authorization", "")
        if not bearer.startswith("Bearer "):
            raise RagsweepError(
                "the kubeconfig's user has no bearer token (a client certificate?): log in "
                "with `oc login --token=...`, or give --token"
            )
        return bearer.removeprefix("Bearer ")

    def pipelines_host(self, namespace: str, name: str | None) -> str:
        """The route of the namespace's DataSciencePipelinesApplication."""
        dspas = self._dspas(namespace)
        names = sorted(d["metadata"]["name"] for d in dspas)
        if not names:
            if self._namespace_missing(namespace):
                raise RagsweepError(f"namespace '{namespace}' does not exist")
            raise RagsweepError(
                f"no DataSciencePipelinesApplication in namespace '{namespace}': configure a "
                "pipeline server (OpenShift AI dashboard) or `oc apply -k manifests`"
            )
        if name is None and len(names) > 1:
            raise RagsweepError(
                f"namespace '{namespace}' has several pipeline servers {names}: choose one with "
                "--dspa"
            )
        name = name or names[0]
        if name not in names:
            raise RagsweepError(f"no pipeline server '{name}' in namespace '{namespace}': {names}")
        route = self._call(
            lambda custom: custom.get_namespaced_custom_object(
                "route.openshift.io",
                "v1",
                namespace,
                "routes",
                f"ds-pipeline-{name}",
                _request_timeout=TIMEOUT,
            ),
            "custom",
        )
        if route is None:
            raise RagsweepError(
                f"pipeline server '{name}' has no route ds-pipeline-{name} in '{namespace}' yet: "
                f"is it ready? (oc get dspa {name} -n {namespace})"
            )
        scheme = "https" if route.get("spec", {}).get("tls") else "http"
        return f"{scheme}://{route['spec']['host']}"

    def _namespace_missing(self, namespace: str) -> bool:
        """True when the API says so; a user who may not read namespaces cannot tell."""
        try:
            found = self._call(
                lambda api: api.read_namespace(namespace, _request_timeout=TIMEOUT), "core"
            )
        except RagsweepError:  # 403: this user may not look
            return False
        return found is None

    def _dspas(self, namespace: str) -> list[dict]:
        for version in DSPA_VERSIONS:
            found = self._call(
                lambda custom, v=version: custom.list_namespaced_custom_object(
                    DSPA_GROUP,
                    v,
                    namespace,
                    "datasciencepipelinesapplications",
                    _request_timeout=TIMEOUT,
                ),
                "custom",
            )
            if found is not None:
                return found.get("items", [])
        raise RagsweepError(
            "this cluster has no DataSciencePipelinesApplication API: is OpenShift AI with "
            "Data Science Pipelines installed?"
        )

    def _call(self, request: Callable[[Any], Any], kind: str) -> Any:
        """Make a request: None when it answers 404 (not found), any other failure as one
        line."""
        from kubernetes import client
        from urllib3.exceptions import HTTPError

        api = client.CustomObjectsApi(self.api) if kind == "custom" else client.CoreV1Api(self.api)
        try:
            return request(api)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 401:
                raise RagsweepError(
                    f"the Kubernetes API at {self.configuration.host} refused the kubeconfig's "
                    "token (401): it has expired or is wrong: log in again with `oc login`"
                ) from None
            if exc.status == 403:
                raise RagsweepError(
                    f"the Kubernetes API at {self.configuration.host} forbade it (403): "
                    f"{_reason(exc.body) or exc.reason}"
                ) from None
            raise RagsweepError(
                f"the Kubernetes API at {self.configuration.host} answered {exc.status}: "
                f"{_reason(exc.body) or exc.reason}"
            ) from None
        except HTTPError as exc:
            raise RagsweepError(
                f"cannot reach the Kubernetes API at {self.configuration.host}: "
                f"{type(exc).__name__}"
            ) from None


def _reason(body: Any) -> str:
    """The message of a JSON error body (Kubernetes Status, or the pipelines API's)."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return ""
    return str(data.get("message") or data.get("error") or "") if isinstance(data, dict) else ""


# ---- the pipelines API -----------------------------------------------------------------------


def _ssl_context(ca_cert: str | None) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=ca_cert)
    except (OSError, ssl.SSLError) as exc:
        raise RagsweepError(f"--ca-cert {ca_cert}: cannot load ({exc})") from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def check(endpoint: Endpoint) -> None:
    """Ask the API's health endpoint with the token; any failure is one line."""
    url = f"{endpoint.host}/apis/v2beta1/healthz"
    opener = urllib.request.build_opener(
        _NoRedirect, urllib.request.HTTPSHandler(context=_ssl_context(endpoint.ca_cert))
    )
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {endpoint.token}"})
    where = f"the pipelines API at {endpoint.host}"
    try:
        with opener.open(request, timeout=TIMEOUT[0] + TIMEOUT[1]) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        raise RagsweepError(_http_error(where, exc.code, exc.read())) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ssl.SSLError):
            raise RagsweepError(
                f"{where}: TLS verification failed ({getattr(reason, 'reason', reason)}): give "
                "the cluster's ingress CA with --ca-cert"
            ) from None
        raise RagsweepError(f"cannot reach {where}: {reason}") from None
    except TimeoutError:
        raise RagsweepError(f"cannot reach {where}: no answer in time") from None


def _http_error(where: str, status: int, body: Any) -> str:
    if status == 401:
        return (
            f"{where} refused the token (401 Unauthorized): it is wrong or has expired; "
            "`oc whoami -t` prints a fresh one"
        )
    if status == 403:
        return (
            f"{where} forbade the token's user (403 Forbidden): it needs access to the "
            "project's pipeline server (the project's edit role, or manifests/rbac.yaml)"
        )
    if 300 <= status < 400:
        return f"{where} redirected to a login page ({status}): give a bearer token"
    if status == 404:
        return f"{where}: not found (404): is this a Data Science Pipelines API address?"
    return f"{where} answered {status}: {_reason(body) or 'no message'}"


class Pipelines:
    """A kfp.Client on an endpoint that was checked first, with API errors as one line."""

    def __init__(self, endpoint: Endpoint) -> None:
        import kfp

        check(endpoint)
        self.endpoint = endpoint
        with _quiet():
            self.client = kfp.Client(
                host=endpoint.host, existing_token=endpoint.token, ssl_ca_cert=endpoint.ca_cert
            )

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[None]:
        """Run kfp calls quietly (kfp prints links of its own) and turn their errors into one
        line naming ``what`` was being done."""
        from kfp_server_api import ApiException
        from urllib3.exceptions import HTTPError

        where = f"the pipelines API at {self.endpoint.host}"
        try:
            with _quiet():
                yield
        except ApiException as exc:
            raise RagsweepError(
                f"could not {what}: " + _http_error(where, exc.status, exc.body)
            ) from None
        except HTTPError as exc:
            raise RagsweepError(f"could not {what}: cannot reach {where} ({exc})") from None

    def experiment_id(self, name: str) -> str:
        with self.call(f"find or create experiment '{name}'"):
            return self.client.create_experiment(name=name).experiment_id

    def submit(self, package: Path, arguments: dict, experiment: str, run_name: str) -> str:
        """Create a run of the compiled pipeline in ``experiment``; return its id."""
        experiment_id = self.experiment_id(experiment)
        with self.call("create the run"):
            result = self.client.create_run_from_pipeline_package(
                str(package), arguments=arguments, run_name=run_name, experiment_id=experiment_id
            )
        return result.run_id

    def wait(self, run_id: str, poll_seconds: float, report: Callable[[str], None]) -> Any:
        """Follow a run to its end, reporting each new state; return the finished run."""
        state = None
        while True:
            with self.call(f"follow run {run_id}"):
                run = self.client.get_run(run_id)
            if run.state != state:
                state = run.state
                report(f"{datetime.now(UTC):%H:%M:%S} {state}")
            if state in FINAL_STATES:
                return run
            time.sleep(poll_seconds)

    def schedules(self) -> list[Any]:
        """Every recurring run of this pipeline server."""
        found, token = [], ""
        while True:
            with self.call("list the schedules"):
                page = self.client.list_recurring_runs(page_token=token, page_size=100)
            found.extend(page.recurring_runs or [])
            token = page.next_page_token
            if not token:
                return found

    def schedule(self, name_or_id: str) -> Any:
        """The recurring run with this id or name."""
        matches = [
            r for r in self.schedules() if name_or_id in (r.recurring_run_id, r.display_name)
        ]
        if not matches:
            raise RagsweepError(f"no schedule named '{name_or_id}' (ragsweep schedule list)")
        if len(matches) > 1:
            ids = [r.recurring_run_id for r in matches]
            raise RagsweepError(f"several schedules are named '{name_or_id}': give an id {ids}")
        return matches[0]

    def create_schedule(
        self, name: str, cron: Cron, package: Path, arguments: dict, experiment: str
    ) -> Any:
        """A recurring run: one run at a time (``max_concurrency=1``), no catch-up of the runs
        missed while paused or down (``no_catchup``)."""
        if any(r.display_name == name for r in self.schedules()):
            raise RagsweepError(
                f"a schedule named '{name}' exists: delete it first, or choose another --name"
            )
        experiment_id = self.experiment_id(experiment)
        with self.call(f"create schedule '{name}'"):
            return self.client.create_recurring_run(
                experiment_id=experiment_id,
                job_name=name,
                description=f"ragsweep, {cron.describe()}",
                cron_expression=cron.expression,
                max_concurrency=1,
                no_catchup=True,
                params=arguments,
                pipeline_package_path=str(package),
                enabled=True,
            )

    def set_schedule(self, name_or_id: str, action: str) -> Any:
        """``pause``, ``resume`` or ``delete`` a schedule; return it."""
        schedule = self.schedule(name_or_id)
        method = {
            "pause": self.client.disable_recurring_run,
            "resume": self.client.enable_recurring_run,
            "delete": self.client.delete_recurring_run,
        }[action]
        with self.call(f"{action} schedule '{name_or_id}'"):
            method(schedule.recurring_run_id)
        return schedule


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """kfp.Client prints links and warns about versions: keep our output our own."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


# ---- what to run -----------------------------------------------------------------------------


def default_image(namespace: str | None) -> str:
    """``RAGSWEEP_IMAGE``, else the image built by manifests/ in the namespace's registry."""
    if os.environ.get("RAGSWEEP_IMAGE"):
        return os.environ["RAGSWEEP_IMAGE"]
    if not namespace:
        raise RagsweepError("which image? give --image (or RAGSWEEP_IMAGE), or --namespace")
    return f"{INTERNAL_REGISTRY}/{namespace}/ragsweep:latest"


def compile_pipeline(
    target: Path, image: str, resources: str | None, parallelism: int = 0, gpus: int = 0
) -> Path:
    """Compile the pipeline for ``image`` (and a resources file, the fan-out's parallelism
    and each embedding step's GPUs: 0 for none) into ``target``.

    In a fresh interpreter: components read ``RAGSWEEP_IMAGE`` when they are first imported.
    """
    import subprocess
    import sys

    from ragsweep.kubeflow.tasks import GPU_ENV, PARALLELISM_ENV, RESOURCES_ENV, load_resources

    load_resources(resources)  # a bad file is one line here, not a traceback in the child
    env = {**os.environ, "RAGSWEEP_IMAGE": image, RESOURCES_ENV: resources or ""}
    env.update({PARALLELISM_ENV: str(parallelism), GPU_ENV: str(gpus)})
    done = subprocess.run(
        [sys.executable, "-m", "ragsweep.pipelines.sweep_pipeline", str(target)],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RagsweepError(f"compiling the pipeline failed: {last}")
    return target


def packaged_pipeline() -> Path:
    """The compiled pipeline installed with ragsweep (``pipelines/sweep_pipeline.yaml``, kept
    current by ``make compile`` and its staleness test). Its parameters and their defaults
    are those of the pipeline compiled for any image, parallelism or GPU count, so the
    arguments are checked against it before any cluster is asked."""
    from importlib.resources import files

    return Path(str(files("ragsweep.pipelines") / "sweep_pipeline.yaml"))


def pipeline_inputs(package: Path) -> dict[str, dict]:
    """The compiled pipeline's parameters: name -> its definition (type, default)."""
    try:
        spec = next(yaml.safe_load_all(package.read_text(encoding="utf-8")))
        return spec["root"]["inputDefinitions"]["parameters"]
    except (OSError, yaml.YAMLError, StopIteration, KeyError, TypeError) as exc:
        raise RagsweepError(f"{package}: not a compiled pipeline ({exc})") from None


def check_arguments(package: Path, arguments: dict[str, Any]) -> None:
    """Every argument names a parameter, and every parameter without a default is given."""
    inputs = pipeline_inputs(package)
    unknown = sorted(set(arguments) - set(inputs))
    if unknown:
        raise RagsweepError(f"unknown pipeline parameter(s) {unknown}; known: {sorted(inputs)}")
    missing = sorted(
        name
        for name, spec in inputs.items()
        if name not in arguments and "defaultValue" not in spec and not spec.get("isOptional")
    )
    if missing:
        raise RagsweepError(f"missing pipeline parameter(s) {missing}")


def failure(run: Any) -> str:
    """Which steps of a finished run failed, and why."""
    details = run.run_details.task_details if run.run_details else None
    failed = [
        f"step {t.display_name}: {t.error.message if t.error else 'no message'}"
        for t in details or []
        if t.state == "FAILED"
    ]
    return "; ".join(failed) or (run.error.message if run.error else "no message")


def run_name(prefix: str = "ragsweep") -> str:
    return f"{prefix} {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"


def run_arguments(
    docs: str,
    testset: str,
    docs_secret: str,
    testset_secret: str | None,
    params: list[str],
) -> dict[str, Any]:
    """Pipeline arguments from the options: locations split into AutoRAG's bucket and key,
    then each ``NAME=VALUE`` (VALUE read as JSON, else taken as a string)."""
    from ragsweep.documents.sources import split_location

    docs_bucket, docs_key = split_location(docs)
    testset_bucket, testset_key = split_location(testset)
    arguments: dict[str, Any] = {
        "input_data_bucket_name": docs_bucket,
        "input_data_key": docs_key,
        "input_data_secret_name": docs_secret,
        "test_data_bucket_name": testset_bucket,
        "test_data_key": testset_key,
        "test_data_secret_name": testset_secret or docs_secret,
    }
    for param in params:
        name, sep, value = param.partition("=")
        if not sep or not name.strip():
            raise RagsweepError(f"--param {param!r}: expected NAME=VALUE")
        name = parameter_of(name.strip())
        try:
            arguments[name] = json.loads(value)
        except ValueError:
            arguments[name] = value
    return arguments


def parameter_of(name: str) -> str:
    """The pipeline parameter an option's name or alias gives (``max_configs``:
    ``optimization_max_rag_patterns``); any other name as it is, for the pipeline to check."""
    from ragsweep.core.option_fields import OWN
    from ragsweep.sweep.options import by_name

    option = by_name().get(name)
    return option.parameter if option is not None and option.declared.pipeline == OWN else name


def add_agents(arguments: dict[str, Any], agents: list[str]) -> None:
    """Set the pipeline parameter ``agents`` from ``--agent`` (each ``NAME=URL`` checked
    here, before anything is sent); given twice, as ``--param agents`` too, is an error."""
    from ragsweep.answering.agents import parse_agents

    if not agents:
        return
    if "agents" in arguments:
        raise RagsweepError("--agent and --param agents: give the deployed assistants once")
    arguments["agents"] = [agent.spec() for agent in parse_agents(agents)]


def name_sweep(
    arguments: dict[str, Any], sweep: str | None, schedule: str | None = None
) -> dict[str, Any]:
    """``arguments`` with the sweep's name (``sweep_name``): ``--sweep``, else one given as
    a parameter, else a schedule's name; a name that cannot name a sweep is refused here,
    before anything is sent."""
    from ragsweep.sweep.settings import check_sweep_name

    given = arguments.get("sweep_name")
    if sweep is not None and given is not None and str(given) != sweep:
        raise RagsweepError(
            f"--sweep {sweep!r} and --param sweep_name={given!r}: give the sweep's name once"
        )
    if sweep is not None:
        arguments["sweep_name"] = check_sweep_name(sweep, "--sweep")
    elif given is not None:
        check_sweep_name(str(given), "sweep_name")
    elif schedule is not None:
        arguments["sweep_name"] = check_sweep_name(
            schedule, "--name (the schedule's, its sweep's name unless --sweep gives one)"
        )
    return arguments


def preflight(package: Path, arguments: dict[str, Any]) -> RunSettings:
    """Check the arguments here, as the pipeline's first step (``configure``) would there,
    with the same function: names, locations, search space (with AutoRAG's preset and
    vector store), budget, metric, model settings. Reads ``package`` alone: no cluster is
    asked. The settings the run would have; what its space leaves out is warned of."""
    from ragsweep.kubeflow.parameters import run_settings

    check_arguments(package, arguments)
    inputs = pipeline_inputs(package)
    values = {name: arguments.get(name, spec.get("defaultValue")) for name, spec in inputs.items()}
    for name, spec in inputs.items():  # a compiled default integer reads back as 3.0
        if spec.get("parameterType") == "NUMBER_INTEGER" and isinstance(values[name], float):
            values[name] = int(values[name]) if values[name].is_integer() else values[name]
    settings = run_settings(values)
    settings.space.log_pruned()
    return settings
