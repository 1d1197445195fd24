"""A training run directory's model: its config, weights and tokenizer, read back.

A run directory (written by `glassformer.train.checkpoint.save_checkpoint`) holds::

    config.json         the ModelConfig: the only source of the architecture
    model.safetensors   the weights; a tied matrix is stored once, under its first name
    tokenizer.json      the tokenizer in glassformer's JSON format (absent if none was given)
    train_config.json   the training settings                     (read by glassformer.train)
    trainer_state.pt    optimizer, schedule, step, data position, RNG states        (idem)
    metrics.jsonl       one JSON object per evaluation                              (idem)
    progress.jsonl      one JSON object per step: loss, gradient norm, lr, tokens/s (idem)
    film.jsonl          one frame per evaluation: a probe's attention, head roles, lens
                        (`glassformer.inspect.film`)
    trainer.lock        while a trainer writes here: its pid and start time, locked by it
                        (`glassformer.train.run_lock`)
    adapter/            a LoRA run's adapters in PEFT's files (`glassformer.train.lora_run`)

`read_run` reads the first three: the network and its tokenizer, nothing of the trainer;
`damage` says, without building anything, why they could not be read. A run may come from
anywhere, so each file is read within its limit (`MAX_BYTES`), as a regular file inside the
run, without ever blocking (`glassformer.formats.bounded_read`).
The model is built without random initialization and each tensor is read from the file
straight into its parameter (`glassformer.formats.safetensors_file`), so loading peaks
near one copy of the weights. Every tensor's name and shape is checked against the config
first, and reading never writes to the directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.formats.bounded_read import checked, open_confined, read_bounded
from glassformer.formats.safetensors_file import SafetensorsFile
from glassformer.models import TransformerModel, build
from glassformer.models.size import check_size
from glassformer.tokenizers.base import FORMAT, Tokenizer

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
TRAIN_CONFIG = "train_config.json"
TRAINER_STATE = "trainer_state.pt"
METRICS = "metrics.jsonl"
TENSORBOARD = "tensorboard"  # a folder of TensorBoard event files
PROGRESS = "progress.jsonl"
FILM = "film.jsonl"
LOCK = "trainer.lock"
DISTRIBUTED = "distributed"  # a distributed run's DCP checkpoints (glassformer.train.distributed_checkpoint)
ADAPTER = "adapter"  # a LoRA run's adapters in PEFT's files (glassformer.train.lora_run)
RUN_FILES = (CONFIG, WEIGHTS, TOKENIZER, TRAIN_CONFIG, TRAINER_STATE, METRICS, PROGRESS, FILM, LOCK)

MiB = 1 << 20
# The most bytes a run file that is read whole can be: past it, a file is damage, refused
# before it is read (a link to /dev/zero, a sparse file of 300 MB).
MAX_BYTES = {
    CONFIG: 1 * MiB,  # a ModelConfig is ~2 KB
    TRAIN_CONFIG: 1 * MiB,  # the run's settings, ~2 KB
    TOKENIZER: 64 * MiB,  # HF's tokenizer.json: Qwen2's 7 MB, Llama 3's 9 MB, Gemma 3's 33 MB
    METRICS: 64 * MiB,  # ~300 bytes an evaluation
    LOCK: 4096,  # {"pid": ..., "started": ...}
}
JSON_BYTES = 1 * MiB  # another JSON file of a run
WEIGHTS_HEADER_BYTES = 16 * MiB  # model.safetensors' JSON header: ~150 bytes a tensor


def read_run(
    path: str | Path, dtype: torch.dtype = torch.float32
) -> tuple[TransformerModel, Tokenizer | None]:
    """``(net, tokenizer)`` of the run directory ``path``: ``net`` in eval mode, its weights
    in ``dtype``; ``tokenizer`` is None when the run has no ``tokenizer.json``.

    >>> import tempfile, safetensors.torch
    >>> net = build(ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=4)).eval()
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = net.config.to_json(Path(folder) / CONFIG)
    ...     safetensors.torch.save_file(unique_state_dict(net), Path(folder) / WEIGHTS)
    ...     loaded, tokenizer = read_run(folder)
    >>> torch.equal(loaded(torch.tensor([[1, 2, 3]])), net(torch.tensor([[1, 2, 3]]))), tokenizer
    (True, None)
    """
    run_dir = existing_run_dir(path)
    config = read_config(run_dir)
    weights = _open_weights(run_dir)
    net = build(config, initialize=False, dtype=dtype)  # every tensor is overwritten below
    targets, stored = unique_state_dict(net, copy=False), set(weights.keys())
    problems = [f"missing {name}" for name in targets if name not in stored]
    problems += [f"unexpected {name}" for name in weights.keys() if name not in targets]
    for name, target in targets.items():
        if name in stored and not weights.read_into(name, target):  # another dtype or shape
            tensor = weights.read(name)
            if tuple(tensor.shape) != tuple(target.shape):
                problems.append(f"{name} has shape {tuple(tensor.shape)}, config says {tuple(target.shape)}")
                continue
            target.copy_(tensor)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ValueError(
            f"{run_dir / WEIGHTS} does not match {run_dir / CONFIG} ({shown}); the two files come from "
            "different models: restore the config.json saved with these weights"
        )
    return net.eval(), read_tokenizer(run_dir)


def damage(run_dir: str | Path) -> str | None:
    """Why the model of the run directory ``run_dir`` cannot be read, or None when it can be
    tried: a missing or unparsable ``config.json``, a config too big for this machine, a
    ``model.safetensors`` whose header does not parse or that is shorter than its header says
    (a copy cut short). Reads config.json and the weights' header only, so listing many runs
    stays quick; `read_run` still checks every tensor against the config.
    """
    try:
        run_dir = existing_run_dir(run_dir)
        check_size(read_config(run_dir))
        _open_weights(run_dir)
        if (run_dir / TOKENIZER).exists():
            read_json(run_dir / TOKENIZER)
    except Exception as error:  # anything a damaged run makes a reader raise is its reason
        return reason(error)
    return None


class Damages:
    """`damage` of each run directory it is asked about, read again only when one of the files
    it reads has changed (the lab lists its runs every few seconds, and a tokenizer.json may
    be tens of MB): ``damages(run_dir)``."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple, str | None]] = {}  # run -> (its files' stat, damage)

    def __call__(self, run_dir: str | Path) -> str | None:
        run_dir, files = Path(run_dir), []
        for name in (CONFIG, WEIGHTS, TOKENIZER):
            try:
                status = (run_dir / name).stat()
                files.append((status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns))
            except OSError:
                files.append(None)
        seen = self._seen.get(run_dir)
        if seen is None or seen[0] != tuple(files):
            seen = self._seen[run_dir] = (tuple(files), damage(run_dir))
        return seen[1]


def reason(error: Exception) -> str:
    """Why a run could not be read, in words, from the exception its reading raised."""
    if isinstance(error, MemoryError):
        return "reading it ran out of memory (MemoryError): its files are larger than a run's can be"
    if isinstance(error, (OSError, ValueError)) and str(error):
        return str(error)
    return f"it could not be read ({type(error).__name__}: {error})"


def unique_state_dict(net: nn.Module, copy: bool = True) -> dict[str, torch.Tensor]:
    """``net.state_dict()`` with each shared tensor kept once, under its first name.

    GPT-2's ``lm_head.weight`` *is* ``stack.embed.token.weight``: safetensors refuses to store
    two names for one memory, and storing it twice would untie it on load. ``copy=True``
    gives detached, contiguous CPU tensors (what a file stores); ``copy=False`` the
    state dict's own tensors, which share memory with the parameters.
    """
    unique: dict[str, torch.Tensor] = {}
    seen: set[tuple] = set()
    for name, tensor in net.state_dict().items():
        key = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        unique[name] = tensor.detach().cpu().contiguous() if copy else tensor
    return unique


def read_config(run_dir: str | Path) -> ModelConfig:
    """The ModelConfig in ``run_dir/config.json``."""
    path = required_file(Path(run_dir), CONFIG)
    data = read_json(path)
    try:
        return ModelConfig.from_dict(data)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} is not a valid ModelConfig: {error}") from None


def read_tokenizer(run_dir: str | Path) -> Tokenizer | None:
    """The tokenizer in ``run_dir/tokenizer.json`` (glassformer format), or None if absent."""
    from glassformer.tokenizers.loading import from_our_json

    path = Path(run_dir) / TOKENIZER
    if not path.exists():
        return None
    data = read_json(path)
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path} is not in glassformer's tokenizer format (format={data.get('format')!r}); "
            "load it with glassformer.tokenizers.load_tokenizer instead"
        )
    return from_our_json(data, path)


def _open_weights(run_dir: Path) -> SafetensorsFile:
    path = required_file(run_dir, WEIGHTS)
    try:
        with os.fdopen(open_confined(path, inside=run_dir), "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
        if length > WEIGHTS_HEADER_BYTES:  # parsed whole, on every listing of the runs
            raise ValueError(f"a header of {length:,} bytes, over a run's {WEIGHTS_HEADER_BYTES:,}")
        return SafetensorsFile(path)  # checks the header against the file's size
    except (ValueError, RecursionError, MemoryError) as error:
        raise ValueError(
            f"{path} is damaged ({error}); it may have been cut short by an interrupted "
            "copy or download: copy the run again or re-save the checkpoint"
        ) from None


def existing_run_dir(run_dir: str | Path) -> Path:
    """``run_dir`` as a Path; FileNotFoundError when it is not a directory."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "is a file, not a run directory" if run_dir.exists() else "does not exist"
        raise FileNotFoundError(
            f"{run_dir} {what}; check the path (glassformer runs --root FOLDER lists the runs in a folder)"
        )
    return run_dir


def required_file(run_dir: Path, name: str) -> Path:
    """``run_dir / name``; FileNotFoundError naming the run files present when it is missing,
    `RunFileRefused` when it is no regular file or a link out of the run (it is not opened)."""
    path = run_dir / name
    if path.exists():
        checked(path, inside=run_dir)
    else:
        present = sorted(p.name for p in run_dir.iterdir() if p.name in RUN_FILES)
        raise FileNotFoundError(
            f"{path} is missing, so {run_dir} is not a complete run directory (it has: "
            f"{', '.join(present) or 'none of the run files'}); was the checkpoint saved with "
            "save_checkpoint, and copied whole?"
        )
    return path


def read_json(path: Path, limit: int | None = None) -> dict[str, Any]:
    """The JSON object in ``path``, a regular file inside its folder of at most ``limit`` bytes
    (by default its `MAX_BYTES`); ValueError saying what is wrong with a damaged file."""
    path = Path(path)
    limit = MAX_BYTES.get(path.name, JSON_BYTES) if limit is None else limit
    try:
        data = json.loads(read_bounded(path, limit).decode("utf-8"))
    except MemoryError:
        raise ValueError(f"{path} holds more JSON than this machine can parse; it is damaged") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not valid JSON ({error}); it was edited by hand or cut short: fix it, "
            "or copy it again from where the run was saved"
        ) from None
    except RecursionError:  # json's parser recurses once per [ or {
        raise ValueError(f"{path} nests its JSON too deeply to be a run file; it is damaged") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds JSON but not an object {{...}}")
    return data
