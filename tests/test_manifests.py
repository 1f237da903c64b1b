"""manifests/: every resource is well formed, fits the code that uses it, and holds no
secret; `kubectl kustomize` renders it into the project's namespace."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ragsweep.kubeflow.openshift import DSPA_GROUP, default_image
from ragsweep.kubeflow.tasks import (
    DEFAULT_CONNECTION,
    DEFAULT_MLFLOW_CONNECTION,
    DEFAULT_VECTOR_STORE_CONNECTION,
    MLFLOW_CONNECTION_KEYS,
    S3_CONNECTION_KEYS,
    STORE_CONNECTION_KEYS,
    vector_store_connection_keys,
)
from ragsweep.store.database import DEFAULT_STORE_CONNECTION
from ragsweep.store.database import ENV as STORE_ENV

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
# every key whose value is a credential, in the example secrets
CREDENTIALS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "RAGSWEEP_LLM_API_KEY"}
CREDENTIALS |= {"RAGSWEEP_UI_TOKEN"}
UI_TOKEN_SECRET = "ragsweep-ui"
PLACEHOLDER = "CHANGE-ME"


def kustomization() -> dict:
    return yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())


def resources() -> list[dict]:
    """The documents of every file the kustomization lists, as written."""
    docs = []
    for name in kustomization()["resources"]:
        docs.extend(d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d)
    return docs


def by_kind(docs: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


def test_every_resource_has_api_version_kind_and_name_and_no_secret():
    docs = resources()
    assert docs
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), doc
        assert doc["metadata"]["name"], doc
    kinds = by_kind(docs)
    assert set(kinds) == {
        "DataSciencePipelinesApplication",
        "ImageStream",
        "BuildConfig",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "Route",
    }
    assert "Secret" not in kinds  # applying the base must never overwrite a real secret


def test_pipeline_server_keeps_artifacts_in_external_s3_and_schedules_in_utc():
    [dspa] = by_kind(resources())["DataSciencePipelinesApplication"]
    group, version = dspa["apiVersion"].split("/")
    assert (group, version) == (DSPA_GROUP, "v1")
    spec = dspa["spec"]
    assert spec["dspVersion"] == "v2"
    storage = spec["objectStorage"]["externalStorage"]
    assert {"host", "bucket", "scheme", "region"} <= set(storage)
    assert storage["s3CredentialsSecret"] == {
        "secretName": DEFAULT_CONNECTION,  # the connection the pipeline reads data with
        "accessKey": "AWS_ACCESS_KEY_ID",
        "secretKey": "AWS_SECRET_ACCESS_KEY",
    }
    assert "minio" not in spec["objectStorage"]
    assert spec["scheduledWorkflow"]["cronScheduleTimezone"] == "UTC"


def test_the_build_makes_the_image_that_submit_uses_by_default():
    kinds = by_kind(resources())
    [stream], [build] = kinds["ImageStream"], kinds["BuildConfig"]
    strategy = build["spec"]["strategy"]
    assert strategy["type"] == "Docker"
    assert (ROOT / strategy["dockerStrategy"]["dockerfilePath"]).is_file()
    target = build["spec"]["output"]["to"]
    assert target == {"kind": "ImageStreamTag", "name": f"{stream['metadata']['name']}:latest"}
    namespace = kustomization()["namespace"]
    assert default_image(namespace).endswith(f"/{namespace}/{target['name']}")


def test_the_ci_account_may_find_and_use_the_pipeline_server_and_nothing_else():
    kinds = by_kind(resources())
    [account], [role], [binding] = kinds["ServiceAccount"], kinds["Role"], kinds["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert [(s["kind"], s["name"]) for s in binding["subjects"]] == [
        ("ServiceAccount", account["metadata"]["name"])
    ]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {
        (DSPA_GROUP, "datasciencepipelinesapplications", "list"),
        (DSPA_GROUP, "datasciencepipelinesapplications/api", "create"),
        ("route.openshift.io", "routes", "get"),
    } <= granted
    assert not [g for g in granted if g[1] in ("secrets", "*") or g[2] == "*"]


def ui_container(docs: list[dict]) -> dict:
    [deployment] = by_kind(docs)["Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_the_ui_reads_the_results_store_and_its_token_from_secrets_only():
    container = ui_container(resources())
    assert container["command"][:6] == ["ragsweep", "ui", "--host", "0.0.0.0", "--port", "8080"]
    env = {e["name"]: e for e in container["env"]}
    assert env[STORE_ENV]["valueFrom"]["secretKeyRef"] == {
        "name": DEFAULT_STORE_CONNECTION,  # the secret the nightly runs publish with
        "key": STORE_CONNECTION_KEYS[0],
    }
    assert env["RAGSWEEP_UI_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": UI_TOKEN_SECRET,
        "key": "RAGSWEEP_UI_TOKEN",
    }
    assert "value" not in env[STORE_ENV] and "value" not in env["RAGSWEEP_UI_TOKEN"]
    assert not container["securityContext"]["allowPrivilegeEscalation"]
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_the_ui_options_are_those_of_the_ui_command():
    import typer.main

    from ragsweep.cli import app

    commands = typer.main.get_command(app).commands
    if "ui" not in commands:
        pytest.skip("no `ragsweep ui` command in this checkout")
    # parsing checks every option and value the manifest passes
    context = commands["ui"].make_context("ui", list(ui_container(resources())["command"][2:]))
    assert context.params["https"] is True  # served over the Route's TLS: __Host- cookies
    assert context.params["docs_root"] == ["/opt/app-root/src/examples"]


def test_the_ui_runs_the_built_image_and_is_served_over_https_only():
    kinds = by_kind(resources())
    [deployment], [service], [route] = kinds["Deployment"], kinds["Service"], kinds["Route"]
    [build] = kinds["BuildConfig"]
    container = ui_container(resources())
    assert container["image"] == build["spec"]["output"]["to"]["name"]
    trigger = json.loads(deployment["metadata"]["annotations"]["image.openshift.io/triggers"])
    assert trigger[0]["from"] == {"kind": "ImageStreamTag", "name": container["image"]}
    assert container["name"] in trigger[0]["fieldPath"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [port] = container["ports"]
    [service_port] = service["spec"]["ports"]
    assert (service_port["targetPort"], port["containerPort"]) == (port["name"], 8080)
    assert route["spec"]["to"] == {"kind": "Service", "name": service["metadata"]["name"]}
    assert route["spec"]["port"]["targetPort"] == service_port["name"]
    assert route["spec"]["tls"] == {
        "termination": "edge",
        "insecureEdgeTerminationPolicy": "Redirect",
    }


def example_secrets() -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted((MANIFESTS / "examples").glob("*.yaml"))]


def test_example_secrets_hold_placeholders_only():
    secrets = example_secrets()
    assert {s["metadata"]["name"] for s in secrets} == {
        DEFAULT_CONNECTION,
        "ragsweep-llm",
        "ragsweep-results-store",
        DEFAULT_VECTOR_STORE_CONNECTION,
        UI_TOKEN_SECRET,
        DEFAULT_MLFLOW_CONNECTION,
    }
    for secret in secrets:
        assert secret["kind"] == "Secret"
        assert "data" not in secret  # no base64 literal hides anything
        for key, value in secret["stringData"].items():
            if key in CREDENTIALS or key == "RAGSWEEP_STORE_URL":
                assert PLACEHOLDER in value, f"{secret['metadata']['name']}: {key}"


def test_example_vector_store_secret_holds_keys_the_retrieve_step_reads():
    [stores] = [
        s for s in example_secrets() if s["metadata"]["name"] == DEFAULT_VECTOR_STORE_CONNECTION
    ]
    assert set(stores["stringData"]) <= set(vector_store_connection_keys())
    for key in ("RAGSWEEP_MILVUS_TOKEN", "RAGSWEEP_PGVECTOR_URL", "RAGSWEEP_ORACLE_PASSWORD"):
        assert PLACEHOLDER in stores["stringData"][key], key


def test_example_mlflow_secret_holds_keys_the_track_step_reads():
    [mlflow] = [s for s in example_secrets() if s["metadata"]["name"] == DEFAULT_MLFLOW_CONNECTION]
    assert set(mlflow["stringData"]) <= set(MLFLOW_CONNECTION_KEYS)
    for key in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN"):
        assert PLACEHOLDER in mlflow["stringData"][key], key


def test_example_s3_connection_is_an_openshift_ai_connection_with_the_pipeline_keys():
    [s3] = [s for s in example_secrets() if s["metadata"]["name"] == DEFAULT_CONNECTION]
    assert s3["metadata"]["labels"]["opendatahub.io/dashboard"] == "true"
    annotations = s3["metadata"]["annotations"]
    assert annotations["opendatahub.io/connection-type"] == "s3"
    assert annotations["opendatahub.io/connection-type-ref"] == "s3"
    assert set(s3["stringData"]) == set(S3_CONNECTION_KEYS)


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kubectl is missing: .ci/run installs it (Debian kubernetes-client)")
        pytest.skip("kubectl is not installed (apt-get install kubernetes-client)")
    return found


@pytest.mark.parametrize("namespace", ["ragsweep", "team-b"])
def test_kustomize_renders_every_resource_into_the_project(tmp_path, namespace):
    base = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, base)
    config = kustomization()
    config["namespace"] = namespace
    (base / "kustomization.yaml").write_text(yaml.safe_dump(config))
    rendered = subprocess.run(
        [kubectl(), "kustomize", str(base)], capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    names = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert names == sorted((d["kind"], d["metadata"]["name"]) for d in resources())
    assert {d["metadata"]["namespace"] for d in docs} == {namespace}
    [binding] = by_kind(docs)["RoleBinding"]
    assert [s["namespace"] for s in binding["subjects"]] == [namespace]
