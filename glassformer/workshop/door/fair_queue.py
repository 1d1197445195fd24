"""Whose model work goes next: the teacher's first, then the students' in turn, one request
each per round.

The model thread runs one piece of work at a time. With a class on one server (issue 30),
thirty students must not push the teacher's walk to the back, nor one student's clicks the
others': the teacher's requests are served first, in the order they came; the students'
round-robin, one turn per student per round, each student's own requests in the order they
came (a page asks for its walk, its tokens and its lens at once: they wait in its lane). A
student has at most `LANE_LIMIT` requests queued or running; one more is answered 429.
Without a class every request is the teacher's (`client_of`), so the order is the order of
arrival, as the one lock served it.

    async with queue.turn(client_of(request)):       # 429 past this student's LANE_LIMIT
        await on_model_thread(work)                   # nothing else runs meanwhile
    async with queue.turn(client, stream=True): ...   # one step of a stream: waits in the
                                                      # client's lane, not counted as its request

A shared computation (`shared_work.py`) takes its ticket when it starts (`enter`), waits for
it on its own task (`wait`) and gives it back when it ends (`leave`); a teacher who joins a
student's computation still waiting moves it to the teacher's line (`promote`). A walk whose
turn comes takes the walks of the same model waiting behind it into its one pass
(`take_along`, `batched_walk.py`): thirty explorers' walks cost a few passes, not thirty.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Hashable

from starlette.requests import Request

from glassformer.workshop.door.http import RequestError

TEACHER = "teacher"
LANE_LIMIT = 8  # a student's requests queued or running at once: a page asks about 4 at a time
TOO_MANY = (
    f"you have {LANE_LIMIT} requests waiting for the model already: in a class the workshop takes a "
    "few at a time from each student; wait for their answers, then ask again"
)


def client_of(request: Request) -> str:
    """Who asked (set by the guard): "teacher", or "student:<id>" (without a class: the teacher)."""
    return request.scope.get("state", {}).get("client", TEACHER)


class Ticket:
    """One request's place: ``client``, whether it counts toward the client's `LANE_LIMIT`, and
    the future set when its turn comes. Work that may run in one pass with other work of the
    same key (`batched_walk.py`) says so: ``together`` (the key) and ``work`` (its arguments);
    ``carried``, set by `FairQueue.take_along`, is the answer of the pass that took it along."""

    __slots__ = ("carried", "client", "counted", "together", "turn", "work")

    def __init__(self, client: str, counted: bool) -> None:
        self.client, self.counted = client, counted
        self.turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.together: Hashable | None = None
        self.work: tuple = ()
        self.carried: asyncio.Future | None = None


class FairQueue:
    """One turn at a time: the teacher's line first, then the students' lanes round-robin."""

    def __init__(self) -> None:
        self._teacher: deque[Ticket] = deque()  # the teacher's requests waiting, in arrival order
        self._lanes: dict[str, deque[Ticket]] = {}  # each student's requests waiting
        self._round: deque[str] = deque()  # the students with a request waiting, the next first
        self._counted: dict[str, int] = {}  # each student's requests queued or running
        self._holder: Ticket | None = None  # the request whose turn it is

    @property
    def queued(self) -> int:
        """How many requests wait (the one running not counted)."""
        return len(self._teacher) + sum(len(lane) for lane in self._lanes.values())

    def ahead(self, client: str) -> int:
        """How many requests go before ``client``'s next turn, as the queue stands now: the one
        running, the teacher's line, and one per student before it in the round (a client with
        nothing waiting: how many a new request of its would have ahead). The request running
        counts unless it is ``client``'s own."""
        running = int(self._holder is not None and self._holder.client != client)
        if client == TEACHER:
            waiting = any(ticket.client == TEACHER for ticket in self._teacher)
            return running + (0 if waiting else len(self._teacher))
        place = self._round.index(client) if client in self._round else len(self._round)
        return running + len(self._teacher) + place

    def enter(self, client: str, *, stream: bool = False) -> Ticket:
        """A ticket for ``client`` (its turn may have come already). A student's request past
        `LANE_LIMIT` queued or running: 429. ``stream``: a step of a stream, which waits in the
        client's lane but is not counted (a stream never gets a 429 partway through)."""
        counted = client != TEACHER and not stream
        if counted and self._counted.get(client, 0) >= LANE_LIMIT:
            raise RequestError(TOO_MANY, status=429)
        ticket = Ticket(client, counted)
        if counted:
            self._counted[client] = self._counted.get(client, 0) + 1
        if client == TEACHER:
            self._teacher.append(ticket)
        else:
            self._lanes.setdefault(client, deque()).append(ticket)
            if client not in self._round:
                self._round.append(client)
        self._next()
        return ticket

    async def wait(self, ticket: Ticket) -> None:
        """Until ``ticket``'s turn comes (cancelled: `leave` takes it out of the queue)."""
        await ticket.turn

    def waiting(self, ticket: Ticket) -> bool:
        """Whether ``ticket`` still waits for its turn."""
        return not ticket.turn.done()

    def promote(self, ticket: Ticket) -> None:
        """Move a student's waiting ``ticket`` to the end of the teacher's line (the teacher
        waits for it too)."""
        lane = self._lanes.get(ticket.client)
        if lane is None or ticket not in lane:
            return
        self._take_out(ticket)
        self._teacher.append(ticket)

    def take_along(self, holder: Ticket, limit: int) -> list[Ticket]:
        """Up to ``limit`` waiting tickets whose work runs in one pass with ``holder``'s (the
        same ``together`` key), in the order their turns would come: the teacher's line, then
        the first of each student's lane in the round, none of a student already in the pass
        (one request in flight each; a student served goes to the round's end); a teacher's
        takes only the teacher's, so that what the class waits for never waits for more.
        Each leaves its line with its turn come and ``carried``, the future the holder sets
        to its answer; none holds the model."""
        if holder.together is None:
            return []
        firsts = [] if holder.client == TEACHER else [self._lanes[client][0] for client in self._round]
        taken: list[Ticket] = []
        clients = {holder.client}
        for ticket in [*self._teacher, *firsts]:
            if len(taken) == limit:
                break
            student_again = ticket.client != TEACHER and ticket.client in clients  # one in flight each
            if ticket.together == holder.together and not ticket.turn.done() and not student_again:
                taken.append(ticket)
                clients.add(ticket.client)
        for ticket in taken:
            self._take_out(ticket)
            if ticket.client in self._round:  # more of its requests wait: after the others'
                self._round.remove(ticket.client)
                self._round.append(ticket.client)
            ticket.carried = asyncio.get_running_loop().create_future()
            ticket.turn.set_result(None)
        return taken

    def leave(self, ticket: Ticket) -> None:
        """``ticket``'s work is over (done, failed, or given up while waiting): the next turn
        goes on. Safe to call twice."""
        if ticket.counted and ticket.client in self._counted:
            ticket.counted = False  # leave() may run twice: counted off once
            self._counted[ticket.client] -= 1
            if not self._counted[ticket.client]:
                del self._counted[ticket.client]
        if self._holder is ticket:
            self._holder = None
            self._next()
        else:
            self._take_out(ticket)
            if not ticket.turn.done():
                ticket.turn.cancel()
            self._next()

    @contextlib.asynccontextmanager
    async def turn(self, client: str, *, stream: bool = False) -> AsyncIterator[None]:
        """The model is ``client``'s while the block runs (`enter`, `wait`, `leave`)."""
        ticket = self.enter(client, stream=stream)
        try:
            await self.wait(ticket)
            yield
        finally:
            self.leave(ticket)

    def _next(self) -> None:
        """Give the turn to the next ticket still waiting: the teacher's, else the next student's."""
        while self._holder is None and (self._teacher or self._round):
            if self._teacher:
                ticket = self._teacher.popleft()
            else:
                ticket = self._lanes[self._round[0]][0]
                self._take_out(ticket)
            if not ticket.turn.done():  # one whose task was cancelled meanwhile is skipped
                self._holder = ticket
                ticket.turn.set_result(None)

    def _take_out(self, ticket: Ticket) -> None:
        """Remove a waiting ``ticket`` from its line; a student whose lane empties leaves the
        round, one with more waiting goes to its end."""
        if ticket in self._teacher:
            self._teacher.remove(ticket)
            return
        lane = self._lanes.get(ticket.client)
        if lane is None or ticket not in lane:
            return
        first = lane[0] is ticket
        lane.remove(ticket)
        if not lane:
            del self._lanes[ticket.client]
            self._round.remove(ticket.client)
        elif first and self._round[0] == ticket.client:
            self._round.rotate(-1)  # served (or gone): the others come first
