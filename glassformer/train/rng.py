"""The global random number generators' states, captured and restored through a checkpoint.

A resumed run continues bit for bit only if every generator it draws from — torch's (and
CUDA's), numpy's and Python's — continues where it stopped. `capture_rng` returns their
states as values ``torch.load(weights_only=True)`` accepts (tensors, dicts, numbers, str),
so they can travel in ``trainer_state.pt``; `restore_rng` puts them back.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture_rng() -> dict[str, Any]:
    """The states of torch's, numpy's and Python's global RNGs as weights_only-safe values.

    numpy's state is ``('MT19937', keys uint32[624], pos, has_gauss, cached_gaussian)`` and
    Python's ``(version, 625 ints, gauss_next)``: both become dicts of tensors and numbers.

    >>> state = capture_rng()
    >>> first = random.random(), float(np.random.rand()), float(torch.rand(1))
    >>> restore_rng(state)
    >>> first == (random.random(), float(np.random.rand()), float(torch.rand(1)))
    True
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
