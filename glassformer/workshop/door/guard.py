"""Only the workshop's own page, or a script that holds its token, may talk to it.

The workshop runs code on the user's machine (training runs, lessons, minutes of CPU), so
it is guarded as Jupyter Server guards a notebook server. Every request passes four checks,
in this order, before any route sees it:

1. **Host** is one of this server's names (127.0.0.1, localhost, [::1], the address it was
   bound to): a page that reached it under another name, through DNS rebinding, gets 403.
2. **Same origin.** A request from another site's page (``Sec-Fetch-Site: cross-site`` or
   ``same-site``, or an ``Origin`` that is not this server's) gets 403, except a plain
   navigation to one of the workshop's pages (a link from a course's notes opens it).
3. **The token**, a secret made at each launch (or fixed with ``--token`` /
   ``GLASSFORMER_TOKEN``): ``Authorization: token <token>`` from scripts, or the cookie set
   when a page was opened with ``?login=<code>`` (the link the command prints: a code that
   works once, for `LOGIN_TTL_S`, so the link a browser keeps in its history opens nothing)
   or with ``?token=<token>`` (a teacher's link for a class, which does stay in each
   browser's history). Either sets the cookie and redirects to the same URL without it.
   Without it: 403, and a page that asks for it. A token that is not ASCII, or malformed,
   is just not the token: 403.
3b. **The role.** When a class runs (``--class``) a second secret, the students' token
   (`rights.StudentsKey`), opens the workshop as a student: the cookie a link sets holds the
   token that link gave (a students' link never hands out the teacher's; a login code is the
   teacher's). Each request's ``scope["state"]`` gets ``role`` ("teacher" | "student") and
   ``client`` ("teacher", or "student:<id>": a random id per browser, kept in the HttpOnly
   cookie ``glassformer-student-<port>`` set the first time a student's browser is seen; a
   script sending the students' token is "student:<its address>"). A student asking for a
   teacher's route (`rights.RIGHTS`) gets 403 "this needs the teacher's link". Without a
   class every request is the teacher's.
4. **JSON bodies only**: a POST whose ``Content-Type`` is not ``application/json`` gets 415
   (a form or ``text/plain`` post is what a browser sends cross-site without asking), and a
   body declared larger than the limit gets 413 before it is read.

The cookie is ``HttpOnly`` and ``SameSite=Lax``: other sites' requests never carry it, and
a link into the workshop still opens it logged in. Its name holds the port, so two
workshops on one machine keep their own; but browsers send a host's cookies to every port
of it, so any other server on 127.0.0.1 receives this one (the README says so).

Every answer carries the headers a browser needs to keep other pages out of it
(`SECURITY_HEADERS`): a Content-Security-Policy with no inline script, no plugin, no
``<base>``, no framing (``frame-ancestors 'none'`` and ``X-Frame-Options: DENY``, so no other
page can put the lab under a decoy's click), no ``Referer`` (a URL with a token never leaves
in one). A page asked for as a frame is refused outright. A client that reads nothing of an
answer for `WRITE_TIMEOUT_S` is dropped: its stream stops and lets go of what it held. A
route that sends a page of its own (a notebook view, whose scripts are inline) sets its own
policy (`views.py`). Only HTTP is answered: a WebSocket (no route takes one) is closed, the
lifespan passes through.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import re
import secrets
import threading
import time
from collections.abc import Iterable
from urllib.parse import urlencode

from starlette.datastructures import URL, MutableHeaders
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from glassformer.workshop.door.http import MAX_BODY_BYTES
from glassformer.workshop.door.rights import TEACHER, TEACHERS_ONLY, StudentsKey, allowed

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PAGES = ("/", "/lab", "/lessons")  # what a link from another site may open
SAME_ORIGIN = ("same-origin", "none")  # Sec-Fetch-Site of the page's own requests; "none": typed URL
WRITES = ("POST", "PUT", "PATCH", "DELETE")
FRAMED = ("iframe", "frame", "embed", "object", "fencedframe")  # Sec-Fetch-Dest of a page put in another
STUDENT = "student"
STUDENT_ID = re.compile(r"[A-Za-z0-9_-]{16}")  # a student's browser id, as `new_student_id` makes it
LOGIN_TTL_S = 15 * 60  # how long a printed login link works (once)
WRITE_TIMEOUT_S = 30.0  # a client that reads nothing of an answer for this long is dropped
PAGE_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",  # no inline script, no eval: markup that slipped in runs nothing
        "style-src 'self' 'unsafe-inline'",  # KaTeX and the views size elements inline
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "content-security-policy": PAGE_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


def new_token() -> str:
    """A fresh secret: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


class ClientTooSlow(OSError):
    """A client that does not read what it asked for (`WRITE_TIMEOUT_S`)."""


class Logins:
    """One-time login codes: the link the command prints opens the workshop once, within
    `LOGIN_TTL_S`; what stays in the browser's history afterwards opens nothing."""

    def __init__(self) -> None:
        self._codes: dict[str, float] = {}  # code -> when it expires (time.monotonic)
        self._lock = threading.Lock()

    def new(self) -> str:
        code = secrets.token_urlsafe(16)
        with self._lock:
            self._codes[code] = time.monotonic() + LOGIN_TTL_S
        return code

    def redeem(self, code: str) -> bool:
        """Whether ``code`` is a live code (it is used up now)."""
        with self._lock:
            now = time.monotonic()
            self._codes = {c: until for c, until in self._codes.items() if until > now}
            return self._codes.pop(code, None) is not None


class Guard:
    """ASGI middleware applying the checks above to ``app``; ``hosts``: the Host names
    answered (None: any, for a server bound to every interface, where the token alone guards);
    ``logins``: the one-time login codes it accepts; ``students``: a class's students' token
    (None: no class, every request is the teacher's)."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        hosts: Iterable[str] | None = LOOPBACK,
        logins: Logins | None = None,
        students: StudentsKey | None = None,
    ) -> None:
        if not token:
            raise ValueError("the workshop needs a token: an empty one would let any page drive it")
        self.app = app
        self.token = token
        self.hosts = None if hosts is None else {_bare(host) for host in hosts}
        self.logins = logins or Logins()
        self.students = students

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a WebSocket: no route takes one
            await send({"type": "websocket.close", "code": 1008, "reason": "the workshop answers HTTP only"})
            return

        dropped = False
        new_id: str | None = None  # a student's browser seen for the first time: its id cookie

        async def send_guarded(message) -> None:
            nonlocal dropped
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:  # a route's own policy (a notebook view) stands
                        headers[name] = value
                if new_id is not None:
                    headers.append("set-cookie", _cookie(student_cookie_name(request), new_id))
            try:  # the server waits while the client's socket is full: not past the timeout
                await asyncio.wait_for(send(message), WRITE_TIMEOUT_S)
            except TimeoutError:
                dropped = True
                raise ClientTooSlow(f"the client read nothing for {WRITE_TIMEOUT_S:g} s") from None

        request = Request(scope)
        role = self.role(request)
        refusal = self.refusal(request, role)
        if refusal is None and role is not None:
            client, new_id = self.client(request, role)
            scope.setdefault("state", {}).update(role=role, client=client)
        if refusal is None and request.method == "GET" and request.url.path in PAGES:
            if request.query_params.get("login") or request.query_params.get("token"):
                refusal = self.logged_in(request)  # the cookie, and the URL without the secret
        try:
            await (refusal or self.app)(scope, receive, send_guarded)
        except (ClientTooSlow, ClientDisconnect):
            if not dropped:
                raise
            # the answer ends here: its stream stops producing, what it held is let go

    def refusal(self, request: Request, role: str | None) -> Response | None:
        """The answer to a request that fails a check, or None when it passes them all."""
        headers = request.headers
        host = _host_name(headers.get("host", ""))
        if self.hosts is not None and host not in self.hosts:
            names = ", ".join(sorted(self.hosts))
            return _refused(request, 403, f"this workshop answers only as {names}, not {host!r}")
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        own = f"{request.url.scheme}://{headers.get('host', '')}"
        navigation = request.method == "GET" and request.url.path in PAGES
        if headers.get("sec-fetch-dest") in FRAMED:
            return _refused(request, 403, "the workshop's pages do not open inside another page")
        if not navigation and (
            (site is not None and site not in SAME_ORIGIN) or (origin is not None and origin != own)
        ):
            return _refused(request, 403, f"a request from another site ({origin or site}) is refused")
        if role is None:
            reason = (
                "The token given is not this workshop's (a new one is made at each start, unless fixed "
                "with --token)"
                if request.query_params.get("token")
                else "This request lacks the workshop's token"
            )
            return _refused(request, 403, reason, ask_token=True)
        if not allowed(role, request.method, request.url.path):
            return _refused(request, 403, TEACHERS_ONLY)
        if request.method in WRITES:
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return _refused(request, 415, f"the body must be application/json, not {kind or 'untyped'}")
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                return _refused(
                    request, 413, f"the body has {int(declared):,} bytes; at most {MAX_BODY_BYTES:,}"
                )
        return None

    def role(self, request: Request) -> str | None:
        """ "teacher" or "student" by the secret the request shows (the teacher's wins where it
        shows both), None when it shows neither."""
        offered = (
            _header_token(request),
            request.cookies.get(cookie_name(request)),
            request.query_params.get("token"),
        )
        if any(self.is_token(given) for given in offered):
            return TEACHER
        if request.method == "GET" and request.url.path in PAGES and request.query_params.get("login"):
            return TEACHER  # `logged_in` checks the code (and uses it up)
        if self.students is not None and any(self.students.matches(given) for given in offered):
            return STUDENT
        return None

    def client(self, request: Request, role: str) -> tuple[str, str | None]:
        """Who asks ("teacher", "student:<id>"), and a new browser id to set as a cookie, if any."""
        if role == TEACHER:
            return TEACHER, None
        if self.students is not None and self.students.matches(_header_token(request)):
            return f"{STUDENT}:{request.client.host if request.client else ''}", None  # a script
        known = request.cookies.get(student_cookie_name(request), "")
        if STUDENT_ID.fullmatch(known):
            return f"{STUDENT}:{known}", None
        made = new_student_id()
        return f"{STUDENT}:{made}", made

    def is_token(self, given: str | None) -> bool:
        """Whether ``given`` is the token; any text compares (in constant time), none raises."""
        return bool(given) and hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def logged_in(self, request: Request) -> Response:
        """The page's URL without its token or login code, with the token it gave as the cookie
        (the teacher's for a login code; a students' link's own token, never the teacher's); a
        used or expired login code gets the page that asks for the token. A token that is
        neither secret (the request passed on its cookie) changes no cookie."""
        given, code = request.query_params.get("token"), request.query_params.get("login")
        if self.is_token(given):
            kept = self.token
        elif self.students is not None and self.students.matches(given):
            kept = given
        elif code:
            if not self.logins.redeem(code):
                reason = "This login link was used already or has expired (it works once, for a few minutes)"
                return _refused(request, 403, reason, ask_token=True)
            kept = self.token
        else:
            kept = None
        rest = [(k, v) for k, v in request.query_params.multi_items() if k not in ("token", "login")]
        target = URL(path=request.url.path, query=urlencode(rest))
        response = RedirectResponse(str(target), status_code=303)
        if kept is not None:
            response.set_cookie(cookie_name(request), kept, httponly=True, samesite="lax", path="/")
        return response


def cookie_name(request: Request) -> str:
    """One cookie per port: two workshops on one machine keep their own tokens."""
    port = request.url.port or (request.scope.get("server") or ("", 80))[1]
    return f"glassformer-token-{port}"


def student_cookie_name(request: Request) -> str:
    """The cookie that keeps a student's browser id, one per port as the token's."""
    return cookie_name(request).replace("-token-", "-student-")


def new_student_id() -> str:
    """A student's browser id: 12 random bytes, URL-safe (16 characters)."""
    return secrets.token_urlsafe(12)


def _header_token(request: Request) -> str | None:
    """The token of an ``Authorization: token <token>`` (or ``Bearer``) header, if any."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return given.strip() if scheme.lower() in ("token", "bearer") else None


def _cookie(name: str, value: str) -> str:
    """A Set-Cookie value as the guard sets its cookies: HttpOnly, SameSite=Lax, the whole site."""
    response = Response()
    response.set_cookie(name, value, httponly=True, samesite="lax", path="/")
    return response.headers["set-cookie"]


def _host_name(header: str) -> str:
    """The name in a Host header, without its port: "[::1]:8765" -> "::1"."""
    if header.startswith("["):
        return header[1:].split("]")[0].lower()
    return (header.rsplit(":", 1)[0] if header.count(":") == 1 else header).lower()


def _bare(host: str) -> str:
    """A Host name without brackets, lower case: "[::1]" -> "::1"."""
    return host.strip().strip("[]").lower()


def _refused(request: Request, status: int, reason: str, ask_token: bool = False) -> Response:
    """JSON for the page's requests and scripts; for a page opened without the token, a page
    that says where the token is and takes it."""
    wants_page = request.method == "GET" and request.url.path in PAGES
    if not (ask_token and wants_page):
        return JSONResponse({"error": reason}, status_code=status)
    kept = "".join(  # the link's own settings (level, model, text) survive typing the token
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in request.query_params.multi_items()
        if k not in ("token", "login")
    )
    page = _TOKEN_PAGE.format(reason=html.escape(reason), path=html.escape(request.url.path), kept=kept)
    return HTMLResponse(page, status_code=403)


_TOKEN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Glassformer: the token</title>
<link rel="icon" href="data:,"></head>
<body style="font: 18px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem">
<h1>This workshop needs its token</h1>
<p>{reason}. Open the address that <code>glassformer workshop</code> printed when it started
(it ends in <code>?token=…</code>), or type the token here. Your teacher may have given you one.</p>
<form method="get" action="{path}">{kept}<label>Token <input name="token" autocomplete="off" required
 autofocus style="font: inherit; width: 100%"></label>
<p><button type="submit" style="font: inherit">Open the workshop</button></p></form></body></html>"""
