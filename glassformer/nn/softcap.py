"""Soft-capping: a smooth limit on how large a score may grow (Gemma 2; Team Gemma, 2024, §2).

    softcap(x) = cap * tanh(x / cap)

Near 0 it is the identity (tanh(u) ≈ u for small u); far from 0 it flattens towards ±cap, so
no attention score and no logit can exceed the cap, however large q·k or the head's output
grow. Gemma 2 caps each attention layer's scores (``attn_softcap``, 50 in the released
models: after the scale, before the mask and the softmax) and the final logits
(``logit_softcap``, 30). Gemma 3 replaces the attention cap with q/k-norm.

>>> import torch
>>> soft_cap(torch.tensor([0.1, 10.0, -1000.0]), 5.0)
tensor([ 0.1000,  4.8201, -5.0000])
"""

from __future__ import annotations

import torch


def soft_cap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """cap * tanh(x / cap), elementwise: every value pulled into (-cap, cap).  Any shape."""
    return torch.tanh(x / cap) * cap  # the order Hugging Face's Gemma computes it in: bit for bit
