"""Run directories from elsewhere, read defensively (`glassformer.formats.bounded_read`): a
FIFO, a link to /dev/zero, a sparse file of 300 MB, a link out of the run, a MemoryError
while reading. None of them blocks, reads past its file's limit or leaves the run; each is
that run's "damaged: reason", and the lab starts, lists and adopts with all of them present.
Every step that could block runs under `within`, so a regression fails instead of hanging."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc

import pytest

from glassformer.commands import workshop
from glassformer.formats import run_directory
from glassformer.formats.bounded_read import RunFileRefused, read_bounded
from glassformer.formats.run_directory import (
    CONFIG,
    LOCK,
    MAX_BYTES,
    METRICS,
    PROGRESS,
    TOKENIZER,
    WEIGHTS,
    damage,
    read_run,
)
from glassformer.train.run_list import list_runs
from glassformer.train.run_lock import acquire, holder
from glassformer.workshop.lab.followed_file import FollowedFile
from glassformer.workshop.lab.training_lab import Lab
from tests.test_lab_supervision import tiny_run

BLOCKED_S = 60  # a read that blocks fails after this, instead of hanging the suite


def within(seconds: float, function, *args):
    """``function(*args)`` on a thread joined within ``seconds``: its result, or its error."""
    result: dict = {}

    def call() -> None:
        try:
            result["value"] = function(*args)
        except BaseException as error:  # handed to the test's thread
            result["error"] = error

    thread = threading.Thread(target=call, daemon=True)  # a blocked one must not keep pytest alive
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{getattr(function, '__name__', function)} still blocked after {seconds} s")
    if "error" in result:
        raise result["error"]
    return result.get("value")


def fifo(path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.fixture
def runs(tmp_path):
    return tmp_path / "runs"


def test_a_fifo_lock_blocks_neither_the_lab_nor_a_trainer(runs):
    run = tiny_run(runs / "fifo-lock")
    fifo(run / LOCK)
    assert within(BLOCKED_S, holder, run) is None  # no trainer made it: nobody holds the run
    lab = within(BLOCKED_S, Lab, runs)
    assert lab.state()["status"] == "idle"
    assert within(BLOCKED_S, lab.runs) == [
        {"name": "fifo-lock", "active": False, "changed": 0.0, "paused": False, "pid": None}
    ]  # its model reads: not damaged
    assert within(BLOCKED_S, lab.state_of, "fifo-lock")["status"] == "not training"
    with pytest.raises(RunFileRefused, match="trainer.lock is not a regular file.*remove trainer.lock"):
        within(BLOCKED_S, acquire, run)


def test_a_fifo_in_place_of_a_run_file_is_a_reason_never_a_wait(runs):
    config, weights, progress = (tiny_run(runs / name) for name in ("config", "weights", "progress"))
    fifo(config / CONFIG)
    fifo(weights / WEIGHTS)
    fifo(progress / PROGRESS)
    fifo(progress / METRICS)
    for run, name in ((config, CONFIG), (weights, WEIGHTS)):
        assert f"{name} is a named pipe (FIFO), not a regular file" in within(BLOCKED_S, damage, run)
    reading = within(BLOCKED_S, FollowedFile(progress / PROGRESS).read)  # what the lab streams
    assert reading.records == [] and "named pipe (FIFO)" in reading.problems[0]["reason"]
    summaries = {summary.name: summary for summary in within(BLOCKED_S, list_runs, runs)}
    assert "metrics.jsonl is a named pipe" in summaries["progress"].problem  # glassformer runs
    assert summaries["weights"].checkpoint_step is None and summaries["config"].checkpoint_step == 1


def test_a_tokenizer_linked_to_dev_zero_is_refused_unread(runs):
    run = tiny_run(runs / "zero")
    (run / TOKENIZER).unlink()
    (run / TOKENIZER).symlink_to("/dev/zero")
    reason = within(BLOCKED_S, damage, run)
    assert reason.startswith(f"{run / TOKENIZER} is a link to /dev/zero, outside {run}")
    with pytest.raises(ValueError, match="is a link to /dev/zero"):
        within(BLOCKED_S, read_run, run)
    with pytest.raises(RunFileRefused, match="/dev/zero is a character device, not a regular file"):
        read_bounded("/dev/zero", MAX_BYTES[TOKENIZER], inside="/dev")  # and inside its folder


def test_a_sparse_tokenizer_of_300_mb_is_refused_before_it_is_read(runs):
    run = tiny_run(runs / "sparse")
    with open(run / TOKENIZER, "r+b") as handle:
        handle.truncate(300 * 2**20)  # 300 MB that take no disk: a hole
    tracemalloc.start()
    try:
        reason = within(BLOCKED_S, damage, run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (
        f"tokenizer.json is 314,572,800 bytes long, more than a tokenizer.json can be ({64 * 2**20:,}"
        in reason
    )
    assert peak < 8 * 2**20  # refused from its size: never read
    assert MAX_BYTES[TOKENIZER] > 33_000_000  # Gemma 3's tokenizer.json, the largest we know of, passes


def test_a_link_out_of_the_run_is_not_followed_and_one_inside_it_is(runs, tmp_path):
    linked, inside = tiny_run(runs / "linked"), tiny_run(runs / "inside")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes((linked / CONFIG).read_bytes())  # a valid config, but not the run's
    (linked / CONFIG).unlink()
    (linked / CONFIG).symlink_to(elsewhere)
    assert f"config.json is a link to {elsewhere}, outside {linked}" in damage(linked)
    (inside / TOKENIZER).rename(inside / "tokenizer-v1.json")
    (inside / TOKENIZER).symlink_to("tokenizer-v1.json")  # a link that stays in the run
    assert damage(inside) is None and read_run(inside)[1] is not None

    victim = tmp_path / "notes.txt"  # a trainer's lock written through a link would truncate it
    victim.write_text("mine")
    (linked / LOCK).symlink_to(victim)
    with pytest.raises(RunFileRefused, match="trainer.lock is a symbolic link"):
        acquire(linked)
    (linked / LOCK).unlink()
    os.link(victim, linked / LOCK)  # or through a second name
    with pytest.raises(RunFileRefused, match="trainer.lock is a file with other names"):
        acquire(linked)
    assert victim.read_text() == "mine"


def test_a_memory_error_while_reading_is_that_run_s_damage(runs, monkeypatch, capsys):
    good, tokenizer, config = (tiny_run(runs / name) for name in ("good", "tokenizer", "config"))
    real = run_directory.read_bounded

    def out_of_memory(path, limit, inside=None):  # what reading a huge file in a small machine does
        if path.parent == tokenizer and path.name == TOKENIZER:
            raise MemoryError
        return real(path, limit, inside)

    monkeypatch.setattr(run_directory, "read_bounded", out_of_memory)
    assert "tokenizer.json holds more JSON than this machine can parse" in damage(tokenizer)
    monkeypatch.setattr(run_directory, "check_size", lambda config: (_ for _ in ()).throw(MemoryError()))
    reason = "reading it ran out of memory (MemoryError): its files are larger than a run's can be"
    assert damage(config) == reason  # raised anywhere else while a run is read
    listed = {run["name"]: run.get("damaged") for run in within(BLOCKED_S, Lab(runs).runs)}
    assert listed == {"good": reason, "tokenizer": reason, "config": reason}  # check_size comes first

    monkeypatch.setattr(workshop, "DEFAULT_MODELS", ())  # the runs alone: each skipped with its reason
    assert workshop.load_models([], runs) == {}
    assert capsys.readouterr().out.count("MemoryError") == 3


def test_the_lab_starts_with_any_number_of_damaged_runs(runs):
    """One run of each kind of damage, and a good one: the lab starts, lists each with its
    reason, and serves none of the damaged."""
    damaged = {}

    def broken(name: str, reason: str):
        damaged[name] = reason
        return tiny_run(runs / name)

    fifo(broken("fifo-config", "is a named pipe (FIFO)") / CONFIG)
    (broken("zero", "is a link to /dev/zero") / TOKENIZER).unlink()
    (runs / "zero" / TOKENIZER).symlink_to("/dev/zero")
    with open(broken("sparse", "more than a tokenizer.json can be") / TOKENIZER, "r+b") as handle:
        handle.truncate(300 * 2**20)
    (broken("deep", "nests its JSON too deeply") / CONFIG).write_text("[" * 100_000)
    (broken("folder", "is a directory, not a regular file") / CONFIG).unlink()
    (runs / "folder" / CONFIG).mkdir()
    (broken("binary", "is not valid JSON") / CONFIG).write_bytes(b"\xff\xfe\x00garbage")
    header = (50 * 2**20).to_bytes(8, "little") + b"{}"  # claims a 50 MB header
    (broken("header", "a header of 52,428,800 bytes") / WEIGHTS).write_bytes(header)
    (broken("gone-weights", "model.safetensors is missing") / WEIGHTS).unlink()
    (broken("loop", "config.json is missing") / CONFIG).unlink()
    (runs / "loop" / CONFIG).symlink_to(CONFIG)  # a link to itself
    tiny_run(runs / "good")
    fifo(runs / "good" / LOCK)

    lab = within(BLOCKED_S, Lab, runs)
    listed = {run["name"]: run for run in within(BLOCKED_S, lab.runs)}
    assert set(listed) == {*damaged, "good"} and "damaged" not in listed["good"]
    for name, reason in damaged.items():
        assert reason in listed[name]["damaged"], name
        assert not listed[name]["active"]
    again = within(BLOCKED_S, lab.runs)  # read again only where a file changed
    assert {run["name"]: run.get("damaged") for run in again} == {
        name: run.get("damaged") for name, run in listed.items()
    }
    assert json.loads(json.dumps(again))  # what /api/lab sends
