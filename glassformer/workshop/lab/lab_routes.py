"""The training lab's routes (`lab.Lab` does the work):

    GET  /lab                   the lab's page (static/lab.html)
    GET  /api/lab               {presets: [{name, summary, fields, pretrained, fixed}], default,
                                 fields, runs, state}
    POST /api/lab/estimate      {preset, fields} -> {seconds, step_s, evaluation_s, steps, evaluations}:
                                 about how long it trains here, its pace measured on first asking
                                 ({seconds: null, reason} while a run trains)
    POST /api/lab/start         {preset, fields: {"model.n_layers": 2, ...}} -> state
    POST /api/lab/pause | /api/lab/resume | /api/lab/stop             -> state
    POST /api/lab/continue      {run} -> state: a stopped run goes on from its checkpoint
    GET  /api/lab/events?run=   server-sent events while the page follows a run:
             progress  [{step, loss, grad_norm, lr, tokens_per_s, steps, time}]  per step
             metrics   [{step, train_loss, val_loss, ..., sample?}]              per evaluation
             film      [frame]                                   (glassformer.inspect.film)
             reset     "progress" | "metrics" | "film": the file started again (a new run)
             problem   {file, line, reason}: a line that is no record, a file that cannot be read
             state     {run, status, ...}

Events come from the run directory's files, read from where the last read stopped; a page
that connects (or reconnects) gets everything from the start, so it follows a run started
from the command line as well as one of its own. A file's new records go out in events of at
most `EVENT_BYTES` (a stream whose client does not read holds one of them, not a whole film),
and each client (its address) follows at most `STREAMS_PER_CLIENT` runs at once (429 past it).
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from glassformer.workshop.door.http import RequestError, read_query, read_request
from glassformer.workshop.door.request_types import Empty, EventsQuery, LabStartRequest, RunRequest
from glassformer.workshop.lab.followed_file import FollowedFile
from glassformer.workshop.lab.training_lab import DEFAULT_PRESET, RUN_FILES_FOLLOWED, Lab

POLL_S = 0.5  # how often a followed run's files are read
HEARTBEAT_S = 15.0  # a comment line now and then keeps proxies from closing a quiet stream
EVENT_BYTES = 1 << 20  # records are sent in events of about this size at most
STREAMS_PER_CLIENT = 8  # event streams one client address may hold open (a page, a few tabs)


def lab_routes(lab: Lab, page: Path, stopping: threading.Event | None = None) -> list[Route]:
    """The routes above for ``lab``; ``page`` is the lab's HTML file; ``stopping``, once set,
    ends the event streams (the server is going down)."""
    stopping = stopping or threading.Event()
    actions = asyncio.Lock()  # one start / stop / pace measurement at a time
    streams = StreamCount(STREAMS_PER_CLIENT)

    async def act(fn, *args) -> JSONResponse:
        async with actions:
            try:
                return JSONResponse(await anyio.to_thread.run_sync(fn, *args))
            except ValueError as error:
                raise RequestError(str(error)) from None

    async def overview(request: Request) -> JSONResponse:
        def read() -> dict[str, Any]:  # off the event loop: the runs are checked on disk, locks too
            return {
                "presets": lab.presets(),
                "default": DEFAULT_PRESET,
                "fields": lab.fields(),
                "runs": lab.runs(),
                "state": lab.state(),
            }

        return JSONResponse(await anyio.to_thread.run_sync(read))

    async def estimate(request: Request) -> JSONResponse:
        body = await read_request(request, LabStartRequest)
        return await act(lab.estimate, body.preset, dict(body.fields))  # a start waits for its measurement

    async def start(request: Request) -> JSONResponse:
        body = await read_request(request, LabStartRequest)
        return await act(lab.start, body.preset, dict(body.fields))

    async def pause(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        return await act(lab.pause)

    async def resume(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        return await act(lab.resume)

    async def stop(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        return await act(lab.stop)

    async def go_on(request: Request) -> JSONResponse:
        return await act(lab.resume_run, (await read_request(request, RunRequest)).run)

    async def events(request: Request) -> ASGIApp:
        run = read_query(request, EventsQuery).run
        try:
            directory = lab.run_dir(run)
        except ValueError as error:
            raise RequestError(str(error), status=404) from None
        headers = {"Cache-Control": "no-cache"}
        response = StreamingResponse(
            _follow(request, lab, run, directory, stopping), media_type="text/event-stream", headers=headers
        )
        return streams.counted(request.client.host if request.client else "", response)

    return [
        Route("/lab", lambda request: FileResponse(page)),
        Route("/api/lab", overview),
        Route("/api/lab/estimate", estimate, methods=["POST"]),
        Route("/api/lab/start", start, methods=["POST"]),
        Route("/api/lab/pause", pause, methods=["POST"]),
        Route("/api/lab/resume", resume, methods=["POST"]),
        Route("/api/lab/stop", stop, methods=["POST"]),
        Route("/api/lab/continue", go_on, methods=["POST"]),
        Route("/api/lab/events", events),
    ]


class StreamCount:
    """How many event streams each client address holds open, at most ``most`` each: a stream
    counts from its start until it ends, however it ends."""

    def __init__(self, most: int):
        self.most = most
        self.open: dict[str, int] = {}  # client address -> its open streams

    def counted(self, client: str, response: ASGIApp) -> ASGIApp:
        """``response``, counted for ``client`` while it streams; 429 past the limit."""
        if self.open.get(client, 0) >= self.most:
            raise RequestError(
                f"this client follows {self.most} runs already: close a lab tab first", status=429
            )
        self.open[client] = self.open.get(client, 0) + 1

        async def streaming(scope, receive, send) -> None:
            try:
                await response(scope, receive, send)
            finally:
                self.open[client] -= 1
                if not self.open[client]:
                    del self.open[client]

        return streaming


async def _follow(request: Request, lab: Lab, run: str, directory: Path, stopping: threading.Event):
    """The events of one run (see the module docstring) until the page goes away. Nothing in
    the run's files ends the stream: a bad line, or a file that cannot be read, is a
    ``problem`` event, and the stream goes on."""
    files = {kind: FollowedFile(directory / name) for kind, name in RUN_FILES_FOLLOWED.items()}
    last_state: dict[str, Any] | None = None
    quiet = 0.0
    while not stopping.is_set() and not await request.is_disconnected():
        events, state = await anyio.to_thread.run_sync(_read, lab, run, files)  # files, /proc: blocking
        if state != last_state:
            events.append(_event("state", state))
            last_state = state
        for event in events:
            yield event
        quiet = 0.0 if events else quiet + POLL_S
        if quiet >= HEARTBEAT_S:
            yield ": still here\n\n"
            quiet = 0.0
        await asyncio.sleep(POLL_S)


def _read(lab: Lab, run: str, files: dict[str, FollowedFile]) -> tuple[list[str], dict[str, Any]]:
    """The events of what the run's files gained since the last read, and the run's state."""
    events = []
    for kind, followed in files.items():
        reading = followed.read()
        if reading.reset:
            events.append(_event("reset", kind))
        events += [_event(kind, batch) for batch in _batches(reading.records)]
        events += [_event("problem", problem) for problem in reading.problems]
    return events, _state(lab, run)


def _batches(records: list[Any]) -> list[list[Any]]:
    """``records`` cut into runs of about `EVENT_BYTES` of JSON at most (a larger record alone)."""
    batches: list[list[Any]] = []
    size = EVENT_BYTES
    for record in records:
        length = len(json.dumps(record, allow_nan=False, default=str))
        if size + length > EVENT_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(record)
        size += length
    return batches


def _state(lab: Lab, run: str) -> dict[str, Any]:
    """The lab's own state for its run; for another run, whether a trainer holds it now."""
    try:
        return lab.state_of(run)
    except (OSError, ValueError) as error:  # the runs root itself unreadable, say
        return {"run": run, "status": "unknown", "pid": None, "log": "", "problem": str(error)}


def _event(name: str, data: Any) -> str:
    """One server-sent event; data JSON cannot carry (it should never come) becomes a problem."""
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        name, text = "problem", json.dumps({"file": None, "line": None, "reason": f"{name}: {error}"})
    return f"event: {name}\ndata: {text}\n\n"
