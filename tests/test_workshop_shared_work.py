"""One computation for a class (issue 30): an answer kept and served to every page that asks the
same, a computation in flight joined, and the model's turns shared fairly (the teacher first,
students in turn, one request each per round, at most LANE_LIMIT each waiting).

What is measured is how often the work ran and in which order, never how fast: the work is held
on an event (or a flag) until every request is in, so the tests pass on a busy machine."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.error
import urllib.request

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from glassformer.workshop.door import fair_queue
from glassformer.workshop.door.fair_queue import LANE_LIMIT, FairQueue
from glassformer.workshop.door.http import RequestError
from glassformer.workshop.door.request_types import WalkRequest
from glassformer.workshop.model_work import settings
from glassformer.workshop.server import create_app
from glassformer.workshop.shared_work import Flight, SharedWork, request_key
from glassformer.workshop.walk import payload
from tests.conftest import workshop_client
from tests.test_workshop_api import TEXT, char_lm
from tests.workshop_server import auth, serving

WAIT_S = 30.0  # the most a test waits for something that takes milliseconds


@pytest.fixture(scope="module")
def lm():
    return char_lm()


@pytest.fixture
def app(lm, tmp_path):
    return create_app({"char": lm}, runs_root=tmp_path / "runs")


@pytest.fixture
def walks(monkeypatch):
    """Count the walks computed (the routes call `payload.walk` by its module's name)."""
    computed: list[str] = []
    walk = payload.walk

    def counted(given, *args):
        computed.append(threading.current_thread().name)
        return walk(given, *args)

    monkeypatch.setattr(payload, "walk", counted)
    return computed


def _stats(app) -> dict:
    return app.state.workshop.work_stats()


# the kept answers ------------------------------------------------------------------------------


def test_the_same_walk_twice_is_computed_once_and_answered_byte_for_byte(app, lm, walks, tmp_path):
    body = {"model": "char", "text": TEXT, "seed": 7}
    with workshop_client(app) as client:
        first, second = client.post("/api/walk", json=body), client.post("/api/walk", json=body)
    assert first.status_code == second.status_code == 200 and first.content == second.content
    assert len(walks) == 1 and walks[0].startswith("glassformer-model")
    assert _stats(app) == {
        "hits": 1,
        "misses": 1,
        "entries": 1,
        "bytes": len(first.content),
        "limit_bytes": 256 << 20,
        "queued": 0,
    }
    assert first.headers["content-type"] == "application/json"

    uncached = create_app({"char": lm}, runs_root=tmp_path / "runs")
    uncached.state.workshop.work.limit_bytes = 0  # keeps nothing: every walk computed
    with workshop_client(uncached) as client:
        again = [client.post("/api/walk", json=body).content for _ in range(2)]
    assert [_untimed(content) for content in again] == [_untimed(first.content)] * 2 and len(walks) == 3
    request = WalkRequest.model_validate(body)
    given = app.state.workshop.pass_input(request, "walk")
    expected = JSONResponse(payload.walk(given, settings(request), "char")).body
    assert _untimed(expected) == _untimed(first.content)


def _untimed(walk: bytes) -> bytes:
    """A walk's JSON without the one thing a pass computed again changes: how long it took."""
    timed = re.findall(rb',"seconds":[0-9.e-]+', walk)
    assert len(timed) == 1
    return walk.replace(timed[0], b"")


def test_different_settings_are_different_answers(app, walks):
    with workshop_client(app) as client:
        for body in ({}, {"temperature": 0}, {"seed": 1}, {"text": "the mat."}, {}, {"seed": 1}):
            answer = client.post("/api/walk", json={"model": "char", "text": TEXT, **body})
            assert answer.status_code == 200, answer.text
        stage = {"model": "char", "text": TEXT, "name": "logits"}
        assert client.post("/api/stage", json=stage).status_code == 200
        assert client.post("/api/stage", json={**stage, "name": "blocks.0.attn.pattern"}).status_code == 200
        assert client.post("/api/lens", json={"model": "char", "text": TEXT}).status_code == 200
        assert client.post("/api/tokens", json={"model": "char", "text": TEXT}).status_code == 200
        assert client.post("/api/tokens", json={"model": "char", "text": TEXT}).status_code == 200
    assert len(walks) == 4
    stats = _stats(app)
    assert (stats["misses"], stats["hits"], stats["entries"]) == (8, 3, 8)


def test_an_error_is_not_kept(app, walks, monkeypatch):
    failing = payload.walk
    failures = [ValueError("the library refused this input")]

    def fails_once(*args):
        if failures:
            raise failures.pop()
        return failing(*args)

    monkeypatch.setattr(payload, "walk", fails_once)
    with workshop_client(app) as client:
        refused = client.post("/api/walk", json={"model": "char", "text": TEXT})
        assert refused.status_code == 400 and refused.json() == {"error": "the library refused this input"}
        assert client.post("/api/walk", json={"model": "char", "text": TEXT}).status_code == 200
    stats = _stats(app)  # the failed walk was computed again, and only its answer kept
    assert len(walks) == 1 and (stats["misses"], stats["hits"], stats["entries"]) == (2, 0, 1)


def test_changed_weights_are_never_answered_from_an_old_pass(app, lm):
    import torch

    with workshop_client(app) as client:
        before = client.post("/api/walk", json={"model": "char", "text": TEXT, "temperature": 0}).content
        weight = lm.net.stack.blocks[0].attn_norm.weight
        kept = weight.detach().clone()
        with torch.no_grad():
            weight.mul_(3.0)  # in place, as a training step would
        try:
            after = client.post("/api/walk", json={"model": "char", "text": TEXT, "temperature": 0}).content
        finally:
            with torch.no_grad():
                weight.copy_(kept)
    assert after != before and _stats(app)["misses"] == 2


def _kept_answer(size: int) -> Flight:
    async def computed() -> bytes:
        return b"x" * size

    return Flight(asyncio.ensure_future(computed()), stop=lambda reason, status: None)


def test_the_kept_answers_stay_within_their_bytes_least_recently_used_out_first():
    async def scenario() -> SharedWork:
        work = SharedWork(limit_bytes=250)
        never = asyncio.get_running_loop().create_future()  # no page leaves
        for key in ("a", "b", "a", "c"):  # "a" used again: "b" is the least recently used
            assert await work.answer(key, lambda: _kept_answer(100), never) == b"x" * 100
        assert list(work._kept) == ["a", "c"]
        await work.answer("too big", lambda: _kept_answer(300), never)  # served, not kept
        await work.answer("b", lambda: _kept_answer(100), never)  # computed again
        return work

    work = asyncio.run(scenario())
    assert work.stats() == {"hits": 1, "misses": 5, "entries": 2, "bytes": 200, "limit_bytes": 250}
    assert list(work._kept) == ["c", "b"]


# work in flight ----------------------------------------------------------------------------


def _post(url: str, route: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url + route.lstrip("/"),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **auth(url)},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_ten_pages_asking_the_same_walk_at_once_start_one_computation(app, walks, monkeypatch):
    released = threading.Event()
    counted = payload.walk

    def held(*args):  # on the model thread: waits until all ten are in
        assert released.wait(WAIT_S), "the ten requests never all arrived"
        return counted(*args)

    monkeypatch.setattr(payload, "walk", held)
    answers: list[tuple[int, bytes]] = []
    with serving(app) as url:
        body = {"model": "char", "text": TEXT, "temperature": 0}
        pages = [
            threading.Thread(target=lambda: answers.append(_post(url, "/api/walk", body))) for _ in range(10)
        ]
        for page in pages:
            page.start()
        deadline = time.monotonic() + WAIT_S
        while (_stats(app)["hits"] + _stats(app)["misses"]) < 10 and time.monotonic() < deadline:
            time.sleep(0.02)
        released.set()
        for page in pages:
            page.join(WAIT_S)
    assert len(walks) == 1
    assert [status for status, _ in answers] == [200] * 10 and len({content for _, content in answers}) == 1
    assert _stats(app)["misses"] == 1 and _stats(app)["hits"] == 9


class Page:
    """A request whose page can leave (`leave`), as a Starlette Request sees it."""

    def __init__(self, client: str = "teacher") -> None:
        self.left = asyncio.Event()
        scope = {"type": "http", "method": "POST", "path": "/api/walk", "headers": [], "query_string": b""}
        scope["state"] = {"client": client}
        self.request = Request(scope, self._receive)

    async def _receive(self) -> dict:
        await self.left.wait()
        return {"type": "http.disconnect"}

    def leave(self) -> None:
        self.left.set()


async def _until(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


def test_the_page_that_started_a_computation_leaving_does_not_stop_it_for_the_others(app, lm):
    workshop, released, runs = app.state.workshop, threading.Event(), []

    def held(text: str) -> dict:
        runs.append(text)
        assert released.wait(WAIT_S)
        lm.logits(text)  # a watched pass: a cancelled budget would stop it here
        return {"text": text}

    async def scenario() -> None:
        body = WalkRequest(model="char", text=TEXT)
        first, second = Page(), Page("student:b")
        asked = [
            asyncio.create_task(workshop.shared(page.request, "walk", body, held, TEXT))
            for page in (first, second)
        ]
        await _until(lambda: runs, "the computation started")
        first.leave()
        with pytest.raises(RequestError) as gone:
            await asked[0]
        assert gone.value.status == 499
        released.set()
        answer = await asked[1]
        assert json.loads(answer.body) == {"text": TEXT}

    asyncio.run(scenario())
    assert runs == [TEXT] and workshop.work_stats()["entries"] == 1


def test_a_computation_nobody_waits_for_any_more_stops(app, lm):
    """As before the class: the page that asked leaving stops its work within a pass, and the
    next request does not wait behind it."""
    workshop, passes = app.state.workshop, []

    def long(text: str) -> dict:
        for _ in range(3000):  # ~30 s unless stopped
            passes.append(1)
            lm.logits(text)
            time.sleep(0.01)
        return {}

    async def scenario() -> None:
        pages = [Page(), Page("student:b")]
        body = WalkRequest(model="char", text=TEXT)
        asked = [
            asyncio.create_task(workshop.shared(page.request, "walk", body, long, TEXT)) for page in pages
        ]
        await _until(lambda: passes, "the computation started")
        for page, task in zip(pages, asked, strict=True):
            page.leave()
            with pytest.raises(RequestError):
                await task
        await _until(lambda: not workshop.running, "the computation stopped")
        after = Page()
        answer = await workshop.shared(after.request, "walk", body, lambda text: {"done": text}, TEXT)
        assert json.loads(answer.body) == {"done": TEXT}

    started = time.monotonic()
    asyncio.run(scenario())
    assert len(passes) < 3000 and time.monotonic() - started < WAIT_S
    assert workshop.work_stats()["misses"] == 2 and workshop.work_stats()["entries"] == 1


def test_a_student_past_the_lane_limit_is_refused_but_may_join_what_others_asked(app, monkeypatch):
    monkeypatch.setattr(fair_queue, "LANE_LIMIT", 1)
    workshop, released = app.state.workshop, threading.Event()

    def held(text: str) -> dict:
        assert released.wait(WAIT_S)
        return {"text": text}

    async def scenario() -> None:
        pages = [Page("student:a"), Page("student:a"), Page("student:b")]
        walk = WalkRequest(model="char", text=TEXT)
        first = asyncio.create_task(workshop.shared(pages[0].request, "walk", walk, held, TEXT))
        await _until(lambda: workshop.work.misses == 1, "the first walk started")
        other = WalkRequest(model="char", text="the mat.")
        with pytest.raises(RequestError, match="requests waiting for the model already") as refused:
            await workshop.shared(pages[1].request, "walk", other, held, "the mat.")
        assert refused.value.status == 429
        joined = asyncio.create_task(workshop.shared(pages[1].request, "walk", walk, held, TEXT))
        theirs = asyncio.create_task(workshop.shared(pages[2].request, "walk", other, held, "the mat."))
        await _until(lambda: workshop.work.hits == 1 and workshop.work.misses == 2, "all asked")
        released.set()
        answers = await asyncio.gather(first, joined, theirs)
        assert [json.loads(a.body)["text"] for a in answers] == [TEXT, TEXT, "the mat."]
        again = await workshop.shared(pages[1].request, "walk", other, held, "the mat.")  # kept: no turn
        assert json.loads(again.body)["text"] == "the mat."

    asyncio.run(scenario())


# the fair queue ---------------------------------------------------------------------------------


async def _served(
    queue: FairQueue, asks: list[tuple[str, bool]], order: list[str], name
) -> list[asyncio.Task]:
    """Each ask (client, stream) as a task that records ``name(i, client)`` when its turn comes."""

    async def ask(i: int, client: str, stream: bool) -> None:
        async with queue.turn(client, stream=stream):
            order.append(name(i, client))
            await asyncio.sleep(0)

    tasks = []
    for i, (client, stream) in enumerate(asks):
        tasks.append(asyncio.create_task(ask(i, client, stream)))
        await asyncio.sleep(0)  # each enters the queue in this order
    return tasks


def test_without_a_class_the_model_is_served_in_order_of_arrival():
    async def scenario() -> list[str]:
        queue, order = FairQueue(), []
        async with queue.turn("teacher"):  # the model is busy while all ten arrive
            tasks = await _served(queue, [("teacher", False)] * 10, order, lambda i, client: str(i))
            assert queue.queued == 10 and queue.ahead("teacher") == 0  # the one running is its own
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == [str(i) for i in range(10)]


def test_the_teacher_goes_first_and_the_students_in_turn():
    asks = [
        ("student:a", True),  # a stream's steps: several in one student's lane
        ("student:a", True),
        ("student:a", False),
        ("student:b", False),
        ("student:c", True),
        ("teacher", False),
        ("student:c", False),
        ("teacher", False),
    ]

    async def scenario() -> list[str]:
        queue, order = FairQueue(), []
        async with queue.turn("teacher"):
            tasks = await _served(queue, asks, order, lambda i, client: f"{client}#{i}")
            assert queue.queued == len(asks)
            assert queue.ahead("teacher") == 0  # the one running is the teacher's own, its next is first
            assert [queue.ahead(f"student:{s}") for s in "abcd"] == [3, 4, 5, 6]
        await asyncio.gather(*tasks)
        assert queue.queued == 0 and queue.ahead("student:a") == 0
        return order

    assert asyncio.run(scenario()) == [
        "teacher#5",
        "teacher#7",
        "student:a#0",
        "student:b#3",
        "student:c#4",
        "student:a#1",
        "student:c#6",
        "student:a#2",
    ]


def test_a_student_has_at_most_lane_limit_requests_queued_or_running():
    async def scenario() -> None:
        queue = FairQueue()
        running = queue.enter("student:a")
        waiting = queue.enter("student:b")
        more = [queue.enter(client) for client in ("student:a", "student:b") for _ in range(LANE_LIMIT - 1)]
        for client in ("student:a", "student:b"):
            with pytest.raises(RequestError, match="requests waiting for the model already") as refused:
                queue.enter(client)
            assert refused.value.status == 429
        step = queue.enter("student:a", stream=True)  # a stream's step is not counted
        extra = [queue.enter("teacher"), queue.enter("teacher")]  # the teacher: no limit
        queue.leave(running)
        assert not queue.waiting(extra[0]) and queue.waiting(waiting)
        again = queue.enter("student:a")  # one of its requests answered: it may ask again
        for ticket in (*extra, waiting, step, again, *more):
            queue.leave(ticket)
        assert queue.queued == 0

    asyncio.run(scenario())


def test_a_request_given_up_while_it_waits_loses_its_place_not_the_queue():
    async def scenario() -> list[str]:
        queue, order = FairQueue(), []
        async with queue.turn("teacher"):
            tasks = await _served(queue, [("student:a", False), ("student:b", False)], order, lambda i, c: c)
            tasks[0].cancel()  # its page left while it waited
            await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
        queue.enter("student:a")  # its place was given back
        return order

    assert asyncio.run(scenario()) == ["student:b"]


def test_a_teacher_who_joins_a_student_s_waiting_work_takes_it_to_the_front():
    async def scenario() -> list[str]:
        queue, order = FairQueue(), []
        async with queue.turn("teacher"):
            asks = [("student:a", False), ("student:b", False), ("student:c", False)]
            tasks = await _served(queue, asks, order, lambda i, client: client)
            queue.promote(next(t for t in queue._lanes["student:c"]))
            assert queue.ahead("student:a") == 2  # the running one, then c's, in the teacher's line
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["student:c", "student:a", "student:b"]


def test_with_no_room_every_page_computes_its_own_answer():
    """``limit_bytes=0``: nothing kept, nothing joined (the workshop before the class's shared
    work, the benchmark's baseline)."""

    async def scenario() -> None:
        work, started = SharedWork(limit_bytes=0), []
        gate = asyncio.Event()

        def start() -> Flight:
            async def compute() -> bytes:
                await gate.wait()
                return b'{"walk": 1}'

            started.append(1)
            return Flight(asyncio.create_task(compute()), lambda reason, status: None)

        never = asyncio.get_running_loop().create_future()
        asks = [asyncio.create_task(work.answer("walk", start, never)) for _ in range(3)]
        await asyncio.sleep(0)
        gate.set()
        assert await asyncio.gather(*asks) == [b'{"walk": 1}'] * 3
        assert await work.answer("walk", start, never) == b'{"walk": 1}'
        assert len(started) == 4 and work.stats()["hits"] == 0 and work.stats()["entries"] == 0

    asyncio.run(scenario())


def test_a_student_asking_what_the_class_shows_waits_in_the_teacher_s_line(lm, tmp_path, monkeypatch):
    """Every follower asks for the class's own text when the teacher moves on: that walk goes
    before the students' own prompts; a student's own text keeps its lane."""
    app = create_app({"char": lm}, runs_root=tmp_path / "runs", classroom=True)
    workshop, lines = app.state.workshop, []
    enter = workshop.queue.enter

    def entered(client: str, **options):
        lines.append(client)
        return enter(client, **options)

    monkeypatch.setattr(workshop.queue, "enter", entered)
    app.state.classroom.update({"text": TEXT})

    async def ask(text: str) -> None:
        scope = {"type": "http", "method": "POST", "path": "/api/walk", "headers": [], "query_string": b""}
        request = Request(
            {**scope, "app": app, "state": {"client": "student:a"}}, lambda: asyncio.sleep(3600)
        )
        body = WalkRequest(model="char", text=text)
        given = workshop.pass_input(body, "walk")
        await workshop.shared(request, "walk", body, payload.walk, given, settings(body), "char")

    asyncio.run(ask(TEXT))
    asyncio.run(ask("the mat."))
    assert lines == ["teacher", "student:a"]


def test_an_image_in_a_request_keys_by_its_pixels():
    """A vision model's pixels are an array once read: the key holds their digest, so two
    images are two answers and the same image one."""
    rows = [[0.0, 0.5], [1.0, 0.25]]
    same = [request_key(WalkRequest(model="vit", pixels=rows)) for _ in range(2)]
    other = request_key(WalkRequest(model="vit", pixels=[[0.0, 0.5], [1.0, 0.5]]))
    assert same[0] == same[1] != other and "sha256" in other
