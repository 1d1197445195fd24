"""How a class's changes travel between processes: nowhere (`InProcess`, one server, the
default), or through Redis (`RedisBroadcast`, ``--broadcast redis://host:port``: several
worker processes or machines behind one address teach one class).

With Redis, every worker's `class_state.Classroom` is a copy of the class kept there:

- **The state and its version**: one key (``<prefix>state``: {version, settings, ended}),
  changed in a WATCH/MULTI transaction (read, change, write; retried if another worker wrote
  meanwhile), so two teachers' tabs on two workers never make two changes of one version.
  Each change is published on the class's channel; each worker's subscriber (`_listen`)
  applies it to its copy, which wakes that worker's own event streams: a student connected
  to worker A sees the teacher's POST to worker B.
- **The students' token** (``<prefix>students``): a new link made on one worker is published,
  and every worker's guard (which reads its copy, `rights.StudentsKey`) takes the new one and
  refuses the old. **The end**: the state's ``ended``, published.
- **The counts** the teacher sees: each worker writes its own (``<prefix>presence:<worker>``,
  expiring after `PRESENCE_TTL_S`, rewritten every `PRESENCE_S` and on each change, and
  announced on the channel); the teacher's count is their sum. A worker that dies stops
  counting once its key expires.
- **The poll** (`poll.py`): which poll is open, whether it is closed or revealed, and every
  client's guess (``<prefix>poll``, ``<prefix>poll:guesses``), so a guess sent to worker A
  counts on worker B's teacher page (`shared_poll.py`).

The keys are named by the class (`class_prefix`: a digest of the teacher's token, which every
worker of a class is started with; the token itself never reaches Redis), so two classes may
share one Redis. The shared work's answers travel too (`shared_work.RemoteAnswers`).

Why ``redis`` itself and not ``broadcaster``: the class needs more than a channel (a
transaction on the state, keys that expire, a hash of guesses, the cache's payloads), which
``broadcaster`` does not offer; with ``redis.asyncio`` one client does all of it, and the
pub/sub it adds is a dozen lines here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

from glassformer.workshop.classroom.class_state import ENDED, HISTORY, Classroom
from glassformer.workshop.classroom.shared_poll import CLASS_TTL_S, RedisPoll
from glassformer.workshop.door.http import RequestError

PRESENCE_S = 3.0  # how often a worker rewrites its counts and sums everyone's
PRESENCE_TTL_S = 10  # a worker's counts expire this long after it stopped writing them
CONNECT_TIMEOUT_S = 3.0
SCHEMES = ("redis://", "rediss://", "unix://")
log = logging.getLogger(__name__)


def class_prefix(token: str) -> str:
    """The keys of the class whose teacher's token is ``token`` (a digest: no secret in Redis)."""
    return f"glassformer:{hashlib.sha256(token.encode()).hexdigest()[:16]}:"


class InProcess:
    """One process: the class lives in its `Classroom`, nothing leaves the process."""

    shared = False

    def join(self, room: Classroom) -> None:
        """Take the class's state where it is kept (here: it is the room's own)."""

    async def start(self, room: Classroom) -> None:
        """Begin listening for other workers' changes (here: there are none)."""

    async def stop(self) -> None:
        """Stop listening; let go of the connection."""

    async def update(self, room: Classroom, changes: dict[str, Any]) -> None:
        room.update(changes)

    async def new_students_link(self, room: Classroom) -> None:
        room.new_students_link()

    async def end(self, room: Classroom) -> None:
        room.end()

    # the class's poll (`poll_routes.py`): the poll object is this process's own
    async def poll_sync(self, current: list, reopen: Callable) -> None:
        """Bring ``current`` (the worker's poll, if any) up to the shared one."""

    async def poll_opened(self, poll) -> None:
        """``poll`` replaces the class's last."""

    async def poll_guess(self, poll, client: str, text: str) -> None:
        poll.guess(client, text)

    async def poll_close(self, poll) -> bool:
        return poll.close()

    async def poll_reveal(self, poll, token: int) -> None:
        if poll.revealed is None:  # a second reveal meanwhile drew the same token
            poll.reveal(token)

    async def poll_tell(self, room: Classroom, poll) -> None:
        """Every stream hears of the poll's change."""
        room.poll_changed(poll.news())


class RedisBroadcast(RedisPoll, InProcess):
    """The class kept in the Redis at ``url`` (the module docstring says what, and how)."""

    shared = True

    def __init__(self, url: str, token: str) -> None:
        if not url.startswith(SCHEMES):
            raise ValueError(f"--broadcast {url!r}: give a Redis address, redis://host:port (or rediss://)")
        import redis.asyncio

        self.url = url
        self.prefix = class_prefix(token)
        self.channel = self.prefix + "events"
        self.worker = secrets.token_hex(6)
        self.client = redis.asyncio.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT_S)
        self.room: Classroom | None = None
        self._tasks: set[asyncio.Task] = set()

    def key(self, name: str) -> str:
        return self.prefix + name

    def join(self, room: Classroom) -> None:
        """At start, before serving: reach Redis (a ValueError saying so if it cannot be
        reached), then join the class kept there or, if none runs (or it ended), start it."""
        import redis

        client = redis.Redis.from_url(
            self.url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CONNECT_TIMEOUT_S
        )
        try:
            client.ping()
            state, students = self.key("state"), self.key("students")
            stored = client.get(state)
            if stored is not None and json.loads(stored).get("ended"):  # a new class on the old token
                client.delete(state, students, self.key("poll"), self.key("poll:guesses"))
            first = {"version": room.version, "settings": room.settings, "ended": False}
            client.set(state, json.dumps(first), nx=True, ex=CLASS_TTL_S)
            client.set(students, room.key.token or "", nx=True, ex=CLASS_TTL_S)
            kept, token = json.loads(client.get(state)), client.get(students)
        except (redis.RedisError, OSError) as error:
            raise ValueError(
                f"--broadcast {self.url}: no Redis answers there ({error}); start one "
                "(redis-server --port 6379) or give the address of the one the other workers use"
            ) from None
        finally:
            client.close()
        room.settings, room.version = kept["settings"], kept["version"]
        room.history = deque([(room.version, dict(room.settings))], HISTORY)
        room.key.token = token.decode() if token else None
        room.all_present = {"connected": 0, "following": 0}

    async def start(self, room: Classroom) -> None:
        self.room = room
        room.on_presence = lambda: self._spawn(self._counts_changed())
        self._spawn(self._listen())
        self._spawn(self._present())

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await self.client.delete(self.key(f"presence:{self.worker}"))
            await self.client.publish(self.channel, json.dumps({"kind": "presence"}))
        await self.client.aclose()

    def _spawn(self, work) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def _reaching(self):
        """A Redis that does not answer: 503 saying so."""
        import redis

        try:
            yield
        except (redis.RedisError, OSError) as error:
            raise RequestError(
                f"the class's Redis ({self.url}) does not answer ({error}): start it again", status=503
            ) from None

    async def _transact(
        self, name: str, change: Callable[[Any], Any], message: Callable | None = None, also: Callable = None
    ) -> Any:
        """Key ``name``'s JSON value changed by ``change(value)`` (None: leave it) atomically,
        ``message(new)`` published and ``also(pipe)``'s commands run with it; the new value
        (None if unchanged)."""
        import redis

        async with self._reaching(), self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(self.key(name))
                    raw = await pipe.get(self.key(name))
                    new = change(json.loads(raw) if raw is not None else None)
                    if new is None:
                        await pipe.reset()
                        return None
                    pipe.multi()
                    pipe.set(self.key(name), json.dumps(new), ex=CLASS_TTL_S)
                    if message is not None:
                        pipe.publish(self.channel, json.dumps(message(new)))
                    if also is not None:
                        also(pipe)
                    await pipe.execute()
                    return new
                except redis.WatchError:
                    continue

    async def update(self, room: Classroom, changes: dict[str, Any]) -> None:
        room.check_open()
        room.check_model(changes)

        def change(kept):
            if kept is None or kept.get("ended"):
                raise RequestError(ENDED, status=404)
            changed = {k: v for k, v in changes.items() if kept["settings"].get(k) != v}
            if not changed:
                return None
            return {**kept, "version": kept["version"] + 1, "settings": {**kept["settings"], **changed}}

        def told(new):
            return {"kind": "state", "version": new["version"], "settings": new["settings"]}

        new = await self._transact("state", change, told)
        if new is not None:
            room.apply(new["version"], new["settings"])

    async def new_students_link(self, room: Classroom) -> None:
        room.check_open()
        token = secrets.token_urlsafe(32)
        async with self._reaching(), self.client.pipeline(transaction=True) as pipe:
            pipe.set(self.key("students"), token, ex=CLASS_TTL_S)
            pipe.publish(self.channel, json.dumps({"kind": "students", "token": token}))
            await pipe.execute()
        room.adopt_key(token)

    async def end(self, room: Classroom) -> None:
        room.check_open()

        def change(kept):
            if kept is None or kept.get("ended"):
                raise RequestError(ENDED, status=404)
            return {**kept, "ended": True}

        await self._transact("state", change, lambda new: {"kind": "end"})
        async with self._reaching():
            await self.client.delete(self.key("students"))
        room.ended_elsewhere()

    # every worker's copy follows the channel
    async def _listen(self) -> None:
        """Apply every change published on the class's channel; after a lost connection,
        subscribe again and catch up with what is kept."""
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                await self._catch_up()
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        await self._received(json.loads(message["data"]))
            except asyncio.CancelledError:
                raise
            except Exception as error:  # Redis gone a while: try again, the streams keep what they had
                log.warning("the class's Redis at %s: %s; listening again in 1 s", self.url, error)
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def _received(self, message: dict[str, Any]) -> None:
        room, kind = self.room, message.get("kind")
        if kind == "state":
            room.apply(message["version"], message["settings"])
        elif kind == "students":
            room.adopt_key(message["token"])
        elif kind == "end":
            room.ended_elsewhere()
        elif kind == "presence":
            await self._sum_presence()
        elif kind == "poll":
            room.poll_changed(message["news"])

    async def _catch_up(self) -> None:
        room = self.room
        kept = await self.client.get(self.key("state"))
        if kept is not None:
            kept = json.loads(kept)
            if kept.get("ended"):
                room.ended_elsewhere()
                return
            room.apply(kept["version"], kept["settings"])
        token = await self.client.get(self.key("students"))
        room.adopt_key(token.decode() if token else None)
        news = await self._poll_news()
        if news is not None and news != room.poll_news:
            room.poll_changed(news)
        await self._sum_presence()

    # the counts: this worker's written, everyone's summed
    async def _present(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self._write_counts()
                await self._sum_presence()
            await asyncio.sleep(PRESENCE_S)

    async def _write_counts(self) -> None:
        counts = {"connected": self.room.connected, "following": self.room.following}
        await self.client.set(self.key(f"presence:{self.worker}"), json.dumps(counts), ex=PRESENCE_TTL_S)

    async def _counts_changed(self) -> None:
        with contextlib.suppress(Exception):
            await self._write_counts()
            await self.client.publish(self.channel, json.dumps({"kind": "presence"}))

    async def _sum_presence(self) -> None:
        names = [name async for name in self.client.scan_iter(match=self.key("presence:*"), count=200)]
        total = {"connected": 0, "following": 0}
        for raw in await self.client.mget(names) if names else []:
            if raw is not None:
                counts = json.loads(raw)
                total = {key: total[key] + int(counts.get(key, 0)) for key in total}
        if total != self.room.all_present:
            self.room.all_present = total
            self.room.wake()


def reach(url: str) -> None:
    """Whether a Redis answers at ``url``: a ValueError saying what to do if none does (the
    command asks before loading any model)."""
    import redis

    if not url.startswith(SCHEMES):
        raise ValueError(f"--broadcast {url!r}: give a Redis address, redis://host:port (or rediss://)")
    client = redis.Redis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CONNECT_TIMEOUT_S
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as error:
        raise ValueError(
            f"--broadcast {url}: no Redis answers there ({error}); start one "
            "(redis-server --port 6379) or give the address of the one the other workers use"
        ) from None
    finally:
        client.close()


def broadcast_for(url: str | None, token: str) -> InProcess:
    """The broadcast ``--broadcast`` names (None: this process alone)."""
    return InProcess() if url is None else RedisBroadcast(url, token)
