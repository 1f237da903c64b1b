"""`ragsweep submit` and `ragsweep schedule` through the real kfp.Client and kubernetes client,
against scripted pipelines and Kubernetes APIs on 127.0.0.1 (tests/scripted_servers.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ragsweep_here
from scripted_servers import Kubernetes, Pipelines

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pipelines" / "sweep_pipeline.yaml"
SECRET_TOKEN = "sha256~do-not-print-this-token"


@pytest.fixture
def env(tmp_path):
    """A clean environment: no KFP or kube settings of the machine, a home of its own."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAGSWEEP_", "KF_PIPELINES", "KUBECONFIG", "AWS_"))
    }
    return {**clean, "HOME": str(tmp_path / "home")}


@pytest.fixture
def pipelines():
    with Pipelines(token=SECRET_TOKEN) as server:
        yield server


def ragsweep(env, *args) -> subprocess.CompletedProcess:
    return ragsweep_here(*args, env=env)


def with_api(env, server):
    return {**env, "RAGSWEEP_KFP_HOST": server.url, "RAGSWEEP_KFP_TOKEN": server.token}


def assert_user_error(result, *fragments):
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    for fragment in fragments:
        assert fragment in line
    assert SECRET_TOKEN not in result.stdout + result.stderr


def created_run(server):
    [run] = server.runs.values()
    return run


S3_RUN = ["--docs", "s3://team-docs/kb/", "--testset", "s3://team-eval/testset.json"]


def test_submit_sends_the_run_with_the_token_experiment_and_autorag_parameters(env, pipelines):
    result = ragsweep(
        with_api(env, pipelines),
        "submit",
        *S3_RUN,
        "--docs-secret", "docs-connection",
        "--param", "optimization_metric=context_correctness",
        "--param", 'search_space={"chunk_sizes": [128, 256], "top_ks": [3]}',
        "--experiment", "nightly",
        "--package", str(PACKAGE),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert {r.headers["authorization"] for r in pipelines.requests} == {f"Bearer {SECRET_TOKEN}"}
    [experiment] = pipelines.experiments.values()
    assert experiment["display_name"] == "nightly"
    run = created_run(pipelines)
    assert run["experiment_id"] == experiment["experiment_id"]
    assert run["runtime_config"]["parameters"] == {
        "input_data_bucket_name": "team-docs",
        "input_data_key": "kb/",
        "input_data_secret_name": "docs-connection",
        "test_data_bucket_name": "team-eval",
        "test_data_key": "testset.json",
        "test_data_secret_name": "docs-connection",
        "optimization_metric": "context_correctness",
        "search_space": {"chunk_sizes": [128, 256], "top_ks": [3]},
    }
    executors = run["pipeline_spec"]["platform_spec"]["platforms"]["kubernetes"]
    secrets = executors["deploymentSpec"]["executors"]["exec-ingest"]["secretAsEnv"]
    assert secrets[0]["secretNameParameter"]["componentInputParameter"] == "input_data_secret_name"
    assert f"run {run['run_id']} in experiment 'nightly'" in result.stdout
    assert f"{pipelines.url}/apis/v2beta1/runs/{run['run_id']}" in result.stdout
    assert SECRET_TOKEN not in json.dumps(run)


def test_submit_compiles_the_pipeline_for_the_image_and_resources_given(env, pipelines, tmp_path):
    resources = tmp_path / "resources.yaml"
    resources.write_text("evaluate: {memory_limit: 9Gi}\n")
    result = ragsweep(
        with_api(env, pipelines),
        "submit", *S3_RUN, "--image", "quay.io/team/ragsweep:1.2", "--resources", str(resources),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    executors = created_run(pipelines)["pipeline_spec"]["pipeline_spec"]["deploymentSpec"]
    containers = {name: e["container"] for name, e in executors["executors"].items()}
    assert {c["image"] for c in containers.values()} == {"quay.io/team/ragsweep:1.2"}
    assert containers["exec-evaluate"]["resources"]["resourceMemoryLimit"] == "9Gi"
    resources.write_text("evaluate: {memory_limit: plenty}\n")
    bad = ragsweep(with_api(env, pipelines), "submit", *S3_RUN, "--resources", str(resources))
    assert_user_error(bad, "memory_limit: 'plenty' is not like")


def test_submit_compiles_the_fan_out_parallelism_and_gpus_given(env, pipelines, tmp_path):
    result = ragsweep(
        with_api(env, pipelines),
        "submit", *S3_RUN, "--image", "quay.io/x/ragsweep:1", "--parallelism", "4", "--gpu", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    spec = created_run(pipelines)["pipeline_spec"]
    pipeline = spec["pipeline_spec"]
    loops = [t for n, t in pipeline["root"]["dag"]["tasks"].items() if n.startswith("for-loop")]
    assert len(loops) == 2  # the shards, the groups of chunk configurations
    assert all(loop["iteratorPolicy"] == {"parallelismLimit": 4} for loop in loops)
    kubernetes = spec["platform_spec"]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for step in ("exec-chunk-embed", "exec-embed-shard"):
        embed = pipeline["deploymentSpec"]["executors"][step]["container"]
        assert embed["resources"]["accelerator"]["resourceType"] == "nvidia.com/gpu"
        assert kubernetes[step]["tolerations"][0]["key"] == "nvidia.com/gpu"
    # a compiled package carries its own: the flags would be silently ignored
    bad = ragsweep(
        with_api(env, pipelines), "submit", *S3_RUN, "--package", str(PACKAGE), "--gpu", "1"
    )
    assert_user_error(bad, "--parallelism and --gpu are compiled into the pipeline")
    negative = ragsweep(with_api(env, pipelines), "submit", *S3_RUN, "--parallelism", "-1")
    assert negative.returncode == 2 and "Traceback" not in negative.stderr


def test_dashboard_url_is_printed_when_the_dashboard_is_known(env, pipelines):
    env = {**with_api(env, pipelines), "RAGSWEEP_DASHBOARD_URL": "https://ai.apps.example.com/"}
    result = ragsweep(env, "submit", *S3_RUN, "-n", "team-a", "--package", str(PACKAGE))
    assert result.returncode == 0, result.stderr
    run_id = created_run(pipelines)["run_id"]
    expected = f"https://ai.apps.example.com/develop-train/pipelines/runs/team-a/runs/{run_id}"
    assert expected in result.stdout


def test_wait_follows_the_run_and_says_where_the_leaderboard_is(env, pipelines):
    pipelines.run_states = ["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"]
    result = ragsweep(
        with_api(env, pipelines),
        "submit", *S3_RUN, "--package", str(PACKAGE), "--wait", "--poll-seconds", "0.05",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    states = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("  ")]
    assert states[1:] == ["PENDING", "RUNNING", "SUCCEEDED"]  # the first line is the URL
    assert "output 'leaderboard' of step 'rank'" in result.stdout


def test_wait_on_a_failed_run_names_the_failed_step_and_exits_2(env, pipelines):
    pipelines.run_states, pipelines.failed_step = ["RUNNING", "FAILED"], "ingest"
    result = ragsweep(
        with_api(env, pipelines),
        "submit", *S3_RUN, "--package", str(PACKAGE), "--wait", "--poll-seconds", "0.05",
    )  # fmt: skip
    assert_user_error(result, "ended FAILED", "step ingest: exit status 2")


def test_a_wrong_token_is_a_one_line_error_that_does_not_print_it(env, pipelines):
    pipelines.token = "the-right-one"
    env = {**env, "RAGSWEEP_KFP_HOST": pipelines.url, "RAGSWEEP_KFP_TOKEN": SECRET_TOKEN}
    result = ragsweep(env, "submit", *S3_RUN, "--package", str(PACKAGE))
    assert_user_error(result, "refused the token (401 Unauthorized)", "oc whoami -t")
    assert pipelines.runs == {}


def test_a_forbidden_user_is_a_one_line_error(env, pipelines):
    pipelines.forbidden = True
    result = ragsweep(with_api(env, pipelines), "schedule", "list")
    assert_user_error(result, "403 Forbidden")


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1: (certificate file, key file)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ds-pipeline-dspa")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "route.crt", tmp_path / "route.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


def test_a_route_with_a_private_ca_needs_ca_cert(env, certificate):
    with Pipelines(token=SECRET_TOKEN, tls=certificate) as server:
        env = with_api(env, server)
        untrusted = ragsweep(env, "submit", *S3_RUN, "--package", str(PACKAGE))
        assert_user_error(untrusted, "TLS verification failed", "--ca-cert")
        trusted = ragsweep(
            env, "submit", *S3_RUN, "--package", str(PACKAGE), "--ca-cert", certificate[0]
        )
        assert trusted.returncode == 0, trusted.stderr
        assert created_run(server)["display_name"].startswith("ragsweep ")


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_host_fails_at_once(env):
    port = free_port()
    env = {**env, "RAGSWEEP_KFP_HOST": f"http://127.0.0.1:{port}", "RAGSWEEP_KFP_TOKEN": "x"}
    result = ragsweep(env, "submit", *S3_RUN, "--package", str(PACKAGE))
    assert_user_error(result, f"cannot reach the pipelines API at http://127.0.0.1:{port}")


def test_a_bad_parameter_is_refused_before_any_connection(env, tmp_path):
    """Host and kubeconfig point at a closed port: a connection attempt would fail with
    "cannot reach"; the parameter's own line comes first, for submit and schedule alike."""
    closed = f"http://127.0.0.1:{free_port()}"
    by_host = {**env, "RAGSWEEP_KFP_HOST": closed, "RAGSWEEP_KFP_TOKEN": SECRET_TOKEN}
    by_kubeconfig = {**env, **kubeconfig(tmp_path, closed)}
    bad = ["-p", "max_questions=-5"]
    message = "max_questions (--max-questions): must be 0"

    assert_user_error(ragsweep(by_host, "submit", *S3_RUN, *bad), message)
    assert_user_error(ragsweep(by_kubeconfig, "submit", *S3_RUN, *bad), message)
    schedule = ["schedule", "create", "--cron", "0 2 * * *", *S3_RUN, *bad]
    assert_user_error(ragsweep(by_kubeconfig, *schedule), message)
    unknown = ragsweep(by_host, "submit", *S3_RUN, "-p", "vector_db=milvus")
    assert_user_error(unknown, "unknown pipeline parameter(s) ['vector_db']")
    # the same parameters, good: the connection is tried, and fails
    assert_user_error(ragsweep(by_host, "submit", *S3_RUN), "cannot reach the pipelines API")


def test_dry_run_checks_and_prints_the_submission_with_no_cluster(env):
    closed = f"http://127.0.0.1:{free_port()}"
    env = {**env, "RAGSWEEP_KFP_HOST": closed, "RAGSWEEP_KFP_TOKEN": SECRET_TOKEN}
    preset = ["-p", "preset=speed", "-p", "sweep_name=nightly-kb"]

    result = ragsweep(env, "submit", *S3_RUN, *preset, "--image", "quay.io/x/r:1", "--dry-run")

    assert result.returncode == 0, result.stderr
    assert "pipeline: compiled for quay.io/x/r:1 (parallelism 0, GPUs 0)" in result.stdout
    assert "experiment: ragsweep; 30 configuration(s)" in result.stdout
    shown = result.stdout.split("parameters: ", 1)[1].rsplit("\ndry run:", 1)[0]
    assert json.loads(shown) == {
        "input_data_bucket_name": "team-docs",
        "input_data_key": "kb/",
        "input_data_secret_name": "ragsweep-s3",
        "test_data_bucket_name": "team-eval",
        "test_data_key": "testset.json",
        "test_data_secret_name": "ragsweep-s3",
        "preset": "speed",
        "sweep_name": "nightly-kb",
    }
    assert result.stdout.rstrip().endswith("nothing submitted, no cluster asked")
    assert SECRET_TOKEN not in result.stdout + result.stderr
    bad = ragsweep(env, "submit", *S3_RUN, "-p", "preset=fastest", "--dry-run")
    assert_user_error(bad, "preset")


def test_unknown_parameters_and_oversized_grids_are_refused_before_submitting(env, pipelines):
    env = with_api(env, pipelines)
    unknown = ragsweep(env, "submit", *S3_RUN, "-p", "vector_db=milvus", "--package", str(PACKAGE))
    assert_user_error(unknown, "unknown pipeline parameter(s) ['vector_db']")
    big = ragsweep(
        env, "submit", *S3_RUN, "-p", "optimization_max_rag_patterns=8", "--package", str(PACKAGE)
    )
    assert_user_error(big, "holds 18 configurations, more than the budget of 8")
    assert pipelines.runs == {}


def test_an_autorag_runs_parameters_are_submitted_as_they_are_and_checked_first(env, pipelines):
    env = with_api(env, pipelines)
    autorag = [
        "-p", "ogx_secret_name=ogx", "-p", "maas_secret_name=maas",
        "-p", "vector_db_secret_name=milvus", "-p", "vector_io_provider_id=remote::milvus",
        "-p", 'input_data_keys=["kb/policies/"]', "-p", "preset=speed",
        "-p", 'generation_models=["granite-3.3"]', "-p", "optimization_max_rag_patterns=30",
    ]  # fmt: skip
    result = ragsweep(env, "submit", *S3_RUN, *autorag, "--package", str(PACKAGE))
    assert result.returncode == 0, result.stderr
    parameters = created_run(pipelines)["runtime_config"]["parameters"]
    assert parameters["input_data_keys"] == ["kb/policies/"]
    assert parameters["vector_io_provider_id"] == "remote::milvus"
    assert parameters["maas_secret_name"] == "maas" and parameters["preset"] == "speed"

    # the preset's grid (5 chunk configurations x 3 Top Ks x 2 search types) meets the budget
    small = [*autorag[:-2], "-p", "optimization_max_rag_patterns=8"]
    big = ragsweep(env, "submit", *S3_RUN, *small, "--package", str(PACKAGE))
    assert_user_error(big, "holds 30 configurations, more than the budget of 8")
    unknown = ragsweep(
        env, "submit", *S3_RUN, "-p", "vector_io_provider_id=remote::qdrant",
        "--package", str(PACKAGE),
    )  # fmt: skip
    assert_user_error(unknown, "vector_io_provider_id 'remote::qdrant': names no vector store")
    assert len(pipelines.runs) == 1


# ---- kubeconfig discovery --------------------------------------------------------------------


@pytest.fixture
def cluster(pipelines):
    host = pipelines.url.removeprefix("http://")
    with Kubernetes(
        token=SECRET_TOKEN,
        namespaces={"team-a", "empty"},
        dspas={"team-a": ["dspa"]},
        routes={("team-a", "ds-pipeline-dspa"): host},
    ) as server:
        yield server


def kubeconfig(tmp_path, url, namespace="team-a", token=SECRET_TOKEN):
    path = tmp_path / "kubeconfig"
    context = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "ctx", "context": context}],
                "current-context": "ctx",
            }
        )
    )
    return {"KUBECONFIG": str(path)}


def test_kubeconfig_finds_the_route_of_the_namespace_dspa_and_uses_its_token(
    env, tmp_path, pipelines, cluster
):
    result = ragsweep({**env, **kubeconfig(tmp_path, cluster.url)}, "submit", *S3_RUN)
    assert result.returncode == 0, result.stderr
    asked = [(r.method, r.path) for r in cluster.requests]
    assert asked == [
        (
            "GET",
            "/apis/datasciencepipelinesapplications.opendatahub.io/v1/namespaces/team-a/"
            "datasciencepipelinesapplications",
        ),
        ("GET", "/apis/route.openshift.io/v1/namespaces/team-a/routes/ds-pipeline-dspa"),
    ]
    assert {r.headers["authorization"] for r in pipelines.requests} == {f"Bearer {SECRET_TOKEN}"}
    spec = created_run(pipelines)["pipeline_spec"]["pipeline_spec"]
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {"image-registry.openshift-image-registry.svc:5000/team-a/ragsweep:latest"}


def test_kubeconfig_errors_say_what_is_missing(env, tmp_path, cluster):
    env = {**env, **kubeconfig(tmp_path, cluster.url)}
    nowhere = ragsweep(env, "schedule", "list", "-n", "nope")
    assert_user_error(nowhere, "namespace 'nope' does not exist")
    no_dspa = ragsweep(env, "schedule", "list", "-n", "empty")
    assert_user_error(no_dspa, "no DataSciencePipelinesApplication in namespace 'empty'")
    cluster.namespaces.add("two")
    cluster.dspas["two"] = ["blue", "green"]
    several = ragsweep(env, "schedule", "list", "-n", "two")
    assert_user_error(several, "several pipeline servers ['blue', 'green']", "--dspa")
    not_ready = ragsweep(env, "schedule", "list", "-n", "two", "--dspa", "green")
    assert_user_error(not_ready, "no route ds-pipeline-green in 'two' yet")
    cluster.dspas = None
    no_api = ragsweep(env, "schedule", "list")
    assert_user_error(no_api, "no DataSciencePipelinesApplication API")


def test_an_expired_kubeconfig_token_is_a_one_line_error(env, tmp_path, cluster):
    cluster.token = "renewed"
    result = ragsweep({**env, **kubeconfig(tmp_path, cluster.url)}, "schedule", "list")
    assert_user_error(result, "refused the kubeconfig's token (401)", "oc login")


def test_an_unreachable_kubernetes_api_is_a_one_line_error(env, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    result = ragsweep({**env, **kubeconfig(tmp_path, url)}, "schedule", "list")
    assert_user_error(result, f"cannot reach the Kubernetes API at {url}")


def test_no_kubeconfig_and_no_host_says_how_to_connect(env):
    result = ragsweep(env, "schedule", "list")
    assert_user_error(result, "no usable kubeconfig", "--host and --token")


# ---- schedules -------------------------------------------------------------------------------


def test_schedule_create_normalises_a_5_field_cron_one_run_at_a_time_no_catch_up(env, pipelines):
    result = ragsweep(
        with_api(env, pipelines),
        "schedule", "create", "--cron", "0 2 * * *", "--name", "nightly", *S3_RUN,
        "--package", str(PACKAGE),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "note: read the 5-field cron '0 2 * * *'" in result.stdout
    assert "runs every day at 02:00:00 UTC: cron '0 0 2 * * *'" in result.stdout
    [created] = pipelines.recurring.values()
    assert created["display_name"] == "nightly"
    assert created["trigger"] == {"cron_schedule": {"cron": "0 0 2 * * *"}}
    assert int(created["max_concurrency"]) == 1
    assert created["no_catchup"] is True
    assert created["mode"] == "ENABLE"
    assert created["runtime_config"]["parameters"]["input_data_bucket_name"] == "team-docs"
    again = ragsweep(
        with_api(env, pipelines),
        "schedule", "create", "--cron", "0 0 3 * * *", "--name", "nightly", *S3_RUN,
        "--package", str(PACKAGE),
    )  # fmt: skip
    assert_user_error(again, "a schedule named 'nightly' exists")


def test_a_bad_cron_is_refused_before_anything_is_sent(env, pipelines):
    result = ragsweep(
        with_api(env, pipelines),
        "schedule", "create", "--cron", "0 25 * * *", *S3_RUN, "--package", str(PACKAGE),
    )  # fmt: skip
    assert_user_error(result, "cron '0 25 * * *': hour 25 is out of range 0-23")
    assert pipelines.requests == []


def test_a_schedule_names_its_sweep_after_itself_unless_given_and_submit_passes_one(env, pipelines):
    env = with_api(env, pipelines)
    package = ["--package", str(PACKAGE)]
    default = ragsweep(env, "schedule", "create", "--cron", "@daily", "--name", "kb-nightly",
                       *S3_RUN, *package)  # fmt: skip
    given = ragsweep(env, "schedule", "create", "--cron", "@daily", "--name", "kb nightly 2",
                     "--sweep", "kb.v2", *S3_RUN, *package)  # fmt: skip
    submitted = ragsweep(env, "submit", *S3_RUN, "--sweep", "kb-nightly", *package)
    for result in (default, given, submitted):
        assert result.returncode == 0, result.stderr
    names = {r["display_name"]: r["runtime_config"]["parameters"].get("sweep_name")
             for r in pipelines.recurring.values()}  # fmt: skip
    assert names == {"kb-nightly": "kb-nightly", "kb nightly 2": "kb.v2"}
    assert created_run(pipelines)["runtime_config"]["parameters"]["sweep_name"] == "kb-nightly"


def test_a_name_that_cannot_name_a_sweep_is_refused_before_anything_is_sent(env, pipelines):
    env = with_api(env, pipelines)
    package = ["--package", str(PACKAGE)]
    spaced = ragsweep(env, "schedule", "create", "--cron", "@daily", "--name", "kb nightly",
                      *S3_RUN, *package)  # fmt: skip
    assert_user_error(
        spaced, "--name (the schedule's, its sweep's name unless --sweep gives one) 'kb nightly'",
        "a sweep name is 1 to 100 letters, digits, '.', '_' or '-'",
    )  # fmt: skip
    long = ragsweep(env, "submit", *S3_RUN, "--sweep", "k" * 101, *package)
    assert_user_error(long, "--sweep 'kkk", "a sweep name is 1 to 100 letters")
    param = ragsweep(env, "submit", *S3_RUN, "-p", "sweep_name=../x", *package)
    assert_user_error(param, "sweep_name '../x': a sweep name is 1 to 100 letters")
    twice = ragsweep(env, "submit", *S3_RUN, "--sweep", "a", "-p", "sweep_name=b", *package)
    assert_user_error(twice, "--sweep 'a' and --param sweep_name='b': give the sweep's name once")
    assert pipelines.requests == []


def test_schedules_are_listed_paused_resumed_and_deleted_by_name(env, pipelines):
    env = with_api(env, pipelines)
    created = ragsweep(
        env, "schedule", "create", "--cron", "@daily", *S3_RUN, "--package", str(PACKAGE)
    )
    assert created.returncode == 0, created.stderr
    [rid] = pipelines.recurring
    listed = ragsweep(env, "schedule", "list")
    assert f"ragsweep-nightly  {rid}  active  cron '0 0 0 * * *'" in listed.stdout
    assert ragsweep(env, "schedule", "pause", "ragsweep-nightly").returncode == 0
    assert pipelines.recurring[rid]["mode"] == "DISABLE"
    assert "paused" in ragsweep(env, "schedule", "list").stdout
    assert ragsweep(env, "schedule", "resume", rid).returncode == 0
    assert pipelines.recurring[rid]["mode"] == "ENABLE"
    deleted = ragsweep(env, "schedule", "delete", "ragsweep-nightly")
    assert deleted.returncode == 0 and f"deleted schedule 'ragsweep-nightly' ({rid})" in (
        deleted.stdout
    )
    assert pipelines.recurring == {}
    assert_user_error(ragsweep(env, "schedule", "pause", "ragsweep-nightly"), "no schedule named")


# ---- a stored test set (test data store:<name>) -----------------------------------------------


def test_submit_and_schedule_run_a_stored_test_set_read_by_load_testset_from_the_store(
    env, pipelines
):
    env = with_api(env, pipelines)
    docs = ["--docs", "s3://team-docs/kb/", "--testset-name", "curated-faq"]
    submitted = ragsweep(env, "submit", *docs, "--package", str(PACKAGE))
    assert submitted.returncode == 0, submitted.stderr
    run = created_run(pipelines)
    assert run["runtime_config"]["parameters"] == {
        "input_data_bucket_name": "team-docs",
        "input_data_key": "kb/",
        "input_data_secret_name": "ragsweep-s3",
        "test_data_bucket_name": "",
        "test_data_key": "store:curated-faq",
        "test_data_secret_name": "ragsweep-s3",
    }
    # the step that reads it gets the results-store Secret's RAGSWEEP_STORE_URL
    executors = run["pipeline_spec"]["platform_spec"]["platforms"]["kubernetes"]
    secrets = executors["deploymentSpec"]["executors"]["exec-load-testset"]["secretAsEnv"]
    given = {
        s["secretNameParameter"]["componentInputParameter"]: [k["envVar"] for k in s["keyToEnv"]]
        for s in secrets
    }
    assert given["results_store_secret_name"] == ["RAGSWEEP_STORE_URL"]

    nightly = ragsweep(
        env, "schedule", "create", "--cron", "0 2 * * *", *docs, "--package", str(PACKAGE)
    )
    assert nightly.returncode == 0, nightly.stderr
    [created] = pipelines.recurring.values()
    parameters = created["runtime_config"]["parameters"]
    assert (parameters["test_data_bucket_name"], parameters["test_data_key"]) == (
        "",
        "store:curated-faq",
    )


def test_stored_test_set_mistakes_are_refused_before_anything_is_sent(env, pipelines):
    env = with_api(env, pipelines)
    package = ["--package", str(PACKAGE)]
    both = ragsweep(env, "submit", *S3_RUN, "--testset-name", "faq", *package)
    assert_user_error(both, "--testset and --testset-name: give one of them")
    neither = ragsweep(
        env, "schedule", "create", "--cron", "@daily", "--docs", "s3://d/kb/", *package
    )
    assert_user_error(neither, "no test data: give --testset (a file) or --testset-name")
    blank = ragsweep(env, "submit", "--docs", "s3://d/kb/", "--testset-name", " ", *package)
    assert_user_error(blank, "--testset-name: name a test set stored in the results database")
    path = ragsweep(env, "submit", "--docs", "s3://d/kb/", "--testset-name", "../x", *package)
    assert_user_error(path, "--testset-name: a test set needs a name of 1 to 100 letters")
    assert pipelines.requests == []  # refused before connecting
    bucket = ragsweep(
        env, "submit", "--docs", "s3://d/kb/", "--testset-name", "faq",
        "-p", "test_data_bucket_name=team-eval", *package,
    )  # fmt: skip
    assert_user_error(bucket, "test_data_key 'store:faq' names a test set in the results database")
    assert pipelines.runs == {} and pipelines.recurring == {}
