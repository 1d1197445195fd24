"""Embeddings: the residual stream that enters block 0.

    X = E[T] * scale + P[pos] + S[segment]      (then LayerNorm and dropout where used)

E is the token table (d per token), scale is sqrt(d_model) in the original Transformer
and 1 elsewhere, P the absolute position vectors (learned or sinusoidal; absent for
RoPE, ALiBi, T5 bias and none), S the BERT segment (token-type) table.

Trace names (prefix ``embed``): ``tokens`` b t d (E[T] * scale), ``positions`` b t d
(only for learned and sinusoidal positions), ``out`` b t d (X).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.hooks import HookPoint
from glassformer.nn.norms import make_norm
from glassformer.nn.positions import LearnedPositions, SinusoidalPositions


class Embeddings(nn.Module):
    """Token (+ position, + segment) embeddings.  b t ids -> b t d."""

    def __init__(self, config: ModelConfig, token: nn.Embedding) -> None:
        super().__init__()
        self.token = token  # may be shared with another stack and with the LM head
        self.scale = math.sqrt(config.d_model) if config.embed_scale else 1.0
        self.position: nn.Module | None = None
        if config.positions == "learned":
            self.position = LearnedPositions(config.max_seq_len, config.d_model)
        elif config.positions == "sinusoidal":
            self.position = SinusoidalPositions(config.d_model, config.sinusoidal_style)
        self.token_type = (
            nn.Embedding(config.type_vocab_size, config.d_model) if config.type_vocab_size else None
        )
        self.norm = make_norm(config) if config.embed_norm else None
        self.dropout = nn.Dropout(config.embed_dropout)
        self.hook_tokens, self.hook_out = HookPoint("tokens"), HookPoint("out")
        if self.position is not None:
            self.hook_positions = HookPoint("positions")

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = self.token(ids)  # b t d
        if self.scale != 1.0:
            x = x * self.scale
        x = self.hook_tokens(x)
        if self.position is not None:
            x = x + self.hook_positions(self.position(positions).to(x.dtype))  # b t d
        if self.token_type is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(ids)
            x = x + self.token_type(token_type_ids)  # b t d
        if self.norm is not None:
            x = self.norm(x)
        return self.hook_out(self.dropout(x))
