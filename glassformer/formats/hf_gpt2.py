"""Key map for Hugging Face GPT-2 (``GPT2LMHeadModel`` / ``GPT2Model``).

GPT-2 keeps q, k and v in one Conv1D ``c_attn`` of shape (d, 3d): transposed and split.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf import Mapped, conv1d, hf_activation, special_id

IGNORED = {
    r"(transformer\.)?h\.\d+\.attn\.(masked_)?bias": "causal-mask buffers of old checkpoints",
    r"lm_head\.weight": "tied to the token embedding (checked by config)",
}


def _prefix(keys: set[str]) -> str:
    return "transformer." if "transformer.wte.weight" in keys else ""


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    if hf.get("scale_attn_by_inverse_layer_idx"):
        raise ValueError("GPT-2 option scale_attn_by_inverse_layer_idx=True is not supported")
    return ModelConfig(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["n_embd"],
        n_layers=hf["n_layer"],
        n_heads=hf["n_head"],
        d_ff=hf.get("n_inner") or 4 * hf["n_embd"],
        max_seq_len=hf["n_positions"],
        positions="learned",
        activation=hf_activation(hf.get("activation_function", "gelu_new")),
        norm="layernorm",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_epsilon", 1e-5),
        tie_embeddings=True,
        bos_token_id=special_id(hf, "bos_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    p = _prefix(keys)
    out = [
        Mapped("embed.token.weight", f"{p}wte.weight"),
        Mapped("embed.position.weight", f"{p}wpe.weight"),
        Mapped("final_norm.weight", f"{p}ln_f.weight"),
        Mapped("final_norm.bias", f"{p}ln_f.bias"),
    ]
    for i in range(config.n_layers):
        ours, theirs = f"blocks.{i}", f"{p}h.{i}"
        for kind in ("weight", "bias"):
            out += [
                Mapped(f"{ours}.attn_norm.{kind}", f"{theirs}.ln_1.{kind}"),
                Mapped(f"{ours}.ffn_norm.{kind}", f"{theirs}.ln_2.{kind}"),
                *(
                    Mapped(f"{ours}.attn.{name}_proj.{kind}", f"{theirs}.attn.c_attn.{kind}", conv1d(j, 3))
                    for j, name in enumerate("qkv")
                ),
                Mapped(f"{ours}.attn.o_proj.{kind}", f"{theirs}.attn.c_proj.{kind}", conv1d()),
                Mapped(f"{ours}.ffn.up_proj.{kind}", f"{theirs}.mlp.c_fc.{kind}", conv1d()),
                Mapped(f"{ours}.ffn.down_proj.{kind}", f"{theirs}.mlp.c_proj.{kind}", conv1d()),
            ]
    return out
