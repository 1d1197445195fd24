"""Key map for Hugging Face GPT-2 (``GPT2LMHeadModel`` / ``GPT2Model``).

GPT-2 keeps q, k and v in one Conv1D ``c_attn`` of shape (d, 3d), columns [q | k | v]:
transposed, it is our ``qkv_proj`` = [W_Q; W_K; W_V] (3d, d) as it is (nanoGPT's
``c_attn``), and transposed back on export. Export writes
``GPT2LMHeadModel`` (the ``transformer.`` prefix, tied LM head left out as HF does).
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import hf_activation, hf_activation_name, special_id
from glassformer.formats.key_map import Conv1D, Mapped

NEUTRAL = {"scale_attn_weights": True, "tie_word_embeddings": True}  # the only values GPT-2 is read with
HARMLESS = {
    "summary_type": "GPT2DoubleHeadsModel's multiple-choice head, which is not read",
    "summary_use_proj": "GPT2DoubleHeadsModel's multiple-choice head, which is not read",
    "summary_proj_to_labels": "GPT2DoubleHeadsModel's multiple-choice head, which is not read",
    "summary_activation": "GPT2DoubleHeadsModel's multiple-choice head, which is not read",
    "reorder_and_upcast_attn": "float32 inside the attention in half precision: the same sums",
}
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


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``GPT2LMHeadModel`` config.json for ``config``: the inverse of `config_from_hf`.

    What GPT-2 cannot express (RoPE, RMSNorm, no biases, an untied head) is written as
    GPT-2 has it; `glassformer.formats.hf_export` reads the result back and refuses it.
    """
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": config.vocab_size,
        "n_embd": config.d_model,
        "n_layer": config.n_layers,
        "n_head": config.n_heads,
        "n_inner": config.d_ff,
        "n_positions": config.max_seq_len,
        "activation_function": hf_activation_name(config.activation),
        "layer_norm_epsilon": config.norm_eps,
        "tie_word_embeddings": True,  # GPT2LMHeadModel always ties
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "pad_token_id": config.pad_token_id,
        # training only: GPT-2's resid_pdrop covers both sublayer outputs (our resid + ffn)
        "embd_pdrop": config.embed_dropout,
        "attn_pdrop": config.attn_dropout,
        "resid_pdrop": config.resid_dropout,
        "initializer_range": config.init_std,
    }


def layout_keys(config: ModelConfig) -> set[str]:
    """Export writes ``GPT2LMHeadModel``, whose tensors carry the ``transformer.`` prefix."""
    return {"transformer.wte.weight"}


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    p = _prefix(keys)
    out = [
        Mapped("stack.embed.token.weight", f"{p}wte.weight"),
        Mapped("stack.embed.position.weight", f"{p}wpe.weight"),
        Mapped("stack.final_norm.weight", f"{p}ln_f.weight"),
        Mapped("stack.final_norm.bias", f"{p}ln_f.bias"),
    ]
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"{p}h.{i}"
        for kind in ("weight", "bias"):
            out += [
                Mapped(f"{ours}.attn_norm.{kind}", f"{theirs}.ln_1.{kind}"),
                Mapped(f"{ours}.ffn_norm.{kind}", f"{theirs}.ln_2.{kind}"),
                Mapped(f"{ours}.attn.qkv_proj.{kind}", f"{theirs}.attn.c_attn.{kind}", Conv1D()),
                Mapped(f"{ours}.attn.o_proj.{kind}", f"{theirs}.attn.c_proj.{kind}", Conv1D()),
                Mapped(f"{ours}.ffn.up_proj.{kind}", f"{theirs}.mlp.c_fc.{kind}", Conv1D()),
                Mapped(f"{ours}.ffn.down_proj.{kind}", f"{theirs}.mlp.c_proj.{kind}", Conv1D()),
            ]
    return out
