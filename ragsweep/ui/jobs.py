"""Jobs started from the pages: ``ragsweep run`` or ``ragsweep generate`` as a local
background process writing to the app's results database (or ``ragsweep submit`` to
OpenShift AI); the job page follows its log until it ends."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import Engine
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.testsets import check_name
from ragsweep.kubeflow.closing import PARTIAL_EXIT
from ragsweep.results.database import ENV as STORE_ENV
from ragsweep.ui.roots import DocRoots
from ragsweep.ui.security import checked_form

LOG_TAIL = 30  # log lines shown
URL = re.compile(r"https?://[^\s'\"]+")
# form field -> `ragsweep run` option; values are passed as they are, the CLI checks them
OPTIONS = {
    "chunk_sizes": "--chunk-sizes",
    "top_k": "--top-k",
    "search_types": "--search-types",
    "max_questions": "--max-questions",
}


# what `ragsweep run`'s exit status says besides success (docs/failures.md)
RUN_ENDINGS = {
    1: "succeeded, regressed against its baseline",
    PARTIAL_EXIT: "partial: results kept, a side step failed",
    130: "interrupted",
    143: "interrupted",
}


@dataclass
class Job:
    id: str
    argv: list[str]
    log: Path
    process: subprocess.Popen
    started: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def status(self) -> str:
        code = self.process.poll()
        if code is None:
            return "running"
        if code == 0:
            return "succeeded"
        ended = RUN_ENDINGS.get(code) if self.argv[0] == "run" else None
        return f"{ended or 'failed'} ({code})"

    def links(self) -> list[str]:
        """The addresses a submit job printed (the run's page)."""
        return list(dict.fromkeys(URL.findall(self.tail()))) if self.argv[0] == "submit" else []

    def tail(self) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-LOG_TAIL:])


class Jobs:
    """The runs this app started, by id; they read documents under ``roots`` only."""

    def __init__(self, folder: Path, engine: Engine, roots: DocRoots) -> None:
        self.folder, self.engine, self.roots = folder, engine, roots
        self.jobs: dict[str, Job] = {}

    def start(self, docs: str, testset: str, options: dict[str, str]) -> Job:
        """``ragsweep run`` on this machine of the stored test set ``testset`` (its name
        checked), storing the run in the app's database."""
        docs = self.roots.check(docs)
        argv = ["run", "--docs", docs, "--testset-name", check_name(testset, "testset")]
        argv += ["--output", str(self.folder)]
        for name, flag in OPTIONS.items():
            if options.get(name):
                argv += [flag, options[name]]
        store_url = self.engine.url.render_as_string(hide_password=False)
        return self._spawn(argv, {STORE_ENV: store_url})

    def generate(self, docs: str, name: str, model: str, num_questions: str) -> Job:
        """``ragsweep generate`` with Giskard, storing the test set under ``name``."""
        docs = self.roots.check(docs)
        argv = ["generate", "--docs", docs, "--name", check_name(name, "name"), "--llm", model]
        argv += ["--num-questions", num_questions] if num_questions else []
        store_url = self.engine.url.render_as_string(hide_password=False)
        return self._spawn(argv, {STORE_ENV: store_url})

    def submit(self, docs: str, testset: str, experiment: str) -> Job:
        """``ragsweep submit`` to OpenShift AI with this server's pipelines settings
        (RAGSWEEP_KFP_HOST and RAGSWEEP_KFP_TOKEN, or the kubeconfig)."""
        argv = ["submit", "--docs", docs, "--testset", testset, "--experiment", experiment]
        return self._spawn(argv, {})

    def _spawn(self, argv: list[str], env: dict[str, str]) -> Job:
        job_id = uuid.uuid4().hex[:12]
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / f".ui-job-{job_id}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", "from ragsweep.cli import main; main()", *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env},  # secrets stay in the environment, off the command
            )
        self.jobs[job_id] = job = Job(job_id, argv, log, process)
        return job

    def get(self, job_id: str) -> Job:
        if job_id not in self.jobs:
            raise HTTPException(404, f"no job {job_id!r} started by this ui")
        return self.jobs[job_id]


def _testset_names(request: Request) -> list[str]:
    from ragsweep.ui.testsets import stored

    return stored(request).names()


async def start_form(request: Request) -> Response:
    return request.app.state.render(
        request,
        "start.html",
        testsets=_testset_names(request),
        jobs=sorted(request.app.state.jobs.jobs.values(), key=lambda j: j.started, reverse=True),
        options=OPTIONS,
        openshift=openshift_configured(),
        roots=request.app.state.jobs.roots.describe(),
    )


async def start(request: Request) -> Response:
    form = await checked_form(request)
    docs, name = str(form.get("docs", "")).strip(), str(form.get("testset", ""))
    if not docs:
        raise HTTPException(400, "docs: give a documents folder or s3://bucket/prefix")
    if name not in _testset_names(request):
        raise HTTPException(400, f"testset: no stored test set {name!r}")
    options = {k: str(form.get(k, "")).strip() for k in OPTIONS}
    try:
        job = request.app.state.jobs.start(docs, name, options)
    except RagsweepError as exc:
        raise HTTPException(400, str(exc)) from None
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


def openshift_configured() -> bool:
    """Whether ``ragsweep submit`` can find a pipelines server from here."""
    kubeconfig = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    return bool(os.environ.get("RAGSWEEP_KFP_HOST")) or Path(kubeconfig).is_file()


async def submit(request: Request) -> Response:
    form = await checked_form(request)
    docs, testset = str(form.get("docs", "")).strip(), str(form.get("testset", "")).strip()
    experiment = str(form.get("experiment", "")).strip() or "ragsweep"
    if not openshift_configured():
        raise HTTPException(400, "OpenShift AI: set RAGSWEEP_KFP_HOST (or a kubeconfig) first")
    if not docs or not testset:
        raise HTTPException(400, "give the documents and the test data (s3://...)")
    job = request.app.state.jobs.submit(docs, testset, experiment)
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


async def generate(request: Request) -> Response:
    form = await checked_form(request)
    fields = {k: str(form.get(k, "")).strip() for k in ("docs", "name", "llm", "num_questions")}
    for needed in ("docs", "name", "llm"):
        if not fields[needed]:
            raise HTTPException(400, f"{needed}: required to generate a test set")
    try:
        job = request.app.state.jobs.generate(
            fields["docs"], fields["name"], fields["llm"], fields["num_questions"]
        )
    except RagsweepError as exc:
        raise HTTPException(400, str(exc)) from None
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


async def job_page(request: Request) -> Response:
    job = request.app.state.jobs.get(request.path_params["job_id"])
    return request.app.state.render(request, "job.html", job=job)


def routes() -> list[Route]:
    return [
        Route("/start", start_form, methods=["GET"]),
        Route("/start", start, methods=["POST"]),
        Route("/submit", submit, methods=["POST"]),
        Route("/generate", generate, methods=["POST"]),
        Route("/jobs/{job_id}", job_page),
    ]
