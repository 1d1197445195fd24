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
   when the page was opened with ``?token=<token>`` (the URL the command prints). That
   first load sets the cookie and redirects to the same URL without the token, so it stays
   out of the address bar, the history and shared screenshots. Without it: 403, and a page
   that asks for it.
4. **JSON bodies only**: a POST whose ``Content-Type`` is not ``application/json`` gets 415
   (a form or ``text/plain`` post is what a browser sends cross-site without asking), and a
   body declared larger than the limit gets 413 before it is read.

The cookie is ``HttpOnly`` and ``SameSite=Lax``: other sites' requests never carry it, and
a link into the workshop still opens it logged in.
"""

from __future__ import annotations

import html
import secrets
from collections.abc import Iterable
from urllib.parse import urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from glassformer.workshop.http import MAX_BODY_BYTES

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PAGES = ("/", "/lab", "/lessons")  # what a link from another site may open
SAME_ORIGIN = ("same-origin", "none")  # Sec-Fetch-Site of the page's own requests; "none": typed URL
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def new_token() -> str:
    """A fresh secret: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


class Guard:
    """ASGI middleware applying the checks above to ``app``; ``hosts``: the Host names
    answered (None: any, for a server bound to every interface, where the token alone guards)."""

    def __init__(self, app: ASGIApp, token: str, hosts: Iterable[str] | None = LOOPBACK) -> None:
        if not token:
            raise ValueError("the workshop needs a token: an empty one would let any page drive it")
        self.app = app
        self.token = token
        self.hosts = None if hosts is None else {_bare(host) for host in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self.refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if request.query_params.get("token") and request.method == "GET" and request.url.path in PAGES:
            await self.logged_in(request)(scope, receive, send)  # the cookie, and the URL without the token
            return
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> Response | None:
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
        if not navigation and (
            (site is not None and site not in SAME_ORIGIN) or (origin is not None and origin != own)
        ):
            return _refused(request, 403, f"a request from another site ({origin or site}) is refused")
        if not self.authorized(request):
            reason = (
                "The token given is not this workshop's (a new one is made at each start, unless fixed "
                "with --token)"
                if request.query_params.get("token")
                else "This request lacks the workshop's token"
            )
            return _refused(request, 403, reason, ask_token=True)
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

    def authorized(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() in ("token", "bearer") and secrets.compare_digest(given.strip(), self.token):
            return True
        for given in (request.cookies.get(cookie_name(request)), request.query_params.get("token")):
            if given and secrets.compare_digest(given, self.token):
                return True
        return False

    def logged_in(self, request: Request) -> Response:
        """The page's URL without its token, with the token as a cookie."""
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = URL(path=request.url.path, query=urlencode(rest))
        response = RedirectResponse(str(target), status_code=303)
        response.set_cookie(cookie_name(request), self.token, httponly=True, samesite="lax", path="/")
        return response


def cookie_name(request: Request) -> str:
    """One cookie per port: two workshops on one machine keep their own tokens."""
    port = request.url.port or (request.scope.get("server") or ("", 80))[1]
    return f"glassformer-token-{port}"


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
        if k != "token"
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
