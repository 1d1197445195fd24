"""Key map for Hugging Face OPT decoders (``OPTForCausalLM``, Zhang et al. 2022): GPT-2's
architecture (pre-norm LayerNorm, learned positions, biases everywhere, a tied head) with a
ReLU feed-forward, separate q / k / v matrices, and a position table offset by 2: OPT keeps
two extra rows in front (a relic of fairseq's padding), so position p reads row p + 2; our
table is its rows from 2 on (`TheirRows`).

Refused by name: the 350m model's projections between a smaller word embedding and the
stream (``word_embed_proj_dim`` != ``hidden_size``), post-norm (``do_layer_norm_before=False``),
and norms without weights. Written too (`config_to_hf`), the table's two first rows as zeros
(`key_map.join_rows`); an OPT with a tied head and biases is GPT-2's model with ReLU, which
export writes as GPT-2 unless asked for ``model_type="opt"``.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import hf_activation, hf_activation_name, special_id
from glassformer.formats.key_map import Mapped, TheirRows, stacked_qkv, with_bias

POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding.offset
IGNORED = {r"lm_head\.weight": "tied to the token embedding"}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    d = hf["hidden_size"]
    if hf.get("word_embed_proj_dim", d) != d:
        raise ValueError(
            f"OPT word_embed_proj_dim={hf['word_embed_proj_dim']} != hidden_size={d} (project_in / "
            "project_out) is not supported"
        )
    if not hf.get("do_layer_norm_before", True):
        raise ValueError("OPT do_layer_norm_before=False (post-norm, the 350m model) is not supported")
    if hf.get("_remove_final_layer_norm") or not hf.get("layer_norm_elementwise_affine", True):
        raise ValueError("OPT without a final norm, or with norms without weights, is not supported")
    return ModelConfig(
        family="decoder",
        vocab_size=hf["vocab_size"],
        d_model=d,
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["ffn_dim"],
        max_seq_len=hf["max_position_embeddings"],
        positions="learned",
        activation=hf_activation(hf.get("activation_function", "relu")),
        qkv_bias=hf.get("enable_bias", True),
        out_bias=hf.get("enable_bias", True),
        ffn_bias=hf.get("enable_bias", True),
        norm="layernorm",
        norm_placement="pre",
        tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
        bos_token_id=special_id(hf, "bos_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """An ``OPTForCausalLM`` config.json: the inverse of `config_from_hf`. OPT has one switch for
    every bias and LayerNorm's default eps: a model that differs reads back otherwise, and is
    refused."""
    return {
        "model_type": "opt",
        "architectures": ["OPTForCausalLM"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "word_embed_proj_dim": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "ffn_dim": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        "activation_function": hf_activation_name(config.activation),
        "enable_bias": config.qkv_bias,
        "do_layer_norm_before": True,
        "_remove_final_layer_norm": False,
        "layer_norm_elementwise_affine": True,
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "pad_token_id": config.pad_token_id,
        "dropout": config.resid_dropout,  # training only
        "attention_dropout": config.attn_dropout,
        "init_std": config.init_std,
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    rows = (POSITION_OFFSET, POSITION_OFFSET + config.max_seq_len)
    out = [
        Mapped("stack.embed.token.weight", "model.decoder.embed_tokens.weight"),
        Mapped("stack.embed.position.weight", "model.decoder.embed_positions.weight", TheirRows(*rows)),
        *with_bias("stack.final_norm", "model.decoder.final_layer_norm"),
    ]
    if not config.tie_embeddings:
        out.append(Mapped("lm_head.weight", "lm_head.weight"))
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"model.decoder.layers.{i}"
        attn = f"{theirs}.self_attn"
        out += stacked_qkv(f"{ours}.attn", f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj", config)
        out += [
            *with_bias(f"{ours}.attn.o_proj", f"{attn}.out_proj", config.out_bias),
            *with_bias(f"{ours}.attn_norm", f"{theirs}.self_attn_layer_norm"),  # norms keep theirs
            *with_bias(f"{ours}.ffn_norm", f"{theirs}.final_layer_norm"),
            *with_bias(f"{ours}.ffn.up_proj", f"{theirs}.fc1", config.ffn_bias),
            *with_bias(f"{ours}.ffn.down_proj", f"{theirs}.fc2", config.ffn_bias),
        ]
    return out
