"""The lab supervises its runs by their locks: a new `Lab` (the server restarted, even after
kill -9) adopts a trainer it finds running, a paused one too, and pauses, resumes and stops
it by pid; nothing starts or continues while a trainer holds a directory; a damaged run is
listed with its reason and skipped by the workshop's default models; a bad line in a file
the lab streams becomes a ``problem`` event and the stream goes on. Real trainer processes,
all under tmp_path, all ended by the test (`tests.trainer_processes.swept`). Each wait ends
when what it waits for happens, with a deadline only a failure reaches (`TIMEOUT_S`): a
slower machine makes them longer, never red."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from glassformer.formats.run_directory import PROGRESS, TRAINER_STATE, WEIGHTS
from glassformer.tokenizers.char import CharTokenizer
from glassformer.train.checkpoint import checkpoint_step, save_checkpoint
from glassformer.train.run_lock import holder, process_stat
from glassformer.workshop.lab import training_lab as lab_module
from glassformer.workshop.lab.lab_routes import _follow
from glassformer.workshop.lab.training_lab import SHUTDOWN_WAIT_S, Lab
from tests.conftest import tiny_model
from tests.trainer_processes import TIMEOUT_S, progress_size, swept, trainer, wait_for, wait_for_steps

FIELDS = {"model.d_model": 32, "train.steps": 100_000, "train.eval_interval": 10_000}


@pytest.fixture
def labs(tmp_path, monkeypatch):
    """Labs over tmp_path/runs; every trainer they or the test started is ended afterwards.
    Stop waits for the trainer's checkpoint as long as it takes (its kill after
    `lab.STOP_WAIT_S` would be a failure here, on a slow machine too)."""
    monkeypatch.setattr(lab_module, "STOP_WAIT_S", TIMEOUT_S)
    made: list[Lab] = []

    def lab() -> Lab:
        made.append(Lab(tmp_path / "runs"))
        return made[-1]

    with swept(tmp_path / "runs", made):
        yield lab


def steps_go_on(run) -> bool:
    size = progress_size(run)
    wait_for(lambda: progress_size(run) > size, f"more steps in {run}")
    return True


def steps_stand_still(run, pid: int) -> bool:
    wait_for(lambda: process_stat(pid)[0] == "T", f"process {pid} to stop")  # then no step can land
    size = progress_size(run)
    time.sleep(1.0)
    return progress_size(run) == size


def last_step(run) -> int:
    return json.loads((run / PROGRESS).read_text().splitlines()[-1])["step"]


def saved_on_stop(run, before: int) -> bool:
    """Whether the run's checkpoint is the one its Ctrl-C saved: at or after ``before``, the
    last step logged before it was asked to stop (the first checkpoint is step 0's)."""
    return (run / TRAINER_STATE).exists() and checkpoint_step(run) >= before > 0


def test_a_restarted_lab_adopts_the_orphaned_run_and_pauses_resumes_and_stops_it(labs, tmp_path):
    first = labs()
    assert first.start("induction", FIELDS)["status"] == "running"
    run = tmp_path / "runs" / "induction-lab"
    wait_for_steps(run)
    pid = first.trainer.pid
    del first  # the server is gone (kill -9): its trainer runs on, in its own session

    lab = labs()  # the restarted server
    state = lab.state()
    assert (state["run"], state["status"], state["pid"], state["adopted"]) == (
        "induction-lab",
        "running",
        pid,
        True,
    )
    assert "parameters" in state["log"]  # the orphan still writes the lab's log
    assert lab.runs()[0] | {"changed": 0} == {
        "name": "induction-lab",
        "active": True,
        "paused": False,
        "pid": pid,
        "changed": 0,
    }
    for refused in (lambda: lab.start("induction", FIELDS), lambda: lab.resume_run("induction-lab")):
        with pytest.raises(
            ValueError, match=f"induction-lab is training now \\(started elsewhere: process {pid}"
        ):
            refused()

    assert lab.pause()["status"] == "paused" and process_stat(pid)[0] == "T"
    assert steps_stand_still(run, pid)
    assert lab.resume()["status"] == "running"
    assert steps_go_on(run)
    before = last_step(run)
    state = lab.stop()
    assert state["status"] == "stopped" and not lab.trainer.alive()
    assert saved_on_stop(run, before) and holder(run) is None  # its checkpoint, and the lock let go
    with pytest.raises(ValueError, match="no run is training now: nothing to pause"):
        lab.pause()


def test_a_paused_orphan_is_adopted_paused_then_resumed_and_stopped(labs, tmp_path):
    first = labs()
    first.start("induction", FIELDS)
    run = tmp_path / "runs" / "induction-lab"
    wait_for_steps(run)
    assert first.pause()["status"] == "paused"
    del first  # the server died with its run paused

    lab = labs()
    assert lab.state()["status"] == "paused" and lab.state()["adopted"]
    assert lab.runs()[0]["paused"] is True
    with pytest.raises(ValueError, match="induction-lab is paused now"):
        lab.resume_run("induction-lab")  # never a second trainer on the same directory
    assert lab.resume()["status"] == "running"
    assert steps_go_on(run)
    assert lab.pause()["status"] == "paused"
    before = last_step(run)
    assert lab.stop()["status"] == "stopped"  # continued, so that it could save and exit
    assert saved_on_stop(run, before) and holder(run) is None


def test_a_run_the_command_line_started_is_adopted_and_left_running_at_shutdown(labs, tmp_path):
    run = tmp_path / "runs" / "cli"
    with trainer(run) as cli:
        wait_for_steps(run)
        lab = labs()
        assert lab.state() | {"log": ""} == {
            "run": "cli",
            "status": "running",
            "pid": cli.pid,
            "log": "",
            "adopted": True,
        }
        with pytest.raises(ValueError, match="cli is training now"):
            lab.start("induction", FIELDS)
        started = time.monotonic()
        lab.shutdown()
        assert time.monotonic() - started < SHUTDOWN_WAIT_S and cli.poll() is None  # not the server's
        assert lab.stop()["status"] == "stopped" and cli.wait(TIMEOUT_S) == 130


def test_shutdown_asks_the_lab_s_run_to_stop_and_returns_within_two_seconds(labs, tmp_path):
    lab = labs()
    lab.start("induction", FIELDS)
    run = tmp_path / "runs" / "induction-lab"
    wait_for_steps(run)
    lab.pause()
    before = last_step(run)
    started = time.monotonic()
    lab.shutdown()
    assert time.monotonic() - started < SHUTDOWN_WAIT_S + 1.0  # it asks, waits that long, and goes
    wait_for(lambda: not lab.trainer.alive(), "the run to save and exit on its own")
    assert lab.state()["status"] == "stopped" and saved_on_stop(run, before)


def tiny_run(folder):
    save_checkpoint(
        folder, tiny_model(n_layers=1), CharTokenizer.from_text("abc d"), {"name": "tiny"}, {"step": 1}
    )
    return folder


def test_a_damaged_run_is_listed_as_damaged_and_skipped_by_the_workshop(labs, tmp_path, capsys, monkeypatch):
    from glassformer.commands import workshop

    runs = tmp_path / "runs"
    good, broken = tiny_run(runs / "good"), tiny_run(runs / "broken")
    weights = (broken / WEIGHTS).read_bytes()
    (broken / WEIGHTS).write_bytes(weights[: len(weights) // 2])  # a copy cut short
    listed = {run["name"]: run for run in labs().runs()}
    assert "damaged" not in listed["good"]
    assert "model.safetensors is damaged" in listed["broken"]["damaged"] and not listed["broken"]["active"]

    monkeypatch.setattr(workshop, "DEFAULT_MODELS", ())  # the registry's models are not needed here
    models = workshop.load_models([], runs)
    assert list(models) == [str(good)]
    assert f"skipping {broken}: " in capsys.readouterr().out
    with pytest.raises(ValueError, match="damaged"):  # named on the command line: loudly
        workshop.load_models([str(broken)], runs)


def follow_until(lab: Lab, run: str, until) -> list[tuple[str, object]]:
    """The lab's events for ``run`` (the route's own generator) until ``until(events)``."""

    class Page:  # what `_follow` asks of a request
        async def is_disconnected(self) -> bool:
            return False

    async def collect():
        events = []
        stream = _follow(Page(), lab, run, lab.run_dir(run), threading.Event())
        async for text in stream:
            if text.startswith(":"):
                continue
            name, data = (line.split(": ", 1)[1] for line in text.strip().split("\n"))
            events.append((name, json.loads(data)))
            if until(events):
                await stream.aclose()
                return events

    return asyncio.run(asyncio.wait_for(collect(), TIMEOUT_S))


def test_a_bad_line_becomes_a_problem_event_and_the_stream_goes_on(labs, tmp_path):
    run = tiny_run(tmp_path / "runs" / "odd")
    lines = [
        b'{"step": 1, "loss": 2.5, "steps": 3}',
        b'{"step": 2, "loss": \xff\xfe}',  # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # json's parser would recurse 100,000 deep
        b'{"step": 2, "loss": NaN, "steps": 3}',  # Python's json writes it; a browser cannot read it
    ]
    (run / PROGRESS).write_bytes(b"\n".join(lines) + b"\n")
    (run / "film.jsonl").write_bytes(b'{"step": 1, "patterns": ' + b"[" * 5000 + b"\n")
    lab = labs()
    seen = follow_until(lab, "odd", lambda events: any(name == "state" for name, _ in events))
    progress = [record for name, data in seen if name == "progress" for record in data]
    assert progress == [{"step": 1, "loss": 2.5, "steps": 3}, {"step": 2, "loss": None, "steps": 3}]
    problems = {(data["file"], data["line"]): data["reason"] for name, data in seen if name == "problem"}
    assert "not UTF-8" in problems["progress.jsonl", 2]
    assert "brackets deep" in problems["progress.jsonl", 3] and "brackets deep" in problems["film.jsonl", 1]
    assert seen[-1][1]["status"] == "not training"

    def later(events) -> bool:  # a good line written after the bad ones still arrives
        if not any(name == "state" for name, _ in events):
            return False
        if not (run / "metrics.jsonl").exists():
            (run / "metrics.jsonl").write_text('{"step": 3, "val_loss": 1.5}\n')
        return any(name == "metrics" for name, _ in events)

    assert ("metrics", [{"step": 3, "val_loss": 1.5}]) in follow_until(lab, "odd", later)
