"""Real trainer processes for the lock and lab supervision tests: tiny `induction` runs
started with ``python -m glassformer train``, and a sweep that ends every one a test
started (by pid, whatever state it was left in), even when the test fails."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from glassformer.formats.run_directory import PROGRESS
from glassformer.train.run_lock import holder, process_stat

TINY = {"model.d_model": 32, "train.eval_interval": 100_000, "train.steps": 100_000}
# Every wait ends as soon as what it waits for happens; this deadline is reached only when that
# never comes (a failure). A trainer starts in ~3 s here and saves and exits on Ctrl-C in ~1 s;
# the slowest CPU the suite runs on takes ten times as long, and a loaded one longer still.
TIMEOUT_S = 300


def train_command(out: Path, *flags: str, **fields: object) -> list[str]:
    """``python -m glassformer train`` of a tiny induction run into ``out``."""
    command = [sys.executable, "-m", "glassformer", "train", "--preset", "induction", "--out", str(out)]
    for field, value in {**TINY, **fields}.items():
        command += ["--set", f"{field}={value}"]
    return [*command, "--no-film", *flags]


def wait_for(condition, what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def progress_size(run: Path) -> int:
    try:
        return (run / PROGRESS).stat().st_size
    except OSError:
        return 0


def wait_for_steps(run: Path) -> None:
    """Until the trainer holds ``run`` and has logged a step."""
    wait_for(lambda: holder(run) is not None and progress_size(run) > 0, f"the first steps in {run}")


def end_process(pid: int) -> None:
    """SIGKILL ``pid`` (continued first: a stopped process dies too, but say it plainly)."""
    if process_stat(pid) is None:
        return
    for which in (signal.SIGCONT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, which)


@contextlib.contextmanager
def swept(runs_root: Path, labs: list) -> Iterator[None]:
    """On the way out: end each lab's trainer and any process holding a run under ``runs_root``."""
    try:
        yield
    finally:
        pids = {lab.trainer.pid for lab in labs if lab.trainer is not None}
        if runs_root.is_dir():
            pids |= {held.pid for run in runs_root.iterdir() if (held := holder(run)) and held.pid}
        for pid in pids:
            end_process(pid)
        for lab in labs:  # reap the labs' own children
            child = getattr(lab.trainer, "_child", None)
            if child is not None:
                child.wait(TIMEOUT_S)


@contextlib.contextmanager
def trainer(out: Path, *flags: str, **fields: object) -> Iterator[subprocess.Popen]:
    """A trainer process in a session of its own (as the lab starts them), ended on the way out."""
    out.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        train_command(out, *flags, **fields),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "TQDM_DISABLE": "1"},
    )
    try:
        yield process
    finally:
        end_process(process.pid)
        process.communicate(timeout=TIMEOUT_S)
