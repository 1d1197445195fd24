"""Block-quantized decode weights (Q8_0, Q4_0, Q4_1 as `glassformer.block_quant` keeps them),
multiplied without going back to float32: a fifth to a third of float32's bytes per token.

torch has a packed 4-bit CPU kernel, ``torch._weight_int4pack_mm_for_cpu``: for 4-bit numbers
n_ij in 0..15 and a scale s and offset z per group g of 32 inputs of each output i, it computes

    y_i = sum_g sum_{j in g} x_j ((n_ij - 8) s_gi + z_gi)

with float32 sums. Each block format is one such product, the block being the group:

    Q4_0   w = d (q - 8)                  n = q,  s = d,  z = 0
    Q4_1   w = d q + m                    n = q,  s = d,  z = m + 8 d
    Q8_0   w = d q, q + 128 = 16 h + l    the input read twice, [x, x], against [h | l]:
                                          s = 16 d, z = 8 d for h;  s = d, z = 0 for l

(Q8_0's check: 16 d (h - 8) + 8 d + d (l - 8) = d (16 h + l - 128) = d q.) The kernel reads x, s
and z in bfloat16 (the fast path: 4 to 6 times slower in float32 on the CPUs measured) and
rounds y to bfloat16. So, against the blocks' own weights w (`BlockWeights.dequantized`), the
product's error per output is at most, with u = 2^-8 (bfloat16's unit roundoff) and w' the
weights the kernel multiplies by (s and z rounded to bfloat16, `kernel_weights`)::

    |y_i - sum_j x_j w_ij| <= sum_j |x_j| |w'_ij - w_ij|     (s, z rounded)
                            + (u + k 2^-24) sum_j |x_j| |w'_ij|   (x rounded; k float32 sums)
                            + u |y_i|                        (y rounded)

`BlockProduct.error_bound` computes it; ``tests/test_fast_blocks.py`` holds every output to it.
Add the format's own bound (`BlockWeights.error_bound`) for the error against the float
weights the blocks were made from. The kernel's speed depends on the CPU (bfloat16
instructions), so `glassformer.fast_decode` times it against float32 (`fast.faster_than_float32`)
and uses it only where it wins.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from glassformer.block_quant import BLOCK, BlockWeights

UNIT_ROUNDOFF = 2.0**-8  # bfloat16: 8 significant bits
ROWS_PACKED = 16  # the kernel packs outputs 16 at a time: a matrix's rows are padded to a multiple


class BlockProduct:
    """x W^T + b with W as blocks (a packed copy: the module's weight is kept)."""

    def __init__(self, blocks: BlockWeights) -> None:
        self.blocks, self.out_features = blocks, blocks.shape[0]
        nibbles, scales, offsets = _kernel_groups(blocks)  # out k, and k/32 out each
        pad = -self.out_features % ROWS_PACKED  # rows of zero weights: n = 8, s = z = 0
        nibbles = F.pad(nibbles.int(), (0, 0, 0, pad), value=8)
        scales, offsets = F.pad(scales, (0, pad)), F.pad(offsets, (0, pad))
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(nibbles.contiguous(), 1)
        self.scales_and_offsets = torch.stack([scales, offsets], dim=-1).to(torch.bfloat16).contiguous()
        self.reads_twice = blocks.kind == "q8_0"  # k = 2 in: the input twice

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)  # n in
        if self.reads_twice:
            rows = torch.cat([rows, rows], dim=-1)  # n 2in
        y = torch._weight_int4pack_mm_for_cpu(rows, self.packed, BLOCK, self.scales_and_offsets)  # n out'
        if y.shape[1] != self.out_features:  # padded rows
            y = y[:, : self.out_features]
        y = y.float().view(*x.shape[:-1], -1)  # ... out
        return y + bias if bias is not None else y

    def kernel_weights(self) -> torch.Tensor:
        """w': the weights the kernel multiplies by, s and z in bfloat16, float32.  out in."""
        nibbles, _, _ = _kernel_groups(self.blocks)
        pairs = self.scales_and_offsets[:, : self.out_features]
        scales, offsets = (pairs[..., i].float().t() for i in (0, 1))  # out k/32
        w = (nibbles.float() - 8) * scales.repeat_interleave(BLOCK, 1) + offsets.repeat_interleave(BLOCK, 1)
        if self.reads_twice:  # h's and l's weights add up
            high, low = w.chunk(2, dim=1)
            w = high + low
        return w

    def error_bound(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The bound above on |y - x W^T| for each output, W the blocks' weights (y without the
        bias).  ... out."""
        x_abs = x.float().abs().reshape(-1, x.shape[-1])  # n in
        kernel, exact = self.kernel_weights(), self.blocks.dequantized()  # out in
        sums = UNIT_ROUNDOFF + self.packed.shape[1] * 2 * 2.0**-24  # x rounded, k float32 additions
        rounding = x_abs @ (kernel - exact).abs().t() + sums * (x_abs @ kernel.abs().t())
        return rounding.view(*x.shape[:-1], -1) + UNIT_ROUNDOFF * y.abs()


def _kernel_groups(blocks: BlockWeights) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(n: out k nibbles 0..15, s and z: k/32 out) such that the kernel's sum is the blocks'
    (the module docstring's table; k = in, or 2 in for Q8_0's two nibbles)."""
    d, m = blocks.steps.t(), blocks.minimums.t()  # in/32 out
    if blocks.kind == "q4_0":
        return blocks.levels + 8, d, torch.zeros_like(d)
    if blocks.kind == "q4_1":
        return blocks.levels, d, m + 8 * d
    shifted = blocks.levels.int() + 128  # q + 128 in 1..255
    nibbles = torch.cat([shifted >> 4, shifted & 15], dim=1)  # out 2in: [h | l]
    return nibbles, torch.cat([16 * d, d]), torch.cat([8 * d, torch.zeros_like(d)])
