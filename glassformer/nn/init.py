"""Weight initialization.

* ``gpt2`` (Radford et al., 2019): every weight matrix and embedding ~ N(0, 0.02); the
  projections that write into the residual stream (attention W_O, FFN W_down) get
  std / sqrt(2 * n_layers), so that the stream's variance does not grow with depth.
* ``xavier`` (Glorot & Bengio, 2010): uniform with variance 2 / (fan_in + fan_out) for
  matrices, N(0, std) for embeddings.

A ViT's patch projection (a convolution: W_patch, `glassformer.nn.patches`) and its [CLS]
vector are drawn like the other matrices and embeddings, N(0, std). Biases start at zero,
norm gains at one. A fused projection ([W_Q; W_K; W_V] in
``qkv_proj``, [W_K; W_V] in ``kv_proj``) is initialized as the separate matrices it holds.
"""

from __future__ import annotations

import math

from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.norms import LayerNorm, RMSNorm
from glassformer.nn.patches import PatchEmbedding
from glassformer.nn.positions import LearnedPositions, T5RelativeBias

RESIDUAL_PROJECTIONS = ("o_proj", "down_proj")


def _blocks(name: str, config: ModelConfig) -> list[int]:
    """Output rows of each matrix a projection holds: [h e, g e, g e] for ``qkv_proj``."""
    q, kv = config.n_heads * config.d_head, config.n_kv_heads * config.d_head
    return {"qkv_proj": [q, kv, kv], "kv_proj": [kv, kv]}.get(name, [])


def init_weights(model: nn.Module, config: ModelConfig) -> None:
    """Initialize every parameter of ``model`` in place, following ``config.init``. A model
    built on the meta device (a loader's, `build(initialize=False)`) has no memory to fill."""
    if any(p.is_meta for p in model.parameters()):
        return
    residual_std = config.init_std / math.sqrt(2 * sum(config.stack_depths))
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            if config.init == "xavier":
                rows = _blocks(name.rsplit(".", 1)[-1], config) or [module.out_features]
                for matrix in module.weight.split(rows):
                    nn.init.xavier_uniform_(matrix)
            else:
                is_residual = name.rsplit(".", 1)[-1] in RESIDUAL_PROJECTIONS
                nn.init.normal_(module.weight, 0.0, residual_std if is_residual else config.init_std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.Embedding, LearnedPositions, T5RelativeBias)):
            nn.init.normal_(module.weight, 0.0, config.init_std)
        elif isinstance(module, nn.Conv2d):  # a ViT's patch projection W_patch
            nn.init.normal_(module.weight, 0.0, config.init_std)
            nn.init.zeros_(module.bias)
        elif isinstance(module, PatchEmbedding):  # its [CLS] (its W_patch and positions: above)
            nn.init.normal_(module.cls_token, 0.0, config.init_std)
        elif isinstance(module, (LayerNorm, RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
