"""Key map for Hugging Face OLMo 2 decoders (``Olmo2ForCausalLM``, model_type ``olmo2``).

Llama's layout (RoPE with rotate-half pairs, SwiGLU, RMSNorm, no biases unless
``attention_bias``), with two changes that keep the residual stream in range (OLMo 2, Team
OLMo 2024, §3.1):

* the norms sit on each sublayer's *output*, not its input (``norm_placement="output"``),
  and the stack still ends in a final norm::

      h   = x + post_attention_layernorm(Attn(x))
      out = h + post_feedforward_layernorm(FFN(h))

* q/k-norm over the whole projection (``qk_norm_scope="all"``): one RMSNorm over all h e
  query features (``self_attn.q_norm``), one over all g e key features (``k_norm``), before
  the split into heads and RoPE.

Export writes ``Olmo2ForCausalLM`` for a model built so (`config_to_hf`).
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_llama
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped

IGNORED = hf_llama.IGNORED


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    base = hf_llama.config_from_hf(overlay(hf, use_sliding_window=False), keys)
    return base.replace(
        norm_placement="output",
        qk_norm=True,
        qk_norm_scope="all",
        ffn_bias=False,  # OLMo 2's MLP has none, whatever mlp_bias says
        norm_eps=hf.get("rms_norm_eps", 1e-5),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """An ``Olmo2ForCausalLM`` config.json: Llama's fields; what OLMo 2 cannot express (norms
    before each sublayer, q/k-norm per head, an FFN bias) is written as OLMo 2 has it, so that
    `glassformer.formats.hf_export` reads it back and refuses it."""
    out = {**hf_llama.config_to_hf(config), "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"]}
    if config.rope_scaling == "linear":  # Olmo2Config checks for exactly {"type", "factor"}
        out["rope_scaling"] = {"type": "linear", "factor": config.rope_scaling_factor}
    return out


# their norm -> ours: each sublayer's output is normed (norm_placement="output")
NORMS = {"post_attention_layernorm": "attn_post_norm", "post_feedforward_layernorm": "ffn_post_norm"}


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    return hf_llama.layout(config, NORMS)  # Llama's, with q/k-norm and the norms on the outputs
