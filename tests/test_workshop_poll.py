"""The class's poll, "what comes next?" (`classroom/poll.py`): opened on the class's text, each
student's guess mapped to the model's token and counted, one per client, the reveal drawn as
the library draws, the student's view hiding the distribution until then, the teacher's
routes closed to students, and its events on the class's stream."""

from __future__ import annotations

import contextlib
import http.client
import json
import urllib.request
from urllib.parse import urlsplit

import pytest
import torch
from starlette.testclient import TestClient

import glassformer as gf
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.classroom import poll as poll_module
from glassformer.workshop.door.rights import TEACHERS_ONLY
from glassformer.workshop.server import create_app
from tests.conftest import tiny
from tests.workshop_server import serving

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
BASE = "http://127.0.0.1:8765"
TOKEN_COOKIE, STUDENT_COOKIE = "glassformer-token-8765", "glassformer-student-8765"
TEXT = "the cat sat on the"
READ_TIMEOUT_S = 20


def char_lm() -> gf.LanguageModel:
    torch.manual_seed(0)
    return gf.LanguageModel(gf.build(tiny(vocab_size=len(ALPHABET))).eval(), CharTokenizer(ALPHABET))


@pytest.fixture
def app(tmp_path):
    app = create_app({"tiny": char_lm()}, runs_root=tmp_path / "runs", classroom=True)
    app.state.classroom.update({"text": TEXT})
    return app


@pytest.fixture
def fast(monkeypatch):
    """Guesses as often as a test sends them (the rate limit has a test of its own)."""
    monkeypatch.setattr(poll_module, "GUESS_EVERY_S", 0.0)


def teacher(app) -> TestClient:
    return TestClient(app, base_url=BASE, headers={"Authorization": f"token {app.state.token}"})


def student(app, n: int) -> TestClient:
    """A student's browser: the students' token as its cookie, its own id (as the guard sets it)."""
    cookies = {TOKEN_COOKIE: app.state.classroom.key.token, STUDENT_COOKIE: f"{n:016d}"}
    return TestClient(app, base_url=BASE, cookies=cookies)


def guess(client: TestClient, text: str):
    return client.post("/api/class/guess", json={"guess": text})


def test_a_poll_maps_guesses_to_tokens_and_counts_them_by_token(app, fast):
    lm = app.state.workshop.models["tiny"]
    opened = teacher(app).post("/api/class/poll", json={})
    assert opened.status_code == 200, opened.text
    poll = opened.json()
    assert poll["open"] and poll["question"] == TEXT and poll["answers"] == 0 and poll["revealed"] is None
    with torch.no_grad():
        probs = torch.softmax(lm.inputs.forward(lm.inputs.single(TEXT))[0, -1], dim=-1)
    top = torch.topk(probs, 10)
    assert [m["id"] for m in poll["model"]] == top.indices.tolist()
    assert [m["p"] for m in poll["model"]] == pytest.approx(top.values.tolist())
    assert [m["text"] for m in poll["model"]] == [ALPHABET[i] for i in top.indices.tolist()]

    # "mat" after "...the": read as "the mat" or "themat", the likelier wins (" " or "m")
    space, m = ALPHABET.index(" "), ALPHABET.index("m")
    mat = space if probs[space] > probs[m] else m
    for n, text in enumerate(["mat", "mat", "matter", " m", "猫"]):
        assert guess(student(app, n), text).status_code == 200
    view = teacher(app).get("/api/class/poll").json()
    assert view["answers"] == 5
    groups = {(g["token"], g["text"]): g for g in view["guesses"]}
    mapped = groups[(ALPHABET[mat], "mat")]
    assert mapped["id"] == mat and mapped["p"] == pytest.approx(float(probs[mat]))
    assert mapped["count"] == 3 + (mat == space)  # " m" is a space too when the space wins
    chinese = groups[(None, "猫")]  # a character the tokenizer lacks: no token, counted by its text
    assert chinese["count"] == 1 and chinese["id"] is None and chinese["p"] is None


def test_one_guess_per_client_a_new_one_replaces_it(app, fast):
    teacher(app).post("/api/class/poll", json={})
    ana = student(app, 1)
    assert guess(ana, "a").json()["yours"] == "a"
    assert guess(ana, "b").json() == {
        "open": True,
        "question": TEXT,
        "yours": "b",
        "answers": 1,
        "revealed": None,
    }  # the student's view: no distribution, no one else's guesses before the reveal
    assert [g["text"] for g in teacher(app).get("/api/class/poll").json()["guesses"]] == ["b"]
    assert guess(student(app, 2), "b").json()["answers"] == 2
    assert student(app, 3).get("/api/class/poll").json()["yours"] is None


def test_guesses_are_rate_limited_per_client(app):
    teacher(app).post("/api/class/poll", json={})
    assert guess(student(app, 1), "a").status_code == 200
    again = guess(student(app, 1), "b")
    assert again.status_code == 429 and "one guess a second" in again.json()["error"]
    assert guess(student(app, 2), "c").status_code == 200  # another student's is their own


def test_no_guess_without_a_poll_or_once_it_is_closed_or_revealed(app, fast):
    answer = guess(student(app, 1), "a")
    assert answer.status_code == 404 and "no poll" in answer.json()["error"]
    assert student(app, 1).get("/api/class/poll").status_code == 404
    teacher(app).post("/api/class/poll", json={})
    assert teacher(app).post("/api/class/poll/close", json={}).json()["open"] is False
    closed = guess(student(app, 1), "a")
    assert closed.status_code == 409 and "closed" in closed.json()["error"]
    teacher(app).post("/api/class/poll", json={})  # a new poll replaces the old: open again
    assert guess(student(app, 1), "a").status_code == 200
    assert teacher(app).post("/api/class/poll/reveal", json={}).status_code == 200
    revealed = guess(student(app, 1), "b")
    assert revealed.status_code == 409 and "revealed" in revealed.json()["error"]
    twice = teacher(app).post("/api/class/poll/reveal", json={})
    assert twice.status_code == 409


@pytest.mark.parametrize(
    ("body", "named"),
    [({}, "guess"), ({"guess": ""}, "guess"), ({"guess": "x" * 41}, "guess"), ({"guess": 3}, "guess")],
)
def test_a_bad_guess_is_refused_naming_the_field(app, body, named):
    teacher(app).post("/api/class/poll", json={})
    answer = student(app, 1).post("/api/class/guess", json=body)
    assert answer.status_code == 400 and named in answer.json()["error"]
    extra = student(app, 1).post("/api/class/guess", json={"guess": "a", "name": "Ana"})
    assert extra.status_code == 400 and "name" in extra.json()["error"]


@pytest.mark.parametrize(
    "sampling",
    [{}, {"temperature": 1.5, "seed": 7}, {"temperature": 0.9, "top_k": 5, "top_p": 0.8, "seed": 3}],
)
def test_the_reveal_draws_the_token_the_library_draws(app, fast, sampling):
    lm = app.state.workshop.models["tiny"]
    t = teacher(app)
    t.post("/api/class", json={"sampling": sampling})
    t.post("/api/class/poll", json={})
    assert guess(student(app, 1), "m").status_code == 200
    before = student(app, 1).get("/api/class/poll").json()
    assert "model" not in before and "guesses" not in before  # nothing of the distribution yet
    revealed = t.post("/api/class/poll/reveal", json={}).json()["revealed"]
    expected = lm.generate(TEXT, max_new_tokens=1, **(sampling or {"temperature": 0.0}))
    assert revealed["text"] == expected and revealed["id"] == ALPHABET.index(expected)
    after = student(app, 1).get("/api/class/poll").json()
    assert after["revealed"] == revealed and not after["open"] and len(after["model"]) == 10
    assert after["guesses"][0]["count"] == 1 and after["yours_token"]["text"] in ("m", " ")
    assert after["matched"] == (after["yours_token"]["id"] == revealed["id"])


def test_a_guess_is_plain_text_whatever_it_holds(app, fast):
    teacher(app).post("/api/class/poll", json={})
    guesses = ["<script>alert(1)</script>"[:40], "مرحبا", "🦊🎉", "\u202eabc"]
    for n, text in enumerate(guesses):
        assert guess(student(app, n), text).json()["yours"] == text
    answer = teacher(app).get("/api/class/poll")
    assert answer.headers["content-type"] == "application/json"
    assert sorted(g["text"] for g in answer.json()["guesses"]) == sorted(guesses)


def test_a_student_may_not_open_close_or_reveal(app):
    for path in ("/api/class/poll", "/api/class/poll/close", "/api/class/poll/reveal"):
        answer = student(app, 1).post(path, json={})
        assert answer.status_code == 403 and answer.json() == {"error": TEACHERS_ONLY}


def test_without_a_class_the_poll_says_how_to_start_one(tmp_path):
    app = create_app({"tiny": char_lm()}, runs_root=tmp_path / "runs")
    answer = teacher(app).post("/api/class/poll", json={})
    assert answer.status_code == 404 and "--class" in answer.json()["error"]


def test_an_empty_text_is_refused(app):
    app.state.classroom.update({"text": ""})
    answer = teacher(app).post("/api/class/poll", json={})
    assert answer.status_code == 400 and "empty" in answer.json()["error"]


def post(url: str, token: str, path: str, body: dict) -> dict:
    """POST ``body`` to the served workshop at ``url`` as ``token``'s holder: the answer."""
    request = urllib.request.Request(
        url.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=READ_TIMEOUT_S) as answer:
        return json.loads(answer.read())


@contextlib.contextmanager
def stream(url: str, token: str):
    """GET /api/class/events as a student's script; yields a function reading the next event."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READ_TIMEOUT_S)
    connection.request("GET", "/api/class/events?following=1", headers={"Authorization": f"token {token}"})
    response = connection.getresponse()
    assert response.status == 200

    def next_event() -> tuple[str, dict]:
        name, data = "", ""
        while True:
            line = response.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif not line and name:
                return name, json.loads(data)

    try:
        yield next_event
    finally:
        connection.close()


def test_each_change_of_the_poll_is_an_event_on_the_class_s_stream(app, fast):
    with serving(app) as url, stream(url, app.state.classroom.key.token) as next_event:
        assert next_event()[0] == "class"
        post(url, app.state.token, "/api/class/poll", {})
        assert next_event() == ("poll", {"open": True, "answers": 0, "revealed": None})
        post(url, app.state.classroom.key.token, "/api/class/guess", {"guess": "a"})
        assert next_event() == ("poll", {"open": True, "answers": 1, "revealed": None})
        revealed = post(url, app.state.token, "/api/class/poll/reveal", {})["revealed"]
        assert next_event() == ("poll", {"open": False, "answers": 1, "revealed": revealed})
