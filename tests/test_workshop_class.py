"""A class on one server: its state (GET / POST /api/class), its events over a real server
(the state on connect, one event per change, Last-Event-ID, presence, the end), its QR code."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
from urllib.parse import urlsplit

import pytest
import torch
from starlette.testclient import TestClient

import glassformer as gf
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.door.request_types import MAX_TEXT_CHARS
from glassformer.workshop.server import create_app
from tests.conftest import tiny
from tests.workshop_server import serving

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
BASE = "http://127.0.0.1:8765"
READ_TIMEOUT_S = 20  # an event that does not come within this fails the test (never a timing assert)
KEYS = {"model", "text", "level", "step", "stage", "zoom", "panel", "sampling", "version", "role", "students"}


def char_lm() -> gf.LanguageModel:
    torch.manual_seed(0)
    return gf.LanguageModel(gf.build(tiny(vocab_size=len(ALPHABET))).eval(), CharTokenizer(ALPHABET))


@pytest.fixture
def app(tmp_path):
    return create_app({"tiny": char_lm(), "other": char_lm()}, runs_root=tmp_path / "runs", classroom=True)


def client(app, token: str) -> TestClient:
    return TestClient(app, base_url=BASE, headers={"Authorization": f"token {token}"})


def test_the_state_as_each_role_reads_it(app):
    teacher = client(app, app.state.token).get("/api/class").json()
    assert set(teacher) == KEYS | {"links", "work"} or set(teacher) == KEYS | {"links"}
    assert teacher["model"] == "tiny" and teacher["level"] == "beginner" and teacher["step"] == 1
    assert teacher["stage"] is None and teacher["sampling"] == {} and teacher["role"] == "teacher"
    assert teacher["students"] == {"connected": 0, "following": 0}
    assert teacher["links"]["students"] == f"{BASE}/?lock=1&token={app.state.classroom.key.token}"
    student = client(app, app.state.classroom.key.token).get("/api/class").json()
    assert set(student) == KEYS and student["role"] == "student"
    assert client(app, app.state.token).get("/api/class?x=1").status_code == 400  # no query taken


def test_the_teacher_changes_the_class_and_each_change_is_a_version(app):
    teacher = client(app, app.state.token)
    change = {"model": "other", "text": "the cat", "level": "advanced", "step": 3, "stage": "blocks.0.attn"}
    state = teacher.post("/api/class", json={**change, "sampling": {"temperature": 0.5, "seed": 7}}).json()
    assert {key: state[key] for key in change} == change and state["version"] == 2
    assert state["sampling"] == {"temperature": 0.5, "seed": 7}
    assert teacher.post("/api/class", json={"stage": None}).json()["stage"] is None
    assert teacher.post("/api/class", json={"stage": None}).json()["version"] == 3  # no change, no version
    assert teacher.post("/api/class", json={"zoom": "blocks.1", "panel": "lens"}).json()["version"] == 4


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"colour": "red"}, "unknown field 'colour'"),
        ({"level": "expert"}, "level"),
        ({"step": 0}, "step"),
        ({"model": None}, "model"),
        ({"model": "gpt-9"}, "model: no model 'gpt-9'"),
        ({"text": "x" * (MAX_TEXT_CHARS + 1)}, "text"),
        ({"sampling": {"top_p": 2}}, "sampling.top_p"),
        ({"sampling": {"repetition_penalty": 2}}, "unknown field 'sampling.repetition_penalty'"),
        ({"step": "2"}, "step"),
    ],
)
def test_a_bad_change_is_refused_naming_what_was_wrong(app, body, named):
    answer = client(app, app.state.token).post("/api/class", json=body)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["error"]
    assert client(app, app.state.token).get("/api/class").json()["version"] == 1


def test_a_student_cannot_change_the_class(app):
    student = client(app, app.state.classroom.key.token)
    answer = student.post("/api/class", json={"step": 2})
    assert answer.status_code == 403 and answer.json() == {"error": "this needs the teacher's link"}
    assert student.post("/api/class/end", json={}).status_code == 403
    assert student.get("/api/class/qr.svg").status_code == 403


def test_the_qr_code_is_an_svg_with_no_script(app):
    answer = client(app, app.state.token).get("/api/class/qr.svg")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("image/svg+xml")
    assert answer.text.startswith("<svg") and "<path" in answer.text
    assert not re.search(r"<script|javascript:|\bon\w+=|<foreignObject", answer.text, re.I)
    assert app.state.classroom.key.token not in answer.text  # the link is in its modules, not its markup
    assert client(app, app.state.token).get("/api/class/qr.svg?at=1700000000").status_code == 200
    assert client(app, app.state.token).get("/api/class/qr.svg?size=9").status_code == 400


def test_an_ended_class_answers_404_and_its_students_are_out(app):
    teacher, student = client(app, app.state.token), client(app, app.state.classroom.key.token)
    assert teacher.post("/api/class/end", json={}).json() == {"ended": True}
    assert student.get("/api/models").status_code == 403
    answer = teacher.get("/api/class")
    assert answer.status_code == 404 and "ended" in answer.json()["error"]
    assert teacher.get("/api/models").status_code == 200


class Events:
    """One page's event stream, read over a real connection."""

    def __init__(self, url: str, token: str, following: int = 0, last_id: int | None = None):
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READ_TIMEOUT_S)
        headers = {"Authorization": f"token {token}"}
        if last_id is not None:
            headers["Last-Event-ID"] = str(last_id)
        self.connection.request("GET", f"/api/class/events?following={following}", headers=headers)
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()
        assert self.response.getheader("content-type").startswith("text/event-stream")

    def next(self) -> tuple[str, dict, int | None]:
        """The next event: (name, data, id); comments skipped; EOFError when the stream ends."""
        fields: dict[str, str] = {}
        while True:
            line = self.response.readline()
            if not line:
                raise EOFError("the stream ended")
            line = line.decode().rstrip("\n")
            if not line:
                if fields:
                    version = int(fields["id"]) if "id" in fields else None
                    return fields["event"], json.loads(fields["data"]), version
                continue
            if not line.startswith(":"):
                key, _, value = line.partition(": ")
                fields[key] = value

    def close(self) -> None:
        self.connection.close()


@pytest.fixture
def served(app):
    opened: list[Events] = []

    def events(*args, **kwargs) -> Events:
        opened.append(Events(*args, **kwargs))
        return opened[-1]

    with serving(app) as url:
        try:
            yield url, events
        finally:
            for stream in opened:
                stream.close()
            app.state.stop_work()  # the streams end with the server


def post(url: str, token: str, path: str, body: dict) -> dict:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=READ_TIMEOUT_S)
    with contextlib.closing(connection):
        headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
        connection.request("POST", path, json.dumps(body), headers)
        answer = connection.getresponse()
        assert answer.status == 200, answer.read()
        return json.loads(answer.read())


def test_a_page_gets_the_state_then_one_event_per_change(app, served):
    url, events = served
    students = app.state.classroom.key.token
    stream = events(url, students, following=1)
    name, state, version = stream.next()
    assert name == "class" and version == 1 and state["version"] == 1 and set(state) == KEYS
    assert state["role"] == "student"
    for step in (2, 3, 4):
        post(url, app.state.token, "/api/class", {"step": step})
    seen = [stream.next() for _ in range(3)]
    assert [(name, data["step"], version) for name, data, version in seen] == [
        ("class", 2, 2),
        ("class", 3, 3),
        ("class", 4, 4),
    ]


def test_a_page_that_reconnects_gets_nothing_old(app, served):
    url, events = served
    post(url, app.state.token, "/api/class", {"text": "the dog"})  # version 2
    stream = events(url, app.state.classroom.key.token, last_id=2)
    post(url, app.state.token, "/api/class", {"level": "intermediate"})
    name, state, version = stream.next()
    assert (name, version, state["level"], state["text"]) == ("class", 3, "intermediate", "the dog")
    behind = events(url, app.state.classroom.key.token, last_id=2)  # one change behind: just that one
    assert [behind.next()[2]] == [3]


def test_the_teacher_s_stream_counts_who_follows(app, served):
    url, events = served
    teacher = events(url, app.state.token)
    assert teacher.next()[0] == "class"
    assert teacher.next()[:2] == ("presence", {"connected": 0, "following": 0})
    students = app.state.classroom.key.token
    first = events(url, students, following=1)
    assert teacher.next()[:2] == ("presence", {"connected": 1, "following": 1})
    events(url, students, following=0)
    assert teacher.next()[:2] == ("presence", {"connected": 2, "following": 1})
    first.close()  # a page leaves: seen within a poll
    assert teacher.next()[:2] == ("presence", {"connected": 1, "following": 0})


def test_the_end_closes_every_stream(app, served):
    url, events = served
    teacher = events(url, app.state.token)
    student = events(url, app.state.classroom.key.token, following=1)
    post(url, app.state.token, "/api/class/end", {})
    for stream in (teacher, student):
        names = []
        with pytest.raises(EOFError):
            while True:
                names.append(stream.next()[0])
        assert names[-1] == "end" and "end" not in names[:-1]


def test_a_new_students_link_closes_the_old_link_s_streams(app, served):
    url, events = served
    student = events(url, app.state.classroom.key.token)
    assert student.next()[0] == "class"
    post(url, app.state.token, "/api/class/students", {})
    with pytest.raises(EOFError):
        student.next()


def test_the_class_s_walk_prepares_its_lens_for_the_followers_and_no_other_walk_does(app):
    teacher = {"Authorization": f"token {app.state.token}"}
    student = {"Authorization": f"token {app.state.classroom.key.token}"}
    work = app.state.workshop.work
    with TestClient(app, base_url=BASE) as page:  # one event loop: the prepared lens runs on in it
        assert page.post("/api/class", json={"text": "the cat sat."}, headers=teacher).status_code == 200

        def asked(path: str, text: str) -> tuple[int, int]:
            body = {"model": "tiny", "text": text}
            assert page.post(path, json=body, headers=student).status_code == 200
            return work.misses, work.hits

        assert asked("/api/walk", "the cat sat.") == (2, 0)  # its walk, and its lens prepared
        assert asked("/api/lens", "the cat sat.") == (2, 1)  # the follower's lens: the prepared one
        assert asked("/api/walk", "a dog") == (3, 1)  # a student's own prompt: no lens it did not ask for
        assert asked("/api/lens", "a dog") == (4, 1)
