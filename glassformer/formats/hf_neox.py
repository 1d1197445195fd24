"""Key map for Hugging Face GPT-NeoX / Pythia decoders (``GPTNeoXForCausalLM``; Black et al.
2022, Biderman et al. 2023, the models much interpretability work is done on): pre-norm
LayerNorm with biases, a GELU feed-forward, an untied head, and

* a parallel residual (``use_parallel_residual``): x + Attn(LN1(x)) + FFN(LN2(x));
* partial rotary: RoPE (rotate-half) over each head's first ``rotary_pct`` of features;
* one fused ``query_key_value`` whose rows go head by head, [q_0; k_0; v_0; q_1; ...]:
  `HeadsInterleaved` reorders them into our [W_Q; W_K; W_V] (and back).

RoPE scaling is refused. Written too (`config_to_hf`).
"""

from __future__ import annotations

from typing import Any

import torch

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import (
    hf_activation,
    hf_activation_name,
    special_id,
)
from glassformer.formats.hf_rope import read_rope, rope_to_hf, rotary_fraction
from glassformer.formats.key_map import Mapped, with_bias

IGNORED = {
    r"gpt_neox\.layers\.\d+\.attention\.(bias|masked_bias|rotary_emb\.inv_freq)": "mask and RoPE buffers",
}


class HeadsInterleaved:
    """NeoX's fused rows (h, 3, e) <-> ours (3, h, e), for a weight (rows x d) or a bias."""

    def __init__(self, heads: int, d_head: int) -> None:
        self.heads, self.d_head = heads, d_head

    def _swap(self, w: torch.Tensor, first: int, second: int) -> torch.Tensor:
        rest = w.shape[1:]
        return w.reshape(first, second, self.d_head, *rest).transpose(0, 1).reshape(-1, *rest).contiguous()

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return self._swap(w, self.heads, 3)

    def inverse(self, w: torch.Tensor) -> torch.Tensor:
        return self._swap(w, 3, self.heads)


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    rope = read_rope(hf, scalings=(), partial=0.25)  # GPTNeoXConfig's default fraction
    d, h = hf["hidden_size"], hf["num_attention_heads"]
    return ModelConfig(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=d,
        n_layers=hf["num_hidden_layers"],
        n_heads=h,
        d_ff=hf["intermediate_size"],
        max_seq_len=hf["max_position_embeddings"],
        positions="rope",
        rope_base=rope.base,
        rotary_dim=rope.rotary_dim(d // h),
        parallel_residual=bool(hf.get("use_parallel_residual", True)),
        activation=hf_activation(hf.get("hidden_act", "gelu")),
        qkv_bias=bool(hf.get("attention_bias", True)),
        out_bias=bool(hf.get("attention_bias", True)),
        norm="layernorm",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_eps", 1e-5),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        bos_token_id=special_id(hf, "bos_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``GPTNeoXForCausalLM`` config.json: the inverse of `config_from_hf`. One switch for the
    attention's biases, always the MLP's: a model that differs reads back otherwise, and is
    refused."""
    return {
        "model_type": "gpt_neox",
        "architectures": ["GPTNeoXForCausalLM"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        **rope_to_hf(config.replace(rope_scaling="none"), partial=True),
        "rotary_emb_base": config.rope_base,  # transformers 4.x's older names
        "rotary_pct": rotary_fraction(config),
        "use_parallel_residual": config.parallel_residual,
        "hidden_act": hf_activation_name(config.activation),
        "attention_bias": config.qkv_bias,
        "layer_norm_eps": config.norm_eps,
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "pad_token_id": config.pad_token_id,
        "hidden_dropout": config.resid_dropout,  # training only
        "attention_dropout": config.attn_dropout,
        "initializer_range": config.init_std,
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    fused = HeadsInterleaved(config.n_heads, config.d_head)
    out = [
        Mapped("stack.embed.token.weight", "gpt_neox.embed_in.weight"),
        *with_bias("stack.final_norm", "gpt_neox.final_layer_norm"),
    ]
    if not config.tie_embeddings:
        out.append(Mapped("lm_head.weight", "embed_out.weight"))
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"gpt_neox.layers.{i}"
        kinds = ("weight", "bias") if config.qkv_bias else ("weight",)
        out += [
            Mapped(f"{ours}.attn.qkv_proj.{k}", f"{theirs}.attention.query_key_value.{k}", fused)
            for k in kinds
        ]
        out += [
            *with_bias(f"{ours}.attn.o_proj", f"{theirs}.attention.dense", config.out_bias),
            *with_bias(f"{ours}.attn_norm", f"{theirs}.input_layernorm"),
            *with_bias(f"{ours}.ffn_norm", f"{theirs}.post_attention_layernorm"),
            *with_bias(f"{ours}.ffn.up_proj", f"{theirs}.mlp.dense_h_to_4h"),
            *with_bias(f"{ours}.ffn.down_proj", f"{theirs}.mlp.dense_4h_to_h"),
        ]
    return out
