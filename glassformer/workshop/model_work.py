"""What the workshop's model routes share: a `Workshop` holds the models, the fair queue and
the one model thread, the shared work, and runs each piece of model work within its route's
limits.

Models are the ones the command line named, loaded once at start (and the lab's runs opened
since); the browser picks one by name and can never make the server read a path. Forward
passes run one at a time, off the event loop, always on the same worker thread: torch's CPU
thread pool belongs to the thread that calls it, so moving between threads would start new
pools that compete for the cores (streaming ran ~15% slower that way). Whose work goes next
is the fair queue's choice (`door/fair_queue.py`: the teacher's first, students in turn, one
request each; without a class, the order of arrival). Each runs within its route's work
limits (`limits.py`: tokens by the model's sizes, seconds) and stops when its page leaves or
the server stops (`budget.py`).

A route whose answer depends only on its request (a walk, a stage, a lens, the tokens, a
similarity, an explanation, an attention change) goes through `Workshop.shared`: computed
once and kept, and a computation in flight joined by every page that asks the same
(`shared_work.py`); it stops only when no page waits for it any more. Work that runs with
other requests' in one call (`Together`: the walks of one model, `batched_walk.py`) is taken
along by the turn of the first (`FairQueue.take_along`); what every follower of a class asks
next can be started before they ask (`Workshop.prepare`). Served by several
workers (``--broadcast``), an answer is also looked up in and stored to Redis, by a key that
names each model by its weights' `shared_work.fingerprint`.

The route modules (`walk_routes.py`, `generate_routes.py`, `reading_routes.py`,
`model_routes.py`, `page_routes.py`) each take the one `Workshop` the app was made with.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from glassformer.sampling import generation_settings
from glassformer.workshop.door.budget import CLIENT_GONE, WorkBudget, WorkStopped, watch, when_gone
from glassformer.workshop.door.fair_queue import TEACHER, FairQueue, client_of
from glassformer.workshop.door.http import RequestError
from glassformer.workshop.door.limits import SECONDS, check_length
from glassformer.workshop.door.request_types import PassRequest, Sampling
from glassformer.workshop.lab.training_lab import Lab
from glassformer.workshop.shared_work import (
    DEFAULT_LIMIT_BYTES,
    Flight,
    SharedWork,
    fingerprint,
    model_stamp,
    request_key,
)
from glassformer.workshop.walk.pass_input import PassInput, read_pass


@dataclass
class Workshop:
    """``models`` ({name: LanguageModel}, the lab's runs added as they open); ``origins``
    ({fine-tuned model: the model it was fine-tuned from}); ``lab``, the training lab;
    ``cache_bytes``, how many bytes of answers the shared work keeps; ``quantized``: {model:
    its `quantized_model.Quantization`}, for the models quantized as they were loaded."""

    models: dict[str, Any]
    origins: dict[str, str]
    lab: Lab
    cache_bytes: int = DEFAULT_LIMIT_BYTES
    quantized: dict[str, Any] = field(default_factory=dict)
    queue: FairQueue = field(default_factory=FairQueue)  # whose model work goes next
    running: set[WorkBudget] = field(
        default_factory=set
    )  # the model work in flight (one runs, the rest wait)
    stopping: threading.Event = field(default_factory=threading.Event)  # set by `stop_work`
    model_thread: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="glassformer-model")
    )

    def __post_init__(self) -> None:
        self.work = SharedWork(self.cache_bytes)
        self._prepared: set[asyncio.Task] = set()  # `prepare`'s computations (a task needs a holder)
        for lm in self.models.values():
            watch(lm.net)

    async def on_model_thread(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self.model_thread, fn, *args)

    async def run_model(self, request: Request, route: str, fn, *args):
        """``fn(*args)`` on the model thread in its client's turn (`fair_queue.py`), within the
        route's time budget and stopped when the page that asked leaves (`budget.py`)."""
        budget = self._budget(route)
        gone = functools.partial(budget.cancel, "the page that asked for it left", CLIENT_GONE)
        watcher = asyncio.create_task(when_gone(request, gone))
        try:
            async with self.queue.turn(client_of(request)):
                return await self.on_model_thread(budget.run, fn, *args)
        except asyncio.CancelledError:  # the server is stopping: the model thread must stop too
            budget.cancel("the server is stopping")
            raise
        except WorkStopped as stopped:
            raise RequestError(str(stopped), stopped.status) from None
        finally:
            watcher.cancel()
            self.running.discard(budget)

    async def shared(
        self, request: Request, route: str, body: BaseModel, fn, *args, together: Together | None = None
    ) -> Response:
        """The JSON answer of ``fn(*args)``, which depends only on ``body`` (the route's validated
        request) and the models it names: kept, joined in flight, or computed once in the
        asking client's turn (`shared_work.py`). The page that asked leaving stops the
        computation only if no other page waits for it. ``together``: how ``fn`` runs with
        other requests' in one call, which the turn of the first takes along (`_computation`)."""
        client = client_of(request)
        if client != TEACHER and _class_shows(request, body):  # what every follower waits for
            client = TEACHER  # goes in the teacher's line, before the explorers' own prompts
        left = asyncio.create_task(when_gone(request, lambda: None))
        try:
            answer = await self._answer(client, left, route, body, fn, *args, together=together)
        finally:
            left.cancel()
        return Response(answer, media_type="application/json")

    def prepare(self, request: Request, route: str, body: BaseModel, fn, read: Callable[[], Any]) -> None:
        """Start ``route``'s answer ``fn(read())`` for ``body`` now, in the teacher's line,
        with no page waiting for it yet, if ``request`` asks about what the class shows and
        nothing for ``body`` is kept or in flight: what every follower asks for next (the class's
        lens, asked while its walk is computed, is ready when their walks land instead of waiting
        behind the explorers' next pass). ``read`` (the input, e.g. `pass_input`) is called only
        then; its RequestError prepares nothing (the page is told when it asks)."""
        sharing = self.work.limit_bytes > 0  # nothing shared (the benchmark's baseline): nothing prepared
        if not sharing or not _class_shows(request, body) or self.work.has(self._keys(route, body)[0]):
            return
        try:
            given = read()
        except RequestError:
            return
        never = asyncio.get_running_loop().create_future()  # nobody leaves: it runs to its end
        task = asyncio.create_task(self._answer(TEACHER, never, route, body, fn, given))
        self._prepared.add(task)
        task.add_done_callback(lambda done: (self._prepared.discard(done), never.cancel(), _retrieved(done)))

    async def _answer(
        self, client: str, left: asyncio.Future, route: str, body: BaseModel, fn, *args, together=None
    ) -> bytes:
        """`shared`'s answer as bytes, asked by ``client`` until ``left`` ends."""
        key, remote_key = self._keys(route, body)

        def start() -> Flight:
            ticket = self.queue.enter(client)  # 429: this student has LANE_LIMIT requests waiting already
            if together is not None:
                ticket.together, ticket.work = together.key, args
            budget = self._budget(route)
            task = asyncio.create_task(self._computation(ticket, budget, route, together, fn, *args))
            task.add_done_callback(lambda _: (self.queue.leave(ticket), self.running.discard(budget)))

            def stop(reason: str, status: int) -> None:
                budget.cancel(reason, status)
                if self.queue.waiting(ticket):  # not on the model thread yet: no need to wait its turn
                    task.cancel()

            return Flight(task, stop, owner=ticket)

        def joined(flight: Flight) -> None:
            if client == TEACHER:  # the teacher waits for it too: it goes with the teacher's line
                self.queue.promote(flight.owner)

        return await self.work.answer(key, start, left, joined, remote_key)

    def _keys(self, route: str, body: BaseModel) -> tuple[Hashable, str | None]:
        """``body``'s key in the shared work, and in Redis with ``--broadcast`` (else None)."""
        names = [body.model, *([body.base] if isinstance(getattr(body, "base", None), str) else [])]
        asked = request_key(body)
        key = (route, tuple(model_stamp(self.models[name]) for name in names), asked)
        if self.work.remote is None:
            return key, None
        stamps = ",".join(fingerprint(name, self.models[name]) for name in names)  # every worker's key
        return key, f"{route}|{stamps}|{asked}"

    def work_stats(self) -> dict[str, int]:
        """The shared work's counts: {hits, misses, entries, bytes, limit_bytes, queued}."""
        return {**self.work.stats(), "queued": self.queue.queued}

    def _budget(self, route: str) -> WorkBudget:
        """A budget for one piece of ``route``'s work, counted among the work in flight."""
        budget = WorkBudget(f"this {route.replace('_', ' ')}", SECONDS[route])
        if self.stopping.is_set():
            budget.cancel("the server is stopping")
        self.running.add(budget)
        return budget

    async def _computation(
        self, ticket, budget: WorkBudget, route: str, together: Together | None, fn, *args
    ) -> bytes:
        """``fn(*args)`` as JSON bytes, on the model thread in ``ticket``'s turn; the library's
        ValueError / TypeError / KeyError on an input the checks let through: a 400. With
        ``together``, the work of that key waiting behind it runs in the same call, and work
        another's turn took along waits for that call's answer (`FairQueue.take_along`)."""
        await self.queue.wait(ticket)
        if ticket.carried is not None:  # taken along by another request's turn
            return await ticket.carried
        companions = [] if together is None else self.queue.take_along(ticket, together.limit - 1)
        try:
            if companions:
                return await self._together(ticket, companions, route, together)
            return await self.on_model_thread(budget.run, _as_json, fn, *args)
        except WorkStopped as stopped:
            raise RequestError(str(stopped), stopped.status) from None
        except RequestError:
            raise
        except (ValueError, TypeError, KeyError) as error:
            raise _bad_input(error) from error

    async def _together(self, ticket, companions, route: str, together: Together) -> bytes:
        """One call of ``together.run`` for ``ticket``'s work and its ``companions``': each
        companion's answer (or error) set on its ``carried``, ``ticket``'s returned. The call
        runs on a budget of its own, so that one page leaving stops no one else's answer."""
        tickets = [ticket, *companions]
        shared = self._budget(route)
        try:
            works = [t.work for t in tickets]
            answers = await self.on_model_thread(shared.run, _each_as_json, together.run, works)
        except BaseException as error:
            for companion in companions:
                _settle(companion.carried, error)
            raise
        finally:
            self.running.discard(shared)
        for companion, answer in zip(companions, answers[1:], strict=True):
            _settle(companion.carried, answer)
        if isinstance(answers[0], Exception):
            raise answers[0]
        return answers[0]

    def stop_work(self, reason: str = "the server is stopping") -> None:
        """Stop the work in flight and the streams now (503s and closed streams, not a
        wait): the command calls it on Ctrl-C, before uvicorn waits for requests to end."""
        self.stopping.set()
        for budget in list(self.running):
            budget.cancel(reason)

    def model(self, name: str) -> Any:
        """The model ``name`` (404 if this workshop holds none of that name)."""
        if name not in self.models:
            raise RequestError(
                f"no model {name!r} here; this workshop holds: {', '.join(self.models)}", status=404
            )
        return self.models[name]

    def reader(self, name: str, route: str, *texts: str | None, extra: int = 0) -> Any:
        """The model ``name``, checked to read ``texts`` within ``route``'s work limit (413 past it)."""
        lm = readable(self.model(name))
        check_length(lm, name, route, *texts, extra=extra)
        return lm

    def pass_input(self, body: PassRequest, route: str) -> PassInput:
        """The forward pass of a walk, stage or lens request, checked against the model and the
        route's work limit (`pass_input.read_pass`)."""
        lm = self.model(body.model)
        return read_pass(lm if lm.config.vision else readable(lm), body, route)


def readable(lm) -> Any:
    """``lm``, if it can read text."""
    if lm.config.vision:
        raise RequestError(
            "this is a vision model (ViT): it reads images, not text; walk it with an image "
            "(pixels, or a held-out sample)"
        )
    if lm.tokenizer is None:
        raise RequestError("this model has no tokenizer, so it cannot read text")
    return lm


def settings(body: Sampling, max_new_tokens: int = 1):
    """GenerationSettings from the request's sampling fields (absent or null: not set)."""
    try:
        return generation_settings(max_new_tokens=max_new_tokens, **body.sampling())
    except ValueError as error:
        raise RequestError(str(error)) from None


@dataclass(frozen=True)
class Together:
    """How a route's work runs with other requests' in one call: ``run([args, ...])`` gives each
    one's answer or its input's error, in order, for work of one ``key``, at most ``limit``."""

    key: Hashable
    run: Callable[[list[tuple]], list[Any]]
    limit: int


def _as_json(fn, *args) -> bytes:
    """``fn(*args)`` rendered as the JSON a `JSONResponse` of it sends (byte for byte)."""
    return JSONResponse(fn(*args)).body


def _each_as_json(run, works: list[tuple]) -> list[bytes | Exception]:
    """``run(works)``'s answers as JSON bytes (an error left as it is)."""
    return [a if isinstance(a, Exception) else JSONResponse(a).body for a in run(works)]


def _bad_input(error: Exception) -> RequestError:
    """The library's ValueError / TypeError / KeyError on an input the checks let through: a 400."""
    return RequestError(str(error.args[0]) if error.args else type(error).__name__)


def _retrieved(task: asyncio.Task) -> None:
    """Look at a finished task's error, so that nobody is told it was never retrieved."""
    if not task.cancelled():
        task.exception()


def _settle(carried: asyncio.Future, answer: Any) -> None:
    """Give a request taken along its answer, or its error as the route answers it."""
    if carried.done():
        return
    if isinstance(answer, asyncio.CancelledError):  # the server is stopping
        carried.cancel()
        return
    if isinstance(answer, WorkStopped):
        answer = RequestError(str(answer), answer.status)
    elif isinstance(answer, (ValueError, TypeError, KeyError)):
        answer = _bad_input(answer)
    if isinstance(answer, BaseException):
        carried.set_exception(answer)
        carried.add_done_callback(_retrieved)  # its page may have left
    else:
        carried.set_result(answer)


def _class_shows(request: Request, body: BaseModel) -> bool:
    """Whether ``body`` asks about the model and text the class shows now (`classroom/`)."""
    app = request.scope.get("app")
    room = getattr(getattr(app, "state", None), "classroom", None)
    return room is not None and room.shows(body.model, getattr(body, "text", None))
