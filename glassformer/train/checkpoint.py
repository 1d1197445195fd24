"""Run directories: save a model and its training state, load them back, list runs.

A run directory holds::

    config.json         the ModelConfig: the only source of the architecture
    model.safetensors   the weights; a tied matrix is stored once, under its first name
    tokenizer.json      the tokenizer in glassformer's JSON format (absent if none was given)
    train_config.json   the caller's training settings, a plain JSON object
    trainer_state.pt    optimizer, schedule, step, data position, RNG states
    metrics.jsonl       one JSON object per evaluation, appended as training goes

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
import random
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from glassformer.atomic import write_bytes_atomic, write_text_atomic
from glassformer.config import ModelConfig
from glassformer.models import build
from glassformer.train.metrics import MetricsLog, read_metrics  # re-exported: the run's log

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
TRAIN_CONFIG = "train_config.json"
TRAINER_STATE = "trainer_state.pt"
METRICS = "metrics.jsonl"
RUN_FILES = (CONFIG, WEIGHTS, TOKENIZER, TRAIN_CONFIG, TRAINER_STATE, METRICS)

__all__ = [
    "MetricsLog",
    "RunSummary",
    "capture_rng",
    "list_runs",
    "load_model",
    "load_trainer_state",
    "read_metrics",
    "restore_rng",
    "save_checkpoint",
]


# saving -----------------------------------------------------------------------------
def save_checkpoint(
    run_dir: str | Path,
    net: nn.Module,
    tokenizer: Any | None,
    train_config: dict[str, Any],
    trainer_state: dict[str, Any],
) -> Path:
    """Write (or overwrite) the checkpoint files of ``run_dir``; returns its path.

    ``trainer_state`` must hold an integer ``"step"``; the trainer also puts the optimizer
    and scheduler ``state_dict()``, the data batcher's state and `capture_rng` there.
    Everything is serialized and checked first, so a bad value raises before any file is
    touched. ``tokenizer=None`` writes no ``tokenizer.json``. ``metrics.jsonl`` is not
    written here: append to it with `MetricsLog`.
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
    weights = safetensors.torch.save(unique_state_dict(net), metadata=metadata)

    write_text_atomic(run_dir / CONFIG, config.to_json() + "\n")
    if tokenizer is not None:
        tokenizer.save(run_dir / TOKENIZER)
    write_text_atomic(run_dir / TRAIN_CONFIG, train_text + "\n")
    write_bytes_atomic(run_dir / WEIGHTS, weights)
    write_bytes_atomic(run_dir / TRAINER_STATE, buffer.getvalue())  # last: it marks a resumable step
    return run_dir


def unique_state_dict(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net.state_dict()`` with each shared tensor kept once, under its first name.

    GPT-2's ``lm_head.weight`` *is* ``embed.token.weight``: safetensors refuses to store
    two names for one memory, and storing it twice would untie it on load.
    """
    unique: dict[str, torch.Tensor] = {}
    seen: set[tuple] = set()
    for name, tensor in net.state_dict().items():
        key = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        unique[name] = tensor.detach().cpu().contiguous()
    return unique


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
def load_model(run_dir: str | Path, device: str | torch.device = "cpu") -> tuple[nn.Module, Any | None]:
    """``(net, tokenizer)`` from a run directory; ``net`` is in eval mode on ``device``.

    The model is built from ``config.json`` and filled from ``model.safetensors``; every
    tensor's name and shape is checked against the config. ``tokenizer`` is None when the
    run has no ``tokenizer.json``. If the weights were saved in one floating dtype
    (bfloat16, say) the model is converted to it.
    """
    run_dir = _existing_run_dir(run_dir)
    config = read_config(run_dir)
    weights_path = _required(run_dir, WEIGHTS)
    try:
        tensors = safetensors.torch.load_file(str(weights_path), device=str(device))
    except SafetensorError as error:
        raise ValueError(
            f"{weights_path} is damaged ({error}); it may have been cut short by an interrupted "
            "copy or download: copy the run again or re-save the checkpoint"
        ) from None
    with torch.random.fork_rng(devices=[]):  # building initializes weights: keep the caller's RNG as it was
        net = build(config).to(device)
    expected = {name: tuple(t.shape) for name, t in unique_state_dict(net).items()}
    problems = [f"missing {name}" for name in expected if name not in tensors]
    problems += [f"unexpected {name}" for name in tensors if name not in expected]
    problems += [
        f"{name} has shape {tuple(tensors[name].shape)}, config says {shape}"
        for name, shape in expected.items()
        if name in tensors and tuple(tensors[name].shape) != shape
    ]
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ValueError(
            f"{weights_path} does not match {run_dir / CONFIG} ({shown}); the two files come from "
            "different models: restore the config.json saved with these weights"
        )
    dtypes = {t.dtype for t in tensors.values() if t.is_floating_point()}
    if len(dtypes) == 1:
        net = net.to(dtypes.pop())
    net.load_state_dict(tensors, strict=False)  # tied aliases are the same Parameter: filled too
    return net.eval(), read_tokenizer(run_dir)


def load_trainer_state(run_dir: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The ``trainer_state`` dict given to `save_checkpoint`, read with ``weights_only=True``.

    Fails clearly if the file is missing, damaged, or from another step than the weights
    beside it (a crash between the two writes of a checkpoint).
    """
    run_dir = _existing_run_dir(run_dir)
    path = _required(run_dir, TRAINER_STATE)
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


def read_config(run_dir: str | Path) -> ModelConfig:
    """The ModelConfig in ``run_dir/config.json``."""
    path = _required(Path(run_dir), CONFIG)
    data = _read_json(path)
    try:
        return ModelConfig.from_dict(data)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} is not a valid ModelConfig: {error}") from None


def read_train_config(run_dir: str | Path) -> dict[str, Any]:
    """The run settings in ``run_dir/train_config.json`` (what resume and eval rebuild from)."""
    return _read_json(_required(_existing_run_dir(run_dir), TRAIN_CONFIG))


def read_tokenizer(run_dir: str | Path) -> Any | None:
    """The tokenizer in ``run_dir/tokenizer.json`` (glassformer format), or None if absent."""
    from glassformer.tokenizers.base import FORMAT
    from glassformer.tokenizers.loading import from_our_json

    path = Path(run_dir) / TOKENIZER
    if not path.exists():
        return None
    data = _read_json(path)
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not in glassformer's tokenizer format (format={data.get('format')!r}); "
            "load it with glassformer.tokenizers.load_tokenizer instead"
        )
    return from_our_json(data, path)


def checkpoint_step(run_dir: str | Path) -> int | None:
    """The step recorded in ``model.safetensors`` (None if absent or unreadable)."""
    path = Path(run_dir) / WEIGHTS
    try:
        with safe_open(str(path), framework="pt") as handle:
            step = (handle.metadata() or {}).get("step")
    except (SafetensorError, OSError):
        return None
    return int(step) if step is not None and step.isdigit() else None


def _existing_run_dir(run_dir: str | Path) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a run directory" if run_dir.exists() else "does not exist"
        raise FileNotFoundError(
            f"{run_dir} {what}; check the path (list_runs(root) shows the runs under a folder)"
        )
    return run_dir


def _required(run_dir: Path, name: str) -> Path:
    path = run_dir / name
    if not path.is_file():
        present = sorted(p.name for p in run_dir.iterdir() if p.name in RUN_FILES)
        raise FileNotFoundError(
            f"{path} is missing, so {run_dir} is not a complete run directory (it has: "
            f"{', '.join(present) or 'none of the run files'}); was the checkpoint saved with "
            "save_checkpoint, and copied whole?"
        )
    return path


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not valid JSON ({error}); it was edited by hand or cut short: fix it, "
            "or copy it again from where the run was saved"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds JSON but not an object {{...}}")
    return data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# random number generators -----------------------------------------------------------
def capture_rng() -> dict[str, Any]:
    """The states of torch's, numpy's and Python's global RNGs as weights_only-safe values.

    numpy's state is ``('MT19937', keys uint32[624], pos, has_gauss, cached_gaussian)`` and
    Python's ``(version, 625 ints, gauss_next)``: both become dicts of tensors and numbers.
    """
    algorithm, keys, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    version, internal, gauss_next = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "algorithm": str(algorithm),
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached_gaussian),
        },
        "python": {
            "version": version,
            "internal": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": gauss_next,
        },
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back the RNG states `capture_rng` returned (CUDA's only if this machine has CUDA)."""
    missing = [key for key in ("torch", "numpy", "python") if key not in state]
    if missing:
        raise ValueError(f"RNG state lacks {', '.join(missing)}: give the dict capture_rng() returned")
    torch.set_rng_state(state["torch"].cpu())
    n = state["numpy"]
    keys = n["keys"].cpu().numpy().astype(np.uint32)
    np.random.set_state((n["algorithm"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(int(x) for x in p["internal"].tolist()), p["gauss_next"]))
    if "cuda" in state and torch.cuda.is_available() and len(state["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


# listing runs -----------------------------------------------------------------------
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
    the listing: it is reported in that run's ``problem``.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory: give the folder that holds the run directories")
    runs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not any((folder / name).exists() for name in RUN_FILES):
            continue
        problem = preset = None
        try:
            records = read_metrics(folder / METRICS)
        except ValueError as error:
            records, problem = [], str(error)
        try:
            if (folder / TRAIN_CONFIG).exists():
                train_config = _read_json(folder / TRAIN_CONFIG)
                preset = train_config.get("preset", train_config.get("name"))
        except ValueError as error:
            problem = str(error)
        steps = [r["step"] for r in records if _is_int(r.get("step"))]
        losses = [r["val_loss"] for r in records if isinstance(r.get("val_loss"), (int, float))]
        runs.append(
            RunSummary(
                name=folder.name,
                path=folder,
                step=steps[-1] if steps else None,
                best_val_loss=min(losses) if losses else None,
                preset=None if preset is None else str(preset),
                checkpoint_step=checkpoint_step(folder),
                problem=problem,
            )
        )
    return runs
