"""Transformer blocks: attention and feed-forward sublayers with residual connections.

Pre-norm (GPT-2, Llama, T5; Xiong et al., 2020)::

    h   = x + Attn(LN1(x))
    h'  = h + CrossAttn(LNc(h), enc)        (encoder-decoder decoders only)
    out = h' + FFN(LN2(h'))

Post-norm (the original Transformer, BERT)::

    h   = LN1(x + Attn(x))
    h'  = LNc(h + CrossAttn(h, enc))
    out = LN2(h' + FFN(h'))

Parallel residual (GPT-NeoX / Pythia): both sublayers read the block's input::

    h   = x + Attn(LN1(x))                  (resid_mid)
    out = h + FFN(LN2(x))                   (resid_post; LN1(x) again with a shared norm: Phi-2, GPT-J)

Dropout is applied to each sublayer's output before it joins the residual stream.

Trace names (prefix ``blocks.{i}``): ``resid_mid`` b t d after the self-attention
sublayer, ``resid_cross`` b t d after cross-attention (when present), ``resid_post``
b t d leaving the block.
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
        self.pre_norm = config.norm_placement == "pre"
        self.parallel = config.parallel_residual
        self.attn_norm = make_norm(config)
        self.attn = Attention(config, layer)
        self.cross_norm = make_norm(config) if cross else None
        self.cross_attn = Attention(config, layer, cross=True) if cross else None
        self.ffn_norm = None if config.shared_norm else make_norm(config)
        self.ffn = MoEFeedForward(config) if config.moe else FeedForward(config)
        self.dropout = nn.Dropout(config.resid_dropout)
        self.hook_resid_mid, self.hook_resid_post = HookPoint("resid_mid"), HookPoint("resid_post")
        if cross:
            self.hook_resid_cross = HookPoint("resid_cross")

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
            )
        )
        if self.cross_attn is not None:
            x = self.hook_resid_cross(
                self._sublayer(
                    x,
                    self.cross_norm,
                    lambda y: self.cross_attn(y, context_mask, context=context, cache=cache, backend=backend),
                )
            )
        return self.hook_resid_post(self._sublayer(x, self.ffn_norm, self.ffn))

    def _sublayer(self, x: torch.Tensor, norm: nn.Module, fn) -> torch.Tensor:
        """x + f(norm(x)) in pre-norm; norm(x + f(x)) in post-norm."""
        if self.pre_norm:
            return x + self.dropout(fn(norm(x)))
        return norm(x + self.dropout(fn(x)))
