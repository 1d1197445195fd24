"""Issue 27's browser and token attacks, replayed end to end against one served workshop:
each is refused.

A model's label ran ``<img src=x onerror=…>`` in the page, read the token from ``/api/models``
and drove the lab; another local port framed ``/lab`` under a decoy's click; Chromium's
history kept the printed link's token; a non-ASCII token got a 500; a WebSocket went past
the guard. Here every answer carries a strict Content-Security-Policy and
``X-Frame-Options: DENY`` (a notebook view its own sandboxed policy), Chromium refuses an
injected script and a framed lab, ``/api/models`` holds no token, the teaching link is shown
only to a top-level navigation, odd tokens get 403, WebSockets are closed, and the one-time
login leaves no token in the History database.

One app is served for the module (`tests.workshop_server.serving`), one Chromium drives it
(`tests.conftest.browser`; the history test needs a persistent profile of its own, under
``tmp_path``), and a decoy page is served on another free port for the framing test.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import http.client
import re
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, urlencode, urlsplit

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from glassformer.workshop.server import create_app
from tests.conftest import CHROMIUM
from tests.test_workshop_api import TEXT, char_lm
from tests.workshop_server import HOST, log_in, serving

PAGE_DIRECTIVES = ("script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'")
MARKUP = "<img src=x onerror=alert(document.cookie)>"
NAVIGATION = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "none"}
SCRIPT_FETCH = {"Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty", "Sec-Fetch-Site": "same-origin"}
CSP_REFUSAL = "Content Security Policy"
WALKED = 'body[data-walks="1"][data-state="ready"], body[data-state="error"]'
# Every securitypolicyviolation of every document, from its first script on (an init script
# runs through the debugging protocol, which no page's policy blocks).
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


# the served workshop ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return create_app({"tiny": char_lm()}, runs_root=tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def token(app) -> str:
    return app.state.token


@pytest.fixture(scope="module")
def server(app) -> Iterator[str]:
    with serving(app) as url:
        yield url


@pytest.fixture(scope="module")
def port(server) -> int:
    return urlsplit(server).port


@pytest.fixture
def anyone(app, server):
    """A client without the token, on the served address (so the cookie's name is the port's);
    a fresh one per test: a client keeps the cookie a login sets."""
    return TestClient(app, base_url=server.rstrip("/"), follow_redirects=False)


@pytest.fixture(scope="module")
def script(app, server, token):
    """A script holding the token."""
    headers = {"Authorization": f"token {token}"}
    return TestClient(app, base_url=server.rstrip("/"), headers=headers, follow_redirects=False)


def walk_query(**more: str) -> str:
    return urlencode({"model": "tiny", "text": TEXT, **more})


def directives(policy: str) -> dict[str, list[str]]:
    """A Content-Security-Policy as {directive: its values}."""
    parsed = {}
    for part in policy.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


def raw_get(url: str, path: str, headers: list[tuple[str, bytes]] = ()) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` of the server at ``url`` with header values sent as the bytes given (no
    client library re-encodes them): status, headers, body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=15)
    try:
        connection.putrequest("GET", path)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


class Tab:
    """A page of ``context`` with its console and its documents' CSP violations recorded."""

    def __init__(self, context) -> None:
        self.page = context.new_page()
        self.console: list[str] = []
        self.page.add_init_script(RECORD_VIOLATIONS)
        self.page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        self.page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    def refusals(self) -> list[str]:
        return [line for line in self.console if CSP_REFUSAL in line]

    def violations(self) -> list[str]:
        return self.page.evaluate("window.__violations || []")


@pytest.fixture
def tab(browser, server) -> Iterator[Tab]:
    """A logged-in tab in a fresh context of the module's Chromium, closed after the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = Tab(context)
    log_in(opened.page, server)
    yield opened
    context.close()


# 1. headers on every kind of answer -------------------------------------------------------------
ANSWERS = [  # (what, who asks, method, path, body, the status expected)
    ("the page", "script", "GET", "/", None, 200),
    ("the lab", "script", "GET", "/lab", None, 200),
    ("the lessons", "script", "GET", "/lessons", None, 200),
    ("a static script", "script", "GET", "/static/js/main.js", None, 200),
    ("a view module", "script", "GET", "/static/viz/core.js", None, 200),
    ("the models", "script", "GET", "/api/models", None, 200),
    ("the login redirect", "anyone", "GET", "/?token={token}", None, 303),
    ("a 403 (no token)", "anyone", "GET", "/api/models", None, 403),
    ("the token page", "anyone", "GET", "/?level=beginner", None, 403),
    ("a 404 (no route)", "script", "GET", "/api/nowhere", None, 404),
    ("a 404 (no model)", "script", "GET", "/api/costs?model=nope", None, 404),
    ("a 400", "script", "POST", "/api/walk", {}, 400),
    ("a 415", "script", "POST", "/api/walk", "text", 415),
]


@pytest.mark.parametrize(
    ("what", "who", "method", "path", "body", "status"), ANSWERS, ids=[a[0] for a in ANSWERS]
)
def test_every_answer_carries_the_page_policy(request, token, what, who, method, path, body, status):
    client = request.getfixturevalue(who)
    path = path.format(token=token)
    if body is None:
        answer = client.request(method, path)
    elif isinstance(body, str):
        answer = client.request(method, path, content=body, headers={"Content-Type": "text/plain"})
    else:
        answer = client.request(method, path, json=body)
    assert answer.status_code == status, answer.text[:300]
    policy = answer.headers.get("content-security-policy", "")
    for directive in PAGE_DIRECTIVES:
        assert directive in policy, (what, directive, policy)
    assert "'unsafe-inline'" not in directives(policy)["script-src"], policy
    assert answer.headers.get("x-frame-options") == "DENY", what
    assert answer.headers.get("referrer-policy") == "no-referrer", what


def test_a_view_has_its_own_sandboxed_policy_allowing_only_its_scripts(script):
    answer = script.get(f"/views/head?{walk_query()}")
    assert answer.status_code == 200, answer.text[:300]
    policy = answer.headers["content-security-policy"]
    assert policy.startswith("sandbox allow-scripts"), policy
    parsed = directives(policy)
    assert parsed["sandbox"] == ["allow-scripts"]  # never allow-same-origin: no cookie, no routes
    allowed = parsed["script-src"]
    assert allowed and all(re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", value) for value in allowed), allowed
    assert "'unsafe-inline'" not in allowed and "'unsafe-eval'" not in allowed
    inline = [
        m["code"]
        for m in re.finditer(
            r"<script(?![^>]*\bsrc=)(?P<attributes>[^>]*)>(?P<code>.*?)</script>", answer.text, re.S
        )
        if "application/json" not in m["attributes"]
    ]
    hashes = {
        "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"
        for code in inline
    }
    assert hashes == set(allowed)  # each script it holds, and no other
    assert parsed["frame-ancestors"] == ["'none'"] and parsed["base-uri"] == ["'none'"]
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "no-referrer"


# 2. the policy in Chromium ---------------------------------------------------------------------
def test_the_page_runs_under_its_policy_and_an_injected_script_does_not(tab, server):
    page = tab.page
    page.goto(f"{server}?{walk_query()}")
    page.wait_for_selector(WALKED, state="attached")
    assert page.get_attribute("body", "data-state") == "ready", tab.console
    assert page.locator("body").get_attribute("data-walks") == "1"
    assert tab.violations() == [] and tab.refusals() == [], (tab.violations(), tab.console)

    with page.expect_console_message(lambda m: CSP_REFUSAL in m.text, timeout=5000) as refused:
        with contextlib.suppress(Exception):  # Playwright may report the blocked tag as an error
            page.add_script_tag(content="window.__pwned = 1")
    assert "inline script" in refused.value.text
    assert page.evaluate("typeof window.__pwned") == "undefined"

    # the label attack's markup, had it reached innerHTML: its handler runs nothing either
    with page.expect_console_message(lambda m: "inline event handler" in m.text, timeout=5000):
        page.evaluate(
            "document.body.insertAdjacentHTML('beforeend', '<img src=x onerror=\"window.__pwned = 2\">')"
        )
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert any(v.startswith("script-src") for v in tab.violations()), tab.violations()


def test_a_view_renders_in_chromium_under_its_policy(tab, server):
    page = tab.page
    answer = page.goto(f"{server}views/head?{walk_query()}")
    assert answer.status == 200
    page.wait_for_selector(".gfv > *", state="attached", timeout=15_000)
    assert page.evaluate("document.querySelector('.gfv').children.length") > 0
    assert tab.violations() == [] and tab.refusals() == [], (tab.violations(), tab.console)
    assert page.evaluate("window.origin") == "null"  # sandboxed: an origin of its own, no cookie


# 3. clickjacking ------------------------------------------------------------------------------
@contextlib.contextmanager
def decoy(framed: str) -> Iterator[str]:
    """Another site on this host: a page framing ``framed`` under a button, on a free port."""
    page = (
        "<!doctype html><html><head><title>win a prize</title></head><body>"
        '<button id="prize" style="position:absolute;top:120px;left:40px">claim</button>'
        f'<iframe id="frame" src="{framed}" width="900" height="600" style="opacity:0.5"></iframe>'
        "</body></html>"
    ).encode()

    class Decoy(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server calls
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args) -> None:
            pass

    with ThreadingHTTPServer((HOST, 0), Decoy) as evil:
        thread = threading.Thread(target=evil.serve_forever, name="decoy", daemon=True)
        thread.start()
        try:
            yield f"http://{HOST}:{evil.server_address[1]}/"
        finally:
            evil.shutdown()
            thread.join(10)


def test_another_local_port_cannot_frame_the_lab(browser, app, server, tmp_path):
    lab = f"{server}lab"
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{server}?login={app.state.login_link()}&{walk_query()}")  # logged in as the user is
        assert "login" not in page.url
        page.goto(lab)
        page.wait_for_selector("#lab-form", state="attached")  # the lab itself opens at top level
        answers: list[tuple[str, int]] = []
        page.on("response", lambda response: answers.append((response.url, response.status)))
        with decoy(lab) as evil:
            page.goto(evil, wait_until="load")  # the load waits for the frame, refused or not
            assert page.locator("#frame").count() == 1
            frames = page.frames
            assert len(frames) == 2, [f.url for f in frames]
            framed = frames[1]
            assert framed.url != lab, framed.url  # Chromium shows its error page, not the lab
            try:
                shown = framed.content()
            except Exception:  # a blocked frame's document may not be readable at all
                shown = ""
            assert "lab-form" not in shown and "training lab" not in shown, shown[:500]
            assert framed.query_selector("#start") is None
        assert (lab, 403) in answers, answers  # the guard refused the frame's request itself
    finally:
        context.close()


@pytest.mark.parametrize("dest", ["iframe", "frame", "embed", "object", "fencedframe"])
def test_a_page_asked_for_as_a_frame_is_403(script, dest):
    for path in ("/lab", "/", "/lessons", "/teach?model=tiny"):
        answer = script.get(path, headers={"Sec-Fetch-Dest": dest, "Sec-Fetch-Site": "same-site"})
        assert answer.status_code == 403, (path, answer.text[:200])
        assert "inside another page" in answer.json()["error"]
        assert answer.headers["x-frame-options"] == "DENY"


# 4. the model list holds no token --------------------------------------------------------------
def keys(value) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from keys(item)


def test_the_model_list_does_not_hold_the_token(script, token):
    answer = script.get("/api/models")
    assert answer.status_code == 200
    assert "token" not in set(keys(answer.json()))
    assert token not in answer.text and quote(token) not in answer.text


# 5. the teaching link --------------------------------------------------------------------------
def test_the_teaching_link_is_shown_to_a_navigation_only(script, token):
    query = walk_query(level="beginner", label=MARKUP, lock="0", token="not-it", login="old-code")
    shown = script.get(f"/teach?{query}", headers=NAVIGATION)
    assert shown.status_code == 200, shown.text[:300]
    link = html.unescape(re.search(r'id="teach-link"[^>]*value="([^"]*)"', shown.text)[1])
    assert f"token={token}" in link and "lock=1" in link and "level=beginner" in link
    assert link.count("token=") == 1 and "lock=0" not in link and "login=" not in link
    assert urlencode({"label": MARKUP}) in link  # the markup travels percent-encoded, as text
    assert "<img" not in shown.text and "onerror=" not in shown.text
    assert "cache-control" in shown.headers and "no-store" in shown.headers["cache-control"]
    for directive in PAGE_DIRECTIVES:
        assert directive in shown.headers["content-security-policy"]

    fetched = script.get(f"/teach?{query}", headers=SCRIPT_FETCH)  # what a script's fetch() sends
    assert fetched.status_code == 403 and token not in fetched.text
    no_cors = script.get(f"/teach?{query}", headers={**SCRIPT_FETCH, "Sec-Fetch-Mode": "no-cors"})
    assert no_cors.status_code == 403 and token not in no_cors.text
    elsewhere = script.get(f"/teach?{query}", headers={**NAVIGATION, "Sec-Fetch-Site": "cross-site"})
    assert elsewhere.status_code == 403 and token not in elsewhere.text  # a link from another site


def test_teach_this_in_chromium_lands_on_the_link(tab, server, token):
    page = tab.page
    page.goto(f"{server}?{walk_query(level='beginner')}")
    page.wait_for_selector(WALKED, state="attached")
    # a script on the workshop's own page cannot read the link
    status, body = page.evaluate(
        "fetch('teach?model=tiny&level=beginner').then(async (r) => [r.status, await r.text()])"
    )
    assert status == 403 and token not in body
    page.click("#teach")
    page.wait_for_url(re.compile(r"/teach\?"))
    link = page.input_value("#teach-link")
    assert f"token={token}" in link and "lock=1" in link and "model=tiny" in link
    assert page.get_attribute("#teach-open", "href") == link
    assert tab.violations() == [] and tab.refusals() == [], (tab.violations(), tab.console)


# 6. odd tokens and WebSockets ------------------------------------------------------------------
def test_a_non_ascii_token_is_403_never_500(server, port, anyone, token):
    cookie = f"glassformer-token-{port}=".encode()
    attempts = [
        ("/?token=%C3%A9", []),
        ("/api/models?token=%C3%A9", []),
        ("/api/models?token=%FF%FE", []),
        (f"/api/models?token={token}%C3%A9", []),
        ("/api/models", [("Authorization", "token é".encode())]),
        ("/api/models", [("Authorization", b"token \xe9")]),
        ("/api/models", [("Authorization", f"Bearer {token}é".encode())]),
        ("/api/models", [("Cookie", cookie + "é".encode())]),
        ("/api/models", [("Cookie", cookie + b"\xe9\xff")]),
        ("/", [("Cookie", cookie + "é".encode())]),
    ]
    for path, headers in attempts:
        status, _, body = raw_get(server, path, headers)
        assert status == 403, (path, headers, status, body[:300])
        assert b"Traceback" not in body and b"Internal Server Error" not in body
    assert "is not this workshop" in anyone.get("/", params={"token": "é"}).text


def test_websockets_are_refused(script, server, port, token):
    for path in ("/", "/api/lab/events", "/api/models"):
        with pytest.raises(WebSocketDisconnect) as closed:
            with script.websocket_connect(path, headers={"Cookie": f"glassformer-token-{port}={token}"}):
                pass
        assert closed.value.code == 1008
    upgrade = [
        ("Connection", b"Upgrade"),
        ("Upgrade", b"websocket"),
        ("Sec-WebSocket-Key", b"dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", b"13"),
        ("Cookie", f"glassformer-token-{port}={token}".encode()),
    ]
    status, headers, _ = raw_get(server, "/api/lab/events", upgrade)
    assert status != 101 and "sec-websocket-accept" not in headers, (status, headers)


# 7. the one-time login -------------------------------------------------------------------------
def test_a_login_code_works_once(app, anyone, port, token):
    code = app.state.login_link()
    first = anyone.get(f"/?login={code}&level=beginner")
    assert first.status_code == 303, first.text[:300]
    location = first.headers["location"]
    assert location == "/?level=beginner" and "login" not in location and token not in location
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"glassformer-token-{port}={token}") and "HttpOnly" in cookie
    assert "samesite=lax" in cookie.lower()
    again = anyone.get(f"/?login={code}&level=beginner")
    assert again.status_code == 403 and "needs its token" in again.text and "used already" in again.text
    assert "set-cookie" not in again.headers and token not in again.text
    anyone.cookies.clear()  # a fresh browser, given the link its history kept
    assert anyone.get(f"/?login={code}&level=beginner").status_code == 403
    assert anyone.get("/?login=made-up-code").status_code == 403
    assert anyone.get(f"/api/models?login={app.state.login_link()}").status_code == 403  # pages only


def test_chromium_history_keeps_no_token(browser, app, server, anyone, port, token, tmp_path):
    profile = tmp_path / "profile"
    code = app.state.login_link()
    context = browser.browser_type.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
    )
    try:
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(f"{server}?login={code}&{walk_query()}")
        page.wait_for_selector(WALKED, state="attached")
        assert page.get_attribute("body", "data-state") == "ready"  # logged in: the walk ran
        assert "login" not in page.url and token not in page.url
    finally:
        context.close()
    history = profile / "Default" / "History"
    assert history.exists(), sorted(p.name for p in (profile / "Default").iterdir())
    with contextlib.closing(sqlite3.connect(f"file:{history}?immutable=1", uri=True)) as db:
        urls = [url for (url,) in db.execute("select url from urls")]
    assert any(url.startswith(server) for url in urls), urls  # it did record the visit
    assert not [url for url in urls if token in url or quote(token) in url], urls
    for url in urls:  # what the history keeps opens nothing now
        if "login=" in url:
            assert anyone.get(url.removeprefix(server.rstrip("/"))).status_code == 403
    assert anyone.get(f"/?login={code}").status_code == 403
