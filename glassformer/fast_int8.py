"""8-bit weights for decoding: a quarter of float32's bytes to stream per token, an approximation
with a stated, tested bound, taken only where it measures faster.

Decoding is bound by how fast the weights stream from memory, so fewer bytes per weight is
more tokens per second. Each row i of W (out x in) is stored as 127 levels of its largest
magnitude (weight-only, per-row symmetric quantization, as LLM.int8's weight side or GPTQ's
starting point)::

    s_i = max_j |W_ij| / 127,   q_ij = round(W_ij / s_i) in -127..127,   W_ij ~ s_i q_ij

and torch's packed CPU kernel (``torch._weight_int8pack_mm``) computes y_i = s_i sum_j x_j q_ij
with the inputs rounded to bfloat16 and the outputs to bfloat16. Per output, with
u = 2^-8 (bfloat16's unit roundoff; the kernel accumulates in float32)::

    |y_i - (x W^T)_i| <= s_i / 2 * sum_j |x_j|              (each weight off by at most s_i / 2)
                       + u * sum_j |x_j| |s_i q_ij|         (x rounded to bfloat16)
                       + u * |y_i|                          (y rounded to bfloat16)

`error_bound` computes it and ``tests/test_fast_int8.py`` checks every product against it. What
it does to a whole model is measured, not bounded: for SmolLM2-135M, the next-token
distribution against float32's on 20 prompts (``benchmarks/pretrained_speed.py`` prints it).
Greedy generations drift from float32's once one argmax differs.

The kernel's speed depends on the CPU (bfloat16 instructions: AVX512-BF16, AMX), so
`glassformer.fast_decode.faster_than_float32` times it against the float32 decode product on
the model's own largest matrix, once per process and shape, and uses int8 weights only where
they win.
"""

from __future__ import annotations

import torch

UNIT_ROUNDOFF = 2.0**-8  # bfloat16: 8 significant bits


class Int8Product:
    """x W^T + b with W as int8 rows and a scale per row (a copy: W itself is kept)."""

    def __init__(self, weight: torch.Tensor) -> None:
        w = weight.detach().float()
        self.scales = (w.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)  # out
        self.q = (w / self.scales[:, None]).round().clamp(-127, 127).to(torch.int8).contiguous()  # out in
        self._scales_bf16 = self.scales.to(torch.bfloat16)

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)  # n in
        y = torch._weight_int8pack_mm(rows, self.q, self._scales_bf16).float()  # n out
        y = y.view(*x.shape[:-1], -1)
        return y + bias if bias is not None else y

    def error_bound(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The bound above on |y - x W^T| for each output (y: this product's result).  ... out."""
        x_abs = x.float().abs()  # ... in
        magnitude = x_abs @ (self.q.float().abs() * self.scales[:, None]).t()  # sum_j |x_j| |s_i q_ij|
        return self.scales / 2 * x_abs.sum(-1, keepdim=True) + UNIT_ROUNDOFF * (magnitude + y.abs())
