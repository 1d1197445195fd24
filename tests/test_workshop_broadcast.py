"""A class served by two worker processes through a real Redis (``--broadcast``,
`glassformer/workshop/classroom/broadcast.py`): a change posted to one reaches the students
on both, a new students' link made on one closes the old on the other, the teacher sees the
students of both, a guess sent to one counts in the poll the other shows, a walk computed on
one is served from Redis by the other, and the end reaches both.

A `redis-server` is started on a free port in a tmp dir (no save, no append-only file) and
two workers (`tests/broadcast_worker.py`) beside it; all three are stopped at the end. Skipped
only where no `redis-server` is installed (``make setup-test`` installs it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glassformer.commands import workshop as command
from tests.workshop_server import free_port

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "teacher-token-of-the-test"
TEXT = "the cat sat on the"
START_S = 90.0  # two workers importing torch on a busy machine
EVENTUALLY_S = 15.0  # what travels through Redis arrives within this (in ms, usually)
READ_TIMEOUT_S = 30.0
REDIS = shutil.which("redis-server")


def call(port: int, method: str, path: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    """``method`` ``path`` on the worker at ``port`` with ``token``: (status, JSON answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=READ_TIMEOUT_S)
    headers = {"Authorization": f"token {token}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        connection.close()


def eventually(check, what: str):
    """``check()`` until it answers something true (within `EVENTUALLY_S`)."""
    deadline = time.monotonic() + EVENTUALLY_S
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {EVENTUALLY_S:g} s")
        time.sleep(0.05)


class Events:
    """A student's (or the teacher's) event stream of the class on one worker."""

    def __init__(self, port: int, token: str, following: int = 1) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=READ_TIMEOUT_S)
        path = f"/api/class/events?following={following}"
        self.connection.request("GET", path, headers={"Authorization": f"token {token}"})
        self.response = self.connection.getresponse()
        assert self.response.status == 200, self.response.read()

    def next(self, wanted: str = "class") -> dict:
        """The next event named ``wanted`` (others skipped): its data."""
        name, data = "", ""
        while True:
            line = self.response.readline().decode()
            if not line:
                raise AssertionError("the stream closed")
            line = line.rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif not line and name:
                if name == wanted:
                    return json.loads(data)
                name, data = "", ""

    def close(self) -> None:
        self.connection.close()


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """A redis-server and two workers of one class: yields their ports (A, B)."""
    if REDIS is None:
        pytest.skip("no redis-server installed (make setup-test installs it: apt-get install redis-server)")
    tmp = tmp_path_factory.mktemp("broadcast")
    redis_port, ports = free_port(), (free_port(), free_port())
    server = subprocess.Popen(
        [REDIS, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{redis_port}/0"
    processes = []
    try:
        eventually(lambda: _answers(redis_port), "redis-server starting")
        for port in ports:
            log = (tmp / f"worker-{port}.log").open("w")
            argv = [sys.executable, "-m", "tests.broadcast_worker", str(port), TOKEN, url, str(tmp / "runs")]
            processes.append(subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + START_S
        for port, process in zip(ports, processes, strict=True):
            while not _serving(port):
                assert process.poll() is None, (tmp / f"worker-{port}.log").read_text()
                assert time.monotonic() < deadline, f"the worker on {port} did not start in {START_S:g} s"
                time.sleep(0.2)
        yield ports
    finally:
        for process in [*processes, server]:
            process.terminate()
        for process in [*processes, server]:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _answers(port: int) -> bool:
    import redis

    try:
        return redis.Redis(port=port, socket_connect_timeout=1).ping()
    except redis.RedisError:
        return False


def _serving(port: int) -> bool:
    try:
        return call(port, "GET", "/api/class", TOKEN)[0] == 200
    except OSError:
        return False


def students_token(port: int) -> str:
    """The students' token, as the teacher's state on ``port`` links it."""
    link = call(port, "GET", "/api/class", TOKEN)[1]["links"]["students"]
    return link.rsplit("token=", 1)[1]


def test_a_change_posted_to_one_worker_reaches_the_students_of_both(workers):
    a, b = workers
    token = students_token(a)
    assert students_token(b) == token  # one class: one students' token
    on_a, on_b = Events(a, token), Events(b, token)
    try:
        first = on_a.next()
        assert on_b.next()["version"] == first["version"]
        status, state = call(b, "POST", "/api/class", TOKEN, {"text": TEXT, "step": 3})
        assert status == 200, state
        assert state["version"] == first["version"] + 1
        for stream in (on_a, on_b):
            change = stream.next()
            assert (change["text"], change["step"], change["version"]) == (TEXT, 3, state["version"])
        assert call(a, "GET", "/api/class", TOKEN)[1]["version"] == state["version"]
        # the teacher on either worker sees the students of both
        for port in (a, b):
            eventually(
                lambda port=port: (
                    call(port, "GET", "/api/class", TOKEN)[1]["students"] == {"connected": 2, "following": 2}
                ),
                f"the teacher on {port} counting both students",
            )
    finally:
        on_a.close()
        on_b.close()
    eventually(
        lambda: call(a, "GET", "/api/class", TOKEN)[1]["students"]["connected"] == 0, "the students leaving"
    )


def test_a_guess_sent_to_one_worker_counts_in_the_poll_the_other_shows(workers):
    a, b = workers
    call(a, "POST", "/api/class", TOKEN, {"text": TEXT})
    status, poll = call(a, "POST", "/api/class/poll", TOKEN, {})
    assert status == 200, poll
    assert poll["answers"] == 0
    status, mine = call(b, "POST", "/api/class/guess", students_token(b), {"guess": "c"})
    assert status == 200, mine
    assert mine["yours"] == "c"
    status, seen = call(a, "GET", "/api/class/poll", TOKEN)
    assert status == 200, seen
    assert seen["answers"] == 1
    assert [(g["text"], g["count"]) for g in seen["guesses"]] == [("c", 1)]
    status, revealed = call(b, "POST", "/api/class/poll/reveal", TOKEN, {})
    assert status == 200 and revealed["revealed"] is not None, revealed
    status, late = call(a, "POST", "/api/class/guess", students_token(a), {"guess": "d"})
    assert status == 409, late  # revealed on B: closed on A too
    assert call(a, "GET", "/api/class/poll", TOKEN)[1]["revealed"] == revealed["revealed"]


def test_a_walk_computed_on_one_worker_is_served_from_redis_by_the_other(workers):
    a, b = workers
    body = {"model": "chars", "text": "a walk shared by workers"}
    status, walked = call(a, "POST", "/api/walk", TOKEN, body)
    assert status == 200, walked
    before = call(b, "GET", "/api/class", TOKEN)[1]["work"]

    def served() -> bool:  # stored in the background once computed
        answer = call(b, "POST", "/api/walk", TOKEN, body)
        work = call(b, "GET", "/api/class", TOKEN)[1]["work"]
        return (
            answer == (200, walked)
            and work["hits"] == before["hits"] + 1
            and work["misses"] == before["misses"]
        )

    eventually(served, "worker B serving A's walk from Redis")


def test_a_new_students_link_made_on_one_worker_closes_the_old_on_the_other(workers):
    a, b = workers
    old = students_token(a)
    assert call(b, "GET", "/api/class", old)[0] == 200
    status, made = call(a, "POST", "/api/class/students", TOKEN, {})
    assert status == 200, made
    new = made["students"].rsplit("token=", 1)[1]
    assert new != old
    eventually(lambda: call(b, "GET", "/api/class", old)[0] == 403, "the old link refused on B")
    assert call(b, "GET", "/api/class", new)[1]["role"] == "student"
    assert students_token(b) == new


def test_the_end_on_one_worker_ends_the_class_on_both(workers):
    a, b = workers
    stream = Events(a, students_token(a))
    try:
        stream.next()
        assert call(b, "POST", "/api/class/end", TOKEN, {}) == (200, {"ended": True})
        assert stream.next("end") == {}
    finally:
        stream.close()
    eventually(lambda: call(a, "GET", "/api/class", TOKEN)[0] == 404, "the class ended on A")


def test_the_command_refuses_broadcast_without_a_class_or_a_redis(capsys):
    args = argparse.Namespace(
        models=["not-loaded"], port=8765, host="127.0.0.1", token=TOKEN, classroom=False, no_browser=True
    )
    with pytest.raises(ValueError, match="--class"):
        command.run(argparse.Namespace(**vars(args), broadcast="redis://127.0.0.1:6379"))
    nobody = f"redis://127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match="no Redis answers there"):
        command.run(argparse.Namespace(**{**vars(args), "classroom": True}, broadcast=nobody))
    with pytest.raises(ValueError, match="redis://host:port"):
        command.run(argparse.Namespace(**{**vars(args), "classroom": True}, broadcast="http://x"))
