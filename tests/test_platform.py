"""How the steps run on OpenShift AI, as compiled: parameters, secrets, resources, retries."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow.autorag import PARAMETERS
from ragsweep.kubeflow.tasks import (
    LLM_CONNECTION_KEYS,
    MAAS_CONNECTION_KEYS,
    MLFLOW_CONNECTION_KEYS,
    OGX_CONNECTION_KEYS,
    RESOURCES,
    S3_CONNECTION_KEYS,
    STORE_CONNECTION_KEYS,
    VECTOR_DB_CONNECTION_KEYS,
    for_local_run,
    load_resources,
    vector_store_connection_keys,
)
from ragsweep.pipelines.sweep_pipeline import sweep, sweep_pipeline

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "pipelines" / "sweep_pipeline.yaml"
AUTORAG = [
    p.name for p in PARAMETERS
]  # Red Hat AutoRAG's parameters (ragsweep/kubeflow/autorag.py)


def documents(path: Path) -> tuple[dict, dict]:
    pipeline, platform = yaml.safe_load_all(path.read_text())
    return pipeline, platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def compile_with(tmp_path: Path, **env: str) -> Path:
    target = tmp_path / "pipeline.yaml"
    subprocess.run(
        [sys.executable, "-m", "ragsweep.pipelines.sweep_pipeline", str(target)],
        env={**os.environ, **env},
        check=True,
    )
    return target


def test_parameters_use_red_hat_autorag_names():
    pipeline, _ = documents(COMMITTED)
    parameters = pipeline["root"]["inputDefinitions"]["parameters"]
    assert set(AUTORAG) <= set(parameters)
    assert parameters["optimization_max_rag_patterns"]["parameterType"] == "NUMBER_INTEGER"
    assert parameters["embedding_models"]["parameterType"] == "LIST"


def test_each_secret_reaches_only_the_steps_that_need_it_as_optional_env():
    _, executors = documents(COMMITTED)
    s3, store = S3_CONNECTION_KEYS, STORE_CONNECTION_KEYS
    llm = [  # ragsweep's model endpoint Secret, and Red Hat AutoRAG's two kinds
        ("llm_secret_name", LLM_CONNECTION_KEYS),
        ("ogx_secret_name", OGX_CONNECTION_KEYS),
        ("maas_secret_name", MAAS_CONNECTION_KEYS),
    ]
    wanted = {  # step -> the (parameter naming the secret, its keys) it gets
        "exec-configure": llm,  # an openai:<model> embedding model's identity: its URL
        # test data store:<name> is read from the results database
        "exec-load-testset": [("test_data_secret_name", s3), ("results_store_secret_name", store)],
        "exec-ingest": [("input_data_secret_name", s3)],
        "exec-generate-qa": llm,
        "exec-plan": llm,  # a space with query transformations: their endpoint, checked early
        # an s3:// embedding cache; embedding models openai:<model>
        "exec-chunk-embed": [("input_data_secret_name", s3), *llm],
        "exec-embed-shard": [("input_data_secret_name", s3), *llm],
        "exec-retrieve": [
            ("input_data_secret_name", s3),
            *llm,
            ("vector_store_secret_name", vector_store_connection_keys()),  # the stores' URLs
            ("vector_db_secret_name", VECTOR_DB_CONNECTION_KEYS),  # AutoRAG's keys for them
        ],
        # the judges' labels and the model search's warm start are read from the store
        "exec-evaluate": [("results_store_secret_name", store), *llm],
        "exec-rank": [("results_store_secret_name", store)],  # the labels, in the report
        "exec-publish": [("results_store_secret_name", store)],
        "exec-compare": [("results_store_secret_name", store)],
        "exec-track": [("mlflow_secret_name", MLFLOW_CONNECTION_KEYS)],
    }
    assert {name for name, e in executors.items() if "secretAsEnv" in e} == set(wanted)
    for executor, secrets in wanted.items():
        found = []
        for secret in executors[executor]["secretAsEnv"]:
            assert secret["optional"] is True
            # inside a loop or condition, kfp names the pipeline parameter as a channel
            parameter = secret["secretNameParameter"]["componentInputParameter"]
            keys = tuple(k["secretKey"] for k in secret["keyToEnv"])
            assert [k["envVar"] for k in secret["keyToEnv"]] == list(keys)
            found.append((parameter.removeprefix("pipelinechannel--"), keys))
        assert found == secrets, executor


def test_compiled_pipeline_holds_no_secret_value(tmp_path):
    values = {
        "AWS_ACCESS_KEY_ID": "AKIA-SENTINEL-ID",
        "AWS_SECRET_ACCESS_KEY": "sentinel-secret-key",
        "RAGSWEEP_KFP_TOKEN": "sha256~sentinel-token",
        "RAGSWEEP_ORACLE_PASSWORD": "sentinel-oracle-password",
        "RAGSWEEP_MILVUS_URI": "http://root:sentinel-milvus@127.0.0.1:19530",
    }
    text = compile_with(tmp_path, **values).read_text()
    assert not [value for value in values.values() if value in text]
    assert "AWS_SECRET_ACCESS_KEY" in text  # named as a key to read, never given a value


def test_steps_that_call_a_service_retry_and_those_reading_outside_data_skip_the_cache():
    pipeline, _ = documents(COMMITTED)
    tasks = {
        name: task
        for dag in [
            pipeline["root"]["dag"],
            *(c["dag"] for c in pipeline["components"].values() if "dag" in c),
        ]
        for name, task in dag["tasks"].items()
        if "componentRef" in task
        and not task["componentRef"]["name"].startswith("comp-for-loop")
        and not task["componentRef"]["name"].startswith("comp-condition")
    }
    retried = {name for name, task in tasks.items() if "retryPolicy" in task}
    services = {"generate-qa", "evaluate"}  # an LLM endpoint
    assert retried == {"load-testset", "ingest", "publish", "compare"} | services
    assert tasks["ingest"]["retryPolicy"]["maxRetryCount"] == 2
    uncached = {name for name, task in tasks.items() if task.get("cachingOptions") == {}}
    assert uncached == {"load-testset", "ingest", "compare", "track"}
    assert {name for name, task in tasks.items() if "cachingOptions" not in task} == set()


def test_every_step_has_cpu_and_memory_requests_and_limits():
    pipeline, _ = documents(COMMITTED)
    for name, executor in pipeline["deploymentSpec"]["executors"].items():
        resources = executor["container"]["resources"]
        assert {"cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit"} <= set(resources), name
    embed = pipeline["deploymentSpec"]["executors"]["exec-chunk-embed"]["container"]["resources"]
    assert embed["resourceMemoryLimit"] == RESOURCES["chunk_embed"].memory_limit


def test_a_resources_file_changes_a_step_at_compile_time(tmp_path):
    overrides = tmp_path / "resources.yaml"
    overrides.write_text("chunk_embed: {cpu_limit: '4', memory_limit: 12Gi}\n")
    pipeline, _ = documents(compile_with(tmp_path, RAGSWEEP_RESOURCES=str(overrides)))
    embed = pipeline["deploymentSpec"]["executors"]["exec-chunk-embed"]["container"]["resources"]
    assert (embed["resourceCpuLimit"], embed["resourceMemoryLimit"]) == ("4", "12Gi")
    assert embed["resourceMemoryRequest"] == RESOURCES["chunk_embed"].memory_request


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ingest: {memory_limit: lots}", "memory_limit: 'lots' is not like"),
        ("ingest: {cpu: 2}", "unknown field(s) ['cpu']"),
        ("ingest: {cpu_request: '4'}", "cpu_request exceeds cpu_limit"),
        ("ingest: {memory_request: 8Gi}", "memory_request exceeds memory_limit"),
        ("- ingest", "expected a mapping of step name"),
        ("ingest: [1]", "step 'ingest': expected a mapping"),
    ],
)
def test_a_bad_resources_file_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "resources.yaml"
    path.write_text(text)
    with pytest.raises(RagsweepError) as error:
        load_resources(str(path))
    assert message in str(error.value)


def test_kfp_local_gets_the_same_secrets_without_resources_or_retries(tmp_path):
    from kfp import compiler

    target = tmp_path / "local.yaml"
    compiler.Compiler().compile(for_local_run(sweep), str(target))
    pipeline, executors = documents(target)
    committed_pipeline, committed_executors = documents(COMMITTED)
    assert executors == committed_executors  # the Kubernetes config kfp.local must accept
    assert not [t for t in pipeline["root"]["dag"]["tasks"].values() if "retryPolicy" in t]
    assert not [
        e for e in pipeline["deploymentSpec"]["executors"].values() if "resources" in e["container"]
    ]
    # and building it did not change the pipeline that make compile writes
    again = tmp_path / "again.yaml"
    compiler.Compiler().compile(sweep_pipeline, str(again))
    assert documents(again) == (committed_pipeline, committed_executors)


def test_a_local_run_reads_s3_with_the_callers_environment(tmp_path, s3, bucket):
    """kfp.local skips use_secret_as_env: each step reads the AWS_* variables of the caller."""
    s3.put_object(Bucket=bucket, Key="kb/ports.md", Body=b"Tidewater listens on port 8443.\n")
    s3.put_object(
        Bucket=bucket,
        Key="eval/testset.json",
        Body=b'[{"question": "Which port?", "correct_answers": ["8443"],'
        b' "correct_answer_document_ids": ["ports.md"]}]',
    )
    ragsweep = str(Path(sys.executable).parent / "ragsweep")
    result = subprocess.run(
        [
            ragsweep,
            "run",
            "--docs",
            f"s3://{bucket}/kb",
            "--testset",
            f"s3://{bucket}/eval/testset.json",
        ]
        + ["--chunk-sizes", "64", "--top-k", "1", "--search-types", "similarity"]
        + ["--output", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "1 configurations" in result.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "read 1 documents" in (run_dir / "pipeline.log").read_text()  # the ingest step's line


def loop_tasks(pipeline: dict) -> dict[str, dict]:
    """The pipeline's loops by the task they run: ``embed-shard`` and ``chunk-embed``."""
    tasks, components = pipeline["root"]["dag"]["tasks"], pipeline["components"]
    loops = {}
    for name, task in tasks.items():
        if name.startswith("for-loop"):
            inner = components[task["componentRef"]["name"]]["dag"]["tasks"]
            loops[next(n for n in ("embed-shard", "chunk-embed") if n in inner)] = task
    return loops


def loop_task(pipeline: dict) -> dict:
    return loop_tasks(pipeline)["chunk-embed"]


def planned_groups(pipeline: dict) -> int:
    """The number of chunk groups compiled into the plan step (0: one per configuration)."""
    plan = pipeline["root"]["dag"]["tasks"]["plan"]["inputs"]["parameters"]["groups"]
    return int(plan["runtimeValue"]["constant"])


def test_each_step_runs_as_many_threads_as_its_cpu_limit_and_no_gpu_unless_asked():
    pipeline, executors = documents(COMMITTED)
    for loop in loop_tasks(pipeline).values():  # no bound on either loop by default
        assert "iteratorPolicy" not in loop
    assert planned_groups(pipeline) == 0  # one chunk configuration per branch
    for name, executor in pipeline["deploymentSpec"]["executors"].items():
        container = executor["container"]
        limit = float(container["resources"]["resourceCpuLimit"].removesuffix("m")) / (
            1000 if container["resources"]["resourceCpuLimit"].endswith("m") else 1
        )
        assert {"name": "OMP_NUM_THREADS", "value": str(max(1, int(limit)))} in container["env"]
        assert "accelerator" not in container["resources"], name
    assert not [e for e in executors.values() if "nodeSelector" in e or "tolerations" in e]


def test_parallelism_and_gpus_are_compiled_in_when_asked(tmp_path):
    pipeline, executors = documents(
        compile_with(tmp_path, RAGSWEEP_PARALLELISM="3", RAGSWEEP_GPU="2")
    )
    loops = loop_tasks(pipeline)
    assert sorted(loops) == ["chunk-embed", "embed-shard"]
    for loop in loops.values():
        assert loop["iteratorPolicy"] == {"parallelismLimit": 3}
    assert planned_groups(pipeline) == 3  # three groups of chunk configurations, one per branch
    containers = {n: e["container"] for n, e in pipeline["deploymentSpec"]["executors"].items()}
    gpu = {
        n: c["resources"]["accelerator"]
        for n, c in containers.items()
        if "accelerator" in c["resources"]
    }
    embedding_steps = ["exec-chunk-embed", "exec-embed-shard"]
    assert sorted(gpu) == embedding_steps
    for name in embedding_steps:
        accelerator = gpu[name]
        assert (accelerator["resourceType"], accelerator["resourceCount"]) == (
            "nvidia.com/gpu",
            "2",
        )
        embed = executors[name]
        assert embed["nodeSelector"] == {"labels": {"nvidia.com/gpu.present": "true"}}
        assert embed["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    others = [e for n, e in executors.items() if n not in embedding_steps]
    assert not [e for e in others if "nodeSelector" in e or "tolerations" in e]
    # the first step fixes the run's embedding runtime for the GPUs: it is told their count
    told = [
        n
        for n, c in containers.items()
        if {"name": "RAGSWEEP_GPU", "value": "2"} in c.get("env", [])
    ]
    assert told == ["exec-configure"]


def test_a_local_run_builds_the_fan_out_one_branch_at_a_time_unless_told(tmp_path):
    from kfp import compiler

    for parallelism in (1, 2):
        target = tmp_path / f"local-{parallelism}.yaml"
        compiler.Compiler().compile(for_local_run(sweep, parallelism), str(target))
        pipeline, _ = documents(target)
        for loop in loop_tasks(pipeline).values():
            assert loop["iteratorPolicy"] == {"parallelismLimit": parallelism}
        assert planned_groups(pipeline) == parallelism
    target = tmp_path / "local.yaml"
    compiler.Compiler().compile(for_local_run(sweep), str(target))
    assert loop_task(documents(target)[0])["iteratorPolicy"] == {"parallelismLimit": 1}


def test_submit_compiles_the_shard_and_retrieval_fan_outs_as_parallel_loops_of_their_own(tmp_path):
    """What ``submit --parallelism 3 --resources FILE`` compiles (``compile_pipeline``): one
    ParallelFor over plan_shards' items running embed_shard alone, one over plan's (chunk
    group, question block) items running chunk_embed and retrieve, each bounded to 3
    branches; the shard loop starts after plan (which refuses a corpus too large before
    anything embeds), and plan is told the heavy steps' pod memory limits."""
    from ragsweep.kubeflow.openshift import compile_pipeline
    from ragsweep.sweep.sizing import MEMORY_LIMITS_ENV

    resources = tmp_path / "resources.yaml"
    resources.write_text("retrieve: {memory_limit: 3Gi}\n")
    target = compile_pipeline(tmp_path / "p.yaml", "quay.io/x/ragsweep:1", str(resources), 3)
    pipeline, _ = documents(target)
    tasks, components = pipeline["root"]["dag"]["tasks"], pipeline["components"]
    loops = {
        task["parameterIterator"]["items"]["inputParameter"]: task
        for name, task in tasks.items()
        if name.startswith("for-loop")
    }
    assert sorted(loops) == ["pipelinechannel--plan-Output", "pipelinechannel--plan-shards-Output"]
    for loop in loops.values():
        assert loop["iteratorPolicy"] == {"parallelismLimit": 3}

    def steps(loop: dict) -> list[str]:
        return sorted(components[loop["componentRef"]["name"]]["dag"]["tasks"])

    assert steps(loops["pipelinechannel--plan-shards-Output"]) == ["embed-shard"]
    assert steps(loops["pipelinechannel--plan-Output"]) == ["chunk-embed", "retrieve"]
    assert "plan" in tasks["plan-shards"]["dependentTasks"]
    env = pipeline["deploymentSpec"]["executors"]["exec-plan"]["container"]["env"]
    compiled = {"chunk_embed": RESOURCES["chunk_embed"], "embed_shard": RESOURCES["embed_shard"]}
    limits = ",".join(f"{step}={r.memory_limit}" for step, r in compiled.items()) + ",retrieve=3Gi"
    assert {"name": MEMORY_LIMITS_ENV, "value": limits} in env
