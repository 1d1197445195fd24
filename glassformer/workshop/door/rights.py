"""Who may do what when a class runs: the teacher's link opens everything, the students' link
opens following the class, the walk, generation and the views.

A class (``glassformer workshop --class``) has two secrets. The teacher's token is the
workshop's own (`guard.py`); the students' token is a `StudentsKey`, which the class can
replace (a new link: the old one and the cookies it set stop working) or revoke (the class
ended). The guard tells them apart and puts the role on each request (``role``: "teacher" or
"student"), then asks `allowed`, which reads one table, `RIGHTS`: each route of the app, by
method and path, is in one of two columns.

- `TEACHER`: what runs code or changes the machine or the class: the lab's runs (start,
  pause, resume, stop, continue, its estimate, a run opened as a model), a lesson's code run,
  the class's changes and links, the teaching link (/teach), the class's poll opened, closed
  and revealed.
- `EVERYONE`: what reads a model or follows the class: the page and its files, the walk, a
  stage, the lens, tokens, similarity, explanations, attention change, generation, the
  notebook views, models, costs, samples, a quantized model's errors, the lab's page and its
  events, the lessons' pages and sources, the class's state and events, the poll read and a
  guess in it.

A request a student makes that is in no row is refused as a teacher's route is: a route added
later is closed to students until it is put in a column (`tests/test_workshop_rights.py`
fails on a route of the app that is in none).
"""

from __future__ import annotations

import hmac
import re
import secrets

TEACHER = "teacher"
EVERYONE = "everyone"
TEACHERS_ONLY = "this needs the teacher's link"  # what a student is told on a teacher's route

RIGHTS: dict[str, str] = {
    # the page, its files, the notebook views
    "GET /": EVERYONE,
    "GET /static/{path:path}": EVERYONE,
    "GET /static/viz/{path:path}": EVERYONE,
    "GET /favicon.ico": EVERYONE,
    "GET /views/{view}": EVERYONE,
    "GET /teach": TEACHER,  # it shows the teacher's token
    # the models and one forward pass
    "GET /api/models": EVERYONE,
    "GET /api/costs": EVERYONE,
    "GET /api/samples": EVERYONE,
    "GET /api/quantization": EVERYONE,
    "GET /api/queue": EVERYONE,
    "POST /api/walk": EVERYONE,
    "POST /api/stage": EVERYONE,
    "POST /api/lens": EVERYONE,
    "POST /api/tokens": EVERYONE,
    "POST /api/similarity": EVERYONE,
    "POST /api/explain": EVERYONE,
    "POST /api/attention_change": EVERYONE,
    "POST /api/generate": EVERYONE,
    # the training lab: watched by all, driven by the teacher
    "GET /lab": EVERYONE,
    "GET /api/lab": EVERYONE,
    "GET /api/lab/events": EVERYONE,
    "POST /api/lab/estimate": TEACHER,
    "POST /api/lab/start": TEACHER,
    "POST /api/lab/pause": TEACHER,
    "POST /api/lab/resume": TEACHER,
    "POST /api/lab/stop": TEACHER,
    "POST /api/lab/continue": TEACHER,
    "POST /api/lab/open": TEACHER,
    # the lessons: read by all, their code run by the teacher
    "GET /lessons": EVERYONE,
    "GET /api/lessons": EVERYONE,
    "GET /api/lessons/{key}": EVERYONE,
    "GET /api/source": EVERYONE,
    "POST /api/lessons/{key}/run": TEACHER,
    # the class: followed by all, led by the teacher
    "GET /api/class": EVERYONE,
    "GET /api/class/events": EVERYONE,
    "POST /api/class": TEACHER,
    "POST /api/class/students": TEACHER,
    "POST /api/class/end": TEACHER,
    "GET /api/class/qr.svg": TEACHER,
    # the class's poll: asked and revealed by the teacher, answered by all
    "POST /api/class/poll": TEACHER,
    "POST /api/class/poll/reveal": TEACHER,
    "POST /api/class/poll/close": TEACHER,
    "GET /api/class/poll": EVERYONE,
    "POST /api/class/guess": EVERYONE,
}


def _pattern(path: str) -> re.Pattern:
    """A route's path as a regular expression: ``{name}`` one segment, ``{name:path}`` the rest."""
    parts = re.split(r"(\{[^}]*\})", path)
    return re.compile(
        "".join(
            (".*" if part.endswith(":path}") else "[^/]+") if part.startswith("{") else re.escape(part)
            for part in parts
        )
        + "$"
    )


_ROWS = [(row.split(" ", 1)[0], _pattern(row.split(" ", 1)[1]), column) for row, column in RIGHTS.items()]


def column(method: str, path: str) -> str | None:
    """The column of the route ``method`` ``path`` asks for (HEAD as GET), None if in no row.
    An exact path wins over a pattern (/static/viz/... is its own mount)."""
    method = "GET" if method == "HEAD" else method
    exact = RIGHTS.get(f"{method} {path}")
    if exact is not None:
        return exact
    return next((col for m, pattern, col in _ROWS if m == method and pattern.match(path)), None)


def allowed(role: str, method: str, path: str) -> bool:
    """Whether a request of ``role`` may ask for ``method`` ``path``."""
    return role == TEACHER or column(method, path) == EVERYONE


class StudentsKey:
    """The students' token of a class: replaced when the teacher asks for a new link, revoked
    when the class ends. ``generation`` grows with each change, so what a student opened under
    an older key (an event stream) can tell it is no longer good."""

    def __init__(self) -> None:
        self.token: str | None = secrets.token_urlsafe(32)
        self.generation = 0

    def replace(self) -> str:
        """A new token; the old one opens nothing from now on."""
        self.token = secrets.token_urlsafe(32)
        self.generation += 1
        return self.token

    def revoke(self) -> None:
        """No students' token any more (the class ended)."""
        self.token = None
        self.generation += 1

    def matches(self, given: str | None) -> bool:
        """Whether ``given`` is the students' token now; any text compares (in constant time)."""
        token = self.token
        if not given or token is None:
            return False
        return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())
