"""Where the lab's Start writes: a run directory of its own, never one that holds a run.

A Start used to train into ``runs/<preset>-lab`` with ``--overwrite``, so a start after a Stop
deleted the stopped run (its checkpoint too) before the trainer had even checked its settings,
and a start the trainer then refused left nothing at all (issue 30). Now each Start gets a
fresh name, ``<preset>-lab``, else ``<preset>-lab-2``, ``-3``, ...: the first whose directory
holds no file but a lock no trainer holds (what a start that failed before its first file
leaves behind). So nothing a start does, failed or not, deletes or changes another run; the
runs a learner keeps are listed, continued or deleted by them.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from glassformer.formats.run_directory import LOCK
from glassformer.train.run_lock import holder

LAB_SUFFIX = "-lab"


def fresh_run(runs_root: Path, preset: str) -> str:
    """The name of a new run of ``preset`` under ``runs_root`` (see the module docstring)."""
    for number in itertools.count(1):
        name = f"{preset}{LAB_SUFFIX}" + ("" if number == 1 else f"-{number}")
        if unused(Path(runs_root) / name):
            return name
    raise AssertionError("unreachable")  # itertools.count never ends


def unused(directory: Path) -> bool:
    """Whether ``directory`` is absent, or a directory holding nothing but a lock no trainer
    holds: a new run may go there without touching anyone's files."""
    if not directory.exists() and not directory.is_symlink():
        return True
    if directory.is_symlink() or not directory.is_dir():
        return False
    try:
        names = [path.name for path in directory.iterdir()]
    except OSError:  # cannot be listed: not ours to write
        return False
    return all(name == LOCK for name in names) and holder(directory) is None
