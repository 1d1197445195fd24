"""A class's routes (`class_state.Classroom` holds the class; the guard, `door/guard.py`,
has already told the teacher from a student and refused a student a teacher's route,
`door/rights.py`):

    GET  /api/class             the state: {model, text, level, step, stage, zoom, panel,
                                sampling, version, role, students: {connected, following}};
                                the teacher's also {links: {students}, work: the shared work's stats}
    POST /api/class             (teacher) any of {model, text, level, step, stage, zoom, panel,
                                sampling} (`request_types.ClassUpdate`) -> the new state
    GET  /api/class/events      ?following=1|0: server-sent events (`class_events.py`)
    POST /api/class/students    (teacher) {} -> {students: a new link}; the old one opens nothing
    POST /api/class/end         (teacher) {} -> {ended: true}: the students' token revoked,
                                the streams get `end`
    GET  /api/class/qr.svg      (teacher) ?at=<a cache-buster, ignored>: the students' link as a
                                QR code (image/svg+xml)

Without a class (the workshop started without ``--class``) each answers 404 with how to
start one; once the class has ended, 404 saying so. Each answer is small and made at once;
the streams are bounded in number (`class_state.MAX_STREAMS`) and end with their page, the
class or the server. A change goes through the class's broadcast (`broadcast.py`): kept in
this process, or in Redis for every worker serving the class (``--broadcast``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from glassformer.workshop.classroom.broadcast import InProcess
from glassformer.workshop.classroom.class_events import class_events, last_event_id
from glassformer.workshop.classroom.class_links import qr_svg, students_link
from glassformer.workshop.classroom.class_state import Classroom, running
from glassformer.workshop.door.http import read_query, read_request
from glassformer.workshop.door.request_types import ClassEventsQuery, ClassUpdate, Empty, NoQuery, QrQuery
from glassformer.workshop.door.rights import TEACHER
from glassformer.workshop.model_work import Workshop

NO_STORE = {"Cache-Control": "no-store"}  # the state changes, the links hold a secret


def class_routes(
    classroom: Classroom | None, workshop: Workshop, broadcast: InProcess | None = None
) -> list[Route]:
    """The routes above for ``classroom`` (None: no class runs); ``workshop`` gives the shared
    work's stats and the server's stop; ``broadcast`` carries each change to the other
    workers (None: there are none)."""
    board = broadcast or InProcess()

    def the_class() -> Classroom:
        return running(classroom)

    def link(request: Request, room: Classroom) -> str:
        address = room.address or f"{request.url.scheme}://{request.headers.get('host', '')}/"
        return students_link(address, room.key.token or "")

    def state(request: Request, room: Classroom) -> dict[str, Any]:
        role = _role(request)
        answer = room.state(role)
        if role == TEACHER:
            answer["links"] = {"students": link(request, room)}
            work_stats = getattr(workshop, "work_stats", None)  # the shared work, where it is built
            if work_stats is not None:
                answer["work"] = work_stats()
        return answer

    async def read(request: Request) -> JSONResponse:
        read_query(request, NoQuery)
        return JSONResponse(state(request, the_class()), headers=NO_STORE)

    async def change(request: Request) -> JSONResponse:
        body = await read_request(request, ClassUpdate)
        room = the_class()
        changes = body.model_dump(exclude_unset=True)
        if "sampling" in changes:
            changes["sampling"] = body.sampling.model_dump(exclude_none=True)
        await board.update(room, changes)
        return JSONResponse(state(request, room), headers=NO_STORE)

    async def new_link(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        room = the_class()
        await board.new_students_link(room)
        return JSONResponse({"students": link(request, room)}, headers=NO_STORE)

    async def end(request: Request) -> JSONResponse:
        await read_request(request, Empty)
        await board.end(the_class())
        return JSONResponse({"ended": True})

    async def qr(request: Request) -> Response:
        read_query(request, QrQuery)
        room = the_class()
        return Response(qr_svg(link(request, room)), media_type="image/svg+xml", headers=NO_STORE)

    async def events(request: Request) -> ASGIApp:
        following = read_query(request, ClassEventsQuery).following == "1"
        room = the_class()
        role, client = _role(request), request.scope.get("state", {}).get("client", TEACHER)
        student = role != TEACHER
        room.open_stream(client, student, following)  # 429 past the limits
        stream = class_events(request, room, role, last_event_id(request), workshop.stopping)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        response = StreamingResponse(stream, media_type="text/event-stream", headers=headers)

        async def counted(scope, receive, send) -> None:
            try:
                await response(scope, receive, send)
            finally:
                room.close_stream(client, student, following)

        return counted

    return [
        Route("/api/class", read),
        Route("/api/class", change, methods=["POST"]),
        Route("/api/class/events", events),
        Route("/api/class/students", new_link, methods=["POST"]),
        Route("/api/class/end", end, methods=["POST"]),
        Route("/api/class/qr.svg", qr),
    ]


def _role(request: Request) -> str:
    """The role the guard gave the request (without a class: the teacher)."""
    return request.scope.get("state", {}).get("role", TEACHER)
