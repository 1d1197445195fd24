"""Key map for Hugging Face Phi-3 decoders (``Phi3ForCausalLM``; Phi-4-mini too): Llama's
architecture without biases, RoPE over each head's first ``partial_rotary_factor`` of features,
a sliding window on every layer when ``sliding_window`` is set, and two fused matrices,

* ``self_attn.qkv_proj`` = [W_Q; W_K; W_V], stacked as ours is: it maps onto ``qkv_proj`` whole;
* ``mlp.gate_up_proj`` = [W_gate; W_up]: its first d_ff rows are our gate, the rest our up
  (`TheirRows`; export joins them back, `key_map.join_rows`).

Phi-3's long-context RoPE scaling ("longrope") is refused by name. Written too (`config_to_hf`),
for what Llama cannot hold (partial rotary): a Phi-3 with full rotary is Llama's model, which
export writes as Llama unless asked for ``model_type="phi3"``.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_llama
from glassformer.formats.hf_rope import read_rope, rope_to_hf
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped, TheirRows

IGNORED = hf_llama.IGNORED
HARMLESS = {  # config keys HF's Phi-3 has but never uses for the computation we read
    "attention_bias": "Phi3Attention has no biases, whatever the config says",
    "mlp_bias": "Phi3MLP has no biases, whatever the config says",
    "original_max_position_embeddings": "read by longrope scaling alone, which is refused",
}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    llama = overlay(hf, drop=tuple(HARMLESS))
    return hf_llama.config_from_hf(llama, keys, rope=read_rope(hf, scalings=(), partial=1.0))


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``Phi3ForCausalLM`` config.json: Llama's, with ``partial_rotary_factor`` and the window.
    Phi-3 takes no RoPE scaling but "longrope", which we lack: a linear one is left out, so a
    model with it reads back without, and is refused."""
    hf = {
        key: value
        for key, value in hf_llama.config_to_hf(config).items()
        if key not in ("attention_bias", "mlp_bias")
    }
    return {
        **hf,
        "model_type": "phi3",
        "architectures": ["Phi3ForCausalLM"],
        **rope_to_hf(config.replace(rope_scaling="none"), partial=True),
        "sliding_window": config.attn_window,
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    f = config.d_ff
    out = []
    for item in hf_llama.key_map(config, keys):
        layer = item.theirs.split(".")[2] if item.theirs.startswith("model.layers.") else None
        theirs = f"model.layers.{layer}"
        if ".self_attn.q_proj." in item.theirs:  # one fused matrix for q, k and v
            out.append(Mapped(item.ours, f"{theirs}.self_attn.qkv_proj.{item.theirs.rsplit('.', 1)[1]}"))
        elif ".self_attn.k_proj." in item.theirs or ".self_attn.v_proj." in item.theirs:
            continue
        elif ".mlp.gate_proj." in item.theirs:
            out.append(Mapped(item.ours, f"{theirs}.mlp.gate_up_proj.weight", TheirRows(0, f)))
        elif ".mlp.up_proj." in item.theirs:
            out.append(Mapped(item.ours, f"{theirs}.mlp.gate_up_proj.weight", TheirRows(f, 2 * f)))
        else:
            out.append(item)
    return out
