"""A class's two links: the teacher's opens everything, the students' only what
`door/rights.py` opens to them, and every route of the app is in one of its columns."""

from __future__ import annotations

import re

import pytest
import torch
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

import glassformer as gf
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.door.rights import EVERYONE, RIGHTS, TEACHER, TEACHERS_ONLY, column
from glassformer.workshop.server import create_app
from tests.conftest import tiny

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
BASE = "http://127.0.0.1:8765"
TOKEN_COOKIE, STUDENT_COOKIE = "glassformer-token-8765", "glassformer-student-8765"


def char_lm() -> gf.LanguageModel:
    torch.manual_seed(0)
    return gf.LanguageModel(gf.build(tiny(vocab_size=len(ALPHABET))).eval(), CharTokenizer(ALPHABET))


@pytest.fixture
def app(tmp_path):
    return create_app({"tiny": char_lm()}, runs_root=tmp_path / "runs", classroom=True)


def as_teacher(app) -> TestClient:
    return TestClient(app, base_url=BASE, headers={"Authorization": f"token {app.state.token}"})


def as_student(app) -> TestClient:
    token = app.state.classroom.key.token
    return TestClient(app, base_url=BASE, headers={"Authorization": f"token {token}"})


def route_rows(app) -> set[str]:
    """Every route of ``app`` as the rights table writes it: "METHOD /path"."""
    rows = set()
    for route in app.routes:
        if isinstance(route, Mount):
            rows.add(f"GET {route.path}/{{path:path}}")
        else:
            assert isinstance(route, Route), route
            rows |= {f"{method} {route.path}" for method in route.methods - {"HEAD"}}
    return rows


def test_every_route_of_the_app_is_in_one_column_of_the_rights(app):
    unclassified = route_rows(app) - set(RIGHTS)
    assert not unclassified, f"put these in door/rights.py's RIGHTS (TEACHER or EVERYONE): {unclassified}"
    assert set(RIGHTS) <= route_rows(app), f"rows of no route: {set(RIGHTS) - route_rows(app)}"
    assert set(RIGHTS.values()) == {TEACHER, EVERYONE}


def test_the_table_matches_paths_with_their_parameters():
    assert column("POST", "/api/lessons/01-tokens/run") == TEACHER
    assert column("GET", "/api/lessons/01-tokens") == EVERYONE
    assert column("HEAD", "/static/viz/lines.js") == EVERYONE
    assert column("POST", "/api/class") == TEACHER and column("GET", "/api/class") == EVERYONE
    assert column("GET", "/api/lessons/a/b") is None  # one segment, not two
    assert column("DELETE", "/api/walk") is None


@pytest.mark.parametrize("row", [row for row, col in RIGHTS.items() if col == TEACHER])
def test_a_student_is_refused_the_teacher_s_routes(app, row):
    method, path = row.split(" ", 1)
    path = re.sub(r"\{[^}]*\}", "01-tokens", path)
    answer = as_student(app).request(method, path, json={} if method == "POST" else None)
    assert answer.status_code == 403, (row, answer.text)
    assert answer.json() == {"error": TEACHERS_ONLY}


def test_a_student_s_routes_work(app):
    student = as_student(app)
    assert student.get("/").status_code == 200
    assert [m["name"] for m in student.get("/api/models").json()["models"]] == ["tiny"]
    walk = student.post("/api/walk", json={"model": "tiny", "text": "the cat"})
    assert walk.status_code == 200, walk.text
    assert student.post("/api/tokens", json={"model": "tiny", "text": "the cat"}).status_code == 200
    generated = student.post("/api/generate", json={"model": "tiny", "text": "the", "max_new_tokens": 2})
    assert generated.status_code == 200 and "event:" in generated.text
    assert student.get("/api/lab").status_code == 200
    assert student.get("/api/lessons").status_code == 200
    state = student.get("/api/class").json()
    assert state["role"] == "student" and "links" not in state and "work" not in state


def test_the_students_link_sets_the_students_token_never_the_teacher_s(app):
    token = app.state.classroom.key.token
    browser = TestClient(app, base_url=BASE, follow_redirects=False)
    opened = browser.get(f"/?token={token}&level=advanced")
    assert opened.status_code == 303 and opened.headers["location"] == "/?level=advanced"
    assert app.state.token not in str(opened.headers)
    assert browser.cookies[TOKEN_COOKIE] == token
    browser_id = browser.cookies[STUDENT_COOKIE]
    assert re.fullmatch(r"[\w-]{16}", browser_id)
    state = browser.get("/api/class")
    assert state.json()["role"] == "student" and "set-cookie" not in state.headers  # the id is kept
    assert browser.post("/api/class", json={"step": 2}).status_code == 403


def test_a_login_code_stays_the_teacher_s(app):
    browser = TestClient(app, base_url=BASE, follow_redirects=False)
    assert browser.get(f"/?login={app.state.login_link()}").status_code == 303
    assert browser.cookies[TOKEN_COOKIE] == app.state.token
    assert STUDENT_COOKIE not in browser.cookies
    assert browser.get("/api/class").json()["role"] == "teacher"


def test_a_new_students_link_closes_the_old_link_and_cookie(app):
    old = app.state.classroom.key.token
    browser = TestClient(app, base_url=BASE, follow_redirects=False)
    browser.get(f"/?token={old}")
    teacher = as_teacher(app)
    new_link = teacher.post("/api/class/students", json={}).json()["students"]
    new = new_link.split("token=")[1]
    assert new != old and new_link.startswith(f"{BASE}/?lock=1&token=")
    assert browser.get("/api/class").status_code == 403  # the old cookie
    assert TestClient(app, base_url=BASE).get(f"/?token={old}").status_code == 403  # the old link
    assert teacher.get("/api/class").status_code == 200  # the teacher's still works
    fresh = TestClient(app, base_url=BASE, follow_redirects=False)
    assert fresh.get(f"/?token={new}").status_code == 303
    assert fresh.get("/api/class").json()["role"] == "student"


def test_without_a_class_every_request_is_the_teacher_s(tmp_path):
    app = create_app({"tiny": char_lm()}, runs_root=tmp_path / "runs")
    teacher = as_teacher(app)
    answer = teacher.get("/api/class")
    assert answer.status_code == 404
    assert answer.json() == {"error": "no class runs here: start the workshop with --class"}
    assert app.state.classroom is None


def test_a_class_s_teaching_link_holds_the_students_token(app):
    navigation = {"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    page = as_teacher(app).get("/teach?level=beginner", headers=navigation)
    assert page.status_code == 200
    assert f"token={app.state.classroom.key.token}" in page.text and app.state.token not in page.text
