"""`Linear`: nn.Linear with a decode fast path.

    y = x W^T + b          W: (out, in), as nn.Linear stores it

When only a few rows go through without gradients (decoding one token at a time), the
product is a matrix-vector product limited by how fast W streams from memory, and on
CPUs the BLAS kernel for ``x @ W^T`` with W stored (out, in) reads it about half as fast
as ``x @ V`` with V = W^T stored (in, out). So for such calls we keep V, made once and
remade whenever W changes (its version counter moves), and compute ``x @ V + b``: the
same numbers, summed in another order (differences ~1e-7). Training and long inputs use
the ordinary path. The price is a second copy of each weight while decoding.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

DECODE_ROWS = 8  # at most this many rows (b * t) take the transposed path


def transposed(weight: torch.Tensor, cache: dict) -> torch.Tensor:
    """W^T as a contiguous (in, out) copy, reused while W is unchanged."""
    # Tensors made under torch.inference_mode() have no version counter (and cannot be
    # changed in place outside it): their storage alone identifies them.
    version = None if weight.is_inference() else weight._version
    key = (weight.data_ptr(), version, weight.dtype, tuple(weight.shape))
    if cache.get("key") != key:
        cache["key"], cache["value"] = key, weight.detach().t().contiguous()
    return cache["value"]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cache: dict) -> torch.Tensor:
    """x W^T + b, through the transposed copy for a few rows without gradients."""
    rows = x.numel() // x.shape[-1]
    if rows <= DECODE_ROWS and not torch.is_grad_enabled() and not torch.is_autocast_enabled(x.device.type):
        out = x @ transposed(weight, cache)
        return out + bias if bias is not None else out
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) with the decode fast path above."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._transposed: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self._transposed)
