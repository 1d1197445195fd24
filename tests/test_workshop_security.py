"""Each attack of issue 18, replayed against the workshop and refused: no process started,
nothing written, no 500.

Another site's page could drive the workshop (a cross-site form, ``text/plain`` or
``Origin: http://evil.example`` POST; an ``<img>`` GET of a view; DNS rebinding through
``Host: evil.example``), one small request could exhaust the machine (quadratic tokenizer
accounts, walks and views of thousands of tokens, explanations running minutes after their
page left), and odd bodies made 500s. Here the token, the Host and origin checks, JSON-only
bodies, the typed requests and the work limits answer each.
"""

from __future__ import annotations

import http.client
import json
import time

import pytest
from starlette.testclient import TestClient

from glassformer.workshop.door import limits
from glassformer.workshop.door.http import MAX_BODY_BYTES
from glassformer.workshop.server import create_app
from tests.test_workshop_api import TEXT, char_lm
from tests.workshop_server import auth, serving

TOKEN = "a-class-token-2026"
BASE = "http://127.0.0.1:8765"
EVIL = "http://evil.example"
JSON_ROUTES = [
    "/api/walk",
    "/api/stage",
    "/api/lens",
    "/api/tokens",
    "/api/similarity",
    "/api/explain",
    "/api/generate",
    "/api/attention_change",
    "/api/lab/open",
    "/api/lab/estimate",
    "/api/lab/start",
    "/api/lab/continue",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def lm():
    return char_lm()


@pytest.fixture(scope="module")
def app(lm, runs):
    return create_app({"tiny": lm}, runs_root=runs, token=TOKEN)


@pytest.fixture(scope="module")
def anyone(app):
    """A client with no token: another site's page, or a stranger's script."""
    return TestClient(app, base_url=BASE, follow_redirects=False)


@pytest.fixture(scope="module")
def script(app):
    return TestClient(app, base_url=BASE, headers={"Authorization": f"token {TOKEN}"})


def browser_headers(origin: str = EVIL, site: str = "cross-site") -> dict[str, str]:
    """What Chromium sends with a request another site's page makes, carrying the cookie as if
    it could (SameSite=Lax keeps it from doing so: each check must hold on its own)."""
    return {"Origin": origin, "Sec-Fetch-Site": site, "Cookie": f"glassformer-token-8765={TOKEN}"}


def nothing_started(script, runs) -> None:
    assert script.get("/api/lab").json()["state"]["status"] == "idle"
    assert list(runs.iterdir()) == []


# only its own page ----------------------------------------------------------------------------
def test_a_cross_site_page_cannot_start_stop_or_run_anything(anyone, script, runs):
    start = {"preset": "induction", "fields": {"train.steps": 40}}
    for headers in (browser_headers(), {"Origin": EVIL}, {"Sec-Fetch-Site": "cross-site"}):
        headers = {**headers, "Authorization": f"token {TOKEN}"}  # even with the token
        assert anyone.post("/api/lab/start", json=start, headers=headers).status_code == 403
        assert anyone.post("/api/lab/stop", json={}, headers=headers).status_code == 403
        assert anyone.post("/api/lessons/01/run", json={}, headers=headers).status_code == 403
    answer = anyone.post(
        "/api/lab/start", json=start, headers=browser_headers("http://127.0.0.1:9999", "same-site")
    )
    assert answer.status_code == 403 and "another site" in answer.json()["error"]  # another local port
    nothing_started(script, runs)


@pytest.mark.parametrize(
    "kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_bodies_must_be_json(script, runs, kind):
    """A form or text/plain POST is what a browser sends cross-site without asking first."""
    headers = {} if kind is None else {"Content-Type": kind}
    body = b'{"preset": "induction", "fields": {"train.steps": 40}}'
    answer = script.post("/api/lab/start", content=body, headers=headers)
    assert answer.status_code == 415 and "application/json" in answer.json()["error"]
    nothing_started(script, runs)


def test_a_rebound_host_is_refused(script):
    for host in ("evil.example:8765", "evil.example", "127.0.0.1.nip.io:8765", "localhost.evil:8765"):
        answer = script.get("/api/models", headers={"Host": host})
        assert answer.status_code == 403 and "answers only as" in answer.json()["error"]
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "LOCALHOST"):
        assert script.get("/api/models", headers={"Host": host}).status_code == 200


def test_the_token_is_needed_and_opening_the_printed_link_sets_it(anyone):
    assert anyone.get("/api/models").status_code == 403
    assert anyone.get("/api/models", headers={"Authorization": "token wrong-token"}).status_code == 403
    assert anyone.get("/api/models", headers={"Authorization": f"token {TOKEN}"}).status_code == 200
    assert anyone.get("/api/models", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    page = anyone.get("/?level=beginner")
    assert page.status_code == 403 and "<form" in page.text and "needs its token" in page.text
    assert '<input type="hidden" name="level" value="beginner">' in page.text  # kept when the token is typed
    assert "is not this workshop" in anyone.get("/?token=guessed-token").text
    opened = anyone.get(f"/?token={TOKEN}&level=beginner&lock=1")
    assert opened.status_code == 303 and opened.headers["location"] == "/?level=beginner&lock=1"
    cookie = opened.headers["set-cookie"]
    assert (
        cookie.startswith(f"glassformer-token-8765={TOKEN}")
        and "HttpOnly" in cookie
        and "SameSite=lax" in cookie
    )
    same_page = {"Cookie": f"glassformer-token-8765={TOKEN}", "Sec-Fetch-Site": "same-origin"}
    assert anyone.get("/api/models", headers=same_page).status_code == 200
    assert (
        anyone.get("/api/models", headers={"Cookie": "glassformer-token-8765=old-launch"}).status_code == 403
    )
    # a link from a course's notes opens the page (a navigation), never an API route or a view
    assert anyone.get("/lab", headers=browser_headers()).status_code == 200
    assert anyone.get("/api/lab", headers=browser_headers()).status_code == 403


def test_an_img_tag_on_another_site_cannot_draw_a_view(anyone):
    query = {"model": "tiny", "text": "abc"}
    answer = anyone.get("/views/head", params=query, headers=browser_headers())
    assert answer.status_code == 403
    same_page = {"Cookie": f"glassformer-token-8765={TOKEN}", "Sec-Fetch-Site": "same-origin"}
    assert anyone.get("/views/head", params=query, headers=same_page).status_code == 200


def test_a_preflight_from_another_site_gets_no_cors(anyone):
    answer = anyone.options("/api/walk", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
    assert answer.status_code == 403 and "access-control-allow-origin" not in answer.headers


# typed requests -------------------------------------------------------------------------------
def test_a_huge_body_is_refused_before_it_is_read(script):
    big = b'{"model": "tiny", "text": "' + b"a" * (MAX_BODY_BYTES + 1) + b'"}'
    answer = script.post("/api/walk", content=big, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and "at most" in answer.json()["error"]

    def chunks():  # no Content-Length: counted while it arrives
        yield b'{"model": "tiny", "text": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"a" * 65536
        yield b'"}'

    answer = script.post("/api/walk", content=chunks(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413


@pytest.mark.parametrize("route", JSON_ROUTES)
def test_odd_bodies_are_400_on_every_route(script, runs, route):
    deep = b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    bodies = [deep, b"{}", b'{"model": []}', b"[]", b"null", b'"text"', b"{not json", b"\xff\xfe"]
    for body in bodies:
        answer = script.post(route, content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, (body[:20], answer.text)
        assert answer.json()["error"]
    nothing_started(script, runs)


@pytest.mark.parametrize(
    ("route", "body", "message"),
    [
        ("/api/lab/continue", {"run": "r" * 100_000}, "run: string should have at most 100 characters"),
        ("/api/lab/open", {"run": "../etc"}, "run: must be the name of a run under the runs folder"),
        (
            "/api/lab/start",
            {"preset": "induction", "fields": []},
            "fields: input should be an object",
        ),
        (
            "/api/walk",
            {"model": "tiny", "text": TEXT, "top_k": 1e400},
            "top_k: input should be a valid integer",
        ),
        (
            "/api/walk",
            {"model": "tiny", "text": TEXT, "temperature": 1e400},
            "temperature: input should be a finite",
        ),
        ("/api/walk", {"model": "tiny", "text": TEXT, "repetition_penalty": 1e-300}, "repetition_penalty"),
        ("/api/generate", {"model": "tiny", "text": TEXT, "seed": 2**64}, "seed: input should be less than"),
        ("/api/generate", {"model": "tiny", "text": TEXT, "seed": -1}, "seed: input should be greater than"),
        ("/api/walk", {"model": "tiny", "text": TEXT, "generated": [2**70]}, "generated.0"),
        ("/api/explain", {"model": "tiny", "text": TEXT, "method": "lime", "samples": 10**6}, "samples"),
    ],
)
def test_out_of_range_fields_are_400_with_the_field_named(script, runs, route, body, message):
    answer = script.post(route, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and message in answer.json()["error"], answer.text
    nothing_started(script, runs)


# work limits ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "route", "body"),
    [
        ("post", "/api/walk", {"text": "a" * 5000}),
        ("post", "/api/stage", {"text": "a" * 5000, "name": "blocks.0.attn.pattern"}),
        (
            "post",
            "/api/walk",
            {
                "text": "a",
                "interventions": [{"layer": 0, "head": 0, "mode": "patch"}],
                "patch_text": "a" * 5000,
            },
        ),
        ("post", "/api/similarity", {"text": "a" * 5000, "other": "b"}),
        ("post", "/api/lens", {"text": "a" * 5000}),
        ("post", "/api/tokens", {"text": "a" * 9000}),
        ("post", "/api/explain", {"text": "a" * 100, "method": "lime"}),
        ("post", "/api/generate", {"text": "a" * 4000, "max_new_tokens": 512}),
        ("get", "/views/head", {"text": "a" * 2000}),
    ],
)
def test_inputs_past_a_routes_work_limit_are_413_before_any_work(script, method, route, body):
    payload = {"model": "tiny", **body}
    if method == "get":
        answer = script.get(route, params=payload)
    else:
        answer = script.post(route, json=payload)
    assert answer.status_code == 413, answer.text
    assert "on this machine" in answer.json()["error"] and "tokens" in answer.json()["error"]


def test_the_limits_follow_the_model_s_sizes():
    import glassformer as gf

    small = gf.ModelConfig(vocab_size=256, d_model=32, n_layers=2, n_heads=2, max_seq_len=8192)
    big = gf.ModelConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, max_seq_len=8192)
    assert limits.max_tokens(small, "walk") == limits.CAPS["pass"]
    assert 1000 < limits.max_tokens(big, "walk") < limits.CAPS["pass"]  # SmolLM2's sizes
    assert limits.max_tokens(big, "views") < limits.max_tokens(big, "walk")
    t = limits.max_tokens(big, "walk")
    within = limits.ATTENTION_COPIES * 9 * t * t + limits.LOGIT_COPIES * 49152 * t
    assert within * limits.FLOAT <= limits.WORK_BYTES


def test_work_past_its_time_is_stopped_and_frees_the_model(lm, script, monkeypatch):
    monkeypatch.setitem(limits.SECONDS, "explain", 0.3)

    def slow(x, name):
        time.sleep(0.02)

    with lm.net.hooks({"logits": slow}):
        started = time.monotonic()
        answer = script.post(
            "/api/explain",
            json={"model": "tiny", "text": TEXT, "method": "lime", "samples": 1000, "keep_first": True},
        )
        took = time.monotonic() - started
    assert answer.status_code == 503 and "took longer than 0.3 s" in answer.json()["error"]
    assert took < 5  # 1,000 samples at 20 ms a pass would be 20 s
    assert script.post("/api/walk", json={"model": "tiny", "text": TEXT}).status_code == 200


def test_work_stops_when_its_page_leaves(runs):
    """An explanation whose client closed the connection stops within a pass, and the next
    request does not wait behind it."""
    lm = char_lm()
    passes: list[float] = []

    def slow(x, name):  # 30 ms a pass: LIME's 1,000 samples would hold the model for ~30 s
        passes.append(time.monotonic())
        time.sleep(0.03)

    app = create_app({"tiny": lm}, runs_root=runs, token=TOKEN)
    with serving(app) as url, lm.net.hooks({"logits": slow}):
        host, port = url.split("//")[1].rstrip("/").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        body = json.dumps(
            {"model": "tiny", "text": TEXT, "method": "lime", "samples": 1000, "keep_first": True}
        )
        connection.request("POST", "/api/explain", body, {"Content-Type": "application/json", **auth(url)})
        deadline = time.monotonic() + 10
        while not passes and time.monotonic() < deadline:
            time.sleep(0.05)
        connection.close()  # the page went away
        time.sleep(1.0)
        made = len(passes)
        time.sleep(1.0)
        assert 0 < made == len(passes)  # no pass after it stopped
        walk = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {"Content-Type": "application/json", **auth(url)}
        started = time.monotonic()
        walk.request("POST", "/api/walk", json.dumps({"model": "tiny", "text": TEXT}), headers)
        assert walk.getresponse().status == 200 and time.monotonic() - started < 5
        walk.close()


def test_a_temperature_too_small_to_divide_by_is_400(script):
    """Found by the fuzz test: 2.2e-311 made every score inf, and the draw a 500."""
    for route in ("/api/generate", "/api/walk"):
        body = {"model": "tiny", "text": TEXT, "temperature": 2.225073858507e-311, "max_new_tokens": 1}
        if route == "/api/walk":
            del body["max_new_tokens"]
        answer = script.post(route, json=body)
        assert answer.status_code == 400 and "too small to divide the scores by" in answer.json()["error"]
