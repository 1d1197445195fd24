"""Block-wise quantized weights, as llama.cpp stores them: a scale per 32 weights.

One scale per row (`glassformer.fast_int8`) lets the row's largest weight set every other
weight's step: in SmolLM2, 8 of 10 greedy answers drift from float32's. llama.cpp keeps a
scale per block of 32 consecutive weights of a row, so an outlier costs only its block:

* Q8_0: d = max |w| / 127 (float32), q = round(w / d) in -127..127, stored as d in float16
  and q as int8 (34 bytes per 32 weights):   w ~ d16 q
* Q4_0: m = the block's weight of largest magnitude (with its sign), d = m / -8,
  q = min(15, trunc(w / d + 8.5)) in 0..15, stored as d16 and 4-bit q (18 bytes per 32):
  w ~ d16 (q - 8)
* Q4_1: a minimum as well: m = min w, d = (max w - m) / 15, q = trunc((w - m) / d + 0.5) in
  0..15, stored as d16, m16 and 4-bit q (20 bytes per 32):   w ~ d16 q + m16. The 16 levels
  span the block's own range, so weights that already lie on a Q4_1 grid (a model read from
  a Q4_1 file, as the registry's SmolLM2 is) come back as the file's own blocks.

with the same float32 arithmetic as llama.cpp's reference quantizer, so the bytes equal
``gguf.quants.quantize``'s (``tests/test_block_quant.py``). `from_gguf` reads blocks as a GGUF
file stores them, never through float32 weights.

**Error bound, per weight.** Rounding to a step d is off by at most d / 2; the stored d16
differs from d, moving each level q by |q| |d - d16|; Q4_0's top level is clipped (w / d = 8
becomes q - 8 = 7: off by d). So, with |d| the block's step::

    Q8_0:  |w - d16 q| <= |d| / 2 + 127 |d - d16|
    Q4_0:  |w - d16 (q - 8)| <= |d| + 8 |d - d16|
    Q4_1:  |w - (d16 q + m16)| <= d / 2 + 15 |d - d16| + |m - m16|

`BlockWeights.error_bound` gives each weight's bound and the tests hold every weight of
random matrices to it. What it does to a model is measured, not bounded
(``benchmarks/quant_quality.py``; SmolLM2-135M, every matrix and the head quantized, 20
prompts: 32 greedy tokens the same as float32's for 15 with Q8_0, 8 with one scale per row,
0 with Q4_0; perplexity 63.00 float32, 63.00 Q8_0, 63.81 per row, 89.49 Q4_0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

BLOCK = 32  # weights per block
KINDS = {"q8_0": 34, "q4_0": 18, "q4_1": 20}  # bytes per block as GGUF stores them
# the output head's (and a tied token table's) kind beside each: Q8_0 beside the 4-bit kinds, as
# llama.cpp's quantizer keeps the output matrix finer (the registry's Q4_1 SmolLM2 has a Q8_0 head)
HEAD_KIND = {"q8_0": "q8_0", "q4_0": "q8_0", "q4_1": "q8_0"}


@dataclass(frozen=True)
class BlockWeights:
    """An out x in matrix as blocks: ``levels`` (out in, int8: Q8_0's q, Q4_0's q - 8, Q4_1's q),
    ``steps`` (out in/32, float32: each block's d as stored, float16), ``minimums`` (Q4_1's m16,
    zeros for the symmetric kinds), and ``exact_steps`` / ``exact_minimums`` (the float32 d and m
    the levels were rounded with, for the bound; the stored ones where only the file is known)."""

    kind: str
    levels: torch.Tensor  # out in, int8
    steps: torch.Tensor  # out in/32, float32 holding float16 values
    minimums: torch.Tensor  # out in/32, float32 holding float16 values
    exact_steps: torch.Tensor  # out in/32, float32
    exact_minimums: torch.Tensor  # out in/32, float32

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.levels.shape)  # type: ignore[return-value]

    def dequantized(self) -> torch.Tensor:
        """The weights the blocks stand for, float32.  out in."""
        out, inner = self.shape
        blocks = self.levels.view(out, inner // BLOCK, BLOCK).float()  # out n 32
        return (blocks * self.steps[..., None] + self.minimums[..., None]).view(out, inner)

    def error_bound(self) -> torch.Tensor:
        """Each weight's bound on |w - dequantized| (the module docstring).  out in."""
        d, d16 = self.exact_steps.abs(), self.steps
        top, clip = {"q8_0": (127, 0.5), "q4_0": (8, 1.0), "q4_1": (15, 0.5)}[self.kind]
        moved = (self.exact_minimums - self.minimums).abs()  # Q4_1's m rounded to float16
        per_block = clip * d + top * (self.exact_steps - d16).abs() + moved  # out n
        return per_block.repeat_interleave(BLOCK, dim=1)  # out in

    def to_gguf(self) -> np.ndarray:
        """The blocks as GGUF stores them: uint8, out x (in / 32 * bytes per block)."""
        out, inner = self.shape
        halves = [self.steps] + ([self.minimums] if self.kind == "q4_1" else [])
        head = [h.to(torch.float16).view(out, -1, 1).view(torch.uint8) for h in halves]  # out n 2 each
        levels = self.levels.view(out, inner // BLOCK, BLOCK)
        if self.kind == "q8_0":
            packed = levels.view(torch.uint8)
        else:  # two 4-bit q per byte: value j in the low nibble, value j + 16 in the high one
            q = (levels + (8 if self.kind == "q4_0" else 0)).to(torch.uint8)
            packed = q[..., :16] | (q[..., 16:] << 4)
        return torch.cat([*head, packed], dim=-1).reshape(out, -1).numpy()


def quantize(weight: torch.Tensor, kind: str) -> BlockWeights:
    """``weight`` (out x in, in a multiple of 32) as ``kind`` blocks ("q8_0", "q4_0" or "q4_1")."""
    _check_kind(kind)
    w = weight.detach().float()
    out, inner = w.shape
    if inner % BLOCK:
        raise ValueError(f"a {out} x {inner} matrix: block quantization needs rows of a multiple of {BLOCK}")
    blocks = w.view(out, inner // BLOCK, BLOCK)  # out n 32
    minimums = torch.zeros(blocks.shape[:2])  # out n
    if kind == "q8_0":
        d = blocks.abs().amax(dim=-1) / 127  # out n
        inverse = torch.where(d == 0, torch.zeros_like(d), 1 / d)
        levels = _round_half_away(blocks * inverse[..., None])  # -127..127
    elif kind == "q4_0":
        largest = blocks.gather(-1, blocks.abs().argmax(dim=-1, keepdim=True))[..., 0]  # out n, signed
        d = largest / -8
        inverse = torch.where(d == 0, torch.zeros_like(d), 1 / d)
        levels = torch.trunc(blocks * inverse[..., None] + 8.5).clamp(0, 15) - 8  # -8..7
    else:  # q4_1
        minimums = blocks.amin(dim=-1)
        d = (blocks.amax(dim=-1) - minimums) / 15
        inverse = torch.where(d == 0, torch.zeros_like(d), 1 / d)
        levels = torch.trunc((blocks - minimums[..., None]) * inverse[..., None] + 0.5).clamp(0, 15)  # 0..15
    levels = levels.to(torch.int8).view(out, inner).contiguous()
    return BlockWeights(kind, levels, _half(d), _half(minimums), d, minimums)


def _half(x: torch.Tensor) -> torch.Tensor:
    """``x`` as GGUF stores it (float16), held in float32."""
    return x.to(torch.float16).float()


def from_gguf(raw: np.ndarray, kind: str) -> BlockWeights:
    """The blocks of a GGUF tensor as stored (uint8 rows x row bytes), read as they are."""
    _check_kind(kind)
    rows = raw.shape[0]
    blocks = torch.from_numpy(np.ascontiguousarray(raw)).view(rows, -1, KINDS[kind])  # out n bytes
    halves = 2 if kind == "q4_1" else 1  # d (and Q4_1's m), float16 each
    head = blocks[..., : 2 * halves].contiguous().view(torch.float16).float()  # out n halves
    steps = head[..., 0]
    minimums = head[..., 1] if kind == "q4_1" else torch.zeros_like(steps)  # out n
    packed = blocks[..., 2 * halves :]
    if kind == "q8_0":
        levels = packed.contiguous().view(torch.int8)
    else:
        levels = torch.cat([packed & 0x0F, packed >> 4], dim=-1).to(torch.int8) - (8 if kind == "q4_0" else 0)
    return BlockWeights(kind, levels.reshape(rows, -1).contiguous(), steps, minimums, steps, minimums)


def _round_half_away(x: torch.Tensor) -> torch.Tensor:
    """C's roundf: halves away from zero (torch.round rounds them to even)."""
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"block quantization {kind!r}; the kinds are: {', '.join(KINDS)}")
