"""Normalization layers: LayerNorm and RMSNorm.

LayerNorm (Ba et al., 2016), with the biased variance as in the paper and in torch::

    LN(x) = (x - mean(x)) / sqrt(var(x) + eps) * gamma + beta

RMSNorm (Zhang & Sennrich, 2019; Llama, T5) drops the centring and the bias::

    RMS(x) = x / sqrt(mean(x^2) + eps) * gamma

Both normalize over the last dimension d. RMSNorm computes in float32 whatever the
input dtype, as Llama and T5 do, because the mean of squares overflows in half precision.
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig


class LayerNorm(nn.Module):
    """LN(x) = (x - mean) / sqrt(var + eps) * weight + bias.  Shape: (..., d) -> (..., d)."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


class RMSNorm(nn.Module):
    """RMS(x) = x * rsqrt(mean(x^2) + eps) * weight.  Shape: (..., d) -> (..., d)."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}"


def make_norm(config: ModelConfig, size: int | None = None) -> nn.Module:
    """The normalization layer the config asks for, over ``size`` features (d_model by default;
    d_head for q/k-norm)."""
    size = size or config.d_model
    if config.norm == "rmsnorm":
        return RMSNorm(size, config.norm_eps)
    return LayerNorm(size, config.norm_eps)
