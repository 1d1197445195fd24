"""The common GGUF block types dequantized with torch: the same floats as ``gguf.quants``,
on every core.

`gguf.quants.dequantize` (numpy, maintained with llama.cpp) is the reference for every
storage type; it runs on one core, a group of rows at a time, and took about half of
SmolLM2-135M's load (0.5 s for its 106M Q4_1 values). The types small models are
usually shipped in are decoded here with the same arithmetic, in float32, as whole-tensor
torch operations (each multithreaded):

* Q8_0, 34 bytes per 32 values: d (fp16), then 32 int8 q:   x = q * d
* Q4_0, 18 bytes per 32 values: d (fp16), then 16 bytes of two 4-bit q each (byte j holds
  value j in its low nibble and value j + 16 in its high one):   x = d * (q - 8)
* Q4_1, 20 bytes per 32 values: d, m (fp16), then the 16 bytes of Q4_0:   x = d * q + m

Each product and sum is rounded to float32 in the reference's order (no fused
multiply-add), so the floats are bit-identical; ``tests/test_gguf_blocks.py`` checks each
type against ``gguf.quants`` on random blocks. Other types return None: the caller falls
back to the reference.
"""

from __future__ import annotations

import numpy as np
import torch

BLOCK_VALUES = 32  # values per block of these three types


def _halves(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """The fp16 stored at bytes start..start+2 of every block, as float32.  n 1."""
    return blocks[:, start : start + 2].contiguous().view(torch.float16).float()


def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    """16 bytes of two 4-bit values each -> the 32 values, low nibbles first.  n 16 -> n 32."""
    return torch.cat([packed & 0x0F, packed >> 4], dim=1)


def _q8_0(blocks: torch.Tensor) -> torch.Tensor:
    return blocks[:, 2:].view(torch.int8).float() * _halves(blocks, 0)


def _q4_0(blocks: torch.Tensor) -> torch.Tensor:
    return _halves(blocks, 0) * (_nibbles(blocks[:, 2:]).to(torch.int8) - 8).float()


def _q4_1(blocks: torch.Tensor) -> torch.Tensor:
    return _halves(blocks, 0) * _nibbles(blocks[:, 4:]).float() + _halves(blocks, 2)


DECODERS = {"Q8_0": (34, _q8_0), "Q4_0": (18, _q4_0), "Q4_1": (20, _q4_1)}  # bytes per block, decoder


def dequantize(raw: np.ndarray, storage_name: str) -> torch.Tensor | None:
    """Rows of blocks as stored (uint8, rows x row bytes) -> float32 rows x values, or None
    for a type decoded only by ``gguf.quants``."""
    if storage_name not in DECODERS:
        return None
    block_bytes, decode = DECODERS[storage_name]
    rows = raw.shape[0]
    blocks = torch.from_numpy(np.ascontiguousarray(raw)).view(-1, block_bytes)  # n bytes
    return decode(blocks).view(rows, -1)
