"""Atomic writes: write to a temporary name beside the target, fsync, rename.

A crash at any moment leaves either the old file or the new one, never half of one.
The file gets the permissions an ordinary ``open(path, "w")`` would give it (0666 less
the umask), not the owner-only mode of a temporary file.

Directories (a checkpoint: config, weights, tokenizer) are written whole into a hidden
sibling that is then renamed into place (`write_directory_atomic`). Replacing an existing
directory is the dangerous part: it is done only when the old one holds nothing but the
files the writer owns (`check_replaceable`), and those are the only files deleted.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


# -- directories --------------------------------------------------------------------------------


def check_replaceable(target: Path, owned: Collection[str], owned_folders: Collection[str] = ()) -> None:
    """Refuse to replace ``target`` unless it is absent, empty, or holds only files whose names
    match ``owned`` (shell patterns such as ``model-*-of-*.safetensors``) and folders named
    in ``owned_folders``: what the writer itself would put there. ValueError naming
    everything else it holds, so nothing of anyone else's is ever deleted
    (``export MODEL ~ --overwrite`` must not empty a home).

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text("{}"), (folder / "notes.txt").write_text("mine")
    >>> check_replaceable(folder, {"config.json", "*.safetensors"})
    Traceback (most recent call last):
    ...
    ValueError: ... holds notes.txt, which this writer does not own; refusing to replace it ...
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise FileExistsError(f"{target} exists and is not a directory; choose another path")
    if not target.is_dir():
        return
    others = sorted(
        f"{path.name}/" if path.is_dir() else path.name
        for path in target.iterdir()
        if (path.name not in owned_folders if path.is_dir() else not _matches(path.name, owned))
    )
    if others:
        shown = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
        what = (
            f"holds {shown}, which this writer does not own" if owned else f"is not empty (it holds {shown})"
        )
        raise ValueError(
            f"{target} {what}; refusing to replace it (nothing was changed: move those away or choose "
            "another directory)"
        )


def _matches(name: str, patterns: Collection[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def delete_owned_directory(
    target: Path, owned: Collection[str], owned_folders: Collection[str] = (), keep: Collection[str] = ()
) -> None:
    """Delete ``target`` when it holds nothing but what the project wrote there: files whose
    names match ``owned`` and folders named in ``owned_folders`` (written whole by the
    project, such as a run's ``tensorboard/``). Anything else: ValueError naming it, and
    nothing is deleted. A missing ``target`` is left missing. Owned files named in ``keep``
    stay, and the directory with them: a lock file the deleter holds must not be pulled
    from under it.

    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp()) / "run"
    >>> (run / "tensorboard").mkdir(parents=True)
    >>> _ = (run / "config.json").write_text("{}"), (run / "thesis.tex").write_text("mine")
    >>> delete_owned_directory(run, {"config.json"}, {"tensorboard"})
    Traceback (most recent call last):
    ...
    ValueError: ... holds thesis.tex, which this writer does not own; refusing to replace it ...
    >>> (run / "thesis.tex").unlink(); delete_owned_directory(run, {"config.json"}, {"tensorboard"})
    >>> run.exists()
    False
    """
    target = Path(target)
    if not target.exists():
        return
    check_replaceable(target, owned, owned_folders)
    for path in target.iterdir():
        if path.name not in keep:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if not any(target.iterdir()):
        target.rmdir()


def replace_directory(target: Path, staging: Path, owned: Collection[str]) -> None:
    """Put the finished directory ``staging`` in the place of ``target`` by two renames, after
    `check_replaceable`; then delete the old directory's files, which are all ``owned``
    (a file that appeared in it meanwhile is kept, and named)."""
    target, staging = Path(target).absolute(), Path(staging)
    check_replaceable(target, owned)
    old = target.with_name(f"{staging.name}.old")
    if target.exists() or target.is_symlink():
        os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        if old.exists() or old.is_symlink():
            os.replace(old, target)
        raise
    _fsync_directory(target.parent)
    if old.is_symlink():  # the link goes; the directory it pointed to stays as it was
        old.unlink()
    elif old.exists():
        for path in old.iterdir():
            if not path.is_dir() and _matches(path.name, owned):
                path.unlink()
        try:
            old.rmdir()
        except OSError:
            raise OSError(
                f"{target} was written, but files appeared in the directory it replaced meanwhile; "
                f"they are kept in {old}"
            ) from None


@contextmanager
def write_directory_atomic(target: Path, owned: Collection[str]) -> Iterator[Path]:
    """``with write_directory_atomic(out, owned) as staging:`` write the files into ``staging``,
    a hidden sibling of ``out``; when the block ends they are fsynced and the directory
    replaces ``out`` (`replace_directory`). An error on the way removes ``staging`` and
    leaves ``out`` as it was: never a half-written directory."""
    target = Path(target).absolute()  # "." has no name to put a sibling beside
    check_replaceable(target, owned)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    staging.mkdir()
    try:
        yield staging
        for path in staging.iterdir():
            if path.is_file():
                with open(path, "rb") as handle:
                    os.fsync(handle.fileno())
        replace_directory(target, staging, owned)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already when it replaced the target


def _fsync_directory(path: Path) -> None:
    """Make a rename inside ``path`` durable (where the platform allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
