"""Multi-head attention: self or cross, MHA / GQA / MQA, explicit or fused.

Scaled dot-product attention (Vaswani et al., 2017)::

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B + M) V

with B an optional position bias (ALiBi, T5) and M the additive mask (0 where allowed,
-inf where not). Each of h heads has its own projections; ``n_kv_heads = g`` key/value
heads are shared by groups of h/g query heads: g = h is multi-head, 1 < g < h grouped-
query (Ainslie et al., 2023), g = 1 multi-query (Shazeer, 2019).

Gemma 2 soft-caps the scores before the mask (``attn_softcap``, `glassformer.nn.softcap`)::

    S = cap * tanh((Q K^T / sqrt(d_k) + B) / cap)

The projections are plain ``nn.Linear`` layers. Self-attention computes Q, K and V with
one matrix, ``qkv_proj`` = [W_Q; W_K; W_V] ((h + 2g) e x d), as nanoGPT's ``c_attn``;
cross-attention takes Q from the decoder (``q_proj``) and K, V from the encoder output
(``kv_proj`` = [W_K; W_V]). Checkpoints that store three matrices are joined by the key
maps of `glassformer.formats`.

Two paths compute the same thing (an `AttentionBackend`, shared by every layer of a
model and passed into each forward call, chooses):

* explicit — the formula above, step by step; it produces the ``scores`` and
  ``pattern`` activations. The reference.
* fused — ``torch.nn.functional.scaled_dot_product_attention``; faster and leaner, but
  it never materializes the pattern. Taken whenever no hook asks for scores or pattern,
  and the layer does not soft-cap its scores. ``tests/test_attention.py`` proves it equal
  to the explicit path.

q/k-norm normalizes the queries and keys before RoPE, with a learned weight: over each
head's e features (``qk_norm_scope="head"``: Qwen3, Gemma 3) or over the whole projection,
all h e query and all g e key features at once, before the split into heads
(``"all"``: OLMo 2).

Trace names (prefix ``blocks.{i}.attn`` or ``.cross_attn``): ``in`` b t d, ``q`` b h t e,
``k``/``v`` b g s e (after RoPE; all keys so far when a cache is used), ``scores``
b h t s (scaled, bias added, before the mask), ``capped`` b h t s (soft-capped scores, only
with ``attn_softcap``), ``pattern`` b h t s, ``z`` b h t e, ``out`` b t d.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.config import ModelConfig
from glassformer.nn.hooks import HookPoint
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.masks import AttentionMask
from glassformer.nn.norms import make_norm
from glassformer.nn.positions import Rotation
from glassformer.nn.softcap import soft_cap

IMPLEMENTATIONS = ("auto", "explicit", "fused")


class AttentionBackend:
    """Which path a model's attention layers take: ``auto`` (fused unless a hook asks for
    scores or pattern), ``explicit`` or ``fused``. One object per model, passed into every
    forward call; `glassformer.fast` extends it."""

    def __init__(self, impl: str = "auto") -> None:
        if impl not in IMPLEMENTATIONS:
            raise ValueError(f"impl={impl!r}; allowed values: {', '.join(IMPLEMENTATIONS)}")
        self.impl = impl

    def attend(self, layer: Attention, q, k, v, mask: AttentionMask | None, bias) -> torch.Tensor:
        """softmax(QK^T * scale + B + M) V for projected heads.  -> b h t e."""
        if layer.softcap is not None:
            # The fused kernel cannot soft-cap: tanh acts on the scores between QK^T and the
            # softmax, which scaled_dot_product_attention never exposes. Such a layer always
            # takes the explicit path, also when "fused" is asked for.
            return layer.explicit_attention(q, k, v, mask, bias)[0]
        if self.impl == "fused" or (self.impl == "auto" and not layer.wants_pattern):
            return layer.fused_attention(q, k, v, mask, bias)
        z, changed = layer.explicit_attention(q, k, v, mask, bias)
        if self.impl == "auto" and not changed and not layer.training:
            # Hooks only looked at scores/pattern: take the fused result so that a
            # traced forward pass returns exactly what an untraced one does.
            z = layer.fused_attention(q, k, v, mask, bias)
        return z

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.impl!r})"


DEFAULT_BACKEND = AttentionBackend()


class Attention(nn.Module):
    """Multi-head (self or cross) attention with g <= h key/value heads.  b t d -> b t d."""

    def __init__(self, config: ModelConfig, layer: int, cross: bool = False) -> None:
        super().__init__()
        d, h, g, e = config.d_model, config.n_heads, config.n_kv_heads, config.d_head
        self.n_heads, self.n_kv_heads, self.d_head = h, g, e
        self.layer, self.cross = layer, cross
        self.scale = config.attn_scale if config.attn_scale is not None else e**-0.5
        self.softcap = config.attn_softcap  # scores -> cap * tanh(scores / cap) (Gemma 2)
        if cross:
            self.q_proj = nn.Linear(d, h * e, bias=config.qkv_bias)  # from the decoder
            self.kv_proj = nn.Linear(d, 2 * g * e, bias=config.qkv_bias)  # [W_K; W_V], from the encoder
        else:
            self.qkv_proj = nn.Linear(d, (h + 2 * g) * e, bias=config.qkv_bias)  # [W_Q; W_K; W_V]
        self.o_proj = nn.Linear(h * e, d, bias=config.out_bias)
        # q/k-norm, before RoPE, so that q·k stays in range. Qwen3, Gemma 3 ("head"): each head's
        # query and key normalized over its e features, one learned weight shared by the heads;
        # OLMo 2 ("all"): one norm over all h e query features, one over all g e key features
        self.qk_norm_all = config.qk_norm and config.qk_norm_scope == "all"
        q_size, k_size = (h * e, g * e) if self.qk_norm_all else (e, e)
        self.q_norm = make_norm(config, q_size) if config.qk_norm else None
        self.k_norm = make_norm(config, k_size) if config.qk_norm else None
        self.dropout_p = config.attn_dropout
        names = ("in", "q", "k", "v", "scores", "pattern", "z", "out")
        self.hook_in, self.hook_q, self.hook_k, self.hook_v = (HookPoint(n) for n in names[:4])
        self.hook_scores, self.hook_pattern, self.hook_z, self.hook_out = (HookPoint(n) for n in names[4:])
        if self.softcap is not None:
            self.hook_capped = HookPoint("capped")

    def forward(
        self,
        x: torch.Tensor,
        mask: AttentionMask | None = None,
        *,
        context: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        rope: Rotation | None = None,
        cache: KVCache | None = None,
        backend: AttentionBackend = DEFAULT_BACKEND,
    ) -> torch.Tensor:
        """x: b t d queries' input; context: b s d for cross-attention (the encoder output)."""
        b, t, _ = x.shape
        h, g, e = self.n_heads, self.n_kv_heads, self.d_head
        x = self.hook_in(x)
        if self.cross:
            q = self._heads(self.q_proj(x), h, self.q_norm)  # b h t e
            if cache is not None and cache.cross[self.layer] is not None:
                k, v = cache.cross[self.layer]  # computed once from the encoder output
            else:
                k, v = self.kv_proj(context).split(g * e, dim=-1)  # b s (g e) each
                k, v = self._heads(k, g, self.k_norm), self._heads(v, g, None)  # b g s e each
                if cache is not None:
                    cache.cross[self.layer] = (k, v)
        else:
            q, k, v = self._self_projections(x, rope)  # b h t e, b g t e, b g t e
            if cache is not None:
                k, v = cache.append(self.layer, k, v)  # b g s e, all keys so far
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        z = self.hook_z(backend.attend(self, q, k, v, mask, bias))  # b h t e
        z = z.transpose(1, 2).reshape(b, t, h * e)  # b t (h e): heads concatenated
        return self.hook_out(self.o_proj(z))  # b t d

    def _self_projections(self, x: torch.Tensor, rope: Rotation | None):
        """q, k, v of self-attention with one matrix product (W_Q, W_K, W_V stacked, as
        GPT-2's c_attn), then RoPE applied to q and k together.  b t d -> b h t e, b g t e x2."""
        b, t, _ = x.shape
        h, g, e = self.n_heads, self.n_kv_heads, self.d_head
        qkv = self.qkv_proj(x)  # b t (h+2g)e
        if self.qk_norm_all:  # OLMo 2: each projection normalized whole, before the split into heads
            q, k, v = qkv.split((h * e, g * e, g * e), dim=-1)
            qkv = torch.cat([self.q_norm(q), self.k_norm(k), v], dim=-1)  # b t (h+2g)e
        qkv = qkv.view(b, t, h + 2 * g, e).transpose(1, 2)  # b (h+2g) t e
        qk, v = qkv[:, : h + g], qkv[:, h + g :]
        if self.q_norm is not None and not self.qk_norm_all:  # each head's e features
            qk = torch.cat([self.q_norm(qk[:, :h]), self.k_norm(qk[:, h:])], dim=1)
        if rope is not None:
            qk = rope.apply(qk)
        return qk[:, :h], qk[:, h:], v

    def _heads(self, x: torch.Tensor, n: int, norm: nn.Module | None) -> torch.Tensor:
        """A projection split into its n heads, q/k-normed as the scope says: the whole
        projection before the split ("all"), or each head after it ("head").  b t (n e) -> b n t e."""
        b, t, _ = x.shape
        if norm is not None and self.qk_norm_all:
            x = norm(x)
        x = x.view(b, t, n, self.d_head).transpose(1, 2)  # b n t e
        return norm(x) if norm is not None and not self.qk_norm_all else x

    @property
    def wants_pattern(self) -> bool:
        """Whether a hook reads or replaces the scores or the pattern (only the explicit path has them)."""
        capped = self.softcap is not None and self.hook_capped.active
        return self.hook_scores.active or self.hook_pattern.active or capped

    def explicit_attention(self, q, k, v, mask: AttentionMask | None, bias):
        """softmax(QK^T * scale + B, soft-capped, masked) V, one step at a time.  -> (b h t e, changed).

        ``changed`` tells whether a hook replaced the scores (capped or not) or the pattern.
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
        if self.softcap is not None:  # before the mask, as Gemma 2: -inf stays -inf either way
            capped = soft_cap(scores, self.softcap)  # b h t s, within (-cap, cap)
            scores = self.hook_capped(capped)
            changed = changed or scores is not capped
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

    def fused_attention(self, q, k, v, mask: AttentionMask | None, bias):
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
