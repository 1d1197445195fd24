"""Weight initialization.

* ``gpt2`` (Radford et al., 2019): every weight matrix and embedding ~ N(0, 0.02); the
  projections that write into the residual stream (attention W_O, FFN W_down) get
  std / sqrt(2 * n_layers), so that the stream's variance does not grow with depth.
* ``xavier`` (Glorot & Bengio, 2010): uniform with variance 2 / (fan_in + fan_out) for
  matrices, N(0, std) for embeddings.

Biases start at zero, norm gains at one.
"""

from __future__ import annotations

import math

from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.norms import LayerNorm, RMSNorm
from glassformer.nn.positions import LearnedPositions, T5RelativeBias

RESIDUAL_PROJECTIONS = ("o_proj", "down_proj")


def init_weights(model: nn.Module, config: ModelConfig) -> None:
    """Initialize every parameter of ``model`` in place, following ``config.init``."""
    depth = config.n_layers + (config.n_decoder_layers if config.family == "encoder_decoder" else 0)
    residual_std = config.init_std / math.sqrt(2 * depth)
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            if config.init == "xavier":
                nn.init.xavier_uniform_(module.weight)
            else:
                is_residual = name.rsplit(".", 1)[-1] in RESIDUAL_PROJECTIONS
                nn.init.normal_(module.weight, 0.0, residual_std if is_residual else config.init_std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.Embedding, LearnedPositions, T5RelativeBias)):
            nn.init.normal_(module.weight, 0.0, config.init_std)
        elif isinstance(module, (LayerNorm, RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
