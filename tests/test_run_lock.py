"""One trainer per run directory (`glassformer.train.run_lock`): the lock against a second
taker, a file left by a dead trainer, a stopped holder, kill -9; a holder that lets go while
`holder` looks (the races, made to happen at a chosen step), a lock inherited by a forked
child; and two real ``glassformer train`` processes on one directory, the second refused
before it reads or deletes anything."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from glassformer.formats.run_directory import LOCK, PROGRESS, TRAIN_CONFIG, WEIGHTS
from glassformer.train import run_lock
from glassformer.train.run_lock import Holder, RunLocked, acquire, holder, process_started, process_stat
from tests.trainer_processes import TIMEOUT_S, end_process, train_command, trainer, wait_for, wait_for_steps

HOLD = """
import sys, time
from glassformer.train.run_lock import acquire
lock = acquire(sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


def test_a_second_taker_is_refused_and_release_cleans_up(tmp_path):
    run = tmp_path / "runs" / "run"
    with acquire(run) as lock:
        named = json.loads(lock.path.read_text())
        assert named == {"pid": os.getpid(), "started": process_started(os.getpid())}
        assert holder(run) is not None and holder(run).pid == os.getpid()
        with pytest.raises(RunLocked, match=rf"being trained by process {os.getpid()}.*kill -INT"):
            acquire(run)  # another open file, even in this process: flock refuses it
    assert holder(run) is None
    assert not run.parent.exists()  # the lock made them, and nothing was written: gone with it


def test_a_lock_file_left_by_a_dead_trainer_is_no_lock(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK).write_text(json.dumps({"pid": os.getpid(), "started": 1}))  # a recycled pid
    assert holder(run) is None  # nobody holds the flock
    with acquire(run):
        assert holder(run).pid == os.getpid()
    assert run.is_dir()  # it was there before: kept


def test_a_holder_seen_from_outside_stopped_and_killed(tmp_path):
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "held\n"
        held = holder(run)
        assert (held.pid, held.started, held.stopped) == (process.pid, process_started(process.pid), False)
        with pytest.raises(RunLocked, match=f"process {process.pid}"):
            acquire(run)
        os.kill(process.pid, signal.SIGSTOP)
        wait_for(lambda: holder(run).stopped, "the holder to stop")
        with pytest.raises(RunLocked, match=f"paused.*kill -CONT {process.pid}; kill -INT"):
            acquire(run)
        os.kill(process.pid, signal.SIGKILL)  # the kernel releases the lock; the file stays
        process.wait(TIMEOUT_S)
        assert (run / LOCK).exists() and holder(run) is None
        with acquire(run):
            assert holder(run).pid == os.getpid()
    finally:
        end_process(process.pid)
        process.wait(TIMEOUT_S)


def let_go_at_first_sleep(monkeypatch, let_go) -> list:
    """`holder` sleeps between two looks at a lock it found held by no live process it could
    name: the holder lets go (``let_go()``) at exactly that moment. The sleeps seen, returned."""
    slept, sleep = [], time.sleep

    def sleeping(seconds: float) -> None:
        if not slept:
            let_go()
        slept.append(seconds)
        sleep(seconds)

    monkeypatch.setattr(run_lock.time, "sleep", sleeping)
    return slept


def test_a_trainer_that_lets_go_while_holder_looks_holds_nothing(tmp_path, monkeypatch):
    """The race the lab lost on a slow machine: `holder` found the lock held, the trainer had
    not written its name (or its process had just ended), and before the next look it let go
    (its file removed) and exited. Reading the name from a file that is gone for 0.2 s gave
    Holder(None, None), "held by an unnamed process", for a run nobody holds."""
    run = tmp_path / "run"
    lock = acquire(run)
    os.ftruncate(lock._descriptor, 0)  # the moment after locking, before the name is written
    slept = let_go_at_first_sleep(monkeypatch, lock.release)
    assert holder(run) is None and slept  # it looked again: the file is gone
    with acquire(run):  # and the run is free to take
        monkeypatch.undo()
        assert holder(run).pid == os.getpid()


def test_a_lock_outliving_its_ended_process_is_waited_for(tmp_path, monkeypatch):
    """A trainer killed while it holds its lock: its main thread ends first (the process reads
    "Z" in /proc), and the kernel frees the lock once its last thread has. Until then `holder`
    waits (up to END_WAIT_S), then finds the lock free, and the file it left is no lock."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # not reaped: a zombie, as above
    try:
        wait_for(lambda: process_stat(ended.pid)[0] == "Z", "the process to end")
        run = tmp_path / "run"
        run.mkdir()
        (run / LOCK).write_text(json.dumps({"pid": ended.pid, "started": process_started(ended.pid)}))
        last_thread = os.open(run / LOCK, os.O_RDONLY)
        fcntl.flock(last_thread, fcntl.LOCK_EX)  # still held, for the ended process
        slept = let_go_at_first_sleep(monkeypatch, lambda: os.close(last_thread))
        assert holder(run) is None and slept
        monkeypatch.undo()

        held_for_good = os.open(run / LOCK, os.O_RDONLY)  # held by a process it does not name
        fcntl.flock(held_for_good, fcntl.LOCK_EX)
        monkeypatch.setattr(run_lock, "END_WAIT_S", 0.3)
        assert holder(run) == Holder(pid=None, started=None)  # after END_WAIT_S
        os.close(held_for_good)
        assert holder(run) is None
    finally:
        ended.wait()


FORKS = """
import os, sys, time
from glassformer.train.run_lock import acquire
lock = acquire(sys.argv[1])
child = os.fork()  # a data loader's worker, a pool: a copy of the trainer, descriptors and all
if child == 0:
    time.sleep(120)
    os._exit(0)
print(child, flush=True)
os._exit(0)  # the trainer ends without letting go, as kill -9 would: the kernel frees its lock
"""


def test_a_forked_child_does_not_keep_its_trainer_s_lock(tmp_path):
    run = tmp_path / "run"
    trainer = subprocess.Popen([sys.executable, "-c", FORKS, str(run)], stdout=subprocess.PIPE, text=True)
    child = int(trainer.stdout.readline())
    try:
        assert trainer.wait(TIMEOUT_S) == 0 and process_stat(child) is not None  # the child lives on
        assert holder(run) is None  # the run was not held by the child, in the trainer's name
        with acquire(run):
            assert holder(run).pid == os.getpid()
    finally:
        end_process(child)


def test_two_trainers_never_write_one_directory(tmp_path):
    run = tmp_path / "run"
    with trainer(run) as first:
        wait_for_steps(run)
        log = (run / PROGRESS).stat()  # appended to in place: deleted, it would be a new file
        for flag in ("--resume", "--overwrite"):
            second = subprocess.run(
                train_command(run, flag), capture_output=True, text=True, timeout=TIMEOUT_S
            )
            assert second.returncode == 2, second.stderr
            assert f"is being trained by process {first.pid}" in second.stderr
        assert first.poll() is None and holder(run).pid == first.pid
        now = (run / PROGRESS).stat()
        assert now.st_ino == log.st_ino and now.st_size >= log.st_size  # --overwrite deleted nothing
        assert (run / TRAIN_CONFIG).exists() and (run / WEIGHTS).exists()
        first.send_signal(signal.SIGINT)
        assert first.wait(TIMEOUT_S) == 130
    assert not (run / LOCK).exists() and holder(run) is None  # released, and removed on the way out
