"""Decoder-only language model: GPT-2 style through Llama style, by configuration.

    logits = LM_head(final_norm(blocks(embed(ids))))        causal self-attention only
    class logits = W_c final_norm(...)[last real token]    (classification head, optional)

GPT-2: learned positions, LayerNorm pre-norm, GELU (tanh), biases, tied head.
Llama: RoPE, RMSNorm pre-norm, SwiGLU, no biases, grouped-query attention.
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.models.base import TransformerModel
from glassformer.models.classifier import ClassificationHead
from glassformer.models.stack import TransformerStack
from glassformer.nn.init import init_weights
from glassformer.nn.kv_cache import KVCache


class DecoderLM(TransformerModel):
    """Causal LM: one causal stack and an LM head.  input_ids b t -> logits b t v.
    Trace names: see docs/architecture.md."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        token = nn.Embedding(config.vocab_size, config.d_model)
        self.stack = TransformerStack(config, token, n_layers=config.n_layers, causal=True)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=config.lm_head_bias)
        self.classifier = ClassificationHead(config) if config.n_classes else None
        init_weights(self, config)
        self.tie_weights()

    def tie_weights(self) -> None:
        """W_U = E^T (Press & Wolf, 2017): the LM head reuses the token embedding."""
        if self.config.tie_embeddings:
            self.lm_head.weight = self.stack.embed.token.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        cache: KVCache | None = None,
        token_type_ids: torch.Tensor | None = None,
        last_only: bool = False,
    ) -> torch.Tensor:
        """Next-token logits at every position: b t -> b t v. ``last_only``: at the last position
        alone, b t -> b 1 v (generation reads no other: the head's t x v scores are skipped)."""
        self.check_ids(input_ids)
        x = self.stack(
            input_ids, attention_mask, token_type_ids=token_type_ids, cache=cache, backend=self.attention
        )  # b t d
        return self.logits_of(x[:, -1:] if last_only else x)  # b t v, or b 1 v
