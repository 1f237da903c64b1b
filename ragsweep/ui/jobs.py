"""Jobs started from the pages: ``ragsweep run`` or ``ragsweep generate`` as a local
background process writing to the app's results database (or ``ragsweep submit`` to
OpenShift AI); the job page follows its counters and log until it ends.

Each job is recorded in the runs folder (``.ui-job-<id>.json``: its command, process id and
start) and its process writes its exit status beside it (``.ui-job-<id>.exit``), so a
restarted UI still lists the jobs it started, follows the ones still running and says how
the others ended."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
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
from ragsweep.runner.closing import PARTIAL_EXIT
from ragsweep.runner.rundir import LOCK, MARKER, read_marker
from ragsweep.store.annotations import MAX_TITLE, label_run
from ragsweep.store.database import ENV as STORE_ENV
from ragsweep.store.database import find_runs, run_info
from ragsweep.ui.live import Count, counts
from ragsweep.ui.roots import DocRoots
from ragsweep.ui.security import checked_form

log = logging.getLogger("ragsweep")
LOG_TAIL = 30  # log lines shown
URL = re.compile(r"https?://[^\s'\"]+")


def form_options() -> tuple[dict[str, dict[str, tuple[str, str]]], dict[str, tuple[str, str]]]:
    """The start form's fields, from the run options' declarations (``Option.form``):
    by group, each text field's (flag, placeholder: its default); and the checkboxes'
    (flag, help). Values are passed as they are and the CLI checks them (its error is the
    job's log)."""
    from ragsweep.core.option_fields import FORM_GROUPS
    from ragsweep.sweep.options import run_options

    groups: dict[str, dict[str, tuple[str, str]]] = {group: {} for group in FORM_GROUPS}
    checks: dict[str, tuple[str, str]] = {}
    for option in run_options():
        if not option.declared.form:
            continue
        if option.kind is bool:
            checks[option.name] = (option.flags[0], option.declared.help)
        else:
            groups[option.declared.form][option.name] = (option.flags[0], option.shown_default())
    return {g: fields for g, fields in groups.items() if fields}, checks


OPTION_GROUPS, FLAGS = form_options()
OPTIONS = {name: flag for group in OPTION_GROUPS.values() for name, (flag, _) in group.items()}


# what `ragsweep run`'s exit status says besides success (docs/failures.md)
RUN_ENDINGS = {
    1: "succeeded, regressed against its baseline",
    PARTIAL_EXIT: "partial: results kept, a side step failed",
    130: "interrupted",
    143: "interrupted",
}


# the job's process: the CLI, its exit status written to the file named first
CHILD = """
import sys
from pathlib import Path
exit_file = Path(sys.argv.pop(1))
code = 1
try:
    from ragsweep.cli import main
    main()
    code = 0
except SystemExit as stop:
    code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
except KeyboardInterrupt:
    code = 130
finally:
    exit_file.write_text(str(code))
raise SystemExit(code)
"""


@dataclass
class Job:
    id: str
    argv: list[str]
    log: Path
    process: subprocess.Popen | None = None  # None: started before this UI restarted
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    pid: int | None = None
    title: str = ""  # the name its run gets once stored
    folder: Path | None = None  # its run folder, once found

    @property
    def exit_file(self) -> Path:
        return self.log.with_suffix(".exit")

    def exit_code(self) -> int | None:
        """The exit status, None while it runs (or when it died without one: ``lost``)."""
        try:
            return int(self.exit_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return self.process.poll() if self.process else None

    def alive(self) -> bool:
        """Whether the job's process runs (this UI's child, or the process recorded before a
        restart, checked to be this job's by its command line)."""
        if self.process is not None:
            return self.process.poll() is None
        try:
            command = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        return str(self.exit_file).encode() in command

    @property
    def status(self) -> str:
        code = self.exit_code()
        if code is None:
            return "running" if self.alive() else "ended, exit status unknown"
        if code == 0:
            return "succeeded"
        ended = RUN_ENDINGS.get(code) if self.argv[0] == "run" else None
        return f"{ended or 'failed'} ({code})"

    def cancel(self) -> None:
        """Stop a running job as Ctrl-C would (SIGTERM: a run stops its steps, keeps what
        finished and can be resumed)."""
        if self.status == "running" and self.pid:
            os.kill(self.pid, signal.SIGTERM)

    def run_dir(self) -> Path | None:
        """The run folder a ``run`` job writes: the one whose marker names its process while
        it runs, or whose lock file still records it (host and PID) once the run closed and
        cleared the marker's PID."""
        if self.argv[0] != "run" or not self.pid:
            return None
        if self.folder is None:
            for marker in self.log.parent.glob(f"*/{MARKER}"):
                if self._writes(marker.parent):
                    self.folder = marker.parent
                    break
        return self.folder

    def _writes(self, folder: Path) -> bool:
        try:
            if read_marker(folder).get("pid") == self.pid:
                return True
            lock = json.loads((folder / LOCK).read_text(encoding="utf-8") or "{}")
        except (RagsweepError, OSError, ValueError):
            return False
        return lock.get("pid") == self.pid and lock.get("host") == socket.gethostname()

    def counts(self) -> list[Count]:
        """The run's counters with their time left, as the terminal shows them."""
        folder = self.run_dir()
        if folder is None:
            return []
        return counts(folder / "progress.jsonl")

    def links(self) -> list[str]:
        """The addresses a submit job printed (the run's page)."""
        return list(dict.fromkeys(URL.findall(self.tail()))) if self.argv[0] == "submit" else []

    def tail(self) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-LOG_TAIL:])

    def record(self) -> dict:
        return {
            "id": self.id,
            "argv": self.argv,
            "pid": self.pid,
            "started": self.started.isoformat(),
            "title": self.title,
        }


class Jobs:
    """The runs this app started, by id; they read documents under ``roots`` only."""

    def __init__(self, folder: Path, engine: Engine, roots: DocRoots) -> None:
        self.folder, self.engine, self.roots = folder, engine, roots
        self.jobs: dict[str, Job] = {}
        for path in sorted(folder.glob(".ui-job-*.json")):  # those started before a restart
            try:
                r = json.loads(path.read_text(encoding="utf-8"))
                job = Job(r["id"], r["argv"], path.with_suffix(".log"), pid=r["pid"])
                job.started, job.title = datetime.fromisoformat(r["started"]), r["title"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("ui: job record %s unreadable (%s): not listed", path, exc)
                continue
            self.jobs[job.id] = job

    def start(self, docs: str, testset: str, options: dict[str, str], title: str = "") -> Job:
        """``ragsweep run`` on this machine of the stored test set ``testset`` (its name
        checked), storing the run in the app's database under the name ``title``."""
        docs = self.roots.check(docs)
        argv = ["run", "--docs", docs, "--testset-name", check_name(testset, "testset")]
        argv += ["--output", str(self.folder)]
        for name, flag in OPTIONS.items():
            if options.get(name):
                argv += [flag, options[name]]
        argv += [flag for name, (flag, _) in FLAGS.items() if options.get(name)]
        store_url = self.engine.url.render_as_string(hide_password=False)
        return self._spawn(argv, {STORE_ENV: store_url}, title)

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

    def _spawn(self, argv: list[str], env: dict[str, str], title: str = "") -> Job:
        job_id = uuid.uuid4().hex[:12]
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / f".ui-job-{job_id}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(log.with_suffix(".exit")), *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env},  # secrets stay in the environment, off the command
            )
        job = Job(job_id, argv, log, process, pid=process.pid, title=title)
        # reaped the moment it ends, whether or not a page asks about it: no zombie
        threading.Thread(target=process.wait, name=f"job-{job_id}", daemon=True).start()
        log.with_suffix(".json").write_text(json.dumps(job.record()), encoding="utf-8")
        self.jobs[job_id] = job
        return job

    def get(self, job_id: str) -> Job:
        if job_id not in self.jobs:
            raise HTTPException(404, f"no job {job_id!r} started by this ui")
        return self.jobs[job_id]

    def name_stored_runs(self) -> None:
        """Give each finished run job's stored run the name it was started with (once)."""
        for job in self.jobs.values():
            if not job.title or job.exit_code() is None or (folder := job.run_dir()) is None:
                continue
            try:
                label_run(self.engine, folder.name, title=job.title)
            except RagsweepError as exc:  # not stored (failed, --no-store): nothing to name
                log.info("ui: job %s: run %s not named: %s", job.id, folder.name, exc)
            job.title = ""
            job.log.with_suffix(".json").write_text(json.dumps(job.record()), encoding="utf-8")


def _testset_names(request: Request) -> list[str]:
    from ragsweep.ui.testset_pages import stored

    return stored(request).names()


def last_options(engine: Engine, testset: str) -> dict[str, str]:
    """The form's defaults for ``testset``: the documents and options of its last stored run
    (none without one)."""
    from ragsweep.sweep.options import run_options

    found = find_runs(engine, text=testset, limit=50, archived=None)
    runs_of_set = [r for r in found if r["testset_name"] == testset]
    if not runs_of_set:
        return {}
    settings = run_info(engine, runs_of_set[0]["run_id"]).get("settings") or {}
    space = settings.get("search_space") or {}

    def text(value: object) -> str:
        return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)

    held = {"space": space, "": settings, "llm": settings.get("llm") or {}}
    out = {"docs": settings.get("docs") or ""}
    for option in run_options():
        value = held.get(option.nest, {}).get(option.field)
        if option.name in OPTIONS and value not in (None, "", [], 0):
            out[option.name] = text(option.plain(value))
    return out


async def start_form(request: Request) -> Response:
    chosen = request.query_params.get("testset", "")
    return request.app.state.render(
        request,
        "start.html",
        testsets=_testset_names(request),
        jobs=sorted(request.app.state.jobs.jobs.values(), key=lambda j: j.started, reverse=True),
        groups=OPTION_GROUPS,
        checks=FLAGS,
        chosen=chosen,
        defaults=last_options(request.app.state.data.engine, chosen) if chosen else {},
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
    options = {k: str(form.get(k, "")).strip() for k in [*OPTIONS, *FLAGS]}
    title = str(form.get("title", "")).strip()
    if len(title) > MAX_TITLE:
        raise HTTPException(400, f"name: at most {MAX_TITLE} characters")
    try:
        job = request.app.state.jobs.start(docs, name, options, title)
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
    return request.app.state.render(request, "job.html", job=job, counts=job.counts())


async def cancel(request: Request) -> Response:
    await checked_form(request)
    job = request.app.state.jobs.get(request.path_params["job_id"])
    job.cancel()
    return RedirectResponse(f"/jobs/{job.id}", status_code=303)


def routes() -> list[Route]:
    return [
        Route("/start", start_form, methods=["GET"]),
        Route("/start", start, methods=["POST"]),
        Route("/submit", submit, methods=["POST"]),
        Route("/generate", generate, methods=["POST"]),
        Route("/jobs/{job_id}", job_page),
        Route("/jobs/{job_id}/cancel", cancel, methods=["POST"]),
    ]
