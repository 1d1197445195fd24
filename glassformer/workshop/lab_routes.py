"""The training lab's routes (`lab.Lab` does the work):

    GET  /lab                   the lab's page (static/lab.html)
    GET  /api/lab               {presets, fields, runs, state}
    POST /api/lab/start         {preset, fields: {"model.n_layers": 2, ...}} -> state
    POST /api/lab/pause | /api/lab/resume | /api/lab/stop             -> state
    POST /api/lab/continue      {run} -> state: a stopped run goes on from its checkpoint
    GET  /api/lab/events?run=   server-sent events while the page follows a run:
             progress  [{step, loss, grad_norm, lr, tokens_per_s, steps, time}]  per step
             metrics   [{step, train_loss, val_loss, ..., sample?}]              per evaluation
             film      [frame]                                   (glassformer.inspect.film)
             reset     "progress" | "metrics" | "film": the file started again (a new run)
             state     {run, status, ...}

Events come from the run directory's files, read from where the last read stopped; a page
that connects (or reconnects) gets everything from the start, so it follows a run started
from the command line as well as one of its own.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, StreamingResponse
from starlette.routing import Route

from glassformer.workshop.http import RequestError, read_body
from glassformer.workshop.lab import RUN_FILES_FOLLOWED, Lab, tail

POLL_S = 0.5  # how often a followed run's files are read
HEARTBEAT_S = 15.0  # a comment line now and then keeps proxies from closing a quiet stream


def lab_routes(lab: Lab, page: Path) -> list[Route]:
    """The routes above for ``lab``; ``page`` is the lab's HTML file."""
    actions = asyncio.Lock()  # one start / stop at a time

    async def act(fn, *args) -> JSONResponse:
        async with actions:
            try:
                return JSONResponse(await anyio.to_thread.run_sync(fn, *args))
            except ValueError as error:
                raise RequestError(str(error)) from None

    async def overview(request: Request) -> JSONResponse:
        return JSONResponse(
            {"presets": lab.presets(), "fields": lab.fields(), "runs": lab.runs(), "state": lab.state()}
        )

    async def start(request: Request) -> JSONResponse:
        body = await read_body(request)
        fields = body.get("fields") or {}
        if not isinstance(fields, dict):
            raise RequestError('fields must be an object such as {"train.steps": 300}')
        return await act(lab.start, body.get("preset"), fields)

    async def pause(request: Request) -> JSONResponse:
        return await act(lab.pause)

    async def resume(request: Request) -> JSONResponse:
        return await act(lab.resume)

    async def stop(request: Request) -> JSONResponse:
        return await act(lab.stop)

    async def go_on(request: Request) -> JSONResponse:
        return await act(lab.resume_run, (await read_body(request)).get("run"))

    async def events(request: Request) -> StreamingResponse:
        run = request.query_params.get("run", "")
        try:
            directory = lab.run_dir(run)
        except ValueError as error:
            raise RequestError(str(error), status=404) from None
        return StreamingResponse(
            _follow(request, lab, run, directory),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )

    return [
        Route("/lab", lambda request: FileResponse(page)),
        Route("/api/lab", overview),
        Route("/api/lab/start", start, methods=["POST"]),
        Route("/api/lab/pause", pause, methods=["POST"]),
        Route("/api/lab/resume", resume, methods=["POST"]),
        Route("/api/lab/stop", stop, methods=["POST"]),
        Route("/api/lab/continue", go_on, methods=["POST"]),
        Route("/api/lab/events", events),
    ]


async def _follow(request: Request, lab: Lab, run: str, directory: Path):
    """The events of one run (see the module docstring) until the page goes away."""
    offsets = dict.fromkeys(RUN_FILES_FOLLOWED, 0)
    last_state: dict[str, Any] | None = None
    quiet = 0.0
    while not await request.is_disconnected():
        sent = False
        for kind, name in RUN_FILES_FOLLOWED.items():
            path = directory / name
            if path.exists() and path.stat().st_size < offsets[kind]:  # replaced: a new run
                offsets[kind] = 0
                yield _event("reset", kind)
            records, offsets[kind] = tail(path, offsets[kind])
            if records:
                yield _event(kind, records)
                sent = True
        state = _state(lab, run)
        if state != last_state:
            yield _event("state", state)
            last_state, sent = state, True
        quiet = 0.0 if sent else quiet + POLL_S
        if quiet >= HEARTBEAT_S:
            yield ": still here\n\n"
            quiet = 0.0
        await asyncio.sleep(POLL_S)


def _state(lab: Lab, run: str) -> dict[str, Any]:
    """The lab's own state for its run; for another run, whether its files still grow."""
    if lab.run == run:
        return lab.state()
    active = any(r["name"] == run and r["active"] for r in lab.runs())
    return {"run": run, "status": "training elsewhere" if active else "not training", "pid": None, "log": ""}


def _event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"
