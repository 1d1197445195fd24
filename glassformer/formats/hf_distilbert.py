"""Key map for Hugging Face DistilBERT (``DistilBertForMaskedLM``, ``DistilBertModel``; Sanh et
al. 2019): BERT's architecture, half as deep, under other names (``q_lin`` ..., ``lin1``,
``vocab_transform``), with no segment embeddings and no pooler; sinusoidal positions
(``sinusoidal_pos_embds=True``) are refused by name. Written too (`config_to_hf`).
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import hf_activation, hf_activation_name, special_id
from glassformer.formats.key_map import Mapped, stacked_qkv, with_bias

NEUTRAL = {"tie_word_embeddings": True}  # the MLM head's decoder is the token embedding
IGNORED = {
    r"(distilbert\.)?embeddings\.position_ids": "an arange buffer",
    r"vocab_projector\.weight": "tied to the token embedding",
}


def _prefix(keys: set[str]) -> str:
    return "distilbert." if "distilbert.embeddings.word_embeddings.weight" in keys else ""


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    if hf.get("sinusoidal_pos_embds"):
        raise ValueError("DistilBERT sinusoidal_pos_embds=True is not supported (learned positions only)")
    return ModelConfig(
        family="encoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["dim"],
        n_layers=hf["n_layers"],
        n_heads=hf["n_heads"],
        d_ff=hf["hidden_dim"],
        max_seq_len=hf["max_position_embeddings"],
        positions="learned",
        activation=hf_activation(hf.get("activation", "gelu")),
        norm="layernorm",
        norm_placement="post",
        norm_eps=1e-12,  # DistilBERT's LayerNorms are built with eps=1e-12
        embed_norm=True,
        tie_embeddings=True,
        mlm_head="vocab_transform.weight" in keys,
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``DistilBertForMaskedLM`` / ``DistilBertModel`` config.json: the inverse of
    `config_from_hf`. DistilBERT's LayerNorm eps is fixed, it has no segments and no pooler: a
    model that differs reads back otherwise, and is refused."""
    return {
        "model_type": "distilbert",
        "architectures": ["DistilBertForMaskedLM" if config.mlm_head else "DistilBertModel"],
        "vocab_size": config.vocab_size,
        "dim": config.d_model,
        "n_layers": config.n_layers,
        "n_heads": config.n_heads,
        "hidden_dim": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        "sinusoidal_pos_embds": False,
        "activation": hf_activation_name(config.activation),
        "tie_word_embeddings": True,
        "pad_token_id": config.pad_token_id,
        "dropout": config.resid_dropout,  # training only
        "attention_dropout": config.attn_dropout,
        "initializer_range": config.init_std,
    }


def layout_keys(config: ModelConfig) -> set[str]:
    """``DistilBertForMaskedLM`` prefixes the encoder with ``distilbert.``; ``DistilBertModel`` does not."""
    return {"distilbert.embeddings.word_embeddings.weight"} if config.mlm_head else set()


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    p = _prefix(keys)
    e = f"{p}embeddings"
    out = [
        Mapped("stack.embed.token.weight", f"{e}.word_embeddings.weight"),
        Mapped("stack.embed.position.weight", f"{e}.position_embeddings.weight"),
        *with_bias("stack.embed.norm", f"{e}.LayerNorm"),
    ]
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"{p}transformer.layer.{i}"
        attn = f"{theirs}.attention"
        out += stacked_qkv(f"{ours}.attn", f"{attn}.q_lin", f"{attn}.k_lin", f"{attn}.v_lin", config)
        out += [
            *with_bias(f"{ours}.attn.o_proj", f"{attn}.out_lin"),
            *with_bias(f"{ours}.attn_norm", f"{theirs}.sa_layer_norm"),
            *with_bias(f"{ours}.ffn.up_proj", f"{theirs}.ffn.lin1"),
            *with_bias(f"{ours}.ffn.down_proj", f"{theirs}.ffn.lin2"),
            *with_bias(f"{ours}.ffn_norm", f"{theirs}.output_layer_norm"),
        ]
    if config.mlm_head:
        out += [
            *with_bias("mlm_head.dense", "vocab_transform"),
            *with_bias("mlm_head.norm", "vocab_layer_norm"),
            Mapped("mlm_head.decoder.bias", "vocab_projector.bias"),
        ]
    return out
