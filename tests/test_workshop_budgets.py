"""Every route's budget (issue 27): a long generation does not hold the model from other
clients, it ends within its time, and an answer too large to send is refused before it is built.

The model's steps are slowed by a forward pre-hook that sleeps, so a generation takes seconds on
any machine; what is measured is an order (another client is answered between two tokens), not
a speed."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from glassformer.models.size import ModelTooLarge, check_size
from glassformer.train import pace_child
from glassformer.train.pace_child import measure_in_child
from glassformer.train.settings import apply_overrides, load_preset
from glassformer.workshop.door import guard, limits
from glassformer.workshop.lab import lab_routes
from glassformer.workshop.lab import training_lab as lab
from glassformer.workshop.server import create_app
from tests.test_workshop_api import TEXT, char_lm
from tests.workshop_server import auth, serving

STEP_S = 0.04  # each forward pass sleeps this long: 100 tokens take >= 4 s


@pytest.fixture(scope="module")
def served():
    lm = char_lm()
    slow = lm.net.register_forward_pre_hook(lambda module, args: time.sleep(STEP_S))
    app = create_app({"char": lm})
    with serving(app) as url:
        yield url
    slow.remove()


def _post(url: str, route: str, body: dict, timeout: float = 60.0) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url + route.lstrip("/"),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **auth(url)},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _events(url: str, body: dict, seen: list, first: threading.Event) -> None:
    """Read the generation's events into ``seen`` (name, data); ``first`` set at the first token."""
    request = urllib.request.Request(
        url + "api/generate",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **auth(url)},
    )
    with urllib.request.urlopen(request, timeout=120) as stream:
        name = None
        for raw in stream:
            line = raw.decode().strip()
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                seen.append((name, json.loads(line.split(":", 1)[1])))
                if name == "token":
                    first.set()


def test_another_client_is_answered_between_two_tokens(served):
    seen: list = []
    first = threading.Event()
    body = {"model": "char", "text": TEXT, "max_new_tokens": 100, "temperature": 0}
    reader = threading.Thread(target=_events, args=(served, body, seen, first), daemon=True)
    reader.start()
    assert first.wait(60), "the generation sent no token"
    start = time.monotonic()
    status, _ = _post(served, "/api/walk", {"model": "char", "text": TEXT})
    waited = time.monotonic() - start
    tokens_meanwhile = sum(1 for name, _ in seen if name == "token")
    reader.join(120)
    total = sum(1 for name, _ in seen if name == "token")
    assert status == 200
    # the walk went in between two tokens: the generation was far from its end when it was answered
    assert tokens_meanwhile < total - 20, (tokens_meanwhile, total, waited)
    assert seen[-1][0] == "done" and total == 100


def test_a_generation_ends_within_its_time(served, monkeypatch):
    monkeypatch.setitem(limits.SECONDS, "generate", 1.0)
    seen: list = []
    body = {"model": "char", "text": TEXT, "max_new_tokens": 500, "temperature": 0}
    start = time.monotonic()
    _events(served, body, seen, threading.Event())
    took = time.monotonic() - start
    names = [name for name, _ in seen]
    assert names[-1] == "stopped" and "done" not in names
    assert "longer than 1 s" in seen[-1][1]["reason"]
    assert 0 < names.count("token") < 500 and took < 30


def test_a_stage_too_large_to_send_is_refused_before_it_is_built(served, monkeypatch):
    monkeypatch.setattr(limits, "RESPONSE_BYTES", 1000)  # the logits of TEXT are far more
    status, answer = _post(served, "/api/stage", {"model": "char", "text": TEXT, "name": "logits"})
    assert status == 413 and "MiB to send" in json.loads(answer)["error"]


def test_the_size_check_counts_training_memory(monkeypatch):
    """A model whose weights fit may still not train: its gradients, optimizer state and
    activations count too (the 617M-parameter MoE of the issue trained for 295 s in the server)."""
    run = apply_overrides(load_preset("induction"), ["model.d_model=1024", "model.n_heads=8"])
    weights = check_size(run.model_config(vocab_size=256)) * 4
    needed = lab.training_memory(run)
    assert needed > 4 * weights  # weights, gradients, two AdamW moments, and activations
    monkeypatch.setattr(lab, "physical_memory", lambda: int(needed * 1.5))  # the weights fit, training not
    with pytest.raises(ModelTooLarge, match="training these settings holds about"):
        lab.check_training_memory(run)


def test_timing_a_run_happens_in_a_child_with_limits(monkeypatch):
    run = load_preset("induction")
    pace = measure_in_child(run, seconds=120, memory_bytes=lab.training_memory(run))
    assert pace.step_s > 0 and pace.evaluation_s > 0
    monkeypatch.setattr(pace_child, "ADDRESS_SPACE_SLACK", 0)
    with pytest.raises(ValueError, match="could not be timed"):  # 64 MiB: not even torch loads
        measure_in_child(run, seconds=120, memory_bytes=64 << 20)
    with pytest.raises(ValueError, match="longer than 0.5 s"):
        measure_in_child(run, seconds=0.5, memory_bytes=lab.training_memory(run))


def _open_unread(url: str, path: str) -> socket.socket:
    """A GET of ``path`` whose answer is never read (the attacker's client)."""
    port = urlsplit(url).port
    reader = socket.create_connection(("127.0.0.1", port))
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once
    token = auth(url)["Authorization"]
    head = f"GET /{path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {token}\r\n\r\n"
    reader.sendall(head.encode())
    return reader


def _get_status(url: str, path: str) -> int:
    request = urllib.request.Request(url + path, headers=auth(url))
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status  # the stream's headers: it was accepted
    except urllib.error.HTTPError as error:
        return error.code


def test_unread_event_streams_are_capped_and_dropped(tmp_path, monkeypatch):
    """Issue 27: 100 unread streams of a run with a 43 MB film held +0.9 GB. Now each event
    holds at most about 1 MiB, a client follows at most a few runs, and a stream whose client
    reads nothing for the write timeout is dropped (its place is free again)."""
    monkeypatch.setattr(lab_routes, "STREAMS_PER_CLIENT", 2)
    monkeypatch.setattr(guard, "WRITE_TIMEOUT_S", 1.0)
    run = tmp_path / "runs" / "big"
    run.mkdir(parents=True)
    (run / "train_config.json").write_text("{}")
    frame = json.dumps({"step": 0, "attention": [0.5] * 20_000})
    (run / "film.jsonl").write_text("\n".join([frame] * 200) + "\n")  # ~20 MB
    app = create_app({"char": char_lm()}, runs_root=tmp_path / "runs")
    with serving(app) as url:
        unread = [_open_unread(url, "api/lab/events?run=big") for _ in range(2)]
        time.sleep(0.5)
        assert _get_status(url, "api/lab/events?run=big") == 429
        deadline = time.monotonic() + 30
        while (status := _get_status(url, "api/lab/events?run=big")) == 429 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert status == 200, "the unread streams were never dropped"
        for reader in unread:
            reader.close()


def test_event_batches_stay_small():
    records = [{"i": i, "pad": "x" * 1000} for i in range(3000)]  # ~3 MB
    batches = lab_routes._batches(records)
    assert [r for batch in batches for r in batch] == records
    assert (
        all(len(json.dumps(batch)) <= 1.01 * lab_routes.EVENT_BYTES for batch in batches)
        and len(batches) >= 3
    )
