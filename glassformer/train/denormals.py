"""Flush denormal floats to zero while training, and put the setting back afterwards.

Late in training some gradients and Adam moments are denormal floats (smaller than
2^-126 in float32), which x86 CPUs handle in microcode, ~100x slower than normal ones.
Flushing them to zero (the FTZ and DAZ bits of the MXCSR register; FZ on ARM) changes
no loss measurably and keeps late steps as fast as early ones.

``torch.set_flush_denormal(mode)`` sets the flag for the whole thread and until someone
sets it again; torch has no getter. So `flush_denormal` is a context manager that reads
the flag before changing it and restores it on the way out, and `flushing_denormals`
is that getter: it *measures* the flag, by multiplying the smallest denormal double
(5e-324) by 1 — with flushing on the product is 0. Measuring, rather than remembering
what we last set, also sees a flag set by other code (a notebook, another library).

The flag is per thread (MXCSR is a register of each CPU thread): setting it affects the
calling thread and the threads it starts afterwards, which inherit it. Threads of
torch's intra-op pool that already exist keep their own flag either way, and a pool
thread created inside the block (by the first parallel operation) keeps flushing after
it; torch offers no call that reaches them.

>>> before = flushing_denormals()
>>> with flush_denormal() as supported:
...     flushing_denormals() == supported
True
>>> flushing_denormals() == before  # as it was before the block
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

SMALLEST_DENORMAL = 5e-324  # 2^-1074, the smallest positive float64


def flushing_denormals() -> bool:
    """Whether this thread flushes denormal floats to zero (measured, see the module doc)."""
    probe = torch.tensor([SMALLEST_DENORMAL], dtype=torch.float64)
    return (probe * 1.0).item() == 0.0  # one element: computed on this thread


@contextlib.contextmanager
def flush_denormal(enabled: bool = True) -> Iterator[bool]:
    """Flush denormals to zero (or, ``enabled=False``, keep them) inside the block; the
    flag this thread had before is restored when the block ends, by exception too.

    Yields whether the CPU supports the setting (``torch.set_flush_denormal``'s answer:
    x86 with SSE3, ARM); where it does not, nothing is changed.
    """
    previous = flushing_denormals()
    supported = torch.set_flush_denormal(enabled)
    try:
        yield supported
    finally:
        if supported:
            torch.set_flush_denormal(previous)
