"""The course's routes (`lesson_pages.py` does the work):

    GET  /lessons                   the lessons' page (static/lessons.html; ?lesson=N opens one)
    GET  /api/lessons               [{number, name, title, summary, stages}]
    GET  /api/lessons/{key}         one lesson as cells: rendered Markdown and code
    POST /api/lessons/{key}/run     run it in a fresh kernel -> {seconds, outputs per code cell}
    GET  /api/source?name=DOTTED    the source of a function or class a lesson links to

A lesson runs in its own kernel process, one run at a time (2 cores); a failing cell is
answered 400 with the cell and its error. A run whose page leaves is cancelled, its kernel
killed, whether it runs or waits; each client (its address) has at most one run running or
waiting, and asking for another is 429.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Route

from glassformer.lessons.catalog import lesson
from glassformer.lessons.run import LessonCancelled
from glassformer.workshop.door.budget import CLIENT_GONE, when_gone
from glassformer.workshop.door.http import RequestError, read_query, read_request
from glassformer.workshop.door.request_types import Empty, SourceQuery
from glassformer.workshop.lessons import lesson_pages


def lesson_routes(models: dict[str, Any], page: Path) -> list[Route]:
    """The routes above; walk links point at ``models``; ``page`` is the lessons' HTML file."""
    running = asyncio.Lock()
    asked: set[str] = set()  # the clients with a run running or waiting

    async def work(fn, *args) -> JSONResponse:
        try:
            return JSONResponse(await anyio.to_thread.run_sync(fn, *args))
        except RequestError:
            raise
        except ValueError as error:
            raise RequestError(str(error)) from None

    def found(request: Request):
        key = request.path_params["key"]
        if key.endswith(".md"):  # a file path: the library reads one, the browser may not
            raise RequestError(f"no lesson {key!r}: name a lesson by its number or slug", status=404)
        try:
            return lesson(key)
        except ValueError as error:
            raise RequestError(str(error), status=404) from None

    async def listing(request: Request) -> JSONResponse:
        return await work(lesson_pages.catalog)

    async def one(request: Request) -> JSONResponse:
        return await work(lambda: lesson_pages.page(found(request), models))

    async def run(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        item = found(request)
        client = request.client.host if request.client else ""
        if client in asked:
            raise RequestError("a lesson of yours is running or waiting already: wait for its answer", 429)
        asked.add(client)
        cancel = threading.Event()
        watcher = asyncio.create_task(when_gone(request, cancel.set))
        try:
            async with running:
                if cancel.is_set():  # its page left while it waited: no kernel started
                    raise RequestError("the page that asked for it left", CLIENT_GONE)
                return await work(lesson_pages.run, item, cancel)
        except LessonCancelled:
            raise RequestError(
                "the page that asked for it left: its kernel was stopped", CLIENT_GONE
            ) from None
        finally:
            watcher.cancel()
            asked.discard(client)

    async def source(request: Request) -> JSONResponse:
        return await work(lesson_pages.source, read_query(request, SourceQuery).name)

    return [
        Route("/lessons", lambda request: FileResponse(page)),
        Route("/api/lessons", listing),
        Route("/api/lessons/{key}", one),
        Route("/api/lessons/{key}/run", run, methods=["POST"]),
        Route("/api/source", source),
    ]
