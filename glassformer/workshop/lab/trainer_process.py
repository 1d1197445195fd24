"""A trainer the lab can watch and signal: a child it started, or a process it adopted by pid.

A server killed with kill -9 leaves its trainer running (the trainer lives in a session of
its own), and a run started from the command line was never the server's child. The lab
finds such a trainer by its run directory's lock (`glassformer.train.run_lock`) and adopts
it: it follows, pauses (SIGSTOP), resumes (SIGCONT) and stops (SIGINT: the trainer saves a
checkpoint) it by pid, as it does its own child.

A run on several processes is torchrun's agent (the child) and its ranks, which the agent
starts in sessions of their own. Pause and resume signal the agent and every process below
it; Ctrl-C goes to the agent, which passes it on, and the ranks stop together after the
step under way, with a checkpoint (`glassformer.train.distributed.StopRequest`). An adopted
distributed run is its rank 0 (the lock's holder): paused alone, the other ranks wait for
it at their next collective; stopped, it tells them.

What differs is the end. A child's exit code says how it ended (0 done, 130 stopped by
Ctrl-C); an adopted process is not our child, so its exit code goes to its parent and is
lost here: whether it finished is read from its run's files (the last step logged against
the steps planned). Every signal goes to the pid only while that pid still has the start
time it had when adopted, so a pid the system gave to a new process is never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from glassformer.formats.bounded_read import read_tail
from glassformer.formats.run_directory import PROGRESS
from glassformer.train.run_lock import Holder, process_started, process_stat

SETTLE_S = 1.0  # how long a pause or resume waits to see the process change state
TAIL_BYTES = 65_536  # enough of progress.jsonl's end to hold its last line


class TrainerProcess:
    """``status()``: running | paused | done | stopped | failed; `pause`, `resume`, `stop`."""

    def __init__(self, pid: int, started: int | None, run_dir: Path, child: subprocess.Popen | None) -> None:
        self.pid, self.started, self.run_dir = pid, started, Path(run_dir)
        self._child = child
        self._interrupted = False  # the lab asked it to stop (a torchrun agent then exits non-zero)

    @classmethod
    def launched(cls, child: subprocess.Popen, run_dir: Path) -> TrainerProcess:
        """The lab's own child."""
        return cls(child.pid, process_started(child.pid), run_dir, child)

    @classmethod
    def adopted(cls, holder: Holder, run_dir: Path) -> TrainerProcess:
        """The process holding ``run_dir``'s lock, which this lab did not start."""
        if holder.pid is None:
            raise ValueError(f"{run_dir} is locked by a process that has not said who it is")
        return cls(holder.pid, holder.started, run_dir, None)

    @property
    def is_adopted(self) -> bool:
        return self._child is None

    # what it is doing ------------------------------------------------------------------------
    def alive(self) -> bool:
        if self._child is not None:
            return self._child.poll() is None
        stat = process_stat(self.pid)
        return stat is not None and stat[1] == self.started and stat[0] not in "ZX"

    def status(self) -> str:
        if self.alive():
            return "paused" if self._stopped() else "running"
        if self._child is not None:
            code = self._child.returncode
            return "done" if code == 0 else "stopped" if code == 130 or self._interrupted else "failed"
        return "done" if finished(self.run_dir) else "stopped"  # the exit code went to its parent

    def started_at(self) -> float | None:
        """When it started, in seconds since the epoch (None where /proc does not say)."""
        try:
            lines = Path("/proc/stat").read_text().splitlines()
            boot = next(int(line.split()[1]) for line in lines if line.startswith("btime"))
        except (OSError, StopIteration, ValueError, IndexError):
            return None
        return None if self.started is None else boot + self.started / os.sysconf("SC_CLK_TCK")

    # what the lab does to it -------------------------------------------------------------------
    def pause(self) -> None:
        self._signal(signal.SIGSTOP, tree=True)
        self._settle(lambda: self._stopped())

    def resume(self) -> None:
        self._signal(signal.SIGCONT, tree=True)
        self._settle(lambda: not self._stopped())

    def interrupt(self) -> None:
        """Ctrl-C for the trainer (it saves a checkpoint and exits); a paused one is continued
        so that it can."""
        self._interrupted = True
        self._signal(signal.SIGINT)
        self._signal(signal.SIGCONT, tree=True)

    def stop(self, timeout: float) -> None:
        """`interrupt`, wait up to ``timeout`` s for the checkpoint, then kill it."""
        self.interrupt()
        if not self.wait(timeout):
            self._signal(signal.SIGKILL)
            self.wait(5.0)

    def wait(self, timeout: float) -> bool:
        """Whether it ended within ``timeout`` seconds."""
        if self._child is not None:
            try:
                self._child.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    # inside ------------------------------------------------------------------------------------
    def _stopped(self) -> bool:
        stat = process_stat(self.pid)
        return stat is not None and stat[0] in "Tt"

    def _signal(self, which: signal.Signals, tree: bool = False) -> None:
        """``which`` to the trainer; ``tree``: also to every process below it (torchrun's ranks)."""
        if not self.alive():  # an adopted pid may belong to another process by now
            return
        for pid in [self.pid, *(descendants(self.pid) if tree else [])]:
            try:
                os.kill(pid, which)
            except ProcessLookupError:  # it ended just now
                pass

    def _settle(self, done) -> None:
        deadline = time.monotonic() + SETTLE_S
        while self.alive() and not done() and time.monotonic() < deadline:
            time.sleep(0.01)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (its children, theirs, ...), from /proc's parent pids."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # it ended while we looked
            continue
        parent = int(text[text.rfind(")") + 2 :].split()[1])  # field 4 of proc(5)
        parents.setdefault(parent, []).append(int(stat.parent.name))
    found, queue = [], list(parents.get(pid, []))
    while queue:
        child = queue.pop()
        found.append(child)
        queue.extend(parents.get(child, []))
    return found


def finished(run_dir: Path) -> bool:
    """Whether the last step in ``run_dir``'s progress.jsonl is the last step planned."""
    try:
        lines = read_tail(Path(run_dir) / PROGRESS, TAIL_BYTES).splitlines()  # a FIFO: refused
        last = json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(last, dict) and last.get("steps") is not None and last.get("step") == last["steps"]
