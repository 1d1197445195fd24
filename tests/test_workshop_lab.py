"""The training lab's API against real training processes (the `induction` preset, made
small): start, refuse a second run, pause and resume, follow the run's events, stop with a
checkpoint and go on from it; follow a run the command line started. Every run lives under
the test's tmp_path. Each wait ends when what it waits for happens; its deadline
(`trainer_processes.TIMEOUT_S`) is reached only by a failure, however slow the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from glassformer.formats.run_directory import PROGRESS, TRAINER_STATE
from glassformer.inspect.film import read_film
from glassformer.train import checkpoint
from glassformer.train.run_lock import process_stat
from glassformer.workshop.lab import training_lab as lab_module
from glassformer.workshop.lab.trainer_process import descendants
from glassformer.workshop.server import create_app
from tests import trainer_processes
from tests.test_workshop_api import char_lm
from tests.workshop_server import auth, serving

SMALL = {"train.steps": 40, "train.eval_interval": 10, "model.d_model": 32}
TIMEOUT_S = trainer_processes.TIMEOUT_S


def call(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **auth(url)}
    request = urllib.request.Request(url + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for(condition, what: str) -> None:
    trainer_processes.wait_for(condition, what, TIMEOUT_S)


def stands_still(progress, pid: int) -> bool:
    """Whether no step lands once the trainer ``pid`` and every process below it (torchrun's
    ranks) are stopped: waited for, so that no step in flight can land after."""

    def stopped() -> bool:  # a process that has ended writes nothing either
        states = [process_stat(process) for process in [pid, *descendants(pid)]]
        return all(state is None or state[0] == "T" for state in states)

    wait_for(stopped, f"process {pid} and its ranks to stop")
    size = progress.stat().st_size
    time.sleep(1.0)
    return progress.stat().st_size == size


def events(url: str, run: str, until) -> dict[str, list]:
    """The lab's events for ``run`` until ``until(seen)`` holds: {event name: [data]}."""
    seen: dict[str, list] = {}
    request = urllib.request.Request(f"{url}api/lab/events?run={run}", headers=auth(url))
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as stream:
        name = None
        for raw in stream:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                seen.setdefault(name, []).append(json.loads(line[6:]))
                if until(seen):
                    return seen
    return seen


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_module, "STOP_WAIT_S", TIMEOUT_S)  # Stop waits for the checkpoint, never kills
    app = create_app({"tiny": char_lm()}, runs_root=tmp_path / "runs")
    with serving(app) as url:
        yield url, tmp_path / "runs"
        call(url, "api/lab/stop", {})  # nothing left running (400 when nothing is)


def test_a_run_starts_is_followed_and_records_its_film(lab):
    url, runs = lab
    status, overview = call(url, "api/lab")
    assert status == 200 and "induction" in [p["name"] for p in overview["presets"]]
    assert overview["fields"]["model.positions"]["allowed"][0] == "learned"
    status, state = call(url, "api/lab/start", {"preset": "induction", "fields": SMALL})
    assert status == 200 and state["run"] == "induction-lab" and state["status"] == "running"
    status, refused = call(url, "api/lab/start", {"preset": "induction", "fields": SMALL})
    assert status == 400 and "one run at a time" in refused["error"]
    seen = events(url, "induction-lab", lambda s: any(x["status"] == "done" for x in s.get("state", [])))
    steps = [line["step"] for batch in seen["progress"] for line in batch]
    assert steps == list(range(1, 41))
    assert [line["step"] for batch in seen["metrics"] for line in batch] == [10, 20, 30, 40]
    frames = [frame for batch in seen["film"] for frame in batch]
    assert (
        [f["step"] for f in frames]
        == [10, 20, 30, 40]
        == [f["step"] for f in read_film(runs / "induction-lab")]
    )
    assert frames[0]["patterns"]["shape"][:2] == [2, 4] and len(frames[0]["induction"]) == 2
    # the trained run opens as one more model of the workshop, by name only
    assert call(url, "api/lab/open", {"run": "induction-lab"}) == (200, {"model": "runs/induction-lab"})
    assert "runs/induction-lab" in [m["name"] for m in call(url, "api/models")[1]["models"]]
    status, answer = call(url, "api/lab/open", {"run": "/etc"})
    assert status == 400 and "must be the name of a run" in answer["error"]
    # a page that connects again gets the whole run
    again = events(url, "induction-lab", lambda s: len(s.get("film", [[]])[0]) == 4)
    assert len(again["progress"][0]) == 40


def test_pause_resume_stop_and_go_on_from_the_checkpoint(lab):
    url, runs = lab
    status, state = call(
        url, "api/lab/start", {"preset": "induction", "fields": {**SMALL, "train.steps": 100000}}
    )
    assert status == 200
    progress = runs / "induction-lab" / PROGRESS
    wait_for(lambda: progress.exists() and progress.stat().st_size > 0, "the first steps")
    busy = call(url, "api/lab/estimate", {"preset": "induction", "fields": {"model.d_model": 48}})
    assert busy == (200, {"seconds": None, "reason": "measured once no run is training"})  # it would slow it
    paused = call(url, "api/lab/pause", {})[1]
    assert paused["status"] == "paused"
    assert stands_still(progress, paused["pid"])  # paused: not a step more
    size = progress.stat().st_size
    assert call(url, "api/lab/resume", {})[1]["status"] == "running"
    wait_for(lambda: progress.stat().st_size > size, "steps after resuming")
    status, state = call(url, "api/lab/stop", {})
    assert status == 200 and state["status"] == "stopped"
    assert (runs / "induction-lab" / TRAINER_STATE).exists()  # the checkpoint Ctrl-C saves
    status, state = call(url, "api/lab/continue", {"run": "induction-lab"})
    assert status == 200 and state["status"] == "running"
    wait_for(lambda: "resumed" in call(url, "api/lab")[1]["state"]["log"], "the resumed run's log")
    size = progress.stat().st_size
    wait_for(lambda: progress.stat().st_size > size, "the resumed run's steps")  # stopped while it trains
    state = call(url, "api/lab/stop", {})[1]
    assert state["status"] == "stopped", state["log"]  # how it ended, if not by its Ctrl-C checkpoint


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="two processes need two cores")
def test_a_run_on_two_processes_pauses_and_stops_as_one_with_a_checkpoint(lab):
    url, runs = lab
    assert call(url, "api/lab")[1]["fields"]["processes"] == {"kind": "int", "range": [1, os.cpu_count()]}
    fields = {**SMALL, "train.steps": 100000, "processes": 2}
    status, state = call(url, "api/lab/start", {"preset": "induction", "fields": fields})
    assert status == 200 and state["status"] == "running", state
    progress = runs / "induction-lab" / PROGRESS
    wait_for(lambda: progress.exists() and progress.stat().st_size > 0, "the first steps")
    paused = call(url, "api/lab/pause", {})[1]
    assert paused["status"] == "paused"
    assert stands_still(progress, paused["pid"])  # torchrun's agent and both ranks
    size = progress.stat().st_size
    assert call(url, "api/lab/resume", {})[1]["status"] == "running"
    wait_for(lambda: progress.stat().st_size > size, "steps after resuming")
    state = call(url, "api/lab/stop", {})[1]
    assert state["status"] == "stopped", state["log"]
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, len(lines) + 1))  # each step once
    assert {line["world_size"] for line in lines} == {2}
    saved = checkpoint.load_trainer_state(runs / "induction-lab")
    assert saved["step"] == lines[-1]["step"]  # both ranks stopped after one step, and saved it


def test_the_lab_follows_a_run_started_from_the_command_line(lab):
    url, runs = lab
    command = [
        sys.executable,
        "-m",
        "glassformer",
        "train",
        "--preset",
        "induction",
        "--out",
        str(runs / "cli"),
    ]
    for field, value in {**SMALL, "train.steps": 30}.items():
        command += ["--set", f"{field}={value}"]
    runs.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as cli:
        progress = runs / "cli" / PROGRESS
        wait_for(
            lambda: progress.exists() and progress.stat().st_size > 0 or cli.poll() is not None, "its steps"
        )
        assert cli.poll() is None, cli.stderr.read().decode()
        assert {"name": "cli", "active": True}.items() <= call(url, "api/lab")[1]["runs"][0].items()
        status, refused = call(url, "api/lab/start", {"preset": "induction", "fields": SMALL})
        assert (
            status == 400
            and f"cli is training now (started elsewhere: process {cli.pid})" in refused["error"]
        )
        seen = events(url, "cli", lambda s: len([f for batch in s.get("film", []) for f in batch]) == 3)
        assert cli.wait(TIMEOUT_S) == 0
    assert seen["state"][0]["status"] == "running" and seen["state"][0]["adopted"]  # the lab supervises it
    assert [line["step"] for batch in seen["metrics"] for line in batch] == [10, 20, 30]


def test_a_preset_tells_its_time_on_this_machine(lab):
    """This machine's pace for the preset's model, measured once, times its steps and evaluations:
    twice the steps (and so twice the evaluations) take twice as long."""
    url, _ = lab
    status, once = call(url, "api/lab/estimate", {"preset": "induction", "fields": SMALL})
    assert status == 200 and (once["steps"], once["evaluations"]) == (40, 4)
    assert 0 < once["step_s"] and 0 < once["evaluation_s"]
    assert once["seconds"] == pytest.approx(40 * once["step_s"] + 4 * once["evaluation_s"])
    status, twice = call(
        url, "api/lab/estimate", {"preset": "induction", "fields": {**SMALL, "train.steps": 80}}
    )
    assert status == 200 and twice["step_s"] == once["step_s"]  # the same model: its pace is kept
    assert twice["seconds"] == pytest.approx(2 * once["seconds"])
    status, wider = call(
        url, "api/lab/estimate", {"preset": "induction", "fields": {**SMALL, "model.d_model": 48}}
    )
    assert status == 200 and wider["step_s"] != once["step_s"]  # another model: measured anew
    assert call(url, "api/lab")[1]["state"]["status"] == "idle"  # measured in the server: no run started


def test_a_fine_tuning_preset_keeps_its_pretrained_architecture(lab):
    url, _ = lab
    presets = {p["name"]: p for p in call(url, "api/lab")[1]["presets"]}
    minilm = presets["genre-minilm"]
    assert minilm["pretrained"] == "minilm-l6"
    assert minilm["fixed"] == [f for f in minilm["fields"] if f.startswith("model.")]
    assert minilm["fields"]["model.n_layers"] is None and minilm["fields"]["train.lr"] == 5e-5
    assert presets["genre-scratch"]["fixed"] == []
    status, answer = call(url, "api/lab/start", {"preset": "genre-minilm", "fields": {"model.n_layers": 2}})
    assert (
        status == 400 and "its architecture is minilm-l6's: model.n_layers cannot change" in answer["error"]
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"preset": "nope"}, "no preset 'nope'"),
        ({"preset": "induction", "fields": {"model.secret": 1}}, "does not change 'model.secret'"),
        ({"preset": "induction", "fields": {"model.n_heads": 3}}, "divisible by n_heads=3"),
        ({"preset": "induction", "fields": {"model.positions": "spiral"}}, "must be one of"),
        ({"preset": "induction", "fields": {"train.steps": 0}}, "from 1 to"),
        ({"preset": "induction", "fields": "all"}, "fields: input should be an object"),
        ({"preset": "induction", "fields": {"processes": 0}}, "processes must be a whole number from 1"),
        ({"preset": "induction", "fields": {"processes": 2.5}}, "processes must be a whole number from 1"),
    ],
)
def test_bad_lab_requests_are_explained(lab, body, message):
    url, _ = lab
    for route in ("api/lab/start", "api/lab/estimate"):
        status, answer = call(url, route, body)
        assert status == 400 and message in answer["error"], (route, answer)
    assert call(url, "api/lab/pause", {}) == (400, {"error": "no run is training now: nothing to pause"})
    status, answer = call(url, "api/lab/continue", {"run": "../etc"})
    assert status == 400 and "must be the name of a run" in answer["error"]
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(
            urllib.request.Request(f"{url}api/lab/events?run=missing", headers=auth(url)), timeout=TIMEOUT_S
        )
    assert error.value.code == 404
