"""Sequence classification: one vector per sequence, then a linear map to class logits.

    pooled = pool(hidden, mask)                       b t d -> b d
    logits = W_c dropout(pooled) + b_c                b d -> b c      (c = n_classes)

BERT's recipe (Devlin et al. 2019, 4.1) on an encoder; the last token on a decoder (GPT's
"extract the last token", Radford et al. 2018, 3.3). The pooling modes
(``config.classifier_pooling``), with mask_t = 1 for a token and 0 for padding:

    cls      hidden[:, 0]                                 the first token ([CLS] for BERT)
    mean     sum_t mask_t hidden_t / sum_t mask_t         the real tokens' average (SBERT)
    pooler   tanh(W_p hidden[:, 0] + b_p)                 BERT's pooler (config.pooler)
    last     hidden[b, max{t : mask_t = 1}]               the last real token, whichever side
                                                          the padding is on (causal models)

Dropout is ``config.resid_dropout`` (BERT's hidden dropout, as HF's BertForSequenceClassification
uses when no classifier dropout is set). Hook points: ``classifier.pooled`` (b d) and
``classifier.logits`` (b c).

>>> hidden = torch.arange(12.0).view(1, 4, 3)            # b=1 t=4 d=3
>>> mask = torch.tensor([[0, 1, 1, 0]])                  # padding on both sides
>>> pool_sequence(hidden, mask, "last").tolist(), pool_sequence(hidden, mask, "mean").tolist()
([[6.0, 7.0, 8.0]], [[4.5, 5.5, 6.5]])
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.config_checks import CLASSIFIER_POOLINGS
from glassformer.nn.hooks import HookPoint, name_hook_points


def pool_sequence(
    hidden: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    mode: str = "mean",
    pooler: nn.Module | None = None,
) -> torch.Tensor:
    """One vector per sequence, b t d -> b d (see the module docstring for each mode)."""
    if mode == "mean":
        if attention_mask is None:
            return hidden.mean(dim=1)
        weights = attention_mask.to(hidden.dtype).unsqueeze(-1)  # b t 1
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)  # b d
    if mode == "cls":
        return hidden[:, 0]  # b d
    if mode == "pooler":
        if pooler is None:
            raise ValueError("this model has no pooler (config.pooler=False); use mode='mean' or 'cls'")
        return torch.tanh(pooler(hidden[:, 0]))  # b d
    if mode == "last":
        b, t, _ = hidden.shape
        if attention_mask is None:
            return hidden[:, -1]
        positions = torch.arange(t, device=hidden.device).expand(b, t)  # b t
        last = torch.where(attention_mask.bool(), positions, -1).max(dim=1).values  # b
        if bool((last < 0).any()):
            raise ValueError("a sequence is all padding (its attention_mask has no 1): nothing to classify")
        return hidden[torch.arange(b, device=hidden.device), last]  # b d
    raise ValueError(f"mode={mode!r}; allowed values: {', '.join(CLASSIFIER_POOLINGS)}")


class ClassificationHead(nn.Module):
    """Pool, dropout, ``out_proj``: final hidden states b t d -> class logits b c."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pooling = config.classifier_pooling
        self.dropout = nn.Dropout(config.resid_dropout)
        self.out_proj = nn.Linear(config.d_model, config.n_classes)
        self.hook_pooled = HookPoint("pooled")
        self.hook_logits = HookPoint("logits")
        self.hook_points = name_hook_points(self, prefix="classifier")  # classifier.pooled, .logits

    def forward(
        self,
        hidden: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        pooler: nn.Module | None = None,
    ) -> torch.Tensor:
        pooled = self.hook_pooled(pool_sequence(hidden, attention_mask, self.pooling, pooler))  # b d
        return self.hook_logits(self.out_proj(self.dropout(pooled)))  # b c
