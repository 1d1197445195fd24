"""Key map for Hugging Face T5 (``T5ForConditionalGeneration``), v1.0 and v1.1 / Flan.

T5: RMSNorm pre-norm, no biases, no 1/sqrt(d_k) (folded into the init), a relative
position bias learned in layer 0 of each stack and shared by all its layers, ReLU or
gated-GELU feed-forward. With tied embeddings the decoder output is scaled by
d_model^-0.5 before the LM head. Export writes ``T5ForConditionalGeneration``.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import special_id
from glassformer.formats.key_map import Mapped, stacked_kv, stacked_qkv

HARMLESS = {
    "dense_act_fn": "derived from feed_forward_proj, which is read",
    "is_gated_act": "derived from feed_forward_proj, which is read",
}
IGNORED = {
    r"(encoder|decoder)\.embed_tokens\.weight": "the same tensor as shared.weight",
    r"lm_head\.weight": "tied to shared.weight when tie_word_embeddings is true",
}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    projection = hf.get("feed_forward_proj", "relu")
    activations = {"relu": "relu", "gated-gelu": "geglu_tanh", "gated-relu": None, "gelu": "gelu"}
    activation = activations.get(projection)
    if activation is None:
        raise ValueError(
            f"T5 feed_forward_proj={projection!r} is not supported; supported: relu, gelu, gated-gelu"
        )
    # transformers 4.x: tie_word_embeddings both ties the head and scales its input (T5 v1.0) or
    # neither (v1.1); 5.x says the scale apart, as scale_decoder_outputs, and writes
    # tie_word_embeddings true always: its head is tied unless the checkpoint holds one of its own
    tied, scaled = bool(hf.get("tie_word_embeddings", True)), hf.get("scale_decoder_outputs")
    if scaled is None:
        scaled = tied
    else:
        tied = "lm_head.weight" not in keys
    return ModelConfig(
        family="encoder_decoder",
        vocab_size=hf["vocab_size"],
        d_model=hf["d_model"],
        n_layers=hf["num_layers"],
        n_decoder_layers=hf.get("num_decoder_layers") or hf["num_layers"],
        n_heads=hf["num_heads"],
        d_head=hf["d_kv"],
        d_ff=hf["d_ff"],
        max_seq_len=hf.get("n_positions", 512),
        positions="t5_relative",
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128),
        attn_scale=1.0,
        qkv_bias=False,
        out_bias=False,
        activation=activation,
        ffn_bias=False,
        norm="rmsnorm",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_epsilon", 1e-6),
        tie_embeddings=tied,
        lm_head_input_scale=hf["d_model"] ** -0.5 if scaled else 1.0,
        pad_token_id=special_id(hf, "pad_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        decoder_start_token_id=special_id(hf, "decoder_start_token_id"),  # None: start from <pad>
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``T5ForConditionalGeneration`` config.json: the inverse of `config_from_hf`.

    What T5 cannot express (sinusoidal positions, LayerNorm, biases) is written as T5 has
    it; `glassformer.formats.hf_export` reads the result back and refuses it.
    """
    # relu, gelu (exact) and gated-gelu (a tanh-GELU gate, T5 v1.1) are what T5 has; any
    # other activation is written as the nearest of these, and so refused
    projection = "gated-gelu" if config.gated else "relu" if config.activation == "relu" else "gelu"
    return {
        "model_type": "t5",
        "architectures": ["T5ForConditionalGeneration"],
        "is_encoder_decoder": True,
        "vocab_size": config.vocab_size,
        "d_model": config.d_model,
        "num_layers": config.n_layers,
        "num_decoder_layers": config.n_decoder_layers,
        "num_heads": config.n_heads,
        "d_kv": config.d_head,
        "d_ff": config.d_ff,
        "n_positions": config.max_seq_len,  # HF T5 ignores it; it keeps our max_seq_len
        "relative_attention_num_buckets": config.relative_buckets,
        "relative_attention_max_distance": config.relative_max_distance,
        "feed_forward_proj": projection,
        "layer_norm_epsilon": config.norm_eps,
        "tie_word_embeddings": config.tie_embeddings,
        "scale_decoder_outputs": config.lm_head_input_scale != 1.0,  # transformers 5.x's own key
        "pad_token_id": config.pad_token_id,
        "eos_token_id": config.eos_token_id,
        "decoder_start_token_id": config.decoder_start_token_id,
        "dropout_rate": config.resid_dropout,  # training only
        "initializer_factor": 1.0,
    }


def _ffn(config: ModelConfig, ours: str, theirs: str) -> list[Mapped]:
    if config.gated:
        return [
            Mapped(f"{ours}.gate_proj.weight", f"{theirs}.wi_0.weight"),
            Mapped(f"{ours}.up_proj.weight", f"{theirs}.wi_1.weight"),
            Mapped(f"{ours}.down_proj.weight", f"{theirs}.wo.weight"),
        ]
    return [
        Mapped(f"{ours}.up_proj.weight", f"{theirs}.wi.weight"),
        Mapped(f"{ours}.down_proj.weight", f"{theirs}.wo.weight"),
    ]


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    out = [Mapped("shared.weight", "shared.weight")]
    if not config.tie_embeddings:
        out.append(Mapped("lm_head.weight", "lm_head.weight"))
    stacks = (("encoder", config.n_layers), ("decoder", config.n_decoder_layers))
    for stack, n_layers in stacks:
        out += [
            Mapped(
                f"{stack}.relative_bias.weight",
                f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            ),
            Mapped(f"{stack}.final_norm.weight", f"{stack}.final_layer_norm.weight"),
        ]
        for i in range(n_layers):
            ours, theirs = f"{stack}.blocks.{i}", f"{stack}.block.{i}.layer"
            ffn_layer = 2 if stack == "decoder" else 1
            attn = f"{theirs}.0.SelfAttention"
            out += stacked_qkv(f"{ours}.attn", f"{attn}.q", f"{attn}.k", f"{attn}.v", config)
            out += [Mapped(f"{ours}.attn.o_proj.weight", f"{attn}.o.weight")]
            out += [Mapped(f"{ours}.attn_norm.weight", f"{theirs}.0.layer_norm.weight")]
            if stack == "decoder":
                cross = f"{theirs}.1.EncDecAttention"
                out += stacked_kv(f"{ours}.cross_attn", f"{cross}.q", f"{cross}.k", f"{cross}.v", config)
                out += [Mapped(f"{ours}.cross_attn.o_proj.weight", f"{cross}.o.weight")]
                out += [Mapped(f"{ours}.cross_norm.weight", f"{theirs}.1.layer_norm.weight")]
            out += _ffn(config, f"{ours}.ffn", f"{theirs}.{ffn_layer}.DenseReluDense")
            out += [Mapped(f"{ours}.ffn_norm.weight", f"{theirs}.{ffn_layer}.layer_norm.weight")]
    return out
