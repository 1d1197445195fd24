"""Fast paths: CPU speedups that compute what the plain modules compute, switched on by
`enable` (``gf.load`` and the trainer call it) and proven equal in ``tests/test_fast.py``.

The modules of `glassformer.nn` are the course, plainly: ``nn.Linear`` projections and an
attention that follows its formula. Two tricks make a CPU faster without changing what
is computed; they live here, so that the reference path stays readable:

* **Decode products** (`DecodeLinear`). Decoding one token at a time multiplies a few
  rows by each weight matrix: a matrix-vector product limited by how fast W streams
  from memory. CPU BLAS streams ``x @ W^T`` with W stored (out, in) about half as fast
  as ``x @ V`` with V = W^T stored (in, out), and runs a single matrix-vector product on
  one thread. So for such calls a copy of V split along its input dimension into p
  blocks (p = the intra-op threads), stored as one (p, in/p, out) tensor, computes

      y = sum_j x_j V_j + b          x_j: the j-th slice of x's features

  as one batched product, whose p blocks stream on p threads at once (SmolLM2's
  matrices: ~15 -> ~25 GB/s on a 2-core machine). The same numbers summed in another
  order (differences ~1e-7). The copy is made on first use and remade whenever W changes
  (its version counter moves); training and long inputs take the ordinary path. The
  price is a second copy of each weight while decoding.
* **Attention in float32 under CPU autocast** (`Float32Attention`). Training autocasts
  the projections to bfloat16, but CPU attention kernels are slower in bfloat16 than in
  float32 (the backward ~5x): attention runs in float32, the projections around it in
  bfloat16.

Both are CPU-only: `enable` leaves a model on another device as it is.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.nn.attention import AttentionBackend

DECODE_ROWS = 8  # at most this many rows (b * t) take the decode product


class DecodeLinear(nn.Linear):
    """nn.Linear sharing another's parameters, with the split-K decode product for a few rows."""

    @classmethod
    def sharing(cls, linear: nn.Linear) -> DecodeLinear:
        """A DecodeLinear over ``linear``'s own Parameter objects (ties and state dict kept)."""
        fast = cls.__new__(cls)
        nn.Module.__init__(fast)
        fast.in_features, fast.out_features = linear.in_features, linear.out_features
        fast.weight, fast.bias = linear.weight, linear.bias
        fast._split_weight, fast._split_key = None, None
        return fast

    def plain(self) -> nn.Linear:
        """An ordinary nn.Linear over the same parameters."""
        linear = nn.Linear.__new__(nn.Linear)
        nn.Module.__init__(linear)
        linear.in_features, linear.out_features = self.in_features, self.out_features
        linear.weight, linear.bias = self.weight, self.bias
        return linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _decoding(x):
            return F.linear(x, self.weight, self.bias)
        return split_product(x, self._split(), self.bias)

    def _split(self) -> torch.Tensor:
        """`split_weight` of W, reused while W is unchanged."""
        key = (_parts(self.in_features), version(self.weight))
        if self._split_key != key:
            self._split_weight = None  # free the old copy before making the new one
            self._split_weight = split_weight(self.weight)
            self._split_key = key
        return self._split_weight

    def extra_repr(self) -> str:
        return super().extra_repr() + ", decode fast path"


def _parts(in_features: int) -> int:
    """p: one block of input features per intra-op thread (1 where they do not divide evenly)."""
    threads = torch.get_num_threads()
    return threads if threads > 1 and in_features % threads == 0 else 1


def split_weight(weight: torch.Tensor) -> torch.Tensor:
    """W (out, in) laid out for the decode product: W^T cut along its input features into p
    blocks, one (p, in/p, out) tensor (a copy)."""
    w = weight.detach()
    parts = _parts(w.shape[1])
    return w.t().reshape(parts, w.shape[1] // parts, -1).contiguous()


def split_product(x: torch.Tensor, split: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x W^T + b from `split_weight`'s layout: sum_j x_j V_j + b, one batched product.  ... in -> ... out."""
    parts = split.shape[0]
    rows = x.reshape(-1, parts, x.shape[-1] // parts).transpose(0, 1)  # p rows in/p
    out = torch.bmm(rows, split).sum(0).view(*x.shape[:-1], -1)  # ... out
    return out + bias if bias is not None else out


def version(tensor: torch.Tensor) -> tuple:
    """What identifies a tensor's current contents: storage, in-place version counter, dtype."""
    # Tensors made under torch.inference_mode() have no version counter (and cannot be
    # changed in place outside it): their storage alone identifies them.
    return (tensor.data_ptr(), None if tensor.is_inference() else tensor._version, tensor.dtype)


def _decoding(x: torch.Tensor) -> bool:
    """A few rows, no gradients, no autocast: the matrix-vector regime of decoding."""
    if torch.is_grad_enabled() or torch.is_autocast_enabled(x.device.type):
        return False
    return x.numel() // x.shape[-1] <= DECODE_ROWS


class Float32Attention(AttentionBackend):
    """The same attention paths, computed in float32 while CPU autocast is on."""

    def attend(self, layer, q, k, v, mask, bias) -> torch.Tensor:
        if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            with torch.autocast("cpu", enabled=False):
                return super().attend(layer, q.float(), k.float(), v.float(), mask, bias)
        return super().attend(layer, q, k, v, mask, bias)


def enable(net: nn.Module) -> nn.Module:
    """Switch ``net``'s fast paths on (CPU models only; others are returned unchanged)."""
    if _on_cpu(net):
        _swap_linears(net, lambda linear: DecodeLinear.sharing(linear) if type(linear) is nn.Linear else None)
        if type(net.attention) is AttentionBackend:
            net.attention = Float32Attention(net.attention.impl)
    return net


def disable(net: nn.Module) -> nn.Module:
    """Back to the plain modules (the reference path)."""
    _swap_linears(net, lambda linear: linear.plain() if isinstance(linear, DecodeLinear) else None)
    if isinstance(net.attention, Float32Attention):
        net.attention = AttentionBackend(net.attention.impl)
    return net


def enabled(net: nn.Module) -> bool:
    """Whether ``net`` runs its fast paths."""
    return any(isinstance(m, DecodeLinear) for m in net.modules())


def _on_cpu(net: nn.Module) -> bool:
    return all(p.device.type == "cpu" for p in net.parameters())


def _swap_linears(net: nn.Module, replacement) -> None:
    for module in list(net.modules()):
        for name, child in list(module.named_children()):
            new = replacement(child) if isinstance(child, nn.Linear) else None
            if new is not None:
                setattr(module, name, new)
