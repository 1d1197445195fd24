"""The run directories in a folder at a glance: `list_runs` (what ``glassformer runs`` prints)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from glassformer.formats.bounded_read import checked
from glassformer.formats.run_directory import (
    MAX_BYTES,
    METRICS,
    RUN_FILES,
    TRAIN_CONFIG,
    WEIGHTS,
    read_json,
    reason,
)
from glassformer.train.checkpoint import checkpoint_step
from glassformer.train.metrics import read_metrics


@dataclass(frozen=True)
class RunSummary:
    """One run directory at a glance (values None when the file that holds them is absent).

    ``step``: the last step logged in metrics.jsonl; ``checkpoint_step``: the step of the
    saved weights (where a resume starts); ``best_val_loss``: the lowest ``val_loss``
    logged; ``preset``: ``train_config["preset"]`` or else ``train_config["name"]``;
    ``problem``: why a file could not be read, if one could not.
    """

    name: str
    path: Path
    step: int | None
    best_val_loss: float | None
    preset: str | None = None
    checkpoint_step: int | None = None
    problem: str | None = None


def list_runs(root: str | Path) -> list[RunSummary]:
    """The run directories directly under ``root``, sorted by name; reads, never writes.

    A folder counts as a run if it holds any of the run files. A damaged file does not stop
    the listing: it is reported in that run's ``problem``. Each file is read as
    `glassformer.formats.bounded_read` reads a run's: a FIFO, a device, a link out of the run
    or a file over its size is a problem, never opened or read.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory: give the folder that holds the run directories")
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    return [summarize(folder) for folder in folders if any((folder / n).exists() for n in RUN_FILES)]


def summarize(folder: Path) -> RunSummary:
    """The `RunSummary` of one run directory."""
    problem = preset = None
    try:
        if (folder / METRICS).exists():  # checked before `read_metrics` opens it
            checked(folder / METRICS, MAX_BYTES[METRICS], inside=folder)
        records = read_metrics(folder / METRICS)
    except Exception as error:  # anything a damaged file makes its reader raise is the run's problem
        records, problem = [], reason(error)
    try:
        if (folder / TRAIN_CONFIG).exists():
            train_config = read_json(folder / TRAIN_CONFIG)
            preset = train_config.get("preset", train_config.get("name"))
    except Exception as error:
        problem = reason(error)
    steps = [r["step"] for r in records if isinstance(r.get("step"), int) and not isinstance(r["step"], bool)]
    losses = [r["val_loss"] for r in records if isinstance(r.get("val_loss"), (int, float))]
    return RunSummary(
        name=folder.name,
        path=folder,
        step=steps[-1] if steps else None,
        best_val_loss=min(losses) if losses else None,
        preset=None if preset is None else str(preset),
        checkpoint_step=_weights_step(folder),
        problem=problem,
    )


def _weights_step(folder: Path) -> int | None:
    """`checkpoint_step`, for weights that are a regular file inside the run (safetensors would
    block on a FIFO, and follow a link anywhere)."""
    try:
        checked(folder / WEIGHTS, inside=folder)
    except (OSError, ValueError):
        return None
    return checkpoint_step(folder)
