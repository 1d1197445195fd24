"""Key map for Hugging Face Llama-family decoders (``LlamaForCausalLM``; Mistral, Qwen2, Qwen3).

Same layout as ours: RMSNorm pre-norm, RoPE (rotate-half pairing), SwiGLU, GQA. Mistral adds
a sliding window on every layer; Qwen2 biases on q, k and v (never on o, nor the MLP), and
a window with ``use_sliding_window``; Qwen3 q/k-norm (``self_attn.q_norm`` / ``k_norm``:
RMSNorm over each head's d_head, before RoPE) and drops Qwen2's q/k/v biases. Export writes
``LlamaForCausalLM`` (`config_to_hf`), and the others for what Llama cannot hold: a sliding
window (`config_to_mistral`), biases on q, k and v alone (`config_to_qwen2`), q/k-norm
(`config_to_qwen3`).
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig, llama_style
from glassformer.formats.hf_config import hf_activation, hf_activation_name, special_id
from glassformer.formats.hf_rope import DEFAULT_BASE, Rope, read_rope, rope_to_hf
from glassformer.formats.key_map import Mapped, stacked_qkv, with_bias

IGNORED = {
    r"model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq": "recomputed from rope_base",
    r"lm_head\.weight": "tied to the token embedding when tie_word_embeddings is true",
}


def config_from_hf(hf: dict[str, Any], keys: set[str], rope: Rope | None = None) -> ModelConfig:
    """Our config for a Llama-style ``hf``; ``rope``: settings a family read itself (Gemma 3's global
    layers', Phi-3's partial rotary), else read here (linear or llama3 scaling, all features)."""
    rope = rope or read_rope(hf, default_base=DEFAULT_BASE.get(hf["model_type"], 10000.0))
    window = _window(hf)
    qkv_bias = bool(hf.get("attention_bias", hf["model_type"] == "qwen2"))
    qk_norm = hf["model_type"] == "qwen3"  # Llama, Mistral and Qwen2 have none
    n_heads = hf["num_attention_heads"]
    hidden_act = hf.get("hidden_act", "silu")
    gated = {"silu": "swiglu", "gelu_tanh": "geglu_tanh", "gelu": "geglu"}.get(hf_activation(hidden_act))
    if gated is None:  # the FFN is always gated: a ReLU gate would be ReGLU, which we lack
        raise ValueError(
            f"Llama hidden_act={hidden_act!r} is not supported (the FFN is gated); supported: silu, gelu, "
            "gelu_new, gelu_pytorch_tanh"
        )
    return llama_style(  # RoPE (rotate-half), pre-RMSNorm; the rest as the config says
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=n_heads,
        n_kv_heads=hf.get("num_key_value_heads") or n_heads,
        d_head=hf.get("head_dim") or hf["hidden_size"] // n_heads,
        d_ff=hf["intermediate_size"],
        max_seq_len=hf.get("max_position_embeddings", 2048),
        **rope.fields(),
        rotary_dim=rope.rotary_dim(hf.get("head_dim") or hf["hidden_size"] // n_heads),
        attn_window=window,
        qkv_bias=qkv_bias,
        qk_norm=qk_norm,
        out_bias=bool(hf.get("attention_bias", False)),
        activation=gated,
        ffn_bias=bool(hf.get("mlp_bias", False)),
        norm_eps=hf.get("rms_norm_eps", 1e-6),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
        bos_token_id=special_id(hf, "bos_token_id"),
        eos_token_id=special_id(hf, "eos_token_id"),
        pad_token_id=special_id(hf, "pad_token_id"),
    )


def _window(hf: dict[str, Any]) -> int | None:
    """The sliding window: Mistral's and Phi-3's on every layer when ``sliding_window`` is set;
    Qwen2's and Qwen3's with ``use_sliding_window`` on the layers ``layer_types`` names (in
    older configs, those from ``max_window_layers`` on). A window on some layers only is refused."""
    window, kind = hf.get("sliding_window"), hf["model_type"]
    on = hf.get("use_sliding_window", kind in ("mistral", "phi3"))
    if kind not in ("qwen2", "qwen3"):
        return window if window and on else None
    first = hf.get("max_window_layers", 28)  # Qwen2Config's default
    n = hf["num_hidden_layers"]
    types = hf.get("layer_types") or [
        "sliding_attention" if i >= first else "full_attention" for i in range(n)
    ]
    if not window or not on:
        return None
    windowed = [i for i, kind in enumerate(types) if kind == "sliding_attention"]
    if len(windowed) not in (0, n):
        raise ValueError(
            f"{hf['model_type']} with a sliding window on layers {windowed} only is not supported: "
            "Glassformer reads a window on every layer or on none"
        )
    return window if windowed else None


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``LlamaForCausalLM`` config.json for ``config``: the inverse of `config_from_hf`.

    What Llama cannot express (learned positions, LayerNorm, an ungated FFN, NTK scaling)
    is written as Llama has it; `glassformer.formats.hf_export` reads the result back and
    refuses it.
    """
    gate = hf_activation_name(config.activation, tanh_gelu="gelu_pytorch_tanh")  # gated or not
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.d_head,
        "intermediate_size": config.d_ff,
        "max_position_embeddings": config.max_seq_len,
        **rope_to_hf(config),
        "attention_bias": config.qkv_bias,  # one flag for q, k, v and o
        "mlp_bias": config.ffn_bias,
        "hidden_act": "silu" if gate == "relu" else gate,  # no ReGLU: written as SwiGLU, so refused
        "rms_norm_eps": config.norm_eps,
        "tie_word_embeddings": config.tie_embeddings,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "pad_token_id": config.pad_token_id,
        "attention_dropout": config.attn_dropout,  # training only
        "initializer_range": config.init_std,
    }


def config_to_mistral(config: ModelConfig) -> dict[str, Any]:
    """A ``MistralForCausalLM`` config.json: Llama's, with a sliding window on every layer and no
    biases (Mistral has none: a model with them reads back without, and is refused)."""
    hf = {
        key: value for key, value in config_to_hf(config).items() if key not in ("attention_bias", "mlp_bias")
    }
    return {
        **hf,
        "model_type": "mistral",
        "architectures": ["MistralForCausalLM"],
        "sliding_window": config.attn_window,
    }


def config_to_qwen2(config: ModelConfig) -> dict[str, Any]:
    """A ``Qwen2ForCausalLM`` config.json: Llama's, with biases on q, k and v alone, always (no
    ``attention_bias``: read back as Qwen2's), and a window on every layer or none."""
    hf = {
        key: value for key, value in config_to_hf(config).items() if key not in ("attention_bias", "mlp_bias")
    }
    windowed = "sliding_attention" if config.attn_window else "full_attention"
    return {
        **hf,
        "model_type": "qwen2",
        "architectures": ["Qwen2ForCausalLM"],
        "use_sliding_window": config.attn_window is not None,
        "sliding_window": config.attn_window,
        "max_window_layers": 0,
        "layer_types": [windowed] * config.n_layers,
    }


def config_to_qwen3(config: ModelConfig) -> dict[str, Any]:
    """A ``Qwen3ForCausalLM`` config.json: Llama's, with q/k-norm (Qwen3 always has it)."""
    return {
        **config_to_hf(config),
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "use_sliding_window": False,
    }


LLAMA_NORMS = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}  # theirs -> ours


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    return layout(config, LLAMA_NORMS)


def layout(config: ModelConfig, norms: dict[str, str]) -> list[Mapped]:
    """The Llama layout (``model.layers.{i}.self_attn`` / ``.mlp``), which Mistral, Qwen, the
    Gemmas, OLMo 2 and the mixtures share; ``norms`` names each block's norms, theirs -> ours
    (Llama: input_layernorm and post_attention_layernorm; Gemma 2 has four, OLMo 2 two others)."""
    out = [
        Mapped("stack.embed.token.weight", "model.embed_tokens.weight"),
        Mapped("stack.final_norm.weight", "model.norm.weight"),
    ]
    if not config.tie_embeddings:
        out.append(Mapped("lm_head.weight", "lm_head.weight"))
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"model.layers.{i}"
        attn = f"{theirs}.self_attn"
        out += stacked_qkv(f"{ours}.attn", f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj", config)
        out += with_bias(f"{ours}.attn.o_proj", f"{attn}.o_proj", config.out_bias)
        out += [Mapped(f"{ours}.{mine}.weight", f"{theirs}.{name}.weight") for name, mine in norms.items()]
        if config.qk_norm:
            out += [Mapped(f"{ours}.attn.{n}_norm.weight", f"{attn}.{n}_norm.weight") for n in ("q", "k")]
        for n in ("gate", "up", "down"):
            out += with_bias(f"{ours}.ffn.{n}_proj", f"{theirs}.mlp.{n}_proj", config.ffn_bias)
    return out
