"""Scripted HTTP servers on 127.0.0.1 standing in for OpenShift: the Kubeflow Pipelines
``/apis/v2beta1`` API of a DataSciencePipelinesApplication, and the Kubernetes API with its
DSPAs and routes. Each records the requests it is sent."""

from __future__ import annotations

import json
import ssl
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


class ScriptedServer:
    """A threaded HTTP server whose ``answer(request)`` returns (status, JSON body)."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        """``tls``: a certificate file and its key file, to serve HTTPS."""
        self.requests: list[Request] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                request = Request(
                    self.command,
                    url.path,
                    parse_qs(url.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
                owner.requests.append(request)
                status, body = owner.answer(request)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _handle

            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "https" if tls else "http"
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{self.scheme}://{host}:{port}"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, request: Request) -> tuple[int, Any]:
        raise NotImplementedError


@dataclass
class Pipelines(ScriptedServer):
    """The pipelines API: experiments, runs (whose states follow ``run_states``), recurring
    runs. A request without ``Bearer <token>`` gets 401; with ``forbidden``, 403."""

    token: str = "pipelines-token"
    tls: tuple[str, str] | None = None
    forbidden: bool = False
    run_states: list[str] = field(default_factory=lambda: ["SUCCEEDED"])
    failed_step: str | None = None
    experiments: dict[str, dict] = field(default_factory=dict)
    runs: dict[str, dict] = field(default_factory=dict)
    recurring: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ScriptedServer.__init__(self, self.tls)

    def answer(self, request: Request) -> tuple[int, Any]:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"error": "Unauthorized", "code": 16}
        if self.forbidden:
            return 403, {"error": "Forbidden", "code": 7}
        path = request.path.removeprefix("/apis/v2beta1/")
        route = (request.method, path)  # a collection, or its name then "/" and an id
        if route == ("GET", "healthz"):
            return 200, {"multi_user": False, "commit_sha": "scripted", "tag_name": "2.17.3"}
        if route == ("GET", "experiments"):
            wanted = json.loads(request.query["filter"][0])["predicates"][0]["stringValue"]
            found = [e for e in self.experiments.values() if e["display_name"] == wanted]
            return 200, {"experiments": found, "total_size": len(found)} if found else {}
        if route == ("POST", "experiments"):
            experiment = {**request.body, "experiment_id": str(uuid.uuid4())}
            self.experiments[experiment["experiment_id"]] = experiment
            return 200, experiment
        if route == ("POST", "runs"):
            run = {**request.body, "run_id": str(uuid.uuid4()), "state": "PENDING"}
            self.runs[run["run_id"]] = run
            return 200, run
        if route[0] == "GET" and path.startswith("runs/"):
            run = dict(self.runs[path.split("/")[1]])
            states = self.run_states
            run["state"] = states.pop(0) if len(states) > 1 else states[0]
            if run["state"] == "FAILED" and self.failed_step:
                run["run_details"] = {
                    "task_details": [
                        {"display_name": "root", "state": "FAILED"},
                        {
                            "display_name": self.failed_step,
                            "state": "FAILED",
                            "error": {"message": "exit status 2"},
                        },
                    ]
                }
            return 200, run
        if route == ("POST", "recurringruns"):
            created = {**request.body, "recurring_run_id": str(uuid.uuid4())}
            self.recurring[created["recurring_run_id"]] = created
            return 200, created
        if route == ("GET", "recurringruns"):
            return 200, {"recurringRuns": list(self.recurring.values())}  # its JSON name
        if request.method in ("POST", "DELETE") and path.startswith("recurringruns/"):
            rid, _, action = path.split("/")[1].partition(":")
            if rid not in self.recurring:
                return 404, {"error": f"recurring run {rid} not found", "code": 5}
            if request.method == "DELETE":
                del self.recurring[rid]
            else:
                self.recurring[rid]["mode"] = {"disable": "DISABLE", "enable": "ENABLE"}[action]
            return 200, {}
        return 404, {"error": f"no route {request.method} {request.path}", "code": 5}


@dataclass
class Kubernetes(ScriptedServer):
    """The Kubernetes API: namespaces, DSPAs by namespace (None: the API is not installed),
    and the routes that DSPA names. A request without ``Bearer <token>`` gets 401."""

    token: str = "kube-token"
    namespaces: set[str] = field(default_factory=set)
    dspas: dict[str, list[str]] | None = field(default_factory=dict)
    routes: dict[tuple[str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ScriptedServer.__init__(self)

    def answer(self, request: Request) -> tuple[int, Any]:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return 401, _status(401, "Unauthorized")
        parts = request.path.strip("/").split("/")
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 4:
            if parts[3] in self.namespaces:
                return 200, {"kind": "Namespace", "metadata": {"name": parts[3]}}
            return 404, _status(404, f'namespaces "{parts[3]}" not found')
        if parts[:2] == ["apis", "datasciencepipelinesapplications.opendatahub.io"]:
            if self.dspas is None or parts[2] != "v1":
                return 404, _status(404, "the server could not find the requested resource")
            names = self.dspas.get(parts[4], [])
            items = [{"metadata": {"name": n, "namespace": parts[4]}} for n in names]
            return 200, {"kind": "DataSciencePipelinesApplicationList", "items": items}
        if parts[:3] == ["apis", "route.openshift.io", "v1"]:
            host = self.routes.get((parts[4], parts[6]))
            if host is None:
                return 404, _status(404, f'routes.route.openshift.io "{parts[6]}" not found')
            return 200, {"kind": "Route", "spec": {"host": host}}
        return 404, _status(404, "not found")


def _status(code: int, message: str) -> dict:
    return {"kind": "Status", "status": "Failure", "message": message, "code": code}
