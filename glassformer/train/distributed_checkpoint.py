"""A distributed run's checkpoints: `torch.distributed.checkpoint` (DCP) beside the ordinary files.

Each checkpoint of a run on several processes (`glassformer.train.distributed`) writes:

1. every rank: the model and optimizer state, each rank its own shard (FSDP) or rank 0's
   copy of what is replicated (DDP), with `torch.distributed.checkpoint.save` into
   ``RUN/distributed/step-NNNNNNNN.partial/``, and rank 0 the checkpoint's metadata as JSON
   there (`dcp_manifest`: resuming reads that, never DCP's pickled ``.metadata``);
2. after a barrier, rank 0 renames that folder ``step-NNNNNNNN`` (complete from then on),
   then writes the ordinary run files with `save_checkpoint`: the consolidated weights in
   ``model.safetensors`` (so ``gf.load(run)`` and ``glassformer generate run`` read a
   distributed run like any other), the settings, and last ``trainer_state.pt`` (step,
   schedule, batcher position, RNGs), which names the DCP folder in ``"distributed"``
   instead of holding the optimizer state; then the older DCP folders go.

A rank killed at any moment leaves the last complete checkpoint as it was: ``trainer_state.pt``
changes only after its DCP folder is complete, and the folder it names is removed only after
it changed. DCP stores each tensor with its global shape, so `restore` loads it on any number
of processes (reshards it), one process included (no process group needed). A one-process
run keeps its directory format: ``trainer_state.pt`` holds the optimizer, no ``distributed/``.
"""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from glassformer.formats.bounded_read import confined
from glassformer.formats.run_directory import DISTRIBUTED
from glassformer.train import checkpoint, dcp_manifest, distributed

_FOLDER = re.compile(r"step-(\d{8})(\.partial)?")


def folder(run_dir: str | Path, step: int) -> Path:
    """Where the DCP checkpoint of ``step`` lives (relative names are stored: runs move)."""
    return Path(run_dir) / DISTRIBUTED / f"step-{step:08d}"


def save(trainer: Any) -> None:
    """Checkpoint ``trainer`` (a `Trainer` on several processes); every rank must call it."""
    run_dir, step = Path(trainer.run_dir), trainer.step
    done = folder(run_dir, step)
    partial = done.with_name(done.name + ".partial")
    if distributed.is_main():
        shutil.rmtree(partial, ignore_errors=True)  # a save killed half way, earlier
    distributed.barrier()
    metadata = dcp.save(_states(trainer, with_optimizer=bool(trainer.optimizer.state)), checkpoint_id=partial)
    if distributed.is_main():
        dcp_manifest.write(partial, metadata)  # what resuming reads: the .metadata pickle never is
    distributed.barrier()  # every shard written
    full = trainer.parallel.full_model()  # FSDP: gathered (every rank takes part)
    world = trainer.parallel.world

    def consolidate() -> None:
        if done.exists():  # the same step saved before holds the same state
            shutil.rmtree(partial)
        else:
            partial.rename(done)
        where = done.relative_to(run_dir).as_posix()
        layout = {"checkpoint": where, "world_size": world, "optimizer": bool(trainer.optimizer.state)}
        state = trainer._state() | {"optimizer": {}, "distributed": layout}  # the optimizer: in DCP
        checkpoint.save_checkpoint(run_dir, full, trainer.tokenizer, trainer.run.to_dict(), state)
        for old in (run_dir / DISTRIBUTED).iterdir():
            if _FOLDER.fullmatch(old.name) and old != done:
                shutil.rmtree(old, ignore_errors=True)

    distributed.on_main(consolidate)


def restore(trainer: Any, state: dict[str, Any]) -> bool:
    """Load the model and optimizer of ``trainer`` from the DCP checkpoint ``state`` names
    (on this run's number of processes, whatever the number that saved it); False when
    ``state`` is a one-process checkpoint (the caller loads it the ordinary way)."""
    info = state.get("distributed")
    if not isinstance(info, dict):
        if trainer.parallel.kind == "fsdp":
            raise ValueError(
                f"{trainer.run_dir} was saved by one process; resume it with train.parallel='ddp' "
                "(--set train.parallel=ddp) or on one process: FSDP resumes from a distributed checkpoint"
            )
        return False
    where = _inside(Path(trainer.run_dir), info.get("checkpoint"))
    if not where.is_dir():
        raise ValueError(
            f"{where} is missing: {checkpoint.TRAINER_STATE} names it as the distributed checkpoint of "
            f"step {state['step']}; copy the whole run directory, {DISTRIBUTED}/ included"
        )
    loaded = _states(trainer, with_optimizer=info.get("optimizer", True))
    with warnings.catch_warnings():  # one process: DCP says it loads without a process group
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        dcp_manifest.load(loaded, where)  # resharded to this world size, nothing unpickled
    if "optimizer" in loaded:
        set_state_dict(
            trainer.net,
            trainer.optimizer,
            model_state_dict=loaded["model"],
            optim_state_dict=loaded["optimizer"],
        )
    else:
        set_model_state_dict(trainer.net, loaded["model"])
    return True


def _inside(run_dir: Path, name: Any) -> Path:
    """The DCP folder ``name`` of ``run_dir``: ``distributed/step-NNNNNNNN``, a real folder of
    this run (never a path elsewhere, nor a link out of it)."""
    if not isinstance(name, str) or not re.fullmatch(rf"{DISTRIBUTED}/step-\d{{8}}", name):
        raise ValueError(
            f"{run_dir / checkpoint.TRAINER_STATE} names {name!r} as its distributed checkpoint; "
            f"Glassformer writes only {DISTRIBUTED}/step-NNNNNNNN there"
        )
    return confined(run_dir / name, run_dir)  # a link out of the run: RunFileRefused


def _states(trainer: Any, with_optimizer: bool) -> dict[str, Any]:
    """The model's (and optimizer's) state dicts as DCP reads and writes them: keyed by parameter
    name, DTensor shards under FSDP. An optimizer that has not stepped yet is left out: asking
    for its state dict would initialize it with a step of learning rate 0, and AdamW would then
    count one step too many in its bias correction."""
    if not with_optimizer:
        return {"model": get_model_state_dict(trainer.net)}
    model_state, optimizer_state = get_state_dict(trainer.net, trainer.optimizer)
    return {"model": model_state, "optimizer": optimizer_state}
