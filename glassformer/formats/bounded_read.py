"""A run directory's file read as data that may lie: never blocking, never past its size, never
outside its run.

A run directory may come from anywhere (a class's zip, a download, a shared folder), and the
workshop lists every run under ``runs/`` each time its lab page asks. So a file in a run is
read as untrusted: ``trainer.lock`` may be a FIFO (opening one for reading blocks until a
writer comes, and a listing would wait forever), ``tokenizer.json`` a link to ``/dev/zero``
(endless) or a sparse file of 300 MB, ``config.json`` a link to a file of the user's outside
the run. Every reader of a run's files goes through `open_confined` (or `read_bounded`,
which reads the file whole; `read_tail`, its end; `checked`, for a library that opens the
file itself):

1. the path is resolved, and must stay inside its run (a link out of it is refused);
2. it is stat'ed, and must be a regular file no larger than its limit, before it is opened;
3. it is opened with ``O_NONBLOCK`` (a FIFO that turns up there opens without waiting) and
   ``O_NOFOLLOW``, and the open file is checked again (it may have changed in between);
4. at most ``limit`` bytes are read (it may have grown since).

Each refusal is a `RunFileRefused` (a ValueError) that says what the file is and what to do::

    read_bounded(run / "config.json", limit=1 << 20)   # b'{"vocab_size": 65, ...}'
    read_bounded(run / "trainer.lock", limit=4096)     # RunFileRefused: ... is a named pipe (FIFO), ...

The limit of each run file is `glassformer.formats.run_directory.MAX_BYTES`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
KINDS = {  # what a path that is no regular file is, in words
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


class RunFileRefused(ValueError):
    """A run's file that is not read: outside its run, not a regular file, or over its size."""


def open_confined(path: str | Path, limit: int | None = None, inside: str | Path | None = None) -> int:
    """A read-only descriptor (close it) of the regular file ``path``, at most ``limit`` bytes
    long, whose real path lies inside ``inside`` (by default the folder that holds it).

    FileNotFoundError (an OSError) when it is absent; `RunFileRefused` when it leaves
    ``inside``, is no regular file, or is longer than ``limit``. Never blocks.
    """
    path = Path(path)
    descriptor = os.open(checked(path, limit, inside), OPEN_FLAGS)  # checked first: a FIFO is never opened
    try:
        _check(path, os.fstat(descriptor), limit)  # what was opened, had it changed since
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def read_bounded(path: str | Path, limit: int, inside: str | Path | None = None) -> bytes:
    """The bytes of the regular file ``path``, refused (`RunFileRefused`) rather than read when
    it is longer than ``limit``; the checks of `open_confined`.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "config.json").write_text('{"d_model": 32}')
    ...     read_bounded(Path(folder) / "config.json", limit=100)
    b'{"d_model": 32}'
    >>> read_bounded("/dev/zero", limit=100)
    Traceback (most recent call last):
    ...
    glassformer.formats.bounded_read.RunFileRefused: /dev/zero is a character device, not a regular file...
    """
    with os.fdopen(open_confined(path, limit, inside), "rb") as handle:
        data = handle.read(limit + 1)  # one byte more: it may have grown since it was measured
    if len(data) > limit:
        raise RunFileRefused(_too_long(Path(path), f"is longer than {limit:,} bytes", limit))
    return data


def read_tail(path: str | Path, size: int, inside: str | Path | None = None) -> bytes:
    """The last ``size`` bytes (at most) of the regular file ``path`` (a log, a ``.jsonl`` that
    grows), with the checks of `open_confined`; the file may be of any length."""
    with os.fdopen(open_confined(path, inside=inside), "rb") as handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
        return handle.read(size)


def checked(path: str | Path, limit: int | None = None, inside: str | Path | None = None) -> Path:
    """``path`` resolved, when it is a regular file inside ``inside`` of at most ``limit`` bytes
    (the checks of `open_confined`, without opening it): for a reader that opens the file
    itself (safetensors, torch.load, zipfile), which would block on a FIFO."""
    path = Path(path)
    real = confined(path, path.parent if inside is None else Path(inside))
    _check(path, os.stat(real), limit)
    return real


def confined(path: Path, inside: Path) -> Path:
    """``path`` resolved (every link followed); `RunFileRefused` when that leaves ``inside``."""
    real, root = Path(os.path.realpath(path)), Path(os.path.realpath(inside))
    if real != root and root not in real.parents:
        raise RunFileRefused(
            f"{path} is a link to {real}, outside {inside}; a run's files stay inside its directory, "
            "so it is not read (copy the file into the run instead of linking to it)"
        )
    return real


def _check(path: Path, status: os.stat_result, limit: int | None) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = KINDS.get(stat.S_IFMT(status.st_mode), "not a file")
        raise RunFileRefused(
            f"{path} is {kind}, not a regular file; glassformer writes its run files as plain files, "
            f"so this run is damaged or was not written by it: remove {path.name}, or the run"
        )
    if limit is not None and status.st_size > limit:
        raise RunFileRefused(_too_long(path, f"is {status.st_size:,} bytes long", limit))


def _too_long(path: Path, length: str, limit: int) -> str:
    return (
        f"{path} {length}, more than a {path.name} can be ({limit:,} bytes at most); it is damaged "
        "or not a run's file, so it is refused rather than read"
    )
