"""Position-wise feed-forward network, plain or gated.

Plain (Vaswani et al., 2017; GPT-2, BERT)::

    FFN(x) = act(x W_up + b_up) W_down + b_down

Gated (Shazeer, 2020, "GLU Variants Improve Transformer"; Llama uses SwiGLU)::

    SwiGLU(x) = (SiLU(x W_gate) * x W_up) W_down
    GeGLU(x)  = (GELU(x W_gate) * x W_up) W_down

Trace names (prefix ``blocks.{i}.ffn``): ``in`` b t d, ``hidden`` b t f (pre-activation:
x W_up for plain, x W_gate for gated), ``act`` b t f (what enters W_down: act(hidden),
times x W_up when gated), ``out`` b t d.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.config import ModelConfig
from glassformer.nn.hooks import HookPoint

ACTIVATION_FNS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "swiglu": F.silu,
    "geglu": F.gelu,
    "geglu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # T5 v1.1 "gated-gelu"
}


def unhooked(x: torch.Tensor) -> torch.Tensor:
    """Stands in for a hook point where a module has none (an expert inside a mixture)."""
    return x


class FeedForward(nn.Module):
    """Two-layer MLP, or three matrices when gated.  Shape: b t d -> b t d.

    ``d_ff`` overrides the config's hidden size (a mixture's experts); ``hooked=False``
    leaves out the hook points (an expert sees only the tokens routed to it, so its
    values are shown by the mixture's own hook points)."""

    def __init__(self, config: ModelConfig, d_ff: int | None = None, hooked: bool = True) -> None:
        super().__init__()
        d, f, bias = config.d_model, d_ff or config.d_ff, config.ffn_bias
        self.gated = config.gated
        self.act_fn = ACTIVATION_FNS[config.activation]
        self.up_proj = nn.Linear(d, f, bias=bias)
        self.gate_proj = nn.Linear(d, f, bias=bias) if self.gated else None
        self.down_proj = nn.Linear(f, d, bias=bias)
        self.dropout = nn.Dropout(config.ffn_dropout)
        point = HookPoint if hooked else lambda _: unhooked
        self.hook_in, self.hook_hidden = point("in"), point("hidden")
        self.hook_act, self.hook_out = point("act"), point("out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_in(x)  # b t d
        if self.gate_proj is not None:
            hidden = self.hook_hidden(self.gate_proj(x))  # b t f: x W_gate
            act = self.hook_act(self.act_fn(hidden) * self.up_proj(x))  # b t f
        else:
            hidden = self.hook_hidden(self.up_proj(x))  # b t f
            act = self.hook_act(self.act_fn(hidden))  # b t f
        return self.hook_out(self.down_proj(self.dropout(act)))  # b t d
