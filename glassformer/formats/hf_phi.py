"""Key map for Hugging Face Phi-1 / Phi-1.5 / Phi-2 decoders (``PhiForCausalLM``; Gunasekar et
al. 2023): a parallel block with one shared LayerNorm, x + Attn(LN(x)) + FFN(LN(x)); RoPE over
each head's first ``partial_rotary_factor`` of features; GELU (tanh); biases everywhere,
the LM head's too, untied. q/k LayerNorm (``qk_layernorm``) and RoPE scaling are refused.
Written too (`config_to_hf`): ``PhiForCausalLM`` always has its head's bias (`layout_keys`), so a
model without one is refused.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import (
    hf_activation,
    hf_activation_name,
    special_id,
)
from glassformer.formats.hf_rope import read_rope, rope_to_hf
from glassformer.formats.key_map import Mapped, stacked_qkv, with_bias

IGNORED: dict[str, str] = {}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    if hf.get("qk_layernorm"):
        raise ValueError("Phi qk_layernorm=True is not supported")
    rope = read_rope(hf, scalings=(), partial=0.5)  # PhiConfig's default fraction
    d, h = hf["hidden_size"], hf["num_attention_heads"]
    return ModelConfig(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=d,
        n_layers=hf["num_hidden_layers"],
        n_heads=h,
        n_kv_heads=hf.get("num_key_value_heads") or h,
        d_ff=hf["intermediate_size"],
        max_seq_len=hf["max_position_embeddings"],
        positions="rope",
        rope_base=rope.base,
        rotary_dim=rope.rotary_dim(d // h),
        parallel_residual=True,
        shared_norm=True,
        activation=hf_activation(hf.get("hidden_act", "gelu_new")),
        norm="layernorm",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_eps", 1e-5),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        lm_head_bias="lm_head.bias" in keys,
        bos_token_id=special_id(hf, "bos_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``PhiForCausalLM`` config.json: the inverse of `config_from_hf`. Phi's head is untied
    (our key map reads its own ``lm_head.weight``): a tied model reads back untied, and is
    refused, as is what else Phi cannot express (no biases, a sequential block)."""
    return {
        "model_type": "phi",
        "architectures": ["PhiForCausalLM"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "intermediate_size": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        **rope_to_hf(config.replace(rope_scaling="none"), partial=True),
        "qk_layernorm": False,
        "hidden_act": hf_activation_name(config.activation),
        "layer_norm_eps": config.norm_eps,
        "tie_word_embeddings": False,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "pad_token_id": config.pad_token_id,
        "resid_pdrop": config.resid_dropout,  # training only
        "embd_pdrop": config.embed_dropout,
        "attention_dropout": config.attn_dropout,
        "initializer_range": config.init_std,
    }


def layout_keys(config: ModelConfig) -> set[str]:
    """``PhiForCausalLM``'s LM head always has a bias."""
    return {"lm_head.bias"}


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    out = [
        Mapped("stack.embed.token.weight", "model.embed_tokens.weight"),
        *with_bias("stack.final_norm", "model.final_layernorm"),
        Mapped("lm_head.weight", "lm_head.weight"),
    ]
    if config.lm_head_bias:
        out.append(Mapped("lm_head.bias", "lm_head.bias"))
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"model.layers.{i}"
        attn = f"{theirs}.self_attn"
        out += stacked_qkv(f"{ours}.attn", f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj", config)
        out += [
            *with_bias(f"{ours}.attn.o_proj", f"{attn}.dense"),
            *with_bias(f"{ours}.attn_norm", f"{theirs}.input_layernorm"),  # the block's one norm
            *with_bias(f"{ours}.ffn.up_proj", f"{theirs}.mlp.fc1"),
            *with_bias(f"{ours}.ffn.down_proj", f"{theirs}.mlp.fc2"),
        ]
    return out
