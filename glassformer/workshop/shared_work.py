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

**Across workers** (``--broadcast redis://…``, `classroom/broadcast.py`): a key kept by no
page of this worker is looked up in Redis (`RemoteAnswers`) before it is computed, and what
is computed here is stored there (under ``<class prefix>work:``, for `REMOTE_TTL_S`, at most
`REMOTE_ENTRY_BYTES` an answer): a walk computed on one worker is served by the others. Its
key must name the same model on every worker, which `model_stamp`'s serial does not, so it is
`fingerprint`: the model's name and a digest of its weights (every tensor of its state, with
its name, dtype and shape), computed once and again only when the weights change in place.
A lookup counts as a hit. Computations in flight are joined per worker only.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel

from glassformer.workshop.door.budget import CLIENT_GONE
from glassformer.workshop.door.http import RequestError

DEFAULT_LIMIT_BYTES = 256 << 20  # 256 MiB of answers: a few hundred walks of a small model
REMOTE_TTL_S = 2 * 3600  # an answer kept in Redis lasts a lesson
REMOTE_ENTRY_BYTES = 8 << 20  # a bigger answer is kept by its worker only
REMOTE_TIMEOUT_S = 2.0  # a Redis slower than this: the answer is computed here
_serials: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_prints: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()
_counter = itertools.count()
log = logging.getLogger(__name__)


def model_stamp(lm: Any) -> tuple[int, int]:
    """What a kept answer of ``lm`` depends on besides the request: the model object (a serial,
    never reused, unlike ``id``) and its weights (each parameter's identity and in-place version)."""
    serial = _serials.get(lm)
    if serial is None:
        serial = _serials[lm] = next(_counter)
    weights = hash(tuple((id(p), p._version) for p in lm.net.parameters()))
    return serial, weights


def fingerprint(name: str, lm: Any) -> str:
    """``lm`` (served as ``name``) as every worker that loaded the same weights names it: the
    name and a digest of its state's tensors, kept until its weights change in place."""
    weights = model_stamp(lm)[1]
    known = _prints.get(lm)
    if known is None or known[0] != weights:
        digest = hashlib.blake2b(digest_size=16)
        for key, tensor in lm.net.state_dict().items():
            flat = tensor.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{key}:{flat.dtype}:{tuple(tensor.shape)};".encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        known = _prints[lm] = (weights, digest.hexdigest())
    return f"{name}@{known[1]}"


class RemoteAnswers:
    """Answers kept in Redis for every worker: ``client`` (``redis.asyncio``) under ``prefix``.
    A Redis that does not answer is no error: the answer is computed (and kept) here."""

    def __init__(self, client: Any, prefix: str) -> None:
        self.client, self.prefix = client, prefix
        self._stores: set[asyncio.Task] = set()

    def name(self, key: str) -> str:
        return self.prefix + hashlib.sha256(key.encode()).hexdigest()

    async def get(self, key: str) -> bytes | None:
        try:
            return await asyncio.wait_for(self.client.get(self.name(key)), REMOTE_TIMEOUT_S)
        except Exception as error:  # unreachable, slow: compute it here
            log.warning("the shared work's Redis: %s", error)
            return None

    def put(self, key: str, answer: bytes) -> None:
        """Store ``answer`` in the background (within `REMOTE_ENTRY_BYTES`)."""
        if len(answer) > REMOTE_ENTRY_BYTES:
            return
        task = asyncio.get_running_loop().create_task(self._put(key, answer))
        self._stores.add(task)
        task.add_done_callback(self._stores.discard)

    async def _put(self, key: str, answer: bytes) -> None:
        try:
            await asyncio.wait_for(self.client.set(self.name(key), answer, ex=REMOTE_TTL_S), REMOTE_TIMEOUT_S)
        except Exception as error:
            log.warning("the shared work's Redis: %s", error)


def request_key(body: BaseModel) -> str:
    """A validated request as canonical JSON, the part of a kept answer's key it makes: an
    image read into an array (a vision model's pixels) stands as its shape, dtype and digest."""
    return body.model_dump_json(fallback=_array_digest)


def _array_digest(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return {
            "shape": list(array.shape),
            "dtype": str(array.dtype),
            "sha256": hashlib.sha256(array).hexdigest(),
        }
    raise TypeError(f"a request's {type(value).__name__} has no place in a key")


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
        self.remote: RemoteAnswers | None = None  # answers shared with other workers (Redis)

    def stats(self) -> dict[str, int]:
        """{hits, misses, entries, bytes, limit_bytes}."""
        return {
            "hits": self.hits,
            "misses": self.misses,
            "entries": len(self._kept),
            "bytes": self.bytes,
            "limit_bytes": self.limit_bytes,
        }

    def has(self, key: Hashable) -> bool:
        """Whether an answer for ``key`` is kept here or in flight."""
        return key in self._kept or key in self._flights

    async def answer(
        self,
        key: Hashable,
        start: Callable[[], Flight],
        left: asyncio.Future,
        joined: Callable[[Flight], None] = lambda flight: None,
        remote_key: str | None = None,
    ) -> bytes:
        """The answer for ``key``: kept, or the computation in flight's (``joined(flight)`` told),
        or kept in Redis under ``remote_key`` (with `remote`), or a new one's (``start()``).
        ``left`` ends when the asking page leaves: then this page stops waiting (499), and the
        computation stops if nobody else waits for it."""
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            self.hits += 1
            return kept
        sharing = self.limit_bytes > 0  # 0: every page computes its own answer
        remote_key = remote_key if sharing and self.remote is not None else None
        if remote_key is not None and key not in self._flights:
            found = await self.remote.get(remote_key)  # another worker's answer
            if found is None:
                found = self._kept.get(key)  # landed here meanwhile
            if found is not None:
                self.hits += 1
                self._keep(key, found)
                return found
        flight = self._flights.get(key) if sharing else None
        if flight is None:
            flight = start()  # a refusal (429) starts nothing and counts nothing
            self.misses += 1
            if sharing:
                self._flights[key] = flight
                flight.task.add_done_callback(functools.partial(self._landed, key, flight, remote_key))
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

    def _landed(
        self, key: Hashable, flight: Flight, remote_key: str | None, task: asyncio.Task[bytes]
    ) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if task.cancelled() or task.exception() is not None:  # an error is not kept
            return
        self._keep(key, task.result())
        if remote_key is not None and self.remote is not None:
            self.remote.put(remote_key, task.result())

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
