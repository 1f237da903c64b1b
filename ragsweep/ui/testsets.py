"""The test-set pages (filled in once the results database holds test sets)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route


def stored(request: Request):
    from ragsweep.curation import DatabaseStore

    return DatabaseStore(request.app.state.data.engine)


def routes() -> list[Route]:
    return []
