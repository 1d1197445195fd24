"""The class's poll (`poll.py`) kept in Redis, for a class served by several workers
(`broadcast.py`): which poll is open, whether it is closed or revealed (``<prefix>poll``:
{id, model, question, open, revealed}, changed in a transaction), and every client's guess
(``<prefix>poll:guesses``: {client: text}, written in the same transaction that checks the
poll is still open), so a guess sent to worker A counts on worker B's teacher page.

Each worker keeps its own `Poll` for the model's side: the next-token distribution (one
forward pass, the same on every worker that loaded the same weights, made where the poll is
first read) and the mapping of each guess to a token. Each change is published on the
class's channel as ``poll`` news, which every worker's streams tell. The one-guess-a-second
limit is per worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from glassformer.workshop.door.http import RequestError

if TYPE_CHECKING:
    from glassformer.workshop.classroom.class_state import Classroom

CLASS_TTL_S = 7 * 24 * 3600  # a class's keys outlive a week's pause, then Redis forgets them


class RedisPoll:
    """The poll's part of `broadcast.RedisBroadcast` (its ``client``, ``key``, ``channel``,
    ``_transact`` and ``_reaching``)."""

    async def _poll_news(self) -> dict[str, Any] | None:
        kept = await self.client.get(self.key("poll"))
        if kept is None:
            return None
        kept = json.loads(kept)
        answers = await self.client.hlen(self.key("poll:guesses"))
        return {"open": kept["open"], "answers": answers, "revealed": kept["revealed"]}

    async def poll_sync(self, current: list, reopen: Callable) -> None:
        async with self._reaching():
            kept = await self.client.get(self.key("poll"))
            if kept is None:
                current.clear()
                return
            kept = json.loads(kept)
            if not current or getattr(current[0], "shared_id", None) != kept["id"]:
                poll = await reopen(kept["model"], kept["question"])  # this worker's copy of the model's side
                poll.shared_id = kept["id"]
                current[:] = [poll]
            poll = current[0]
            guesses = await self.client.hgetall(self.key("poll:guesses"))
        poll.open, poll.revealed = kept["open"], kept["revealed"]
        poll.sync_guesses({client.decode(): text.decode() for client, text in guesses.items()})

    async def poll_opened(self, poll) -> None:
        def change(kept):
            number = (kept or {}).get("id", 0) + 1
            return {
                "id": number,
                "model": poll.model,
                "question": poll.question,
                "open": True,
                "revealed": None,
            }

        async with self._reaching():
            await self.client.delete(self.key("poll:guesses"))
        poll.shared_id = (await self._transact("poll", change))["id"]

    async def poll_guess(self, poll, client: str, text: str) -> None:
        poll.guess(client, text)  # checked here first: open, one a second, at most MAX_GUESSES

        def change(kept):
            if kept is None or kept["id"] != poll.shared_id or not kept["open"]:
                raise RequestError("this poll is closed: wait for the teacher's next question", status=409)
            return kept  # unchanged, but watched: a close meanwhile refuses the guess

        def keep(pipe) -> None:
            pipe.hset(self.key("poll:guesses"), client, text)
            pipe.expire(self.key("poll:guesses"), CLASS_TTL_S)

        await self._transact("poll", change, also=keep)

    async def poll_close(self, poll) -> bool:
        def change(kept):
            if kept is None or kept["id"] != poll.shared_id or not kept["open"]:
                return None
            return {**kept, "open": False}

        closed = await self._transact("poll", change) is not None
        poll.open = False
        return closed

    async def poll_reveal(self, poll, token: int) -> None:
        def change(kept):
            if kept is None or kept["id"] != poll.shared_id or kept["revealed"] is not None:
                return None
            return {**kept, "open": False, "revealed": poll.token(token)}

        await self._transact("poll", change)
        async with self._reaching():
            kept = json.loads(await self.client.get(self.key("poll")))
        poll.open, poll.revealed = kept["open"], kept["revealed"]

    async def poll_tell(self, room: Classroom, poll) -> None:
        async with self._reaching():
            news = await self._poll_news()
            if news is not None:
                await self.client.publish(self.channel, json.dumps({"kind": "poll", "news": news}))
