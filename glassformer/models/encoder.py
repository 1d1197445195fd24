"""Encoder-only model, BERT style: bidirectional attention, masked-LM head, pooling.

hidden = blocks(embed(ids, segments))                    no causal mask
MLM logits = W_E^T . LN(act(W_t hidden + b_t)) + b       (BERT's prediction head)
pooled[CLS] = tanh(W_p hidden[:, 0] + b_p)               (BERT's pooler, optional)
mean pooling = sum_t mask_t hidden_t / sum_t mask_t      (sentence embeddings, SBERT)
class logits = W_c pool(hidden) + b_c                    (classification head, optional)
sentence vector = pool(hidden) / ‖pool(hidden)‖          (a sentence encoder: no MLM head)

A vision transformer (ViT, ``config.vision``) is this encoder over an image's patches: hidden =
blocks(PatchEmbedding(pixels)) (`glassformer.nn.patches`), and an image classifier's logits =
W_c hidden[:, 0] + b_c, the [CLS] position after the final LayerNorm (HF's
ViTForImageClassification). It has no token table and no MLM head.
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.models.base import TransformerModel
from glassformer.models.classifier import ClassificationHead, pool_sequence
from glassformer.models.sentence import SentenceHead
from glassformer.models.stack import TransformerStack
from glassformer.nn.ffn import ACTIVATION_FNS
from glassformer.nn.init import init_weights
from glassformer.nn.norms import make_norm

POOLINGS = ("mean", "cls", "pooler")


class MLMHead(nn.Module):
    """Transform (dense, activation, norm) then project to the vocabulary.  b t d -> b t v."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.act_fn = ACTIVATION_FNS[config.activation]
        self.norm = make_norm(config)
        self.decoder = nn.Linear(config.d_model, config.vocab_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.act_fn(self.dense(x))))


class EncoderModel(TransformerModel):
    """BERT-style encoder: one bidirectional stack, an optional masked-LM head and pooler.
    ``forward`` gives MLM logits b t v; ``encode`` the hidden states."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        token = None if config.vision else nn.Embedding(config.vocab_size, config.d_model)  # ViT: patches
        self.stack = TransformerStack(config, token, n_layers=config.n_layers, causal=False)
        self.mlm_head = MLMHead(config) if config.mlm_head else None
        self.pooler = nn.Linear(config.d_model, config.d_model) if config.pooler else None
        self.classifier = ClassificationHead(config) if config.n_classes else None
        self.sentence = SentenceHead() if not (config.mlm_head or config.n_classes) else None
        init_weights(self, config)
        self.tie_weights()

    def tie_weights(self) -> None:
        """The MLM head's output matrix reuses the token embedding (BERT)."""
        if self.config.tie_embeddings and self.mlm_head is not None:
            self.mlm_head.decoder.weight = self.stack.embed.token.weight

    def encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Contextual token vectors: b t -> b t d (a vision model's pixels b C H W -> b t d)."""
        self.check_input(input_ids)
        return self.stack(input_ids, attention_mask, token_type_ids=token_type_ids, backend=self.attention)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Masked-LM logits at every position: b t -> b t v (an error without an MLM head)."""
        return self.logits_of(self.encode(input_ids, attention_mask, token_type_ids))

    def sentence_vectors(
        self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """A sentence encoder's unit vectors, pooled as its config says: b t d -> b d
        (through the ``sentence.*`` hook points; see `glassformer.models.sentence`)."""
        if self.sentence is None:
            raise ValueError("sentence vectors come from a sentence encoder (no MLM head, no classifier)")
        return self.sentence(hidden, attention_mask, self.config.sentence_pooling, self.pooler)

    def pool(
        self,
        hidden: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        mode: str = "mean",
    ) -> torch.Tensor:
        """One vector per sequence: b t d -> b d (``mean`` over real tokens, ``cls``, ``pooler``;
        see `glassformer.models.classifier.pool_sequence`)."""
        if mode not in POOLINGS:
            raise ValueError(f"mode={mode!r}; allowed values: {', '.join(POOLINGS)}")
        return pool_sequence(hidden, attention_mask, mode, self.pooler)
