"""Shared fixtures. S3: a real moto server on 127.0.0.1 speaking HTTP to real boto3 clients."""

from __future__ import annotations

import logging
import urllib.request
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest
from botocore.client import BaseClient
from moto.server import ThreadedMotoServer

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing-secret"}


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """URL of a moto server on a free port of 127.0.0.1, shared by the session."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> BaseClient:
    """A boto3 client of the moto server; the AWS_* connection variables point at it too."""
    env = {**FAKE_CREDENTIALS, "AWS_S3_ENDPOINT": moto_endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_S3_BUCKET", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


@pytest.fixture
def bucket(s3: BaseClient) -> str:
    """A new, empty bucket on the moto server."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def moto_auth(moto_endpoint: str) -> Iterator[Callable[[], None]]:
    """A switch that makes the moto server check credentials, until the test ends.

    Uses moto's documented ``/moto-api/reset-auth`` endpoint: from then on every request must
    be signed with an access key of a user created through the server's IAM API.
    """

    def authenticate_after(requests: str) -> None:
        url = f"{moto_endpoint}/moto-api/reset-auth"
        urllib.request.urlopen(
            urllib.request.Request(url, requests.encode(), {"Content-Type": "text/plain"})
        )

    yield lambda: authenticate_after("0")
    authenticate_after("inf")


TEST_API_KEY = "sk-test-do-not-leak-8d41"


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator:
    """A scripted OpenAI-compatible server; RAGSWEEP_LLM_* point at it (the judge defaults
    to the same), and the reply cache lives in the test's folder."""
    from scripted_llm import ScriptedLLM

    server = ScriptedLLM().start()
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", server.url)
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", TEST_API_KEY)
    monkeypatch.delenv("RAGSWEEP_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("RAGSWEEP_JUDGE_API_KEY", raising=False)
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    yield server
    server.stop()
