"""The workshop's web server: a Starlette app, a plain list of routes to plain functions,
one route module per area:

    `page_routes.py`      GET /, /static/..., /teach, /views/{view}: the page, its files, the
                          teaching link, a notebook view
    `model_routes.py`     GET /api/models, /api/costs, /api/samples, /api/quantization; POST
                          /api/lab/open: the models held, what one costs, a vision model's
                          held-out digits, a quantized model's errors block by block, a lab
                          run opened as one more model
    `walk_routes.py`      POST /api/walk, /api/stage, /api/lens: one forward pass as the page
                          draws it
    `reading_routes.py`   POST /api/tokens, /api/similarity, /api/explain,
                          /api/attention_change: what a model made of a text
    `generate_routes.py`  POST /api/generate: new tokens as server-sent events
    `lab_routes.py`       /lab, /api/lab/...: the training lab (`lab.py`)
    `lesson_routes.py`    /lessons, /api/lessons/...: the course's lessons, run on this machine
    `class_routes.py`     GET/POST /api/class, GET /api/class/events, POST /api/class/students,
                          /api/class/end, GET /api/class/qr.svg: a class on one server
                          (``--class``): the teacher's walk, followed by every student's page
    `poll_routes.py`      GET/POST /api/class/poll, POST /api/class/guess, /api/class/poll/reveal,
                          /api/class/poll/close: the class's poll, "what comes next?"

Each module's docstring lists its routes and their bodies. The model routes share one
`model_work.Workshop`: the models, the one lock, the one model thread, each route's limits.

Only the workshop's own page, or a script with its token, gets through (`guard.py`: the
Host, the origin, the token, JSON bodies); when a class runs, it tells the teacher's token
from the students' and refuses a student the teacher's routes (`rights.py`). Every body is
a typed request (`request_types.py`) read and validated in one place (`http.read_request`);
a bad one is answered 400 (404 for an unknown model, 413 for a body or an input past its
limit, 415 for a body that is not JSON) with ``{"error": message}``, which the page shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware

from glassformer.workshop.classroom.broadcast import broadcast_for
from glassformer.workshop.classroom.class_routes import class_routes
from glassformer.workshop.classroom.class_state import Classroom
from glassformer.workshop.classroom.poll_routes import poll_routes
from glassformer.workshop.door.guard import LOOPBACK, Guard, Logins, new_token
from glassformer.workshop.door.http import RequestError, request_error
from glassformer.workshop.lab.lab_routes import lab_routes
from glassformer.workshop.lab.training_lab import Lab
from glassformer.workshop.lessons.lesson_routes import lesson_routes
from glassformer.workshop.model_routes import model_routes
from glassformer.workshop.model_work import Workshop
from glassformer.workshop.page_routes import STATIC, page_routes
from glassformer.workshop.reading.generate_routes import generate_routes
from glassformer.workshop.reading.reading_routes import reading_routes
from glassformer.workshop.shared_work import DEFAULT_LIMIT_BYTES, RemoteAnswers, fingerprint
from glassformer.workshop.walk.walk_routes import walk_routes


def create_app(
    models: dict[str, Any],
    runs_root: str | Path = "runs",
    origins: dict[str, str] | None = None,
    *,
    token: str | None = None,
    hosts: Iterable[str] | None = LOOPBACK,
    classroom: bool = False,
    cache_bytes: int = DEFAULT_LIMIT_BYTES,
    broadcast: str | None = None,
    quantized: dict[str, Any] | None = None,
) -> Starlette:
    """The app serving ``models`` ({name: LanguageModel}); its training lab keeps its runs
    under ``runs_root``. ``origins``: {fine-tuned model: the model it was fine-tuned from},
    both names of ``models`` (the page offers the pair to compare their attention).
    ``token``: the secret a page or script must show (`guard.py`; None: a new one, read back
    as ``app.state.token``); ``hosts``: the Host names answered (None: any, the token alone).
    ``classroom``: a class runs from the start (`classroom/`), read back as
    ``app.state.classroom`` (None without one), its students' token made now. ``cache_bytes``:
    how many bytes of answers the shared work keeps (`shared_work.py`). ``broadcast``: the
    Redis (``redis://host:port``) through which several workers, each made with the same
    ``token`` and a class, teach one class and share their answers (`classroom/broadcast.py`);
    reached now (a ValueError if it cannot be), listened to while the app runs (its lifespan).
    ``quantized``: {name: `quantized_model.Quantization`} of the models quantized in place
    (``--quantize``): each block's error, served by /api/quantization, and their labels."""
    if not models:
        raise ValueError("the workshop needs at least one model")
    if broadcast is not None and not classroom:
        raise ValueError("--broadcast shares a class between workers: start each worker with --class too")
    token = new_token() if token is None else token
    unknown = set(quantized or {}) - set(models)
    if unknown:
        raise ValueError(f"quantized models the workshop does not hold: {', '.join(sorted(unknown))}")
    workshop = Workshop(
        models, dict(origins or {}), Lab(runs_root), cache_bytes=cache_bytes, quantized=dict(quantized or {})
    )
    room = Classroom(list(models)) if classroom else None
    board = broadcast_for(broadcast, token)
    if room is not None:
        board.join(room)  # with Redis: the class kept there, or this one started there
    if broadcast is not None:
        workshop.work.remote = RemoteAnswers(board.client, board.prefix + "work:")
        for name, lm in models.items():  # once, at load: the answers' keys name the weights
            fingerprint(name, lm)
    routes = [
        *model_routes(workshop),
        *walk_routes(workshop),
        *reading_routes(workshop),
        *generate_routes(workshop),
        *lab_routes(workshop.lab, STATIC / "lab.html", workshop.stopping),
        *lesson_routes(models, STATIC / "lessons.html"),
        *class_routes(room, workshop, board),
        *poll_routes(room, workshop, board),
        # last: its static mounts answer every path under /static; a class's teaching link is the students'
        *page_routes(workshop, lambda: room.key.token if room is not None and room.key.token else token),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if room is not None:
            await board.start(room)  # with Redis: the other workers' changes applied here
        yield
        await board.stop()
        await anyio.to_thread.run_sync(workshop.lab.shutdown)  # a run still going keeps its checkpoint

    logins = Logins()
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(Guard, token=token, hosts=hosts, logins=logins, students=room.key if room else None)
        ],
        exception_handlers={RequestError: request_error},
        lifespan=lifespan,
    )
    app.state.token = token
    app.state.classroom = room  # the class (`class_state.Classroom`): its students' token, its state
    app.state.login_link = logins.new  # a one-time code for the link the command prints
    app.state.stop_work = workshop.stop_work
    app.state.workshop = workshop  # the models, the lock, the work in flight (`model_work.py`)
    app.state.broadcast = board  # how the class travels between workers (`broadcast.py`)
    return app
