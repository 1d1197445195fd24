"""Training on several processes: `torch.distributed`, launched with ``torchrun``.

    torchrun --standalone --nproc-per-node 2 -m glassformer train --preset shakespeare-char

torchrun starts one process per rank and gives each ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``
and the rendezvous address in its environment; `process_group` reads them (gloo on the CPU,
NCCL on CUDA). Several machines: torchrun's own ``--nnodes`` / ``--rdzv-endpoint``, nothing
more from us (the run directory must then be on a file system every node sees).

What stays the same as one process (`Parallel`):

* ``train.batch_size`` is the *global* batch. Every rank draws the same global batch (a
  batcher's batch k depends on (seed, k) only) and keeps its own contiguous block of rows
  (`shard`). Rank r's loss is weighted by its share of the batch's scored positions, so the
  averaged gradient is the gradient of the global mean loss, as in one process, and the
  reported loss is that mean (`reduce_sum`): one preset gives one loss curve on 1, 2 or N
  processes (in float32, equal up to the order of the reductions; dropout masks differ).
* ``train.parallel = "ddp"`` (the default): `DistributedDataParallel`, a full replica per
  rank, gradients averaged during backward. ``"fsdp"``: FSDP2 (`fully_shard`), each block's
  parameters, gradients and optimizer state sharded over the ranks.
* Rank 0 alone writes metrics, progress, the film, samples and TensorBoard (every line
  records ``world_size``), and evaluates on the full validation set with a full copy of
  the model (`on_main`); the others wait at a barrier.

A rank that dies must not leave the others waiting forever: every collective times out
after ``train.distributed_timeout_s`` and raises. torchrun itself stops the other workers
when one fails; ``--max-restarts N`` restarts them all, and ``--resume`` in the command
then continues from the last checkpoint (`glassformer.train.distributed_checkpoint`).
"""

from __future__ import annotations

import copy
import gc
import inspect
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from glassformer.inputs import ModelInputs
from glassformer.models.stack import TransformerStack

Batch = dict[str, torch.Tensor]
T = TypeVar("T")


# the process group ------------------------------------------------------------------
def launched() -> bool:
    """Whether torchrun (or another launcher) started this process as one of several ranks."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def active() -> bool:
    """Whether this process is one rank of an initialized process group of several."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    """Rank 0: the one process that writes the run's logs and consolidated files."""
    return rank() == 0


@contextmanager
def process_group(timeout_s: float = 600.0) -> Iterator[None]:
    """Join torchrun's process group for the ``with`` block (nothing when launched alone).

    ``timeout_s``: how long a collective waits for the other ranks before it raises; a
    rank that died is then reported instead of hanging the rest.
    """
    if not launched() or active():
        yield
        return
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    cuda = torch.cuda.is_available()
    if cuda:  # one GPU per rank of this node
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    try:
        yield
    except BaseException as error:  # Ctrl-C's KeyboardInterrupt (`StopRequest`) included
        # its traceback keeps the frames it passed through alive, and their locals (a trainer, its
        # DDP reducer) with them: cleared, so that gc.collect below frees them while the group
        # exists, not when the error is dropped after destroy_process_group (a hang at exit)
        traceback.clear_frames(error.__traceback__)
        raise
    finally:
        # what the block left unreachable (a trainer, its DDP reducer, in reference cycles) goes
        # while the group it talks to still exists: freed after it, a reducer can hang the exit
        gc.collect()
        dist.destroy_process_group()


def barrier() -> None:
    if active():
        dist.barrier()


def broadcast(value: T) -> T:
    """Rank 0's ``value`` on every rank (any picklable object)."""
    if not active():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def on_main(work: Callable[[], T]) -> T:
    """``work()`` on rank 0; its result (or the error it raised, re-raised) on every rank.
    The other ranks wait, so nobody races ahead while rank 0 evaluates or writes."""
    if not active():
        return work()
    result: tuple[bool, Any] = (True, None)
    if is_main():
        try:
            result = (True, work())
        except Exception as error:  # told to the others, so that they stop too
            result = (False, error)
    ok, value = broadcast(result)
    if not ok:
        raise value  # on every rank: each stops with rank 0's own error
    return value


class StopRequest:
    """Ctrl-C at a step boundary: the run stops after the step under way, with a checkpoint.

    Ranks must: the signal reaches them at different points of a step (torchrun passes its own
    SIGINT or SIGTERM on to every worker; the lab signals rank 0 alone), and a checkpoint is
    written by all of them together. So while a run has several processes, SIGINT and SIGTERM
    only set ``requested``; after each step the ranks agree (`agreed`: the maximum over the
    ranks, one small all-reduce) and all raise ``KeyboardInterrupt`` at the same step
    boundary, where the trainer saves. One process does the same with SIGINT: a Ctrl-C that
    landed anywhere (inside TensorBoard's writer queue, say) could leave a library half way,
    and the trainer then hung on its way out, after its checkpoint; a second Ctrl-C stops it
    at once. The handlers are put back on exit.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, world: int, device: torch.device) -> None:
        self.world, self.device, self.requested = world, device, False
        self.stopping = False  # the ranks agreed to stop after this step
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            signals = self.SIGNALS if self.world > 1 else (signal.SIGINT,)
            self._previous = {sig: signal.signal(sig, self._request) for sig in signals}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _request(self, signum: int, frame: Any) -> None:
        if self.requested and self.world == 1:  # asked twice: now, wherever it is
            raise KeyboardInterrupt
        self.requested = True

    def agreed(self) -> bool:
        """Whether any rank was asked to stop (every rank calls it after the same step)."""
        if self.world == 1:
            self.stopping = self.requested
            return self.stopping
        flag = torch.tensor(float(self.requested), device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        self.stopping = bool(flag)
        return self.stopping


# the model across ranks ----------------------------------------------------------------
class FamilyForward(nn.Module):
    """The family's forward pass (`ModelInputs.forward`: ``net(ids, mask)``, ``net.classify``, ...)
    as one module's ``forward``, which is what `DistributedDataParallel` wraps."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, *inputs: Any) -> torch.Tensor:
        return ModelInputs(self.net).forward(*inputs)


class Parallel:
    """How this process trains ``net``: alone, as a DDP replica or as an FSDP2 shard.

    Built before the optimizer (FSDP2 replaces the parameters by sharded DTensors in place).
    One process: every method is the identity and ``net`` is untouched.
    """

    def __init__(self, net: nn.Module, kind: str = "ddp") -> None:
        if kind not in ("ddp", "fsdp"):
            raise ValueError(f"train.parallel={kind!r}; allowed values: ddp, fsdp")
        self.net, self.world, self.rank = net, world_size(), rank()
        self.kind = kind if self.world > 1 else "single"
        self.ddp: nn.Module | None = None
        self.full_copy: nn.Module | None = None  # FSDP: rank 0's unsharded twin, for evaluation
        if self.kind == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            device = next(net.parameters()).device
            # buffers are not synced at each forward: none is learned, and rank 0 evaluates alone
            quiet = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
            self.ddp = DistributedDataParallel(
                FamilyForward(net),
                device_ids=[device.index] if device.type == "cuda" else None,
                **{"forward_sync_buffers" if quiet else "broadcast_buffers": False},
            )
        elif self.kind == "fsdp":
            from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

            if self.rank == 0:
                self.full_copy = copy.deepcopy(net)
            for stack in [m for m in net.modules() if isinstance(m, TransformerStack)]:
                for block in stack.blocks:
                    fully_shard(block)
            fully_shard(net)  # the rest: embeddings, final norm, heads (tied weights together)
            for method in ("classify", "encode"):  # entry points other than forward
                if callable(getattr(net, method, None)):
                    register_fsdp_forward_method(net, method)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, batch: Batch) -> tuple[Batch, float]:
        """(this rank's contiguous block of the global batch's rows, its share of the batch's
        scored positions). The loss weighted by ``world * share`` and averaged over the ranks
        is the global batch's mean loss."""
        if self.world == 1:
            return batch, 1.0
        rows = len(batch["labels"])
        if rows < self.world:
            raise ValueError(
                f"train.batch_size={rows} is smaller than the {self.world} processes: each needs at "
                "least one row of the global batch; raise train.batch_size or start fewer processes"
            )
        mine = {
            key: value.tensor_split(self.world)[self.rank]
            if isinstance(value, torch.Tensor) and value.dim() > 0 and len(value) == rows
            else value
            for key, value in batch.items()
        }
        scored = int((batch["labels"] != -100).sum())
        return mine, int((mine["labels"] != -100).sum()) / max(scored, 1)

    def weighted(self, loss: torch.Tensor, share: float) -> torch.Tensor:
        """This rank's loss, weighted so that the averaged gradient is the global mean's."""
        return loss if self.world == 1 else loss * (self.world * share)

    def forward(self, net: nn.Module) -> Callable[..., torch.Tensor]:
        """The forward pass for ``net``: through DDP while training (its gradient hooks), the
        plain family forward otherwise (rank 0's evaluation, with no collective)."""
        if self.ddp is not None and net is self.net and torch.is_grad_enabled():
            return self.ddp
        return ModelInputs(net).forward

    def reduce_sum(self, value: float) -> float:
        """The sum of ``value`` over the ranks."""
        if self.world == 1:
            return value
        total = torch.tensor(value, dtype=torch.float64, device=_device(self.net))
        dist.all_reduce(total)
        return float(total)

    def full_model(self) -> nn.Module | None:
        """The whole model on rank 0 (None on the others), for evaluation and consolidated
        weights. FSDP: every rank must call it (the shards are gathered into rank 0's copy)."""
        if self.kind != "fsdp":
            return self.net if self.is_main else None
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(self.net, options=options)
        if self.full_copy is not None:
            self.full_copy.load_state_dict(state)
        return self.full_copy

    def on_full_model(self, owner: Any, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` on rank 0 with ``owner.net`` the whole model (FSDP: rank 0's gathered copy,
        put back afterwards); its result on every rank (`on_main`)."""
        full = self.full_model()
        if self.kind != "fsdp":
            return on_main(lambda: work(*args))

        def with_full_model() -> T:
            sharded, owner.net = owner.net, full
            try:
                return work(*args)
            finally:
                owner.net = sharded

        return on_main(with_full_model)

    def stop_request(self) -> StopRequest:
        """Ctrl-C that stops every rank (or the one process) at one step boundary."""
        return StopRequest(self.world, _device(self.net))

    def log(self, log: Any) -> Any:
        """A run file's writer for this rank: rank 0's adds ``world_size`` to each line; the
        others write nothing."""
        return _Stamped(log, self.world) if self.is_main else _Silent()


def local_value(value: torch.Tensor) -> torch.Tensor:
    """A DTensor (FSDP's gradient norm) as the whole tensor; other tensors unchanged."""
    full = getattr(value, "full_tensor", None)
    return full() if callable(full) else value


def _device(net: nn.Module) -> torch.device:
    device = next(net.parameters()).device
    return device if device.type != "meta" else torch.device("cpu")


class _Stamped:
    """A `MetricsLog` whose lines each record the world size."""

    def __init__(self, log: Any, world: int) -> None:
        self.log, self.world = log, world

    def append(self, record: dict[str, Any]) -> None:
        self.log.append(record | {"world_size": self.world})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)


class _Silent:
    """A run file's writer on a rank other than 0: nothing is written."""

    def append(self, record: dict[str, Any]) -> None:
        pass

    def truncate_after(self, step: int) -> None:
        pass
