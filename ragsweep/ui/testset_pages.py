"""The test-set pages over the results database (``stored_sets.DatabaseStore``): list, view,
edit every field of a question, delete, add, import AutoRAG JSON / Giskard JSONL, export;
delete, set the topic or type of, or export a selection of questions at once. Every change
is saved as a new version of the items it changes, with who made it and why when they say
(the author is remembered in the browser, as for labels); a question's page shows each
version's changes from the one before and the runs that scored it."""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ragsweep.core.errors import RagsweepError
from ragsweep.curation import question_versions, set_versions, stored_sets
from ragsweep.documents.testsets import check_name, export_testset, load_testset, name_from_file
from ragsweep.ui.security import author_of, checked_form, remember_author

FORMATS = {"json": "application/json", "jsonl": "application/x-ndjson"}
UPLOADS = (".json", ".jsonl")


def stored(request: Request) -> stored_sets.DatabaseStore:
    return stored_sets.DatabaseStore(request.app.state.data.engine)


def _load(request: Request, name: str):
    try:
        return stored(request).load(name)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _back(
    request: Request, name: str, question_id: str | None = None, author: str = ""
) -> RedirectResponse:
    path = f"/testsets/{quote(name, safe='')}"
    if question_id:
        path += f"/questions/{quote(question_id, safe='')}"
    response = RedirectResponse(path, status_code=303)
    if author:
        remember_author(request, response, author)
    return response


def _save(request: Request, name: str, table, form) -> str:
    """Store ``table`` under ``name`` with the form's author and comment; the author."""
    author = str(form.get("author", "")).strip()
    try:
        stored(request).save(name, table, author, str(form.get("comment", "")))
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return author


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
        testsets = stored(request)
        if name in testsets.names() and not form.get("replace"):
            size = len(testsets.load(name))
            raise HTTPException(
                409,
                f"name: a test set {name!r} is stored already ({size} questions); tick "
                "'Replace' to store this file as its new version (its page can revert it), "
                "or give another name",
            )
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"upload{suffix}"
            path.write_bytes(await upload.read())
            try:
                table = load_testset(str(path))
            except RagsweepError as exc:
                raise RagsweepError(str(exc).replace(str(path), filename)) from None
        testsets.save(name, table, comment=f"imported from {filename}")
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return _back(request, name)


async def revert(request: Request) -> Response:
    """Store the set as it was before its latest change, as a new version (the change
    stays in the history; reverting again undoes the revert)."""
    name = request.path_params["name"]
    form = await checked_form(request)
    try:
        table = set_versions.before_latest(stored(request), name)
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return _back(request, name, author=_save(request, name, table, form))


async def set_page(request: Request) -> Response:
    name = request.path_params["name"]
    table = _load(request, name)
    return request.app.state.render(
        request,
        "testset.html",
        name=name,
        questions=table.to_pylist(),
        formats=FORMATS,
        author=author_of(request),
    )


async def export(request: Request) -> Response:
    name, kind = request.path_params["name"], request.path_params["kind"]
    return _exported(name, _load(request, name), kind)


def _exported(name: str, table, kind: str) -> Response:
    """``table`` as an attachment in format ``kind``, named for the set ``name``."""
    if kind not in FORMATS:
        raise HTTPException(404, f"export: {kind!r}; choose from {', '.join(FORMATS)}")
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
        table = stored_sets.add_question(
            table,
            str(form.get("question", "")).strip(),
            _lines(str(form.get("answers", ""))),
            _lines(str(form.get("doc_ids", ""))),
            str(form.get("topic", "")).strip() or None,
            str(form.get("question_type", "")).strip() or None,
        )
    except RagsweepError as exc:
        raise _user_error(exc) from None
    author = _save(request, name, table, form)
    return _back(request, name, table["question_id"][-1].as_py(), author)


async def question_page(request: Request) -> Response:
    name, question_id = request.path_params["name"], request.path_params["question_id"]
    table = _load(request, name)
    current = [q for q in table.to_pylist() if q["question_id"] == question_id]
    try:
        history = stored(request).history(name, question_id)
    except RagsweepError as exc:
        raise HTTPException(404, str(exc)) from None
    engine = request.app.state.data.engine
    return request.app.state.render(
        request,
        "testset_question.html",
        name=name,
        question=current[0] if current else None,
        question_id=question_id,
        history=question_versions.with_diffs(history),
        used=question_versions.runs_by_version(engine, name, question_id),
        author=author_of(request),
    )


async def edit(request: Request) -> Response:
    """Every field of a question: its text, reference answers and documents (one a line),
    reference context, topic and type; an empty context, topic or type clears it."""
    name, question_id = request.path_params["name"], request.path_params["question_id"]
    form = await checked_form(request)

    table = _load(request, name)

    def text(field: str) -> str | None:
        return None if field not in form else str(form[field]).replace("\r\n", "\n").strip()

    context = text("reference_context")
    try:
        current = table.slice(stored_sets.row_of(table, question_id), 1).to_pylist()[0]
        if context == (current["reference_context"] or "").strip():
            context = None  # as it is (a textarea gives back its lines ended by CR LF)
        table = stored_sets.edit_question(
            table,
            question_id,
            text("question"),
            None if "answers" not in form else _lines(str(form["answers"])),
            None if "doc_ids" not in form else _lines(str(form["doc_ids"])),
            context,
            text("topic"),
            text("question_type"),
        )
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return _back(request, name, question_id, _save(request, name, table, form))


async def delete(request: Request) -> Response:
    name, question_id = request.path_params["name"], request.path_params["question_id"]
    form = await checked_form(request)
    try:
        table = stored_sets.delete_question(_load(request, name), question_id)
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return _back(request, name, author=_save(request, name, table, form))


def _selected(table, question_ids: list[str]):
    """The rows of ``question_ids``, in the set's order; an unknown id is refused."""
    try:
        rows = sorted({stored_sets.row_of(table, q) for q in question_ids})
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return table.take(rows)


async def bulk(request: Request) -> Response:
    """A selection of questions (``q``, repeated) exported (``action`` export.json or
    export.jsonl), or deleted, or given a topic or a type (``action`` delete, topic, type;
    ``value``), in one new version each."""
    name = request.path_params["name"]
    form = await checked_form(request)
    chosen = [str(q) for q in form.getlist("q")]
    action, value = str(form.get("action", "")), str(form.get("value", "")).strip()
    if not chosen:
        raise HTTPException(400, "selection: tick the questions to change")
    table = _load(request, name)
    selection = _selected(table, chosen)  # every id known
    if action.startswith("export."):
        return _exported(name, selection, action.removeprefix("export."))
    try:
        if action == "delete":
            for question_id in chosen:
                table = stored_sets.delete_question(table, question_id)
        elif action in ("topic", "type"):
            field = "topic" if action == "topic" else "question_type"
            for question_id in chosen:
                table = stored_sets.edit_question(table, question_id, **{field: value})
        else:
            raise RagsweepError(
                f"action: {action!r}; choose export.json, export.jsonl, delete, topic or type"
            )
    except RagsweepError as exc:
        raise _user_error(exc) from None
    return _back(request, name, author=_save(request, name, table, form))


def routes() -> list[Route]:
    q = "/testsets/{name}/questions/{question_id:path}"
    return [
        Route("/testsets", list_page, methods=["GET"]),
        Route("/testsets", import_set, methods=["POST"]),
        Route("/testsets/{name}/export.{kind}", export, methods=["GET"]),
        Route("/testsets/{name}", set_page, methods=["GET"]),
        Route("/testsets/{name}/questions", add, methods=["POST"]),
        Route("/testsets/{name}/selection", bulk, methods=["POST"]),
        Route("/testsets/{name}/revert", revert, methods=["POST"]),
        Route(q, question_page, methods=["GET"]),
        Route(f"{q}/edit", edit, methods=["POST"]),
        Route(f"{q}/delete", delete, methods=["POST"]),
    ]
