"""`Linear`: nn.Linear with a decode fast path, and `fused_linear` for stacked projections.

    y = x W^T + b          W: (out, in), as nn.Linear stores it

When only a few rows go through without gradients (decoding one token at a time), the
product is a matrix-vector product limited by how fast W streams from memory. Two things
make CPU BLAS stream it slowly: ``x @ W^T`` with W stored (out, in) reads about half as
fast as ``x @ V`` with V = W^T stored (in, out); and a single matrix-vector product runs
on one thread. So for such calls we keep V split along its input dimension into p blocks
(p = the intra-op threads), stored as one (p, in/p, out) tensor, and compute

    y = sum_j x_j V_j + b          x_j: the j-th slice of x's features

as one batched product, whose p blocks stream on p threads at once (SmolLM2's decoding
matrices: ~15 -> ~25 GB/s on the 2-core development machine). The copy is made once and
remade whenever W changes (its version counter moves). The same numbers, summed in
another order (differences ~1e-7); training and long inputs take the ordinary path.
The price is a second copy of each weight while decoding.

`fused_linear` computes several projections of the same input (q, k, v; gate, up) as one
product with the stacked matrix [W_1; W_2; ...], so decoding streams them in one call.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

DECODE_ROWS = 8  # at most this many rows (b * t) take the fast path


def _version(tensor: torch.Tensor) -> tuple:
    """What identifies a tensor's current contents: storage and in-place version counter."""
    # Tensors made under torch.inference_mode() have no version counter (and cannot be
    # changed in place outside it): their storage alone identifies them.
    return (tensor.data_ptr(), None if tensor.is_inference() else tensor._version, tensor.dtype)


def _decode_weight(weights: Sequence[torch.Tensor], cache: dict) -> torch.Tensor:
    """[W_1; W_2; ...]^T split along the input dimension: (p, in/p, out), reused while unchanged."""
    d_in = weights[0].shape[1]
    threads = torch.get_num_threads()
    parts = threads if threads > 1 and d_in % threads == 0 else 1
    key = (parts, *(_version(w) for w in weights))
    if cache.get("key") != key:
        cache["value"] = None  # free the old copy before making the new one
        stacked = torch.cat([w.detach() for w in weights]) if len(weights) > 1 else weights[0].detach()
        cache["key"], cache["value"] = key, stacked.t().reshape(parts, d_in // parts, -1).contiguous()
    return cache["value"]


def _decoding(x: torch.Tensor) -> bool:
    """A few rows, no gradients, no autocast: the matrix-vector regime of decoding."""
    if torch.is_grad_enabled() or torch.is_autocast_enabled(x.device.type):
        return False
    return x.numel() // x.shape[-1] <= DECODE_ROWS


def fused_linear(
    x: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor | None], cache: dict
) -> torch.Tensor:
    """x [W_1; W_2; ...]^T + [b_1; b_2; ...]: the outputs of several projections of x,
    concatenated along the last dimension.  (..., in) -> (..., out_1 + out_2 + ...)."""
    bias = None if biases[0] is None else torch.cat(list(biases)) if len(biases) > 1 else biases[0]
    if _decoding(x):
        split = _decode_weight(weights, cache)  # p in/p out
        parts = split.shape[0]
        rows = x.reshape(-1, parts, x.shape[-1] // parts).transpose(0, 1)  # p rows in/p
        out = torch.bmm(rows, split).sum(0).view(*x.shape[:-1], -1)  # ... out
        return out + bias if bias is not None else out
    weight = torch.cat(list(weights)) if len(weights) > 1 else weights[0]  # gradients reach each part
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """nn.Linear (same parameters, same state dict) with the decode fast path above."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._decode_cache: dict = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_linear(x, (self.weight,), (self.bias,), self._decode_cache)
