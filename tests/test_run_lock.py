"""One trainer per run directory (`glassformer.train.run_lock`): the lock against a second
taker, a file left by a dead trainer, a stopped holder, kill -9; and two real
``glassformer train`` processes on one directory, the second refused before it reads or
deletes anything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from glassformer.formats.run_directory import LOCK, PROGRESS, TRAIN_CONFIG, WEIGHTS
from glassformer.train.run_lock import RunLocked, acquire, holder, process_started
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
