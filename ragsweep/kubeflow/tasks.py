"""How each pipeline step runs on OpenShift AI: connection secrets, CPU and memory, retries.

Secrets reach a step only as environment variables taken from a Kubernetes Secret
(``kfp.kubernetes.use_secret_as_env``): pipeline parameters carry secret *names*, never
values. The secrets are optional, so a missing secret or key leaves its variable unset and
the step says which variable it needs, rather than leaving a pod that never starts.

CPU and memory come from ``RESOURCES``, overridden at compile time by the YAML file named by
``RAGSWEEP_RESOURCES``, a step's fields or ``default`` (every step not listed)::

    chunk_embed: {cpu_limit: "4", memory_limit: 12Gi}

Each step's ``OMP_NUM_THREADS`` (torch's and BLAS's threads) is its whole cores of
``cpu_limit``: a pod sees every core of its node, and more threads than its CPU quota only
wait for it.

Two more compile-time settings, read from the environment (``ragsweep submit`` and
``ragsweep schedule`` set them from ``--parallelism`` and ``--gpu``): ``RAGSWEEP_PARALLELISM``,
the most branches each loop (chunk groups, document shards) runs at once, and so the
number of chunk groups ``plan`` deals (Kubeflow's ``ParallelFor`` parallelism is a number in
the compiled pipeline, not a run parameter; 0 or unset: no bound, one chunk configuration
per branch), and ``RAGSWEEP_GPU``, the NVIDIA GPUs each embedding step (``GPU_STEPS``) asks
for (with a node selector and a toleration for GPU nodes; 0 or unset: none). The count is
also set in the ``configure`` step's environment, which fixes the run's embedding runtime
(PyTorch on the GPUs) for every step (``embedding_gpus``).
The heavy steps' memory limits are set in the ``plan`` step's environment
(``ragsweep.sweep.sizing.MEMORY_LIMITS_ENV``), which refuses a corpus too large for them.

kfp.local ignores the Kubernetes settings (a local step reads the caller's environment) and
the resources, but honours retries and the fan-out's parallelism: ``for_local_run`` builds
the same pipeline without resources and retries, since on a laptop a failing step is a
mistake to fix, not a flaky service, and runs ``parallelism`` branches (chunk groups) at once,
every step cached in the run folder (so that an interrupted run resumes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow import autorag
from ragsweep.retrieval.vector_stores import connection_keys
from ragsweep.sweep.sizing import HEAVY_STEPS, MEMORY_LIMITS_ENV

if TYPE_CHECKING:  # kfp is imported where used: the CLI's other commands never need it
    from kfp import dsl
    from kfp.dsl import PipelineTask
    from kfp.dsl.graph_component import GraphComponent

PIPELINE_NAME = "ragsweep"
RESOURCES_ENV = "RAGSWEEP_RESOURCES"
PARALLELISM_ENV = "RAGSWEEP_PARALLELISM"
GPU_ENV = "RAGSWEEP_GPU"
THREADS_ENV = "OMP_NUM_THREADS"  # torch's intra-op threads, and numpy's BLAS
READS_ENV = "RAGSWEEP_READS"  # what a step reads from outside the pipeline (ragsweep.runner.reads)
# The steps that run an embedding model on chunks; retrieve embeds only the questions.
GPU_STEPS = ("chunk_embed", "embed_shard")
GPU_RESOURCE = "nvidia.com/gpu"  # the NVIDIA GPU operator's device plugin
GPU_NODE_LABEL = ("nvidia.com/gpu.present", "true")  # set by its GPU feature discovery
DEFAULT_CONNECTION = "ragsweep-s3"
# The keys of an OpenShift AI S3 connection, each read into the variable of the same name.
S3_CONNECTION_KEYS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_S3_ENDPOINT",
    "AWS_DEFAULT_REGION",
    "AWS_S3_BUCKET",
)
# The key of the results-store Secret: a SQLAlchemy URL, read by the publish and compare steps
# (and by load_testset, for test data store:<name>; by evaluate, for the judges' labels and
# the model search's warm start).
STORE_CONNECTION_KEYS = ("RAGSWEEP_STORE_URL",)
DEFAULT_LLM_CONNECTION = "ragsweep-llm"
# The keys of the LLM endpoint Secret; the judge's default to the generator's when absent.
LLM_CONNECTION_KEYS = (
    "RAGSWEEP_LLM_BASE_URL",
    "RAGSWEEP_LLM_API_KEY",
    "RAGSWEEP_JUDGE_BASE_URL",
    "RAGSWEEP_JUDGE_API_KEY",
    "RAGSWEEP_EMBEDDING_BASE_URL",  # embedding models openai:<model>
    "RAGSWEEP_EMBEDDING_API_KEY",
    "RAGSWEEP_RERANK_BASE_URL",  # rerankers rerank:<model>, read by the retrieve step
    "RAGSWEEP_RERANK_API_KEY",
    "RAGSWEEP_AGENT_API_KEY",  # the deployed assistants' (--agent), read by evaluate
)
DEFAULT_VECTOR_STORE_CONNECTION = "ragsweep-vector-store"
# Red Hat AutoRAG's Secrets (ragsweep.kubeflow.autorag), each mounted with its own keys; by default
# the Secrets above, which may hold AutoRAG's keys instead of ragsweep's.
OGX_CONNECTION_KEYS = autorag.LLM_ENDPOINTS["ogx_secret_name"][:2]
MAAS_CONNECTION_KEYS = autorag.LLM_ENDPOINTS["maas_secret_name"][:2]
VECTOR_DB_CONNECTION_KEYS = (*autorag.MILVUS_KEYS, *autorag.PGVECTOR_KEYS)
DEFAULT_MLFLOW_CONNECTION = "ragsweep-mlflow"
# The keys of the MLflow Secret, read by the track step: MLflow's own variables (a tracking
# URI in the Secret may hold credentials; a token or user and password are the other way).
MLFLOW_CONNECTION_KEYS = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_TRACKING_TOKEN",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_INSECURE_TLS",
    "MLFLOW_EXPERIMENT_NAME",
)
RETRIES = 2
RETRY_BACKOFF = "30s"  # doubled for each further try

_CPU = re.compile(r"^(\d+(\.\d+)?|\d+m)$")
_MEMORY = re.compile(r"^\d+(\.\d+)?(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?$")
_UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


@dataclass(frozen=True)
class Resources:
    """A step's CPU (cores, or millicores as ``500m``) and memory (``512Mi``, ``2Gi``)."""

    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str

    def validate(self, where: str) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            pattern = _CPU if field.name.startswith("cpu") else _MEMORY
            if not isinstance(value, str) or not pattern.match(value):
                example = "'500m' or '2'" if pattern is _CPU else "'512Mi' or '4Gi'"
                raise RagsweepError(f"{where}: {field.name}: {value!r} is not like {example}")
        if _cpu(self.cpu_request) > _cpu(self.cpu_limit):
            raise RagsweepError(f"{where}: cpu_request exceeds cpu_limit")
        if _memory(self.memory_request) > _memory(self.memory_limit):
            raise RagsweepError(f"{where}: memory_request exceeds memory_limit")

    def apply(self, task: PipelineTask) -> None:
        task.set_cpu_request(self.cpu_request).set_cpu_limit(self.cpu_limit)
        task.set_memory_request(self.memory_request).set_memory_limit(self.memory_limit)
        task.set_env_variable(THREADS_ENV, str(self.threads))

    @property
    def threads(self) -> int:
        """The threads that fit the CPU limit: its whole cores, at least one."""
        return max(1, int(_cpu(self.cpu_limit)))


def _cpu(value: str) -> float:
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def _memory(value: str) -> float:
    number, unit = re.match(r"^([\d.]+)(\w*)$", value).groups()
    binary = unit.endswith("i")
    scale = 1024 ** "KMGTPE".index(unit[0]) * 1024 if binary else _UNITS[unit]
    return float(number) * scale


# Steps are named by their component function. Embedding dominates: chunk_embed holds the
# model and a chunk set, retrieve the model and one question x chunk similarity matrix;
# evaluate holds every configuration's retrievals and answers.
RESOURCES: dict[str, Resources] = {
    "default": Resources("250m", "1", "512Mi", "2Gi"),
    "load_testset": Resources("250m", "1", "512Mi", "1Gi"),
    "ingest": Resources("500m", "2", "1Gi", "4Gi"),
    "configure": Resources("100m", "500m", "256Mi", "512Mi"),
    "plan": Resources("100m", "500m", "256Mi", "512Mi"),
    "chunk_embed": Resources("1", "2", "2Gi", "6Gi"),
    "plan_shards": Resources("100m", "500m", "256Mi", "1Gi"),
    "embed_shard": Resources("1", "2", "2Gi", "6Gi"),
    "merge_shards": Resources("100m", "500m", "256Mi", "512Mi"),
    "retrieve": Resources("1", "2", "2Gi", "4Gi"),
    "evaluate": Resources("500m", "2", "1Gi", "4Gi"),
    "generate_qa": Resources("1", "2", "2Gi", "6Gi"),
    "rank": Resources("500m", "2", "1Gi", "4Gi"),
    "publish": Resources("250m", "1", "512Mi", "2Gi"),
    "compare": Resources("250m", "1", "512Mi", "2Gi"),
    "track": Resources("250m", "1", "512Mi", "2Gi"),
}


def load_resources(path: str | None) -> dict[str, Resources]:
    """``RESOURCES`` with the overrides of the YAML file at ``path`` (none: as they are)."""
    resources = dict(RESOURCES)
    if not path:
        return resources
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise RagsweepError(f"{path}: cannot read the resources file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise RagsweepError(f"{path}: not valid YAML ({exc})".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise RagsweepError(f"{path}: expected a mapping of step name to resources")
    known = {f.name for f in fields(Resources)}
    for step, values in data.items():
        where = f"{path}: step '{step}'"
        if not isinstance(values, dict):
            raise RagsweepError(f"{where}: expected a mapping of {sorted(known)}")
        unknown = sorted(set(values) - known)
        if unknown:
            raise RagsweepError(f"{where}: unknown field(s) {unknown}; known: {sorted(known)}")
        base = resources.get(step, resources["default"])
        resources[step] = replace(base, **{k: str(v) for k, v in values.items()})
        resources[step].validate(where)
    return resources


def memory_limits(resources: dict[str, Resources]) -> str:
    """The heavy steps' memory limits, as ``plan`` reads them (``MEMORY_LIMITS_ENV``)."""
    return ",".join(
        f"{step}={resources.get(step, resources['default']).memory_limit}" for step in HEAVY_STEPS
    )


def count_setting(name: str, value: str | int | None) -> int:
    """A count given as text (an environment variable or option): 0 when empty."""
    text = str(value or "0").strip()
    if not text.isdigit():
        raise RagsweepError(f"{name}: {value!r} is not a whole number of 0 or more")
    return int(text)


@dataclass(frozen=True)
class Settings:
    """What ``step`` applies: resources by step name (None: none at all) and retries; and the
    fan-out's parallelism (0: no bound) and the GPUs of each embedding step; whether every
    step is cached (``cache_all``: a local run, whose cache lives in its own folder); the
    digest of what each step reads from outside the pipeline, by step name (``reads``: a
    local run's, ``ragsweep.runner.reads``), set as its task's ``READS_ENV``."""

    resources: dict[str, Resources] | None
    retries: int
    parallelism: int = 0
    gpus: int = 0
    cache_all: bool = False
    reads: dict[str, str] | None = None


_active: ContextVar[Settings | None] = ContextVar("ragsweep_platform_settings", default=None)


@lru_cache(maxsize=4)
def _cluster_settings(resources_file: str | None, parallelism: str, gpus: str) -> Settings:
    return Settings(
        resources=load_resources(resources_file),
        retries=RETRIES,
        parallelism=count_setting(PARALLELISM_ENV, parallelism),
        gpus=count_setting(GPU_ENV, gpus),
    )


def _settings() -> Settings:
    return _active.get() or _cluster_settings(
        os.environ.get(RESOURCES_ENV) or None,
        os.environ.get(PARALLELISM_ENV, ""),
        os.environ.get(GPU_ENV, ""),
    )


def embedding_gpus() -> int:
    """The GPUs each embedding step has, as the ``configure`` step's environment says (set
    when the pipeline was compiled with ``--gpu``; 0: none)."""
    return count_setting(GPU_ENV, os.environ.get(GPU_ENV, ""))


def vector_store_connection_keys() -> tuple[str, ...]:
    """The keys of the vector-store Secret, read by the retrieve step: those every
    registered store declares (``CONNECTION_KEYS``; none for an embedded store)."""
    return tuple(connection_keys())


def loop_parallelism() -> int:
    """The most branches a loop runs at once, and the chunk groups ``plan`` deals (0: no
    bound, one chunk configuration per branch)."""
    return _settings().parallelism


def step(
    task: PipelineTask,
    *,
    s3_connection: str | dsl.PipelineChannel | None = None,
    store_connection: str | dsl.PipelineChannel | None = None,
    llm_connection: str | dsl.PipelineChannel | None = None,
    vector_store_connection: str | dsl.PipelineChannel | None = None,
    mlflow_connection: str | dsl.PipelineChannel | None = None,
    ogx_connection: str | dsl.PipelineChannel | None = None,
    maas_connection: str | dsl.PipelineChannel | None = None,
    vector_db_connection: str | dsl.PipelineChannel | None = None,
    retry: bool = False,
    cache: bool = True,
) -> PipelineTask:
    """Set a task's CPU and memory; expose an S3 connection, results-store, LLM endpoint,
    vector-store or MLflow secret (or AutoRAG's OGX, MaaS or vector-DB secret) as its
    environment;
    retry it when it calls a service (``retry``); turn caching off when its inputs live
    outside the pipeline and may change between runs (``cache=False``)."""
    from kfp import kubernetes

    settings = _settings()
    name = task.component_spec.name.replace("-", "_")
    if settings.resources is not None:
        settings.resources.get(name, settings.resources["default"]).apply(task)
    if settings.gpus and name == "configure":  # it fixes the runtime the GPUs run
        task.set_env_variable(GPU_ENV, str(settings.gpus))
    if settings.resources is not None and name == "plan":  # it checks the corpus against them
        task.set_env_variable(MEMORY_LIMITS_ENV, memory_limits(settings.resources))
    if settings.gpus and name in GPU_STEPS:
        task.set_accelerator_type(GPU_RESOURCE).set_accelerator_limit(settings.gpus)
        kubernetes.add_node_selector(task, *GPU_NODE_LABEL)
        kubernetes.add_toleration(task, key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")
    for secret, keys in (
        (s3_connection, S3_CONNECTION_KEYS),
        (store_connection, STORE_CONNECTION_KEYS),
        (llm_connection, LLM_CONNECTION_KEYS),
        (ogx_connection, OGX_CONNECTION_KEYS),
        (maas_connection, MAAS_CONNECTION_KEYS),
        (vector_store_connection, vector_store_connection_keys()),
        (vector_db_connection, VECTOR_DB_CONNECTION_KEYS),
        (mlflow_connection, MLFLOW_CONNECTION_KEYS),
    ):
        if secret is not None:
            kubernetes.use_secret_as_env(
                task, secret_name=secret, secret_key_to_env={k: k for k in keys}, optional=True
            )
    if retry and settings.retries:
        task.set_retry(settings.retries, backoff_duration=RETRY_BACKOFF, backoff_factor=2)
    if not cache and not settings.cache_all:
        task.set_caching_options(enable_caching=False)
    if name in (settings.reads or {}):  # part of kfp.local's cache key: changed reads, a new key
        task.set_env_variable(READS_ENV, settings.reads[name])
    return task


def for_local_run(
    pipeline_func: Callable[..., Any], parallelism: int = 1, reads: dict[str, str] | None = None
) -> GraphComponent:
    """The pipeline of ``pipeline_func``, built for kfp.local: secrets as on the cluster, no
    resources and no retries; ``parallelism`` chunk configurations at once. Every step is
    cached: kfp.local's cache lives in the run folder, so a hit is always a resume of the
    same run; a step's key includes the digest of what it reads from outside the pipeline
    (``reads``, by step name), so it is reused only if that is unchanged."""
    from kfp import dsl

    token = _active.set(
        Settings(resources=None, retries=0, parallelism=parallelism, cache_all=True, reads=reads)
    )
    try:
        return dsl.pipeline(pipeline_func, name=PIPELINE_NAME)
    finally:
        _active.reset(token)
