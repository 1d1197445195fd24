"""A class's state: what the teacher shows, as one version that grows by one per change, and
who follows it.

The state is the page's settings a class shares (``model``, ``text``, ``level``, ``step``:
teaching mode's reveal, ``stage``: the step opened, ``zoom``, ``panel``, ``sampling``). Each
change the teacher makes (`update`) is kept, with its version, among the last `HISTORY`
changes, so a page that reconnects with ``Last-Event-ID`` gets what it missed (`since`) and
nothing it had. Every open event stream waits on an event of its own (`listen`), set by each
change, each change of who follows and the end, so thirty students wake together, on the
server's one event loop.

The counts: each open event stream of a student is ``connected``; one opened to follow the
teacher (``following=1``) is ``following`` too. At most `MAX_STREAMS` streams are open at
once (the teacher's too), and `STREAMS_PER_CLIENT` per browser or script (429 past either).

The class's poll (`poll.py`) tells the streams of its changes through `poll_changed`: its
news and a `poll_version` of its own, which the streams watch beside the state's.

Served by several workers (``--broadcast``, `broadcast.py`) each worker's `Classroom` is its
copy of the class kept in Redis: a change made on any worker arrives as `apply` (a version
this copy has not seen), the students' token as `adopt_key`, and the counts the teacher
sees are every worker's summed (`all_present`; this worker's own still counted here and
handed to `on_presence`). Without one it is the class itself, as above.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from typing import Any

from glassformer.workshop.door.http import RequestError
from glassformer.workshop.door.rights import StudentsKey

DEFAULT_TEXT = "The capital of France is"  # the page's own first text (static/js/core/state.js)
HISTORY = 64  # changes kept for a page that reconnects
MAX_STREAMS = 300  # event streams open at once in all: a class of a few hundred
STREAMS_PER_CLIENT = 8  # one browser's tabs, one script's streams
NO_CLASS = "no class runs here: start the workshop with --class"
ENDED = "the class has ended: start the workshop again with --class for a new one"


def running(classroom: Classroom | None) -> Classroom:
    """``classroom``, if a class runs and has not ended (404 with how to start one, else)."""
    if classroom is None:
        raise RequestError(NO_CLASS, status=404)
    classroom.check_open()
    return classroom


class Classroom:
    """One class on this server: ``models`` are the names the class may show (the first is
    shown first). ``key`` is the students' token; ``address`` the base URL students reach
    (the command sets it; None: the one the teacher's request came to)."""

    def __init__(self, models: list[str], text: str = DEFAULT_TEXT) -> None:
        if not models:
            raise ValueError("a class needs at least one model to show")
        self.models = list(models)
        self.key = StudentsKey()
        self.address: str | None = None
        self.settings: dict[str, Any] = {
            "model": self.models[0],
            "text": text,
            "level": "beginner",
            "step": 1,
            "stage": None,
            "zoom": "",
            "panel": None,
            "sampling": {},
        }
        self.version = 1
        self.history: deque[tuple[int, dict[str, Any]]] = deque([(1, copy.deepcopy(self.settings))], HISTORY)
        self.ended = False
        self.streams: dict[str, int] = {}  # client -> its open event streams
        self.connected = 0  # students' open event streams
        self.following = 0  # those opened with following=1
        self._waiting: set[asyncio.Event] = set()  # one per open stream
        self.poll_news: dict[str, Any] | None = None  # the class's poll, as its streams tell it
        self.poll_version = 0  # grows by one per change of the poll (`poll.py`)
        self.all_present: dict[str, int] | None = None  # every worker's counts summed (`broadcast.py`)
        self.on_presence: Any = None  # told when this worker's counts change (`broadcast.py`)

    def shows(self, model: str, text: str | None) -> bool:
        """Whether the class shows ``model`` on ``text`` now (its followers all ask for it)."""
        return not self.ended and self.settings["model"] == model and self.settings["text"] == text

    def check_open(self) -> None:
        """404 once the class has ended."""
        if self.ended:
            raise RequestError(ENDED, status=404)

    def state(self, role: str) -> dict[str, Any]:
        """The state as ``role`` reads it (the routes add the teacher's links and work)."""
        return self.snapshot(self.version, self.settings, role)

    def snapshot(self, version: int, settings: dict[str, Any], role: str) -> dict[str, Any]:
        return {**copy.deepcopy(settings), "version": version, "role": role, "students": self.presence()}

    def update(self, changes: dict[str, Any]) -> bool:
        """Apply ``changes`` (validated by `request_types.ClassUpdate`; the model checked here):
        a new version if anything changed, and every stream woken. Whether it changed."""
        self.check_open()
        self.check_model(changes)
        changed = {key: value for key, value in changes.items() if self.settings.get(key) != value}
        if not changed:
            return False
        self.settings.update(copy.deepcopy(changed))
        self.version += 1
        self.history.append((self.version, copy.deepcopy(self.settings)))
        self.wake()
        return True

    def check_model(self, changes: dict[str, Any]) -> None:
        """400 if ``changes`` names a model this class may not show."""
        if "model" in changes and changes["model"] not in self.models:
            raise RequestError(
                f"model: no model {changes['model']!r} here; this class may show: {', '.join(self.models)}"
            )

    def apply(self, version: int, settings: dict[str, Any]) -> bool:
        """Take the state ``version`` made on another worker (`broadcast.py`), if it is newer
        than this copy's; every stream woken. Whether it was."""
        if version <= self.version:
            return False
        self.settings = copy.deepcopy(settings)
        self.version = version
        self.history.append((version, copy.deepcopy(settings)))
        self.wake()
        return True

    def adopt_key(self, token: str | None) -> None:
        """The students' token made (or revoked: None) on another worker: the old one opens
        nothing here either, and the streams opened under it close."""
        if token != self.key.token:
            self.key.token = token
            self.key.generation += 1
            self.wake()

    def ended_elsewhere(self) -> None:
        """The class ended on another worker: here too."""
        if not self.ended:
            self.ended = True
            self.key.revoke()
            self.wake()

    def since(self, version: int | None) -> list[tuple[int, dict[str, Any]]]:
        """The states after ``version``: none if it is the current one, the changes since it if
        they are kept, else the current state alone (a first connect, or one too far behind)."""
        if version == self.version:
            return []
        if version is not None and self.history[0][0] <= version < self.version:
            return [(v, settings) for v, settings in self.history if v > version]
        return [(self.version, self.settings)]

    def presence(self) -> dict[str, int]:
        """The students following, on every worker (this one's alone without `broadcast.py`)."""
        if self.all_present is not None:
            return dict(self.all_present)
        return {"connected": self.connected, "following": self.following}

    def counted(self) -> None:
        """This worker's counts changed: the streams woken, the broadcast told."""
        self.wake()
        if self.on_presence is not None:
            self.on_presence()

    def open_stream(self, client: str, student: bool, following: bool) -> None:
        """Count a stream opening (429 past `MAX_STREAMS` in all or `STREAMS_PER_CLIENT` for ``client``)."""
        if sum(self.streams.values()) >= MAX_STREAMS:
            raise RequestError(
                f"this class has {MAX_STREAMS} pages following it already: the server takes no more",
                status=429,
            )
        if self.streams.get(client, 0) >= STREAMS_PER_CLIENT:
            raise RequestError(
                f"this browser follows the class in {STREAMS_PER_CLIENT} tabs already: close one first",
                status=429,
            )
        self.streams[client] = self.streams.get(client, 0) + 1
        if student:
            self.connected += 1
            self.following += following
            self.counted()

    def close_stream(self, client: str, student: bool, following: bool) -> None:
        self.streams[client] -= 1
        if not self.streams[client]:
            del self.streams[client]
        if student:
            self.connected -= 1
            self.following -= following
            self.counted()

    def new_students_link(self) -> str:
        """A new students' token: the old links and cookies open nothing, their streams close."""
        self.check_open()
        token = self.key.replace()
        self.wake()
        return token

    def end(self) -> None:
        """The class ends: the students' token is revoked, every stream gets ``end``."""
        self.check_open()
        self.ended = True
        self.key.revoke()
        self.wake()

    def poll_changed(self, news: dict[str, Any]) -> None:
        """The poll changed (`poll.py`): its ``news`` ({open, answers, revealed}) for every stream."""
        self.poll_news = news
        self.poll_version += 1
        self.wake()

    def wake(self) -> None:
        """Wake every stream waiting (on the event loop: the routes run there)."""
        for event in self._waiting:
            event.set()

    def listen(self) -> asyncio.Event:
        """An event of a stream's own, set by every change until `unlisten`: cleared before the
        stream reads the state, so a change while it writes is not missed."""
        event = asyncio.Event()
        self._waiting.add(event)
        return event

    def unlisten(self, event: asyncio.Event) -> None:
        self._waiting.discard(event)
