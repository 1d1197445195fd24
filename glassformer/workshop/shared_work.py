"""Work done once for every page that asks: answers kept by what was asked, and a computation
in flight shared by all who wait for it.

In a class (issue 30) thirty pages ask for the teacher's walk at the same moment. A walk, a
stage, a lens, the tokens, a similarity, an explanation, an attention change depend only on
their request, so each is computed once: keyed by the route, the models it reads (by
`model_stamp`: the object and its weights, so a run opened again or weights changed in
place never get an old answer) and the validated request's canonical JSON, and kept as the
answer's JSON bytes (a walk without a seed draws its sample once: every page gets the same
draw). The answers are held least recently used first out, within ``limit_bytes``; an error
is not kept (the next ask tries again).

    work = SharedWork(limit_bytes=256 << 20)
    body = await work.answer(key, start, left)   # bytes: kept, joined in flight, or computed

``start()`` begins the computation (a `Flight`: its task, and how to stop it) only when none
is kept or in flight. Each page waits for it until it lands or until its page leaves
(``left``, a task that ends then); the computation is stopped only when nobody waits for it
any more, so the page that started it may leave and the others still get the answer. With
``limit_bytes=0`` nothing is shared: every page computes its own answer, as the workshop did
before (the baseline `benchmarks/class_load.py` measures against).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from glassformer.workshop.door.budget import CLIENT_GONE
from glassformer.workshop.door.http import RequestError

DEFAULT_LIMIT_BYTES = 256 << 20  # 256 MiB of answers: a few hundred walks of a small model
_serials: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_counter = itertools.count()


def model_stamp(lm: Any) -> tuple[int, int]:
    """What a kept answer of ``lm`` depends on besides the request: the model object (a serial,
    never reused, unlike ``id``) and its weights (each parameter's identity and in-place version)."""
    serial = _serials.get(lm)
    if serial is None:
        serial = _serials[lm] = next(_counter)
    weights = hash(tuple((id(p), p._version) for p in lm.net.parameters()))
    return serial, weights


@dataclass
class Flight:
    """One computation in flight: its ``task`` (the answer's bytes), ``stop(reason, status)``
    to end it early, ``waiting`` the pages that wait for it, ``owner`` what the starter needs
    to know of it (the queue's ticket)."""

    task: asyncio.Task[bytes]
    stop: Callable[[str, int], None]
    owner: Any = None
    waiting: int = 0


class SharedWork:
    """Answers kept by key within ``limit_bytes`` (least recently used out first), and the
    computations in flight; ``hits`` (answers served without a computation of their own: kept
    or joined in flight) and ``misses`` (computations started) counted."""

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        if limit_bytes < 0:
            raise ValueError(f"the shared work's limit must be 0 or more bytes, got {limit_bytes}")
        self.limit_bytes = limit_bytes
        self.hits = self.misses = self.bytes = 0
        self._kept: OrderedDict[Hashable, bytes] = OrderedDict()
        self._flights: dict[Hashable, Flight] = {}

    def stats(self) -> dict[str, int]:
        """{hits, misses, entries, bytes, limit_bytes}."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "entries": len(self._kept),
            "bytes": self.bytes,
            "limit_bytes": self.limit_bytes,
        }

    async def answer(
        self,
        key: Hashable,
        start: Callable[[], Flight],
        left: asyncio.Future,
        joined: Callable[[Flight], None] = lambda flight: None,
    ) -> bytes:
        """The answer for ``key``: kept, or the computation in flight's (``joined(flight)`` told),
        or a new one's (``start()``). ``left`` ends when the asking page leaves: then this page
        stops waiting (499), and the computation stops if nobody else waits for it."""
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            self.hits += 1
            return kept
        sharing = self.limit_bytes > 0  # 0: every page computes its own answer
        flight = self._flights.get(key) if sharing else None
        if flight is None:
            flight = start()  # a refusal (429) starts nothing and counts nothing
            self.misses += 1
            if sharing:
                self._flights[key] = flight
                flight.task.add_done_callback(functools.partial(self._landed, key, flight))
        else:
            self.hits += 1
            joined(flight)
        flight.waiting += 1
        try:
            await asyncio.wait({flight.task, left}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the server is stopping
            self._give_up(key, flight, "the server is stopping", 503)
            raise
        if not flight.task.done():
            self._give_up(key, flight, "the page that asked for it left", CLIENT_GONE)
            raise RequestError("the page that asked for this left", CLIENT_GONE)
        flight.waiting -= 1
        return _result(flight.task)

    def _give_up(self, key: Hashable, flight: Flight, reason: str, status: int) -> None:
        """One page stops waiting; with nobody left, the computation stops (and a new ask for
        ``key`` starts afresh instead of joining a computation being stopped)."""
        flight.waiting -= 1
        if flight.waiting == 0 and not flight.task.done():
            if self._flights.get(key) is flight:
                del self._flights[key]
            flight.stop(reason, status)

    def _landed(self, key: Hashable, flight: Flight, task: asyncio.Task[bytes]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if task.cancelled() or task.exception() is not None:  # an error is not kept
            return
        self._keep(key, task.result())

    def _keep(self, key: Hashable, answer: bytes) -> None:
        if len(answer) > self.limit_bytes:
            return
        old = self._kept.pop(key, None)
        self.bytes += len(answer) - (len(old) if old is not None else 0)
        self._kept[key] = answer
        while self.bytes > self.limit_bytes:
            _, dropped = self._kept.popitem(last=False)
            self.bytes -= len(dropped)


def _result(task: asyncio.Task[bytes]) -> bytes:
    """The computation's answer, or its error raised anew for this page (a RequestError: the
    workshop's answer to it, the same for every page)."""
    if task.cancelled():
        raise RequestError("this work was stopped: the server is stopping", 503)
    error = task.exception()
    if isinstance(error, RequestError):
        raise RequestError(str(error), error.status) from None
    if error is not None:
        raise error
    return task.result()
