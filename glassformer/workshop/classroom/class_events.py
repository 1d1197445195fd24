"""The server-sent events of one page following a class (``GET /api/class/events``):

    id: <version>
    event: class
    data: {"model", "text", "level", "step", "stage", "zoom", "panel", "sampling",
           "version", "role", "students": {"connected", "following"}}

the current state at once (unless the page's ``Last-Event-ID`` is the current version: it has
it; a version a little older gets the changes since), then one event per change. The teacher's
stream also gets ``event: presence`` ({"connected", "following"}) when the counts change (and
on connect). Each change of the class's poll (`poll.py`; on connect too, if one was opened) is
``event: poll`` ({"open", "answers", "revealed"}: null or the token). ``event: end`` when the
class ends, then the stream closes. A comment every `HEARTBEAT_S` keeps proxies open.

A stream holds nothing but its place (the version it sent last); it ends when its page leaves
(checked every `POLL_S`), when the server stops (`Workshop.stopping`), when the class ends,
and, for a student, when the teacher makes a new students' link (the old link opens nothing:
the page's reconnect is refused).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from glassformer.workshop.classroom.class_state import Classroom
from glassformer.workshop.door.rights import TEACHER

POLL_S = 1.0  # how often a quiet stream checks that its page is still there
HEARTBEAT_S = 15.0  # a comment line now and then keeps proxies from closing a quiet stream


async def class_events(
    request: Request, classroom: Classroom, role: str, last_id: int | None, stopping: threading.Event
) -> AsyncIterator[str]:
    """The events above for one page of ``role`` that had the version ``last_id`` (None: none)."""
    generation = classroom.key.generation
    changed = classroom.listen()
    sent, presence, written = last_id, None, time.monotonic()
    polled = 0  # the poll's version this stream told (0: none yet)
    try:
        while not stopping.is_set():
            changed.clear()  # before reading: a change while this writes wakes the next wait
            if classroom.ended:
                yield "event: end\ndata: {}\n\n"
                return
            if role != TEACHER and classroom.key.generation != generation:
                return  # a new students' link: this one's reconnect is refused
            events = [
                _event("class", classroom.snapshot(version, settings, role), version)
                for version, settings in classroom.since(sent)
            ]
            sent = classroom.version
            if classroom.poll_version != polled:
                polled = classroom.poll_version
                events.append(_event("poll", classroom.poll_news))
            if role == TEACHER and classroom.presence() != presence:
                presence = classroom.presence()
                events.append(_event("presence", presence))
            if not events and time.monotonic() - written >= HEARTBEAT_S:
                events.append(": still here\n\n")
            for event in events:
                yield event
                written = time.monotonic()
            try:
                await asyncio.wait_for(changed.wait(), POLL_S)
            except TimeoutError:
                if await request.is_disconnected():
                    return
    finally:
        classroom.unlisten(changed)


def last_event_id(request: Request) -> int | None:
    """The version a reconnecting page had (``Last-Event-ID``), None if absent or not a version."""
    given = request.headers.get("last-event-id", "").strip()
    return int(given) if given.isdigit() and len(given) < 19 else None


def _event(name: str, data: Any, version: int | None = None) -> str:
    head = f"id: {version}\n" if version is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, allow_nan=False)}\n\n"
