"""One trainer per run directory: ``trainer.lock``, held with `fcntl.flock` for the trainer's life.

Two trainers writing one run directory would overwrite each other's checkpoints and
interleave their logs. `acquire` (the first thing ``glassformer train`` does) takes an
exclusive flock on ``RUN/trainer.lock`` and writes the trainer's pid and start time there.
The kernel releases a flock when its process ends, however it ends (kill -9 included), so a
file left behind is never taken for a live trainer: only the lock counts; the file's text
just names who holds it. `holder` asks from outside (the workshop's lab): who holds the
lock, and whether that process is stopped (SIGSTOP).

A pid alone is reused by new processes once its process ends; a pid with that process's
start time (field 22 of /proc/PID/stat: clock ticks after boot) names one process for good,
so a signal never reaches a stranger that inherited a trainer's pid.

    with acquire("runs/induction"):      # RunLocked if another trainer holds it
        ...train...                      # released (and the file removed) on the way out
    holder("runs/induction")             # Holder(pid=4242, started=913377, stopped=False) or None
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from glassformer.formats.run_directory import LOCK

ACQUIRE_WAIT_S = 2.0  # how long a lock held by nobody we can name is retried (a lab's quick look)
NAME_WAIT_S = 0.2  # how long a holder has to write its name after locking


class RunLocked(ValueError):
    """Another trainer holds the run directory's lock."""


@dataclass(frozen=True)
class Holder:
    """The process holding a run directory's lock: ``pid`` and ``started`` (its start time
    in clock ticks after boot) are None while the holder has not written them yet (the
    moment after it locked); ``stopped``: it was paused with SIGSTOP (state T)."""

    pid: int | None
    started: int | None
    stopped: bool = False


class RunLock:
    """A held ``trainer.lock``: `release` (or leaving a ``with`` block) lets it go."""

    def __init__(self, run_dir: Path, descriptor: int, created: list[Path]) -> None:
        self.run_dir, self.path = run_dir, run_dir / LOCK
        self._descriptor: int | None = descriptor
        self._created = created  # the folders `acquire` made, the run directory first

    def release(self) -> None:
        """Remove the lock file, then unlock: the file goes while it is still ours, so nobody
        takes over a file that is being deleted. A run directory this lock created and
        that stayed empty (the run failed before it wrote anything) goes too, with the
        folders made for it."""
        if self._descriptor is None:
            return
        try:
            if _same_file(self._descriptor, self.path):
                self.path.unlink()
        finally:
            os.close(self._descriptor)
            self._descriptor = None
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:  # it holds the run (or another): keep it and those above it
                break

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def acquire(run_dir: str | Path) -> RunLock:
    """Lock ``run_dir`` (created if missing) for this process until it releases or ends.

    `RunLocked` names the pid of the trainer that holds it. A lock held by a process that
    has not named itself is retried for up to `ACQUIRE_WAIT_S`: it may be a trainer that has
    just locked, or a lab taking a quick look (`holder`).
    """
    run_dir = Path(run_dir)
    created = [folder for folder in (run_dir, *run_dir.parents) if not folder.exists()]
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    deadline = time.monotonic() + ACQUIRE_WAIT_S
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            named = _named(path)
            if named is not None or time.monotonic() > deadline:
                raise RunLocked(_refusal(run_dir, named)) from None
            time.sleep(0.05)
            continue
        if not _same_file(descriptor, path):  # the holder removed it as we opened it: again
            os.close(descriptor)
            continue
        me = {"pid": os.getpid(), "started": process_started(os.getpid())}
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, (json.dumps(me) + "\n").encode(), 0)
        return RunLock(run_dir, descriptor, created)


def holder(run_dir: str | Path) -> Holder | None:
    """Who holds ``run_dir``'s lock now, or None when no process does. Writes nothing: a
    shared lock is tried for an instant (it fails while a trainer holds the exclusive one)."""
    path = Path(run_dir) / LOCK
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no lock file (no trainer ever, or one that ended well), or unreadable
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pass  # held
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)
    deadline = time.monotonic() + NAME_WAIT_S
    while (named := _named(path)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return named or Holder(pid=None, started=None)


# processes, from /proc ---------------------------------------------------------------------
def process_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) of process ``pid`` from /proc/PID/stat, or None when there is no
    such process (or no /proc). State: R running, S sleeping, T stopped, Z ended (a zombie)..."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name, in parentheses, may hold spaces
    return fields[0], int(fields[19])  # fields 3 and 22 of proc(5)


def process_started(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot), or None when unknown."""
    stat = process_stat(pid)
    return None if stat is None else stat[1]


def _named(path: Path) -> Holder | None:
    """The process the lock file names, if that very process (same start time) still lives."""
    try:
        named = json.loads(path.read_text(encoding="utf-8"))
        pid, started = int(named["pid"]), named["started"]
    except (OSError, ValueError, TypeError, KeyError):
        return None  # not written yet, or not by a trainer
    stat = process_stat(pid)
    if stat is None or stat[0] in "ZX" or stat[1] != started:
        return None
    return Holder(pid=pid, started=started, stopped=stat[0] in "Tt")


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(descriptor), os.stat(path))
    except OSError:
        return False


def _refusal(run_dir: Path, named: Holder | None) -> str:
    who = f"process {named.pid}" if named is not None else "another process"
    paused = " (paused: it is stopped, not ended)" if named is not None and named.stopped else ""
    if named is None:
        stop = f"the process holding {LOCK}"
    else:  # a stopped process takes SIGINT only once it is continued
        stop = f"kill -CONT {named.pid}; kill -INT {named.pid}" if named.stopped else f"kill -INT {named.pid}"
    return (
        f"{run_dir} is being trained by {who}{paused}; two trainers would overwrite each other's "
        f"checkpoints. Stop it first ({stop}, or Stop in the workshop's lab), or train into another --out"
    )
