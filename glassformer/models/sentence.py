"""A sentence encoder's output: one unit-length vector per sentence (Sentence-BERT, Reimers &
Gurevych 2019), as sentence-transformers computes it after the transformer:

    pooled = pool(hidden, mask)               b t d -> b d   (config.sentence_pooling)
    vector = pooled / max(‖pooled‖₂, 1e-12)   b d -> b d     (its Normalize module)

so the cosine similarity of two sentences is the dot product of their vectors. The pooling
modes are `glassformer.models.classifier.pool_sequence`'s (mean over the real tokens, the
first token, or BERT's pooler). Hook points: ``sentence.pooled`` and ``sentence.vector``.

>>> SentenceHead()(torch.tensor([[[3.0, 0.0], [3.0, 8.0]]]), mode="mean")  # mean (3, 4), length 5
tensor([[0.6000, 0.8000]])
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.models.classifier import pool_sequence
from glassformer.nn.hooks import HookPoint, name_hook_points


class SentenceHead(nn.Module):
    """Pool, then normalize: b t d -> b d. No parameters of its own: the mode is the
    model's config's, and the pooler, if the mode uses it, is the encoder's."""

    def __init__(self) -> None:
        super().__init__()
        self.hook_pooled = HookPoint("pooled")
        self.hook_vector = HookPoint("vector")
        self.hook_points = name_hook_points(self, prefix="sentence")  # sentence.pooled, .vector

    def forward(
        self,
        hidden: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        mode: str = "mean",
        pooler: nn.Module | None = None,
    ) -> torch.Tensor:
        pooled = self.hook_pooled(pool_sequence(hidden, attention_mask, mode, pooler))  # b d
        return self.hook_vector(torch.nn.functional.normalize(pooled, dim=-1))  # b d
