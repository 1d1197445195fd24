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

`holder` answers from one look at the lock at a time, and looks again until its answer holds:
a trainer may let go between the look and the reading of its name (its file then gone, or
naming a process that has ended), and a process whose main thread has ended (a zombie, "Z")
still holds its lock until its last thread is gone. Only a lock held for `NAME_WAIT_S` by no
live process it names is "held by an unnamed process" (``Holder(None, None)``). A process
forked by the trainer does not inherit the lock (`_forget_in_child`), so it cannot keep a run
held after its trainer has ended. The lock file is opened without following a link and
without blocking, and only a plain file of its own is taken: a run from elsewhere cannot
make a trainer truncate another file, nor a FIFO hang the lab that looks at it.

    with acquire("runs/induction"):      # RunLocked if another trainer holds it
        ...train...                      # released (and the file removed) on the way out
    holder("runs/induction")             # Holder(pid=4242, started=913377, stopped=False) or None
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

from glassformer.formats.bounded_read import RunFileRefused, open_confined
from glassformer.formats.run_directory import LOCK, MAX_BYTES

ACQUIRE_WAIT_S = 2.0  # how long a lock held by nobody we can name is retried (a lab's quick look)
NAME_WAIT_S = 0.2  # how long a holder has to write its name after locking
END_WAIT_S = 5.0  # how long an ended holder's lock may outlive it (its other threads still exiting)
UNNAMED, ENDING = "unnamed", "ending"  # a held lock that names no live process / one ending


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
        _HELD.add(self)

    def release(self) -> None:
        """Remove the lock file, then unlock: the file goes while it is still ours, so nobody
        takes over a file that is being deleted. A run directory this lock created and
        that stayed empty (the run failed before it wrote anything) goes too, with the
        folders made for it."""
        if self._descriptor is None:
            return
        _HELD.discard(self)
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

    def _forget(self) -> None:
        """In a forked child: close the child's copy of the descriptor, neither unlocking (a
        flock belongs to the open file, which parent and child share: LOCK_UN would free the
        parent's) nor removing the file. The lock is then the trainer's alone, and goes when
        the trainer ends, whatever its children do."""
        if self._descriptor is not None:
            try:
                os.close(self._descriptor)
            except OSError:
                pass
            self._descriptor = None

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
    began = time.monotonic()
    while True:
        descriptor = _open_own(path)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            named = _named(descriptor)
            os.close(descriptor)
            waited = time.monotonic() - began
            if isinstance(named, Holder) or waited > (END_WAIT_S if named == ENDING else ACQUIRE_WAIT_S):
                raise RunLocked(_refusal(run_dir, named if isinstance(named, Holder) else None)) from None
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
    shared lock is tried for an instant (it fails while a trainer holds the exclusive one).

    A held lock that names no live process is looked at again (the file opened anew) until
    it does, or is free, or `NAME_WAIT_S` has passed (`END_WAIT_S` while the process it names
    is ending): only then is it ``Holder(None, None)``, held by a process that has not named
    itself."""
    run_dir = Path(run_dir)
    began = time.monotonic()
    while True:
        seen = _look(run_dir)
        if seen is None or isinstance(seen, Holder):
            return seen
        if time.monotonic() - began > (END_WAIT_S if seen == ENDING else NAME_WAIT_S):
            return Holder(pid=None, started=None)
        time.sleep(0.02)


def _look(run_dir: Path) -> Holder | str | None:
    """One look at ``run_dir``'s lock: None when no process holds it; when one does, the live
    process its file names, or `ENDING` (that process has ended, its lock not yet let go) or
    `UNNAMED` (it names none: not written yet, or by a process gone)."""
    try:
        descriptor = open_confined(run_dir / LOCK, MAX_BYTES[LOCK], inside=run_dir)
    except (OSError, ValueError):  # no lock file (no trainer, or one that ended well), or no trainer's
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _named(descriptor)  # held: read from the very file that was found locked
        except OSError:  # a file system without flock: no trainer could lock it either
            return None
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


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


def _named(descriptor: int) -> Holder | str:
    """The process the open lock file names, if that very process (same start time) still
    lives; `ENDING` if it has ended (a zombie) and `UNNAMED` if there is no such process."""
    try:
        named = json.loads(os.pread(descriptor, MAX_BYTES[LOCK], 0))
        pid, started = int(named["pid"]), named["started"]
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return UNNAMED  # not written yet, or not by a trainer
    status = process_stat(pid) if pid > 0 else None
    if status is None or status[1] != started:
        return UNNAMED
    if status[0] in "ZX":  # its main thread has ended; the lock goes with its last thread
        return ENDING
    return Holder(pid=pid, started=started, stopped=status[0] in "Tt")


def _open_own(path: Path) -> int:
    """``path`` opened (created if missing) to be locked and written: never through a link,
    never blocking, and only a plain file with no other name, so that the name written into it
    can never overwrite a file of someone else's (a run from elsewhere may hold anything)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    refused = f"; a trainer's lock is a plain file it makes itself: remove {path.name}"
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:
        what = {errno.ELOOP: "a symbolic link", errno.EISDIR: "a directory"}.get(error.errno)
        if what is None:
            raise
        raise RunFileRefused(f"{path} is {what}{refused}") from None
    status = os.fstat(descriptor)
    if not S_ISREG(status.st_mode) or status.st_nlink != 1:
        os.close(descriptor)
        what = "a file with other names (hard links)" if S_ISREG(status.st_mode) else "not a regular file"
        raise RunFileRefused(f"{path} is {what}{refused}")
    return descriptor


_HELD: weakref.WeakSet[RunLock] = weakref.WeakSet()  # the locks this process holds


def _forget_in_child() -> None:
    """A forked child (a data loader's worker, a pool) lets go of its copy of each lock."""
    for lock in list(_HELD):
        lock._forget()


os.register_at_fork(after_in_child=_forget_in_child)


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
