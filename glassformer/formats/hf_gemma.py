"""Key map for Hugging Face Gemma decoders (``GemmaForCausalLM``): Llama's layout, with

* the token vectors multiplied by sqrt(d_model) (``embed_scale``);
* GeGLU (tanh GELU) for the gate, ``hidden_activation`` in its config;
* RMSNorm as ``x / rms(x) * (1 + w)``: the checkpoint stores w, we keep 1 + w as the norm's
  weight (`OffsetByOne`), so that Gemma's norm is our RMSNorm unchanged;
* tied embeddings by default.

Read, not written: 1 + w in float32 does not always give w back when 1 is taken away, so
an export could not be the checkpoint's own tensors.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import torch

from glassformer.config import ModelConfig
from glassformer.formats import hf_llama
from glassformer.formats.key_map import Mapped

IGNORED = hf_llama.IGNORED
NORM = re.compile(r"(input_layernorm|post_attention_layernorm|model\.norm)\.weight$")


class OffsetByOne:
    """Gemma's norm weight w <-> ours, 1 + w."""

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return w + 1.0

    def inverse(self, w: torch.Tensor) -> torch.Tensor:
        return w - 1.0


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    activation = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
    llama = {**hf, "hidden_act": activation, "tie_word_embeddings": hf.get("tie_word_embeddings", True)}
    return dataclasses.replace(hf_llama.config_from_hf(llama, keys), embed_scale=True)


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    return [
        dataclasses.replace(item, transform=OffsetByOne()) if NORM.search(item.theirs) else item
        for item in hf_llama.key_map(config, keys)
    ]
