"""Serve an ASGI app on a free 127.0.0.1 port in a background thread, for browser tests.

    with serving(create_app({"tiny": lm})) as url:
        page.goto(url)          # http://127.0.0.1:PORT/

`uvicorn.Server` runs in a daemon thread; leaving the block asks it to exit and waits for
the thread, so no server outlives its test module. The workshop answers only with its token
(`glassformer.workshop.door.guard`): `auth(url)` gives a script's header for a served URL, and
`log_in(page, url)` the browser's cookie, as the page gets it from the printed link.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import uvicorn

HOST = "127.0.0.1"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
_TOKENS: dict[str, str] = {}  # base URL -> the token of the app served there


def _base(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def auth(url: str) -> dict[str, str]:
    """The header a script sends to the workshop served at ``url``."""
    return {"Authorization": f"token {_TOKENS[_base(url)]}"}


def log_in(page, url: str) -> None:
    """Give ``page``'s browser context the workshop's cookie, as opening the printed link does."""
    port = urlsplit(url).port
    cookie = {"name": f"glassformer-token-{port}", "value": _TOKENS[_base(url)], "url": _base(url)}
    page.context.add_cookies([cookie])


def free_port() -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving(app) -> Iterator[str]:
    """Run ``app`` on a free port while the block runs; yields its base URL (with '/')."""
    port = free_port()
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"workshop-test-server:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the test server on {HOST}:{port} stopped before it started")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the test server on {HOST}:{port} did not start in {START_TIMEOUT_S:g} s")
        time.sleep(0.02)
    url = f"http://{HOST}:{port}/"
    _TOKENS[url] = getattr(getattr(app, "state", None), "token", "")
    try:
        yield url
    finally:
        _TOKENS.pop(url, None)
        server.should_exit = True
        thread.join(STOP_TIMEOUT_S)


def wait_until(page, expression: str, timeout_s: float = 30.0) -> None:
    """Wait until ``expression`` (JavaScript: an expression, or ``() => ...``) is true in
    ``page``. Playwright's ``wait_for_function`` compiles it with ``new Function``, which the
    workshop's Content-Security-Policy forbids (no eval); ``page.evaluate`` goes through the
    debugger, outside the page's policy, so this polls with it."""
    code = expression if expression.lstrip().startswith("()") else f"() => ({expression})"
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(code):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{expression!r} still false after {timeout_s:g} s")
        time.sleep(0.05)
