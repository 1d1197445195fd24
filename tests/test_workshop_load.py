"""A bounded load test on this machine only: 20 clients x 10 mixed requests at a tiny model
(models, walks, stages, a bad request, the lens with a patched and a scaled head, streamed
generations, timeline walks).

Every answer must be the one expected (200 for good requests, 400 with a message for the
bad one mixed in), and the process's memory must come back to where it was after a warm-up
round (forward passes are serialized; nothing is kept per request).
"""

import gc
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from glassformer.workshop.server import create_app
from tests.test_workshop_api import TEXT, char_lm
from tests.workshop_server import auth, serving

CLIENTS, REQUESTS = 20, 10
TIMEOUT_S = 30


def request(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON answer); a server-sent event stream answers {"events": [names]}."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url + path.lstrip("/"), data=data, headers={"Content-Type": "application/json", **auth(url)}
    )
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as answer:
            text = answer.read()
            if answer.headers["content-type"].startswith("text/event-stream"):
                names = [line[7:] for line in text.decode().splitlines() if line.startswith("event: ")]
                return answer.status, {"events": names}
            return answer.status, json.loads(text)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def client_session(url: str, client: int) -> list[str]:
    """REQUESTS mixed requests; the problems found (empty when every answer is right)."""
    problems = []
    for i in range(REQUESTS):
        kind = (client + i) % 8
        if kind == 0:
            status, answer = request(url, "/api/models")
            ok = status == 200 and answer["models"]
        elif kind == 1:
            status, answer = request(url, "/api/walk", {"model": "tiny", "text": TEXT, "seed": i})
            ok = status == 200 and answer["prediction"]["token"]["id"] >= 0
        elif kind == 2:
            body = {"model": "tiny", "text": TEXT[: 3 + i], "temperature": 0.5, "top_k": 3}
            status, answer = request(url, "/api/walk", body)
            ok = status == 200 and len(answer["tokens"]) == 3 + i
        elif kind == 3:
            body = {"model": "tiny", "text": TEXT, "name": f"blocks.{i % 2}.attn.pattern"}
            status, answer = request(url, "/api/stage", body)
            ok = status == 200 and answer["value"]["dtype"] == "uint8"
        elif kind == 4:
            status, answer = request(url, "/api/walk", {"model": "tiny", "text": "a" * 100})
            ok = status == 400 and "max_seq_len" in answer["error"]
        elif kind == 5:
            changes = [
                {"layer": 1, "head": 0, "mode": "patch"},
                {"layer": 0, "head": 1, "mode": "scale", "factor": 2},
            ]
            body = {"model": "tiny", "text": TEXT, "interventions": changes, "patch_text": TEXT[::-1]}
            status, answer = request(url, "/api/lens", body)
            ok = status == 200 and len(answer["rows"]) == 3
        elif kind == 6:
            body = {"model": "tiny", "text": TEXT, "max_new_tokens": 4, "seed": i}
            status, answer = request(url, "/api/generate", body)
            ok = status == 200 and answer["events"] == ["token"] * 4 + ["done"]
        else:
            body = {"model": "tiny", "text": TEXT, "generated": [1, 2, i], "temperature": 0}
            status, answer = request(url, "/api/walk", body)
            ok = status == 200 and len(answer["tokens"]) == len(TEXT) + 3
        if not ok:
            problems.append(f"client {client} request {i} (kind {kind}): {status} {str(answer)[:120]}")
    return problems


def resident_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def test_twenty_clients_ten_requests_each_no_errors_no_growth():
    app = create_app({"tiny": char_lm(positions="rope", n_kv_heads=2)})
    with serving(app) as url, ThreadPoolExecutor(CLIENTS) as pool:
        assert not sum(pool.map(lambda c: client_session(url, c), range(CLIENTS)), [])  # warm-up
        gc.collect()
        before, start = resident_mb(), time.perf_counter()
        problems = sum(pool.map(lambda c: client_session(url, c), range(CLIENTS)), [])
        seconds = time.perf_counter() - start
        gc.collect()
        after = resident_mb()
    print(  # the figures for a closing note: pytest -s tests/test_workshop_load.py
        f"{CLIENTS} clients x {REQUESTS} requests in {seconds:.2f} s, {len(problems)} wrong; "
        f"resident memory {before:.0f} MB -> {after:.0f} MB"
    )
    assert not problems, "\n".join(problems[:10])
    assert after - before < 32, (
        f"resident memory grew {after - before:.0f} MB over {CLIENTS * REQUESTS} requests"
    )


@pytest.mark.parametrize("body", [b"", b"{", b"[]"])
def test_malformed_bodies_are_400_not_500(body):
    app = create_app({"tiny": char_lm()})
    with serving(app) as url:
        req = urllib.request.Request(
            url + "api/walk", data=body, headers={"Content-Type": "application/json", **auth(url)}
        )
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(req, timeout=TIMEOUT_S)
    assert error.value.code == 400 and "JSON" in json.loads(error.value.read())["error"]


def test_a_client_that_leaves_mid_stream_stops_its_generation():
    import http.client

    lm = char_lm()
    forwards = []

    def slow(x, name):  # 30 ms per forward pass: 512 tokens would take ~15 s
        forwards.append(time.monotonic())
        time.sleep(0.03)

    with serving(create_app({"tiny": lm})) as url, lm.net.hooks({"logits": slow}):
        host, port = url.split("//")[1].rstrip("/").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
        body = json.dumps({"model": "tiny", "text": TEXT, "max_new_tokens": 512, "temperature": 0})
        connection.request("POST", "/api/generate", body, {"Content-Type": "application/json", **auth(url)})
        answer = connection.getresponse()
        assert answer.status == 200 and answer.readline().startswith(b"event: token")
        connection.close()  # the page went away
        time.sleep(1.0)
        made = len(forwards)
        time.sleep(1.0)
        assert len(forwards) == made < 100  # it stopped, long before 512 tokens
        started = time.monotonic()
        status, _ = request(url, "/api/walk", {"model": "tiny", "text": TEXT})
        assert status == 200 and time.monotonic() - started < 5  # the model is free again
    assert not lm.net.hook_points["blocks.0.attn.q"].fns  # the stream's own hooks came off
