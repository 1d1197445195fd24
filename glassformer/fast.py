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
* **oneDNN's packed weights** (`inference_weight`). Where it measures faster on this CPU
  (`onednn_layout`: on the AMD EPYC we develop on, MKL's float32 GEMM runs at about half
  the speed of oneDNN's, which packs W into the blocks its kernels stream), that copy is
  oneDNN's packed W instead, and every product without gradients takes it, long inputs
  (a prompt's prefill: ~1.9x) as well as decoding rows. Still float32: the same sums in
  oneDNN's blocked order (differences ~1e-6 of the outputs' scale).

While a hook function is attached anywhere (`glassformer.nn.hooks.any_attached`: a trace, an
intervention, the workshop's pass), every product is the plain ``F.linear``: what a trace
shows is the reference path.
* **Attention in float32 under CPU autocast** (`Float32Attention`). Training autocasts
  the projections to bfloat16, but CPU attention kernels are slower in bfloat16 than in
  float32 (the backward ~5x): attention runs in float32, the projections around it in
  bfloat16.

Both are CPU-only: `enable` leaves a model on another device as it is.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.nn import hooks
from glassformer.nn.attention import AttentionBackend

DECODE_ROWS = 8  # at most this many rows (b * t) take the decode product


def sharing_parameters(linear: nn.Linear, kind: type[nn.Linear]) -> nn.Linear:
    """A ``kind`` (nn.Linear or a subclass) over ``linear``'s own Parameter objects, not copies: ties
    and state dict names kept; a subclass's own attributes are for the caller to set."""
    shared = kind.__new__(kind)
    nn.Module.__init__(shared)
    shared.in_features, shared.out_features = linear.in_features, linear.out_features
    shared.weight, shared.bias = linear.weight, linear.bias
    return shared


def plain_linear(linear: nn.Linear) -> nn.Linear:
    """An ordinary nn.Linear over ``linear``'s own Parameter objects (a subclass's extras left behind)."""
    return sharing_parameters(linear, nn.Linear)


class DecodeLinear(nn.Linear):
    """nn.Linear sharing another's parameters, with the inference product (`inference_weight`)
    without gradients: for a few rows, or for any number in oneDNN's packed layout."""

    @classmethod
    def sharing(cls, linear: nn.Linear) -> DecodeLinear:
        """A DecodeLinear over ``linear``'s own Parameter objects (ties and state dict kept)."""
        fast = sharing_parameters(linear, cls)
        fast._prepared_weight, fast._prepared_key = None, None
        return fast

    def plain(self) -> nn.Linear:
        """An ordinary nn.Linear over the same parameters."""
        return plain_linear(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        plain = torch.is_grad_enabled() or torch.is_autocast_enabled(x.device.type) or hooks.any_attached()
        if plain or torch.compiler.is_compiling():  # a trace and torch.compile see the plain product
            return F.linear(x, self.weight, self.bias)
        if x.numel() // x.shape[-1] > DECODE_ROWS and _layout(self.weight) != "onednn":
            return F.linear(x, self.weight, self.bias)
        return inference_product(x, self.prepared(), self.bias)

    def prepared(self) -> torch.Tensor:
        """`inference_weight` of W, reused while W is unchanged."""
        key = (_layout(self.weight), _parts(self.in_features), version(self.weight))
        if self._prepared_key != key:
            self._prepared_weight = None  # free the old copy before making the new one
            self._prepared_weight = inference_weight(self.weight)
            self._prepared_key = key
        return self._prepared_weight

    def extra_repr(self) -> str:
        return super().extra_repr() + ", decode fast path"


def _parts(in_features: int) -> int:
    """p: one block of input features per intra-op thread (1 where they do not divide evenly)."""
    threads = torch.get_num_threads()
    return threads if threads > 1 and in_features % threads == 0 else 1


def inference_weight(weight: torch.Tensor) -> torch.Tensor:
    """A copy of W (out, in) laid out for `inference_product`: oneDNN's packed blocks where
    `onednn_layout` measured them faster (float32), else W^T cut along its input features into
    p blocks, one (p, in/p, out) tensor (the split-K decode product)."""
    w = weight.detach()
    if _layout(w) == "onednn":
        return torch.ops.mkldnn._reorder_linear_weight(w, PACKED_FOR_ROWS)
    return _split(w)


def inference_product(
    x: torch.Tensor, prepared: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """x W^T + b from `inference_weight`'s copy.  ... in -> ... out. Split: sum_j x_j V_j + b as
    one batched product."""
    if prepared.is_mkldnn:
        rows = x.reshape(-1, x.shape[-1])  # n in
        out = torch.ops.mkldnn._linear_pointwise(rows, prepared, bias, "none", [], "")  # n out
        return out.view(*x.shape[:-1], -1)
    parts = prepared.shape[0]
    rows = x.reshape(-1, parts, x.shape[-1] // parts).transpose(0, 1)  # p rows in/p
    out = torch.bmm(rows, prepared).sum(0).view(*x.shape[:-1], -1)  # ... out
    return out + bias if bias is not None else out


PACKED_FOR_ROWS = 512  # oneDNN's packing hint: measured as fast for one row as for a prompt's 512


def _layout(weight: torch.Tensor) -> str:
    """The layout of W's inference copy: oneDNN's (float32, where measured faster) or the split."""
    if weight.dtype == torch.float32 and onednn_layout(torch.get_num_threads())[0]:
        return "onednn"
    return "split"


def _split(weight: torch.Tensor) -> torch.Tensor:
    """W^T cut along its input features into p blocks: (p, in/p, out), a copy."""
    parts = _parts(weight.shape[1])
    return weight.t().reshape(parts, weight.shape[1] // parts, -1).contiguous()


@functools.cache
def onednn_layout(threads: int) -> tuple[bool, str]:
    """(whether oneDNN's packed float32 weights beat ``F.linear`` for a 256-row prompt and match
    the split decode product for one row on this CPU, with the timings): measured once per
    process and thread count on copies of a 1536 x 576 matrix (SmolLM2's FFN) past the caches,
    the four products taken in turn (`interleaved_medians`)."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False, "oneDNN is not in this torch"
    weights = [torch.randn(1536, 576) * 0.02 for _ in range(copies_past_caches(1536 * 576))]
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, PACKED_FOR_ROWS) for w in weights]
    split = [_split(w) for w in weights]
    one, prompt = torch.randn(1, 576), torch.randn(256, 576)
    runs = {
        "onednn 1": lambda: [inference_product(one, w) for w in packed],
        "split 1": lambda: [inference_product(one, w) for w in split],
        "onednn 256": lambda: [inference_product(prompt, w) for w in packed[:2]],
        "linear 256": lambda: [F.linear(prompt, w) for w in weights[:2]],
    }
    seconds = interleaved_medians(runs, repeats=9)
    # a prompt's products must be faster; one row's no slower than the split's (within noise)
    wins = seconds["onednn 1"] < 1.1 * seconds["split 1"] and seconds["onednn 256"] < seconds["linear 256"]
    ms = {name: f"{value * 1e3:.1f}" for name, value in seconds.items()}
    return wins, (
        f"oneDNN {ms['onednn 1']} vs split {ms['split 1']} ms ({len(weights)} one-row products), "
        f"{ms['onednn 256']} vs F.linear {ms['linear 256']} ms (2 products of 256 rows)"
    )


PAST_CACHES = 64 << 20  # bytes of float32 weights a speed test streams: more than a CPU's caches hold


def copies_past_caches(numel: int) -> int:
    """How many copies of a float32 matrix of ``numel`` weights a speed test streams (at least 2),
    so that each product reads its weights from memory, as decoding a model does."""
    return max(2, PAST_CACHES // (numel * 4))


def interleaved_times(runs: dict[str, Callable[[], object]], repeats: int = 7) -> dict[str, list[float]]:
    """Each of ``runs``' wall times, taken in turn (ABAB...) after one warm-up each: a slow moment
    of the machine (another process, a clock's change) falls on all of them alike. The
    benchmarks (`benchmarks/common.py`) time with it too."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def interleaved_medians(runs: dict[str, Callable[[], object]], repeats: int = 7) -> dict[str, float]:
    """The median of each of ``runs``' times (`interleaved_times`)."""
    return {name: statistics.median(seen) for name, seen in interleaved_times(runs, repeats).items()}


def version(tensor: torch.Tensor) -> tuple:
    """What identifies a tensor's current contents: storage, in-place version counter, dtype."""
    # Tensors made under torch.inference_mode() have no version counter (and cannot be
    # changed in place outside it): their storage alone identifies them.
    return (tensor.data_ptr(), None if tensor.is_inference() else tensor._version, tensor.dtype)


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
