"""Key map for Hugging Face Marian (``MarianMTModel``): the original Transformer layout.

Post-norm LayerNorm, sinusoidal positions with every sine before every cosine
("halved"), token embeddings scaled by sqrt(d) when ``scale_embedding``, biases
everywhere, and a fixed ``final_logits_bias`` added to the logits.

Written too (`config_to_hf`). The position tables are not written: like ``save_pretrained``,
export leaves the sinusoids to HF, which recomputes them (and `check` compares a checkpoint's
own with ours when it has them).
"""

from __future__ import annotations

from typing import Any

import torch

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import hf_activation, hf_activation_name, special_id
from glassformer.formats.key_map import Mapped, Unbatched, stacked_kv, stacked_qkv
from glassformer.nn.positions import sinusoidal_table

IGNORED = {
    r"model\.(encoder|decoder)\.embed_tokens\.weight": "the same tensor as model.shared.weight",
    r"model\.(encoder|decoder)\.embed_positions\.weight": "fixed sinusoids, recomputed (checked)",
    r"lm_head\.weight": "tied to model.shared.weight",
}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    pairs = [("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")]
    for enc, dec in pairs:
        if hf[enc] != hf[dec]:
            raise ValueError(f"Marian with {enc}={hf[enc]} != {dec}={hf[dec]} is not supported")
    if hf.get("decoder_vocab_size", hf["vocab_size"]) not in (None, hf["vocab_size"]):
        raise ValueError(
            f"Marian with decoder_vocab_size={hf['decoder_vocab_size']} != vocab_size={hf['vocab_size']} "
            "(two vocabularies) is not supported"
        )
    if not hf.get("share_encoder_decoder_embeddings", True) or not hf.get("tie_word_embeddings", True):
        raise ValueError("Marian without shared, tied embeddings is not supported")
    return ModelConfig(
        family="encoder_decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_layers=hf["encoder_layers"],
        n_decoder_layers=hf["decoder_layers"],
        n_heads=hf["encoder_attention_heads"],
        d_ff=hf["encoder_ffn_dim"],
        max_seq_len=hf["max_position_embeddings"],
        positions="sinusoidal",
        sinusoidal_style="halved",
        activation=hf_activation(hf.get("activation_function", "swish")),
        norm="layernorm",
        norm_placement="post",
        norm_eps=1e-5,
        embed_scale=bool(hf.get("scale_embedding", False)),
        tie_embeddings=True,
        lm_head_bias=True,
        pad_token_id=special_id(hf, "pad_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        decoder_start_token_id=special_id(hf, "decoder_start_token_id"),  # None: start from <pad>
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``MarianMTModel`` config.json: the inverse of `config_from_hf`. One size for both stacks'
    heads and FFNs, LayerNorm's default eps, shared and tied embeddings: a model that differs
    reads back otherwise, and is refused."""
    return {
        "model_type": "marian",
        "architectures": ["MarianMTModel"],
        "is_encoder_decoder": True,
        "vocab_size": config.vocab_size,
        "decoder_vocab_size": config.vocab_size,
        "d_model": config.d_model,
        "encoder_layers": config.n_layers,
        "decoder_layers": config.n_decoder_layers,
        "encoder_attention_heads": config.n_heads,
        "decoder_attention_heads": config.n_heads,
        "encoder_ffn_dim": config.d_ff,
        "decoder_ffn_dim": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        "activation_function": hf_activation_name(config.activation),
        "scale_embedding": config.embed_scale,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
        "pad_token_id": config.pad_token_id,
        "eos_token_id": config.eos_token_id,
        "decoder_start_token_id": config.decoder_start_token_id,
        "forced_eos_token_id": None,  # our generation forces no token
        "dropout": config.resid_dropout,  # training only
        "attention_dropout": config.attn_dropout,
        "init_std": config.init_std,
    }


def check(state: dict[str, torch.Tensor], config: ModelConfig) -> None:
    """The ignored position tables must be the sinusoids we recompute."""
    for stack in ("encoder", "decoder"):
        table = state.get(f"model.{stack}.embed_positions.weight")
        if table is None:
            continue
        ours = sinusoidal_table(torch.arange(table.shape[0]), config.d_model, "halved")
        if not torch.allclose(table.float(), ours, atol=1e-4):
            raise ValueError(f"model.{stack}.embed_positions.weight is not the expected sinusoidal table")


def _attention(ours: str, theirs: str, config: ModelConfig, cross: bool = False) -> list[Mapped]:
    """Self-attention's q, k, v stacked into ``qkv_proj``; cross-attention's k, v into ``kv_proj``."""
    stack = stacked_kv if cross else stacked_qkv
    out = stack(ours, f"{theirs}.q_proj", f"{theirs}.k_proj", f"{theirs}.v_proj", config)
    return out + [Mapped(f"{ours}.o_proj.{kind}", f"{theirs}.out_proj.{kind}") for kind in ("weight", "bias")]


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    out = [
        Mapped("shared.weight", "model.shared.weight"),
        Mapped("lm_head.bias", "final_logits_bias", Unbatched(1)),  # HF's is 1 x v
    ]
    for stack, n_layers in (("encoder", config.n_layers), ("decoder", config.n_decoder_layers)):
        for i in range(n_layers):
            ours, theirs = f"{stack}.blocks.{i}", f"model.{stack}.layers.{i}"
            out += _attention(f"{ours}.attn", f"{theirs}.self_attn", config)
            norms = [("attn_norm", "self_attn_layer_norm"), ("ffn_norm", "final_layer_norm")]
            if stack == "decoder":
                out += _attention(f"{ours}.cross_attn", f"{theirs}.encoder_attn", config, cross=True)
                norms.append(("cross_norm", "encoder_attn_layer_norm"))
            for kind in ("weight", "bias"):
                out += [Mapped(f"{ours}.{a}.{kind}", f"{theirs}.{b}.{kind}") for a, b in norms]
                out += [
                    Mapped(f"{ours}.ffn.up_proj.{kind}", f"{theirs}.fc1.{kind}"),
                    Mapped(f"{ours}.ffn.down_proj.{kind}", f"{theirs}.fc2.{kind}"),
                ]
    return out
