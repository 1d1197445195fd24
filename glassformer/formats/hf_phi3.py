"""Key map for Hugging Face Phi-3 decoders (``Phi3ForCausalLM``): Llama's architecture with
two fused matrices,

* ``self_attn.qkv_proj`` = [W_Q; W_K; W_V], stacked as ours is: it maps onto ``qkv_proj`` whole;
* ``mlp.gate_up_proj`` = [W_gate; W_up]: its first d_ff rows are our gate, the rest our up
  (`TheirRows`).

Read, not written (export writes the Llama layout for the same model). Phi-3's long-context
RoPE scaling ("longrope") is refused by name.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_llama
from glassformer.formats.key_map import Mapped, TheirRows

IGNORED = hf_llama.IGNORED


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    if hf.get("partial_rotary_factor", 1.0) != 1.0:
        raise ValueError(
            f"Phi-3 partial_rotary_factor={hf['partial_rotary_factor']} is not supported (only 1.0)"
        )
    return hf_llama.config_from_hf(hf, keys)


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
