"""The test-set pages over the results database (``curation.DatabaseStore``): list, view,
edit a question or its answers, delete, add, import AutoRAG JSON / Giskard JSONL, export.
Every change is saved as a new version of the items it changes."""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.testsets import check_name, export_testset, load_testset, name_from_file
from ragsweep.results import curation
from ragsweep.ui.security import checked_form

FORMATS = {"json": "application/json", "jsonl": "application/x-ndjson"}
UPLOADS = (".json", ".jsonl")


def stored(request: Request) -> curation.DatabaseStore:
    return curation.DatabaseStore(request.app.state.data.engine)


def _load(request: Request, name: str):
    try:
        return stored(request).load(name)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _back(name: str, question_id: str | None = None) -> RedirectResponse:
    path = f"/testsets/{quote(name, safe='')}"
    if question_id:
        path += f"/questions/{quote(question_id, safe='')}"
    return RedirectResponse(path, status_code=303)


def _user_error(exc: RagsweepError) -> HTTPException:
    return HTTPException(400, str(exc))


async def list_page(request: Request) -> Response:
    return request.app.state.render(request, "testsets.html", sets=stored(request).summaries())


async def import_set(request: Request) -> Response:
    """A test-set file uploaded: AutoRAG .json or Giskard .jsonl, stored under a name (the
    one given, checked, else one made from the file's name). The upload is read from a file
    named by its format alone: no file name is built from what the browser sent."""
    form = await checked_form(request)
    upload = form.get("file")
    if upload is None or isinstance(upload, str) or not upload.filename:
        raise HTTPException(400, "file: choose an AutoRAG .json or Giskard .jsonl file")
    filename = PurePosixPath(upload.filename).name
    suffix = PurePosixPath(filename).suffix.lower()
    given = str(form.get("name", "")).strip()
    try:
        name = check_name(given or name_from_file(filename), "name" if given else "file name")
        if suffix not in UPLOADS:
            raise RagsweepError(f"{filename}: choose an AutoRAG .json or Giskard .jsonl file")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"upload{suffix}"
            path.write_bytes(await upload.read())
            try:
                table = load_testset(str(path))
            except RagsweepError as exc:
                raise RagsweepError(str(exc).replace(str(path), filename)) from None
        stored(request).save(name, table)
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return _back(name)


async def set_page(request: Request) -> Response:
    name = request.path_params["name"]
    table = _load(request, name)
    return request.app.state.render(
        request, "testset.html", name=name, questions=table.to_pylist(), formats=FORMATS
    )


async def export(request: Request) -> Response:
    name, kind = request.path_params["name"], request.path_params["kind"]
    if kind not in FORMATS:
        raise HTTPException(404, f"export: {kind!r}; choose from {', '.join(FORMATS)}")
    table = _load(request, name)
    with tempfile.TemporaryDirectory() as folder:
        text = export_testset(table, Path(folder) / f"testset.{kind}").read_text(encoding="utf-8")
    stem = PurePosixPath(name).stem if PurePosixPath(name).suffix in (".json", ".jsonl") else name
    stem = name_from_file(stem) or "testset"  # a name stored before the rule may be any text
    return Response(
        text,
        media_type=FORMATS[kind],
        headers={"content-disposition": f'attachment; filename="{stem}.{kind}"'},
    )


async def add(request: Request) -> Response:
    name = request.path_params["name"]
    form = await checked_form(request)
    table = _load(request, name)
    try:
        table = curation.add_question(
            table,
            str(form.get("question", "")).strip(),
            _lines(str(form.get("answers", ""))),
            _lines(str(form.get("doc_ids", ""))),
            str(form.get("topic", "")).strip() or None,
            str(form.get("question_type", "")).strip() or None,
        )
    except RagsweepError as exc:
        raise _user_error(exc) from None
    stored(request).save(name, table)
    return _back(name, table["question_id"][-1].as_py())


async def question_page(request: Request) -> Response:
    name, question_id = request.path_params["name"], request.path_params["question_id"]
    table = _load(request, name)
    current = [q for q in table.to_pylist() if q["question_id"] == question_id]
    try:
        history = stored(request).history(name, question_id)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    return request.app.state.render(
        request,
        "testset_question.html",
        name=name,
        question=current[0] if current else None,
        question_id=question_id,
        history=history,
    )


async def edit(request: Request) -> Response:
    name, question_id = request.path_params["name"], request.path_params["question_id"]
    form = await checked_form(request)
    try:
        table = curation.edit_question(
            _load(request, name),
            question_id,
            str(form.get("question", "")).strip(),
            _lines(str(form.get("answers", ""))),
        )
    except RagsweepError as exc:
        raise _user_error(exc) from None
    stored(request).save(name, table)
    return _back(name, question_id)


async def delete(request: Request) -> Response:
    name, question_id = request.path_params["name"], request.path_params["question_id"]
    await checked_form(request)
    try:
        table = curation.delete_question(_load(request, name), question_id)
    except RagsweepError as exc:
        raise _user_error(exc) from None
    stored(request).save(name, table)
    return _back(name)


def routes() -> list[Route]:
    q = "/testsets/{name}/questions/{question_id}"
    return [
        Route("/testsets", list_page, methods=["GET"]),
        Route("/testsets", import_set, methods=["POST"]),
        Route("/testsets/{name}/export.{kind}", export, methods=["GET"]),
        Route("/testsets/{name}", set_page, methods=["GET"]),
        Route("/testsets/{name}/questions", add, methods=["POST"]),
        Route(q, question_page, methods=["GET"]),
        Route(f"{q}/edit", edit, methods=["POST"]),
        Route(f"{q}/delete", delete, methods=["POST"]),
    ]
