"""Where a run trains: ``train.device = "auto"`` picks CUDA, else Apple's MPS, else the CPU.

The model is moved there once, when the trainer is made; each batch is moved there as it is
used (`to_device`), so the data pipeline stays on the CPU where it is built. The run's log
names the device it chose (`describe`).

>>> resolve("cpu")
device(type='cpu')
>>> to_device({"input_ids": torch.ones(1, 2, dtype=torch.long)}, torch.device("cpu"))["input_ids"].device
device(type='cpu')
"""

from __future__ import annotations

from typing import Any

import torch

DEVICES = ("auto", "cpu", "cuda", "mps")


def resolve(name: str) -> torch.device:
    """The device ``name`` means here: ``"auto"`` -> cuda if available, else mps, else cpu; a named
    accelerator this machine lacks is refused with what it has instead. ``"cuda:1"`` is allowed."""
    kind = name.partition(":")[0]
    if kind not in DEVICES:
        raise ValueError(f"train.device={name!r}; allowed values: {', '.join(DEVICES)} (or cuda:N)")
    if kind == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if _mps_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"train.device={name!r} but this torch sees no CUDA GPU (torch {torch.__version__}); "
            "use train.device='auto' to train on what this machine has"
        )
    if kind == "mps" and not _mps_available():
        raise ValueError("train.device='mps' but MPS is not available here; use train.device='auto'")
    return torch.device(name)


def describe(requested: str, device: torch.device) -> str:
    """One line for the log: ``device: auto -> cuda (NVIDIA H100 80GB HBM3)``."""
    detail = (
        torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    )
    return f"device: {requested} -> {device} ({detail})"


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The batch's tensors on ``device`` (non-blocking from pinned memory on CUDA); other values kept."""
    if device.type == "cpu":
        return batch
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
