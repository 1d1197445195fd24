"""Checkpoints: a run directory's model and training state, saved and loaded back.

`save_checkpoint` writes the run directory's files (listed in
`glassformer.formats.run_directory`): the model (``config.json``, ``model.safetensors``,
``tokenizer.json``), which `read_run` there reads back and `load_model` here puts on a
device, and the trainer's (``train_config.json``, ``trainer_state.pt``; `MetricsLog`
appends to ``metrics.jsonl``).

Every file is written atomically (temporary name, fsync, rename: `glassformer.atomic`), so
a crash leaves the old file or the new one, never half of one. A crash *between* two files
can leave weights of step N beside a trainer state of step N - k; `load_trainer_state`
detects that from the step both record. ``metrics.jsonl`` is appended a line at a time
(flush + fsync), and a reader skips a last line cut short by a crash.

``trainer_state.pt`` is written with ``torch.save`` and read only with
``torch.load(weights_only=True)``, which refuses to unpickle arbitrary objects. So it may
hold only tensors, dicts, lists, tuples, str, int, float, bool and None; `save_checkpoint`
checks that before writing anything, and `capture_rng` turns numpy's and Python's RNG
states into exactly such values. Loading never writes to the run directory.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from glassformer.atomic import write_bytes_atomic, write_text_atomic
from glassformer.config import ModelConfig
from glassformer.formats.run_directory import (
    CONFIG,
    METRICS,
    RUN_FILES,
    TOKENIZER,
    TRAIN_CONFIG,
    TRAINER_STATE,
    WEIGHTS,
    existing_run_dir,
    read_config,
    read_json,
    read_run,
    read_tokenizer,
    required_file,
    unique_state_dict,
)
from glassformer.models import TransformerModel
from glassformer.train.metrics import MetricsLog, read_metrics  # re-exported: the run's log
from glassformer.train.rng import capture_rng, restore_rng  # re-exported: saved in trainer_state

__all__ = [
    "CONFIG",
    "METRICS",
    "RUN_FILES",
    "TOKENIZER",
    "TRAINER_STATE",
    "TRAIN_CONFIG",
    "WEIGHTS",
    "MetricsLog",
    "capture_rng",
    "checkpoint_step",
    "load_model",
    "load_trainer_state",
    "read_config",
    "read_metrics",
    "read_tokenizer",
    "read_train_config",
    "restore_rng",
    "save_checkpoint",
    "unique_state_dict",
]


# saving -----------------------------------------------------------------------------
def save_checkpoint(
    run_dir: str | Path,
    net: nn.Module,
    tokenizer: Any | None,
    train_config: dict[str, Any],
    trainer_state: dict[str, Any],
    weights: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Write (or overwrite) the checkpoint files of ``run_dir``; returns its path.

    ``trainer_state`` must hold an integer ``"step"``; the trainer also puts the optimizer
    and scheduler ``state_dict()``, the data batcher's state and `capture_rng` there.
    Everything is serialized and checked first, so a bad value raises before any file is
    touched. ``tokenizer=None`` writes no ``tokenizer.json``. ``metrics.jsonl`` is not
    written here: append to it with `MetricsLog`. ``weights``: the tensors model.safetensors
    stores instead of ``net``'s own, under the names of ``net.config``'s model (a LoRA run's
    merged weights, `glassformer.train.lora_run.merged_weights`).
    """
    run_dir = Path(run_dir)
    net = getattr(net, "_orig_mod", net)  # torch.compile's wrapper prefixes every key: save the model
    config = getattr(net, "config", None)
    if not isinstance(config, ModelConfig):
        raise TypeError(f"net must be a glassformer model with a ModelConfig, got {type(net).__name__}")
    if not isinstance(trainer_state, dict) or not _is_int(trainer_state.get("step")):
        raise ValueError("trainer_state must be a dict with an integer 'step' (optimizer updates done)")
    if not isinstance(train_config, dict):
        raise TypeError(f"train_config must be a dict, got {type(train_config).__name__}")
    if tokenizer is not None and not callable(getattr(tokenizer, "save", None)):
        raise TypeError(f"tokenizer must be a glassformer Tokenizer or None, got {type(tokenizer).__name__}")
    step = int(trainer_state["step"])
    try:
        train_text = json.dumps(train_config, indent=2, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"train_config must be plain JSON values (dicts, lists, numbers, str): {error}"
        ) from None
    _check_weights_only(trainer_state, "trainer_state")
    buffer = io.BytesIO()
    torch.save(trainer_state, buffer)
    metadata = {"format": "pt", "step": str(step), "family": config.family}
    tensors = unique_state_dict(net) if weights is None else weights
    weights_bytes = safetensors.torch.save(tensors, metadata=metadata)

    write_text_atomic(run_dir / CONFIG, config.to_json() + "\n")
    if tokenizer is not None:
        tokenizer.save(run_dir / TOKENIZER)
    write_text_atomic(run_dir / TRAIN_CONFIG, train_text + "\n")
    write_bytes_atomic(run_dir / WEIGHTS, weights_bytes)
    write_bytes_atomic(run_dir / TRAINER_STATE, buffer.getvalue())  # last: it marks a resumable step
    return run_dir


_PLAIN = (str, int, float, bool, type(None), torch.dtype, torch.device, torch.Size)


def _check_weights_only(value: Any, where: str) -> None:
    """Raise TypeError naming the first value ``torch.load(weights_only=True)`` would refuse."""
    kind = type(value)
    if kind in (dict, OrderedDict, list, tuple):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict) and type(key) not in (str, int):
                raise TypeError(
                    f"{where} has a key {key!r} of type {type(key).__name__}; use str or int keys"
                )
            _check_weights_only(item, f"{where}[{key!r}]")
    elif kind not in (torch.Tensor, nn.Parameter) and kind not in _PLAIN:
        raise TypeError(
            f"{where} is a {kind.__module__}.{kind.__qualname__}: {TRAINER_STATE} is read with "
            "torch.load(weights_only=True), which accepts only tensors, dicts, lists, tuples, str, "
            "int, float, bool and None; convert it (a numpy array: torch.from_numpy(x); an object: "
            "its state_dict() or a dict of its fields)"
        )


# loading ----------------------------------------------------------------------------
def load_model(
    run_dir: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> tuple[TransformerModel, Any | None]:
    """``(net, tokenizer)`` from a run directory; ``net`` is in eval mode on ``device``, its
    weights in ``dtype``. See `glassformer.formats.run_directory.read_run`, which reads them:
    the model is built from ``config.json`` and every tensor's name and shape is checked
    against it. ``tokenizer`` is None when the run has no ``tokenizer.json``."""
    net, tokenizer = read_run(run_dir, dtype)
    return net.to(device), tokenizer


def load_trainer_state(run_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The ``trainer_state`` dict given to `save_checkpoint`, read with ``weights_only=True``.

    Fails clearly if the file is missing, damaged, or from another step than the weights
    beside it (a crash between the two writes of a checkpoint).
    """
    run_dir = existing_run_dir(run_dir)
    path = required_file(run_dir, TRAINER_STATE)
    damaged = (
        f"{path} is damaged or not a torch.save file; it was probably cut short by an interrupted "
        "copy: copy the run again, or restart training without resuming"
    )
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise ValueError(damaged)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        reason = next((line.strip() for line in str(error).splitlines() if "Unsupported" in line), "")
        reason = reason.split(" Please use")[0]
        raise ValueError(
            f"{path} holds objects other than tensors and plain values, and nothing is unpickled "
            f"here beyond what torch.load(weights_only=True) allows ({reason}); "
            "re-save it with save_checkpoint"
        ) from None
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as error:
        raise ValueError(f"{damaged} ({str(error).splitlines()[0]})") from None
    if not isinstance(state, dict) or not _is_int(state.get("step")):
        raise ValueError(f"{path} does not hold a trainer state (a dict with an integer 'step')")
    weights_step = checkpoint_step(run_dir)
    if weights_step is not None and weights_step != state["step"]:
        raise ValueError(
            f"{run_dir} mixes two checkpoints: {WEIGHTS} is from step {weights_step} but "
            f"{TRAINER_STATE} from step {state['step']} (a crash between the two writes); "
            "resuming would pair the wrong optimizer state with the weights: restart the run "
            "or restore both files from one checkpoint"
        )
    return state


def read_train_config(run_dir: str | Path) -> dict[str, Any]:
    """The run settings in ``run_dir/train_config.json`` (what resume and eval rebuild from)."""
    return read_json(required_file(existing_run_dir(run_dir), TRAIN_CONFIG))


def checkpoint_step(run_dir: str | Path) -> int | None:
    """The step recorded in ``model.safetensors`` (None if absent or unreadable)."""
    path = Path(run_dir) / WEIGHTS
    try:
        with safe_open(str(path), framework="pt") as handle:
            step = (handle.metadata() or {}).get("step")
    except (SafetensorError, OSError):
        return None
    return int(step) if step is not None and step.isdigit() else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
