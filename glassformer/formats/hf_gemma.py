"""Key map for Hugging Face Gemma decoders (``GemmaForCausalLM``): Llama's layout, with

* the token vectors multiplied by sqrt(d_model) (``embed_scale``);
* GeGLU (tanh GELU) for the gate, ``hidden_activation`` in its config;
* RMSNorm as ``x / rms(x) * (1 + w)``: the checkpoint stores w, we keep 1 + w as the norm's
  weight (`OffsetByOne`), so that Gemma's norm is our RMSNorm unchanged;
* tied embeddings by default.

Written too (`config_to_hf`), with w = (1 + w) - 1. That is not always the checkpoint's own
w: 1 + w is rounded where w has bits below 1's last (a float32 w; a bfloat16 one fits), and
where 1 + w is under 0.5 or negative, taking 1 away rounds again. What HF computes, 1 + w,
is then ours within one rounding (`OffsetByOne.rounds`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from glassformer.config import ModelConfig
from glassformer.formats import hf_llama
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped

IGNORED = hf_llama.IGNORED
NORM = re.compile(r"(input_layernorm|post_attention_layernorm|model\.norm)\.weight$")


class OffsetByOne:
    """Gemma's norm weight w <-> ours, 1 + w; read back within one rounding of 1 + |w| (export's
    check, `key_map.hf_state`), as w - 1 + 1 is not always w in floating point."""

    rounds = True

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return w + 1.0

    def inverse(self, w: torch.Tensor) -> torch.Tensor:
        return w - 1.0


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    activation = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
    llama = overlay(hf, hidden_act=activation, tie_word_embeddings=hf.get("tie_word_embeddings", True))
    return dataclasses.replace(hf_llama.config_from_hf(llama, keys), embed_scale=True)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``GemmaForCausalLM`` config.json: Llama's, with the gate's activation named twice (HF's
    Gemma reads ``hidden_act``, older configs ``hidden_activation``) and no ``mlp_bias`` (Gemma's
    MLP has none: a model with one reads back without, and is refused)."""
    hf = {key: value for key, value in hf_llama.config_to_hf(config).items() if key != "mlp_bias"}
    return {
        **hf,
        "model_type": "gemma",
        "architectures": ["GemmaForCausalLM"],
        "hidden_activation": hf["hidden_act"],
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    return [
        dataclasses.replace(item, transform=OffsetByOne()) if NORM.search(item.theirs) else item
        for item in hf_llama.key_map(config, keys)
    ]
