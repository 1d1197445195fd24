"""Encoder-decoder model: T5 style or the original Transformer, by configuration.

    memory = encoder(source ids)                              bidirectional
    logits = LM_head(decoder(target ids, cross-attending to memory))   causal

T5: T5 relative position bias, RMSNorm pre-norm, no biases, attention scale 1.
Original (Vaswani et al., 2017; Marian): sinusoidal positions, embeddings scaled by
sqrt(d), post-norm LayerNorm, biases. Both share one token table between encoder,
decoder and (when tied) the LM head.

Trace names carry an ``encoder.`` or ``decoder.`` prefix; decoder blocks also have
``cross_attn.*`` and ``resid_cross``; ``logits`` has no prefix.
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.models.base import TransformerModel
from glassformer.models.stack import TransformerStack
from glassformer.nn.init import init_weights
from glassformer.nn.kv_cache import KVCache


class EncoderDecoderLM(TransformerModel):
    """Sequence-to-sequence LM.  (source b s, target b t) -> logits b t v."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder = TransformerStack(
            config, self.shared, n_layers=config.n_layers, causal=False, name="encoder"
        )
        self.decoder = TransformerStack(
            config, self.shared, n_layers=config.n_decoder_layers, causal=True, cross=True, name="decoder"
        )
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=config.lm_head_bias)
        init_weights(self, config)
        self.tie_weights()

    def tie_weights(self) -> None:
        """The LM head reuses the token table shared by encoder and decoder."""
        if self.config.tie_embeddings:
            self.lm_head.weight = self.shared.weight

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output (the decoder's memory): b s -> b s d."""
        self.check_ids(input_ids)
        return self.encoder(input_ids, attention_mask, backend=self.attention)

    def decode(
        self,
        decoder_input_ids: torch.Tensor,
        memory: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        decoder_attention_mask: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        """Logits for the target given the encoder memory: b t -> b t v.

        ``attention_mask`` is the source padding mask (b s); with a cache, cross-attention
        keys and values are computed on the first call only.
        """
        self.check_ids(decoder_input_ids, "decoder_input_ids")
        x = self.decoder(
            decoder_input_ids,
            decoder_attention_mask,
            cache=cache,
            context=memory,
            context_mask=attention_mask,
            backend=self.attention,
        )
        return self.logits_of(x)  # b t v

    def forward(
        self,
        input_ids: torch.Tensor,
        decoder_input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        decoder_attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        memory = self.encode(input_ids, attention_mask)
        return self.decode(
            decoder_input_ids, memory, attention_mask, decoder_attention_mask=decoder_attention_mask
        )
