"""Attention masks: which keys each query may look at.

A mask is boolean, ``True`` = allowed, shaped b 1 t s so it broadcasts over heads.
Queries are the last t of s key slots (the first ``s - t`` come from the KV cache), so
query i sits at slot ``past + i``:

* causal:          key j allowed iff j <= past + i (no looking ahead);
* sliding window:  also j > past + i - window (only the last ``window`` keys);
* padding:         key j allowed iff ``key_padding[b, j]`` is 1 (a real token).

In the explicit path, disallowed scores become -inf before the softmax. A query whose
keys are all disallowed (a left-padding slot under a causal mask) gets an all-zero
row instead of NaN: see `Attention`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttentionMask:
    """``allowed``: b 1 t s bool, or None when every key is visible.

    ``plain_causal`` marks the common case (causal, no padding, no window, no cache)
    where the fused kernel's own ``is_causal`` flag is faster than an explicit mask.
    ``may_empty_rows`` is set when padding can leave a query with no key at all.
    """

    allowed: torch.Tensor | None
    plain_causal: bool = False
    may_empty_rows: bool = False


def build_mask(
    *,
    t: int,
    s: int,
    causal: bool,
    key_padding: torch.Tensor | None = None,
    window: int | None = None,
    device: torch.device | None = None,
) -> AttentionMask:
    """Combine causal, sliding-window and padding constraints into one boolean mask."""
    past = s - t
    allowed = None
    if t == 1 and window is None:
        causal = False  # one query in the last slot: every key is in its past already
    if causal or window is not None:
        q_slot = torch.arange(past, s, device=device)[:, None]  # t 1
        k_slot = torch.arange(s, device=device)[None, :]  # 1 s
        allowed = torch.ones(t, s, dtype=torch.bool, device=device)
        if causal:
            allowed = allowed & (k_slot <= q_slot)
        if window is not None:
            allowed = allowed & (k_slot > q_slot - window)
        allowed = allowed[None, None]  # 1 1 t s
    if key_padding is not None:
        keys = key_padding.bool()[:, None, None, :]  # b 1 1 s
        allowed = keys if allowed is None else allowed & keys
    plain_causal = causal and window is None and key_padding is None and past == 0
    return AttentionMask(allowed, plain_causal, may_empty_rows=key_padding is not None)
