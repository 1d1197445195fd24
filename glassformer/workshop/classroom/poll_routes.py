"""The class's poll's routes, "what comes next?" (`poll.py` holds the poll; the guard,
`door/guard.py`, has already told the teacher from a student and refused a student the
teacher's routes, `door/rights.py`):

    POST /api/class/poll          (teacher) {} -> a new poll on the class's model and text (it
                                  replaces the last): the teacher's view below
    POST /api/class/guess         (anyone) {guess: 1..40 characters} -> this client's guess
                                  (replacing theirs): their view; 409 once the poll is closed,
                                  429 more than once a second
    GET  /api/class/poll          the poll as the asker may see it. The teacher's: {open,
                                  question, guesses: [{text, count, token, id, p}], answers,
                                  model: [{text, id, p}] (the top 10), revealed: {text, id, p} |
                                  null}. A student's: {open, question, yours, answers, revealed},
                                  and after the reveal also guesses, model, yours_token, matched
    POST /api/class/poll/reveal   (teacher) {} -> the model's token drawn with the class's
                                  sampling (greedy without), shown to all; no more guesses
    POST /api/class/poll/close    (teacher) {} -> no more guesses

Each change of the poll is ``event: poll`` on the class's streams (`class_events.py`). The
poll's forward pass and its draw run on the model thread in the teacher's turn, within the
``poll`` budget (`limits.SECONDS`; its length limit is a walk's); a guess is a tokenization of
at most `poll.TAIL_CHARS` + 40 characters, on the event loop. Without a class each answers 404
with how to start one; without a poll, 404 saying how to open one. Served by several workers
(``--broadcast``), the poll's state and guesses are kept in Redis (`broadcast.py`): a worker
that has not seen the poll yet opens its own copy of the model's side first.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from glassformer.workshop.classroom.broadcast import InProcess
from glassformer.workshop.classroom.class_state import Classroom, running
from glassformer.workshop.classroom.poll import NO_POLL, Poll, draw, open_poll, reveal_settings
from glassformer.workshop.door.http import RequestError, read_query, read_request
from glassformer.workshop.door.request_types import Empty, NoQuery, PollGuess
from glassformer.workshop.door.rights import TEACHER
from glassformer.workshop.model_work import Workshop

NO_STORE = {"Cache-Control": "no-store"}  # the poll changes with every guess


def poll_routes(
    classroom: Classroom | None, workshop: Workshop, broadcast: InProcess | None = None
) -> list[Route]:
    """The routes above for ``classroom`` (None: no class runs), on ``workshop``'s models;
    ``broadcast``: where the poll is kept besides (None: this process alone)."""
    current: list[Poll] = []  # the class's poll (this worker's copy), once one is opened
    board = broadcast or InProcess()

    def the_class() -> Classroom:
        return running(classroom)

    async def the_poll(request: Request) -> Poll:
        the_class()
        await board.poll_sync(current, lambda model, question: opened(request, model, question))
        if not current:
            raise RequestError(NO_POLL, status=404)
        return current[0]

    def view(request: Request, poll: Poll) -> JSONResponse:
        scope = request.scope.get("state", {})
        answer = poll.view(scope.get("role", TEACHER), scope.get("client", TEACHER))
        return JSONResponse(answer, headers=NO_STORE)

    async def model_work(request: Request, fn, *args):
        """``fn(*args)`` on the model thread (`Workshop.run_model`); the library's ValueError on
        an input the checks let through (past the model's max_seq_len): a 400 with its message."""
        try:
            return await workshop.run_model(request, "poll", fn, *args)
        except RequestError:
            raise
        except (ValueError, TypeError, KeyError) as error:
            raise RequestError(str(error.args[0]) if error.args else type(error).__name__) from None

    async def changed(poll: Poll) -> None:
        if current and current[0] is poll:  # a poll replaced meanwhile tells nothing
            await board.poll_tell(the_class(), poll)

    async def opened(request: Request, name: str, text: str) -> Poll:
        """A poll on model ``name`` reading ``text`` (400 if the model continues no text)."""
        lm = workshop.reader(name, "poll", text)
        if not lm.config.generates or lm.config.seq2seq:
            raise RequestError(
                f"{name} does not continue a text (it is no decoder): open a model that predicts the "
                "next token (a GPT-like one) for the class's poll"
            )
        return await model_work(request, open_poll, lm, name, text)

    async def ask(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        room = the_class()
        name, text = room.settings["model"], room.settings["text"]
        if not text:
            raise RequestError("the class's text is empty: write the text the class should continue first")
        poll = await opened(request, name, text)
        await board.poll_opened(poll)
        current[:] = [poll]
        await changed(poll)
        return view(request, poll)

    async def guess(request: Request) -> JSONResponse:
        body = await read_request(request, PollGuess)
        poll = await the_poll(request)
        await board.poll_guess(poll, request.scope.get("state", {}).get("client", TEACHER), body.guess)
        await changed(poll)
        return view(request, poll)

    async def read(request: Request) -> JSONResponse:
        read_query(request, NoQuery)
        return view(request, await the_poll(request))

    async def reveal(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        poll = await the_poll(request)
        if poll.revealed is not None:
            raise RequestError("this poll's token is revealed already: ask the class a new one", status=409)
        try:
            settings = reveal_settings(the_class().settings["sampling"])
        except ValueError as error:
            raise RequestError(f"the class's sampling: {error}") from None
        token = await model_work(request, draw, poll, settings)
        if poll.revealed is None:  # a second reveal meanwhile drew the same token
            await board.poll_reveal(poll, token)
            await changed(poll)
        return view(request, poll)

    async def close(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        poll = await the_poll(request)
        if await board.poll_close(poll):
            await changed(poll)
        return view(request, poll)

    return [
        Route("/api/class/poll", ask, methods=["POST"]),
        Route("/api/class/poll", read),
        Route("/api/class/guess", guess, methods=["POST"]),
        Route("/api/class/poll/reveal", reveal, methods=["POST"]),
        Route("/api/class/poll/close", close, methods=["POST"]),
    ]
