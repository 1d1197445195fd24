"""Key map for Hugging Face BERT (``BertForMaskedLM``, ``BertModel``, sentence encoders).

BERT is post-norm with a LayerNorm on the embeddings; its separate query, key and value
Linears are stacked into our ``qkv_proj`` (and split again on export).
Checkpoints with a ``bert.`` prefix carry the MLM head (``cls.predictions``); bare
``BertModel`` ones (all-MiniLM-L6-v2) have none, and usually a pooler.

Export writes ``BertForMaskedLM`` when the model has the masked-LM head (a pooler, if
any, is written too: ``BertModel`` loads it from the same file) and ``BertModel``
otherwise (HF then gives a model without a pooler a random one, which is not part of
its hidden states).
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import hf_activation, hf_activation_name, special_id
from glassformer.formats.key_map import Mapped, stacked_qkv

NEUTRAL = {"tie_word_embeddings": True}  # the MLM head's decoder is the token embedding
IGNORED = {
    r"(bert\.)?embeddings\.position_ids": "an arange buffer",
    r"cls\.predictions\.decoder\.weight": "tied to the token embedding",
    r"cls\.predictions\.decoder\.bias": "the same tensor as cls.predictions.bias",
    r"cls\.seq_relationship\..*": "next-sentence-prediction head, not used",
}


def _prefix(keys: set[str]) -> str:
    return "bert." if "bert.embeddings.word_embeddings.weight" in keys else ""


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"BERT position_embedding_type={hf['position_embedding_type']!r} is not supported")
    p = _prefix(keys)
    return ModelConfig(
        family="encoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        max_seq_len=hf["max_position_embeddings"],
        type_vocab_size=hf.get("type_vocab_size", 2),
        positions="learned",
        activation=hf_activation(hf.get("hidden_act", "gelu")),
        norm="layernorm",
        norm_placement="post",
        norm_eps=hf.get("layer_norm_eps", 1e-12),
        embed_norm=True,
        tie_embeddings=True,
        mlm_head="cls.predictions.transform.dense.weight" in keys,
        pooler=f"{p}pooler.dense.weight" in keys,
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``BertForMaskedLM`` / ``BertModel`` config.json: the inverse of `config_from_hf`.

    What BERT cannot express (pre-norm, RoPE, no segment embeddings) is written as BERT
    has it; `glassformer.formats.hf_export` reads the result back and refuses it.
    """
    return {
        "model_type": "bert",
        "architectures": ["BertForMaskedLM" if config.mlm_head else "BertModel"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        "type_vocab_size": max(config.type_vocab_size, 1),  # BERT always adds segment embeddings
        "position_embedding_type": "absolute",
        "hidden_act": hf_activation_name(config.activation),
        "layer_norm_eps": config.norm_eps,
        "pad_token_id": config.pad_token_id,
        "hidden_dropout_prob": config.resid_dropout,  # training only
        "attention_probs_dropout_prob": config.attn_dropout,
        "initializer_range": config.init_std,
    }


def layout_keys(config: ModelConfig) -> set[str]:
    """``BertForMaskedLM`` prefixes the encoder with ``bert.``; a bare ``BertModel`` does not."""
    return {"bert.embeddings.word_embeddings.weight"} if config.mlm_head else set()


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    p = _prefix(keys)
    e = f"{p}embeddings"
    out = [
        Mapped("stack.embed.token.weight", f"{e}.word_embeddings.weight"),
        Mapped("stack.embed.position.weight", f"{e}.position_embeddings.weight"),
        Mapped("stack.embed.token_type.weight", f"{e}.token_type_embeddings.weight"),
        Mapped("stack.embed.norm.weight", f"{e}.LayerNorm.weight"),
        Mapped("stack.embed.norm.bias", f"{e}.LayerNorm.bias"),
    ]
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"{p}encoder.layer.{i}"
        attn = f"{theirs}.attention.self"
        out += stacked_qkv(f"{ours}.attn", f"{attn}.query", f"{attn}.key", f"{attn}.value", config)
        for kind in ("weight", "bias"):
            out += [
                Mapped(f"{ours}.attn.o_proj.{kind}", f"{theirs}.attention.output.dense.{kind}"),
                Mapped(f"{ours}.attn_norm.{kind}", f"{theirs}.attention.output.LayerNorm.{kind}"),
                Mapped(f"{ours}.ffn.up_proj.{kind}", f"{theirs}.intermediate.dense.{kind}"),
                Mapped(f"{ours}.ffn.down_proj.{kind}", f"{theirs}.output.dense.{kind}"),
                Mapped(f"{ours}.ffn_norm.{kind}", f"{theirs}.output.LayerNorm.{kind}"),
            ]
    if config.mlm_head:
        head = "cls.predictions"
        out += [
            Mapped("mlm_head.dense.weight", f"{head}.transform.dense.weight"),
            Mapped("mlm_head.dense.bias", f"{head}.transform.dense.bias"),
            Mapped("mlm_head.norm.weight", f"{head}.transform.LayerNorm.weight"),
            Mapped("mlm_head.norm.bias", f"{head}.transform.LayerNorm.bias"),
            Mapped("mlm_head.decoder.bias", f"{head}.bias"),
        ]
    if config.pooler:
        out += [
            Mapped("pooler.weight", f"{p}pooler.dense.weight"),
            Mapped("pooler.bias", f"{p}pooler.dense.bias"),
        ]
    return out
