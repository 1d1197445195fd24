"""``glassformer workshop --class`` as a teacher runs it (the server itself not started): the
teacher's and the students' links, the QR code, what each link allows beyond this machine,
and links that open what they say."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
import torch
from starlette.testclient import TestClient

import glassformer as gf
import glassformer.commands.workshop as command
from glassformer.cli import build_parser
from glassformer.tokenizers.char import CharTokenizer
from tests.conftest import tiny

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"


@pytest.fixture
def started(monkeypatch, tmp_path):
    """Run the command with ``argv`` on a tiny model; what it printed and the app it would serve."""
    torch.manual_seed(0)
    lm = gf.LanguageModel(gf.build(tiny(vocab_size=len(ALPHABET))).eval(), CharTokenizer(ALPHABET))
    served = {}
    monkeypatch.chdir(tmp_path)  # the lab's runs/ is the working directory's
    monkeypatch.setattr(command, "load_models", lambda named: {"tiny": lm})
    monkeypatch.setattr(
        command, "serve", lambda app, host, port: served.update(app=app, host=host, port=port)
    )
    monkeypatch.delenv(command.TOKEN_VARIABLE, raising=False)

    def start(*argv: str):
        args = build_parser().parse_args(["workshop", "--no-browser", *argv])
        assert args.handler(args) == 0
        return served["app"]

    return start


def printed_line(out: str, start: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith(start)]
    assert len(lines) == 1, out
    return lines[0][len(start) :]


def test_class_prints_both_links_and_the_qr_code(started, capsys):
    app = started("--class", "--port", "8799", "--token", "class-teacher-token")
    out = capsys.readouterr().out
    assert "the workshop is at http://127.0.0.1:8799/?login=" in out  # what it printed before stays
    teacher = printed_line(out, "teacher: ")
    students = printed_line(out, "students: ")
    assert re.fullmatch(r"http://127\.0\.0\.1:8799/\?login=[\w-]+", teacher)
    assert students == f"http://127.0.0.1:8799/?lock=1&token={app.state.classroom.key.token}"
    assert "class-teacher-token" not in students
    assert re.search(r"[█▀▄]{20,}", out)  # the QR code
    assert "allows" not in out  # on this machine only: nothing exposed to say

    browser = TestClient(app, base_url="http://127.0.0.1:8799", follow_redirects=False)
    assert browser.get(urlsplit(teacher)._replace(scheme="", netloc="").geturl()).status_code == 303
    assert browser.cookies["glassformer-token-8799"] == "class-teacher-token"
    student = TestClient(app, base_url="http://127.0.0.1:8799", follow_redirects=False)
    assert student.get(urlsplit(students)._replace(scheme="", netloc="").geturl()).status_code == 303
    assert student.cookies["glassformer-token-8799"] == app.state.classroom.key.token
    assert student.get("/api/class").json()["role"] == "student"
    assert student.post("/api/lab/stop", json={}).status_code == 403


def test_class_on_every_interface_says_what_each_link_allows(started, capsys):
    app = started("--class", "--host", "0.0.0.0", "--port", "8798")
    captured = capsys.readouterr()
    students = printed_line(captured.out, "students: ")
    assert students == f"{app.state.classroom.address}?lock=1&token={app.state.classroom.key.token}"
    assert app.state.classroom.address == f"http://{command.network_address()}:8798/"
    allows = [line for line in captured.out.splitlines() if "allows" in line]
    assert len(allows) == 2
    assert "teacher" in allows[0] and "everything" in allows[0]
    assert "students" in allows[1] and "not the lab's runs, lessons' code, models or the class" in allows[1]
    assert "Anyone who has the token" in captured.err  # the exposure warning stays


def test_without_class_no_class_runs(started, capsys):
    app = started("--port", "8797")
    out = capsys.readouterr().out
    assert app.state.classroom is None
    assert "students: " not in out and "teacher: " not in out


def test_help_explains_class(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["workshop", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--class" in help_text and "students' link" in help_text and "QR" in help_text
