"""Transformer blocks: attention and feed-forward sublayers with residual connections.

Pre-norm (GPT-2, Llama, T5; Xiong et al., 2020)::

    h   = x + Attn(LN1(x))
    h'  = h + CrossAttn(LNc(h), enc)        (encoder-decoder decoders only)
    out = h' + FFN(LN2(h'))

Post-norm (the original Transformer, BERT)::

    h   = LN1(x + Attn(x))
    h'  = LNc(h + CrossAttn(h, enc))
    out = LN2(h' + FFN(h'))

Sandwich norm (Gemma 2, 3): a norm before each sublayer and another on its output::

    h   = x + LN1b(Attn(LN1(x)))            (LNcb(CrossAttn(LNc(h), enc)) alike)
    out = h + LN2b(FFN(LN2(h)))

Output norm (OLMo 2): only the sublayer's output is normalized; the sublayer reads the raw
stream::

    h   = x + LN1(Attn(x))
    out = h + LN2(FFN(h))

Pre-norm, sandwich and output norm end the stack with a final norm; post-norm has none.

Parallel residual (GPT-NeoX / Pythia): both sublayers read the block's input::

    h   = x + Attn(LN1(x))                  (resid_mid)
    out = h + FFN(LN2(x))                   (resid_post; LN1(x) again with a shared norm: Phi-2, GPT-J)

Dropout is applied to each sublayer's output before it joins the residual stream.

Trace names (prefix ``blocks.{i}``): ``resid_mid`` b t d after the self-attention
sublayer, ``resid_cross`` b t d after cross-attention (when present), ``resid_post``
b t d leaving the block; with a norm on each sublayer's output (sandwich, output norm),
``attn.post_norm``, ``cross_attn.post_norm`` and ``ffn.post_norm`` b t d: that normed
output, what joins the stream.
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.attention import DEFAULT_BACKEND, Attention, AttentionBackend
from glassformer.nn.ffn import FeedForward
from glassformer.nn.hooks import HookPoint
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.masks import AttentionMask
from glassformer.nn.moe import MoEFeedForward
from glassformer.nn.norms import make_norm
from glassformer.nn.positions import Rotation


class Block(nn.Module):
    """One layer: self-attention, optional cross-attention, FFN.  b t d -> b t d."""

    def __init__(self, config: ModelConfig, layer: int, cross: bool = False) -> None:
        super().__init__()
        self.norm_after_add = config.norm_after_add
        self.parallel = config.parallel_residual
        # each sublayer's norms: on its input (pre, sandwich) or after the sum (post): `*_norm`;
        # on its output (sandwich, output): `*_post_norm`
        before = config.norm_on_input or config.norm_after_add
        after = config.norm_on_output
        self.attn_norm = make_norm(config) if before else None
        self.attn = Attention(config, layer)
        self.attn_post_norm = make_norm(config) if after else None
        self.cross_norm = make_norm(config) if cross and before else None
        self.cross_attn = Attention(config, layer, cross=True) if cross else None
        self.cross_post_norm = make_norm(config) if cross and after else None
        self.ffn_norm = None if config.shared_norm or not before else make_norm(config)
        self.ffn = MoEFeedForward(config) if config.moe else FeedForward(config)
        self.ffn_post_norm = make_norm(config) if after else None
        self.dropout = nn.Dropout(config.resid_dropout)
        self.hook_resid_mid, self.hook_resid_post = HookPoint("resid_mid"), HookPoint("resid_post")
        if cross:
            self.hook_resid_cross = HookPoint("resid_cross")
        # the normed outputs, named with their sublayer (blocks.{i}.attn.post_norm); None: no point
        self.hook_attn_post_norm = HookPoint("attn.post_norm") if after else None
        self.hook_cross_post_norm = HookPoint("cross_attn.post_norm") if cross and after else None
        self.hook_ffn_post_norm = HookPoint("ffn.post_norm") if after else None

    def forward(
        self,
        x: torch.Tensor,
        mask: AttentionMask | None = None,
        *,
        bias: torch.Tensor | None = None,
        rope: Rotation | None = None,
        cache: KVCache | None = None,
        context: torch.Tensor | None = None,
        context_mask: AttentionMask | None = None,
        backend: AttentionBackend = DEFAULT_BACKEND,
    ) -> torch.Tensor:
        if self.parallel:  # the FFN reads the block's input, not attention's sum
            normed = self.attn_norm(x)
            attn = self.attn(normed, mask, bias=bias, rope=rope, cache=cache, backend=backend)
            mid = self.hook_resid_mid(x + self.dropout(attn))
            ffn_in = normed if self.ffn_norm is None else self.ffn_norm(x)
            return self.hook_resid_post(mid + self.dropout(self.ffn(ffn_in)))
        x = self.hook_resid_mid(
            self._sublayer(
                x,
                self.attn_norm,
                lambda y: self.attn(y, mask, bias=bias, rope=rope, cache=cache, backend=backend),
                (self.attn_post_norm, self.hook_attn_post_norm),
            )
        )
        if self.cross_attn is not None:
            x = self.hook_resid_cross(
                self._sublayer(
                    x,
                    self.cross_norm,
                    lambda y: self.cross_attn(y, context_mask, context=context, cache=cache, backend=backend),
                    (self.cross_post_norm, self.hook_cross_post_norm),
                )
            )
        ffn_post = (self.ffn_post_norm, self.hook_ffn_post_norm)
        return self.hook_resid_post(self._sublayer(x, self.ffn_norm, self.ffn, ffn_post))

    def _sublayer(self, x: torch.Tensor, norm: nn.Module | None, fn, post) -> torch.Tensor:
        """One sublayer f with its residual, by placement: x + f(N(x)) pre-norm; N(x + f(x))
        post-norm; x + N2(f(N(x))) sandwich; x + N2(f(x)) output norm (``norm`` None).
        ``post``: (N2, its hook point), both None where the output is not normed."""
        if self.norm_after_add:
            return norm(x + self.dropout(fn(x)))
        y = fn(x if norm is None else norm(x))
        post_norm, hook = post
        if post_norm is not None:
            y = hook(post_norm(y))
        return x + self.dropout(y)
