"""Multi-head attention: self or cross, MHA / GQA / MQA, explicit or fused.

Scaled dot-product attention (Vaswani et al., 2017)::

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B + M) V

with B an optional position bias (ALiBi, T5) and M the additive mask (0 where allowed,
-inf where not). Each of h heads has its own projections; ``n_kv_heads = g`` key/value
heads are shared by groups of h/g query heads: g = h is multi-head, 1 < g < h grouped-
query (Ainslie et al., 2023), g = 1 multi-query (Shazeer, 2019).

Two paths compute the same thing:

* explicit — the formula above, step by step; it produces the ``scores`` and
  ``pattern`` activations. The reference.
* fused — ``torch.nn.functional.scaled_dot_product_attention``; faster and leaner, but
  it never materializes the pattern. Taken whenever no hook asks for scores or pattern.

Trace names (prefix ``blocks.{i}.attn`` or ``.cross_attn``): ``in`` b t d, ``q`` b h t e,
``k``/``v`` b g s e (after RoPE; all keys so far when a cache is used), ``scores``
b h t s (scaled, bias added, before the mask), ``pattern`` b h t s, ``z`` b h t e,
``out`` b t d.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.config import ModelConfig
from glassformer.nn.hooks import HookPoint
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.linear import Linear, fused_linear
from glassformer.nn.masks import AttentionMask
from glassformer.nn.positions import Rotation

IMPLEMENTATIONS = ("auto", "explicit", "fused")


class Attention(nn.Module):
    """Multi-head (self or cross) attention with g <= h key/value heads.  b t d -> b t d."""

    def __init__(self, config: ModelConfig, layer: int, cross: bool = False) -> None:
        super().__init__()
        d, h, g, e = config.d_model, config.n_heads, config.n_kv_heads, config.d_head
        self.n_heads, self.n_kv_heads, self.d_head = h, g, e
        self.layer, self.cross = layer, cross
        self.scale = config.attn_scale if config.attn_scale is not None else e**-0.5
        self.q_proj = Linear(d, h * e, bias=config.qkv_bias)
        self.k_proj = Linear(d, g * e, bias=config.qkv_bias)
        self.v_proj = Linear(d, g * e, bias=config.qkv_bias)
        self.o_proj = Linear(h * e, d, bias=config.out_bias)
        self.dropout_p = config.attn_dropout
        self.impl = "auto"  # see IMPLEMENTATIONS; set by the model's attention_impl
        self._qkv_decode_cache: dict = {}  # the decode fast path of glassformer.nn.linear
        names = ("in", "q", "k", "v", "scores", "pattern", "z", "out")
        self.hook_in, self.hook_q, self.hook_k, self.hook_v = (HookPoint(n) for n in names[:4])
        self.hook_scores, self.hook_pattern, self.hook_z, self.hook_out = (HookPoint(n) for n in names[4:])

    def forward(
        self,
        x: torch.Tensor,
        mask: AttentionMask | None = None,
        *,
        context: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        rope: Rotation | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """x: b t d queries' input; context: b s d for cross-attention (the encoder output)."""
        b, t, _ = x.shape
        h, g, e = self.n_heads, self.n_kv_heads, self.d_head
        x = self.hook_in(x)
        if self.cross:
            q = self.q_proj(x).view(b, t, h, e).transpose(1, 2)  # b h t e
            if cache is not None and cache.cross[self.layer] is not None:
                k, v = cache.cross[self.layer]  # computed once from the encoder output
            else:
                s = context.shape[1]
                k = self.k_proj(context).view(b, s, g, e).transpose(1, 2)  # b g s e
                v = self.v_proj(context).view(b, s, g, e).transpose(1, 2)  # b g s e
                if cache is not None:
                    cache.cross[self.layer] = (k, v)
        else:
            q, k, v = self._self_projections(x, rope)  # b h t e, b g t e, b g t e
            if cache is not None:
                k, v = cache.append(self.layer, k, v)  # b g s e, all keys so far
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        z = self._attend(q, k, v, mask, bias)  # b t (h e)
        return self.hook_out(self.o_proj(z))  # b t d

    def _self_projections(self, x: torch.Tensor, rope: Rotation | None):
        """q, k, v of self-attention with one matrix product: W_Q, W_K, W_V stacked (as
        GPT-2's c_attn), then RoPE applied to q and k together.  b t d -> b h t e, b g t e x2."""
        b, t, _ = x.shape
        h, g, e = self.n_heads, self.n_kv_heads, self.d_head
        projections = (self.q_proj, self.k_proj, self.v_proj)
        qkv = fused_linear(
            x, [p.weight for p in projections], [p.bias for p in projections], self._qkv_decode_cache
        )  # b t (h+2g)e
        qkv = qkv.view(b, t, h + 2 * g, e).transpose(1, 2)  # b (h+2g) t e
        qk, v = qkv[:, : h + g], qkv[:, h + g :]
        if rope is not None:
            qk = rope.apply(qk)
        return qk[:, :h], qk[:, h:], v

    def _attend(self, q, k, v, mask: AttentionMask | None, bias: torch.Tensor | None) -> torch.Tensor:
        """Attention from projected heads to concatenated head outputs: -> b t (h e)."""
        if torch.is_autocast_enabled("cpu") and q.device.type == "cpu":
            # CPU attention kernels are slower in bf16 than in fp32 (backward ~5x): keep
            # attention in fp32 and let autocast speed up the projections around it.
            with torch.autocast("cpu", enabled=False):
                return self._attend(q.float(), k.float(), v.float(), mask, bias)
        b, t = q.shape[0], q.shape[2]
        if self._explicit():
            z, changed = self._explicit_attention(q, k, v, mask, bias)
            if self.impl == "auto" and not changed and not self.training:
                # Hooks only looked at scores/pattern: take the fused result so that a
                # traced forward pass returns exactly what an untraced one does.
                z = self._fused_attention(q, k, v, mask, bias)
        else:
            z = self._fused_attention(q, k, v, mask, bias)
        z = self.hook_z(z)  # b h t e
        return z.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head)  # b t (h e)

    def _explicit(self) -> bool:
        if self.impl == "auto":
            return self.hook_scores.active or self.hook_pattern.active
        return self.impl == "explicit"

    def _explicit_attention(self, q, k, v, mask: AttentionMask | None, bias):
        """softmax(QK^T * scale + B, masked) V, one step at a time.  -> (b h t e, changed).

        ``changed`` tells whether a hook replaced the scores or the pattern.
        """
        groups = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(groups, dim=1)  # b h s e: query head i reads kv head i // groups
        v = v.repeat_interleave(groups, dim=1)  # b h s e
        scores = q @ k.transpose(-1, -2) * self.scale  # b h t s
        if bias is not None:
            scores = scores + bias
        hooked = self.hook_scores(scores)
        changed = hooked is not scores
        scores = hooked
        allowed = mask.allowed if mask is not None else None
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        pattern = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # b h t s
        if allowed is not None:
            # A query with no allowed key has softmax(-inf, ..., -inf) = NaN: make it 0.
            pattern = pattern.masked_fill(~allowed, 0.0)
        hooked = self.hook_pattern(pattern)
        changed = changed or hooked is not pattern
        pattern = F.dropout(hooked, self.dropout_p, self.training)
        return pattern @ v, changed  # b h t e

    def _fused_attention(self, q, k, v, mask: AttentionMask | None, bias):
        """The same result through torch's fused kernel.  -> b h t e."""
        allowed = mask.allowed if mask is not None else None
        is_causal = bool(mask is not None and mask.plain_causal and bias is None)
        attn_mask = None
        if bias is not None:
            attn_mask = bias.to(q.dtype)
            if allowed is not None:
                attn_mask = attn_mask.masked_fill(~allowed, float("-inf"))
        elif allowed is not None and not is_causal:
            attn_mask = allowed
        z = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=attn_mask,
            is_causal=is_causal,
            dropout_p=self.dropout_p if self.training else 0.0,
            scale=self.scale,
            enable_gqa=self.n_kv_heads != self.n_heads,
        )  # b h t e
        if mask is not None and mask.may_empty_rows:
            z = z.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)  # as the explicit path
        return z

    def extra_repr(self) -> str:
        kind = "cross" if self.cross else "self"
        return f"{kind}, heads={self.n_heads}, kv_heads={self.n_kv_heads}, d_head={self.d_head}"
