"""Key map for Hugging Face Gemma 2 and Gemma 3 text decoders (``Gemma2ForCausalLM``,
``Gemma3ForCausalLM`` with a ``Gemma3TextConfig``, model_type ``gemma3_text``).

Gemma's layout (`hf_gemma`: GeGLU, token vectors times sqrt(d_model), (1 + w) RMSNorms kept
as our RMSNorm with the weight 1 + w, tied embeddings), and

* a sandwich of norms around each sublayer (``norm_placement="sandwich"``)::

      h   = x + post_attention_layernorm(Attn(input_layernorm(x)))
      out = h + post_feedforward_layernorm(FFN(pre_feedforward_layernorm(h)))

* sliding-window layers between global ones (``layer_types``; ``attn_window`` with
  ``global_every``: Gemma 2 alternates, Gemma 3 has five windowed layers per global one);
* the attention scale ``query_pre_attn_scalar ** -0.5`` (``attn_scale``), not always
  1/sqrt(d_head);
* soft-caps, ``cap * tanh(x / cap)``: Gemma 2's on every attention score
  (``attn_logit_softcapping`` -> ``attn_softcap``) and on the final logits
  (``final_logit_softcapping`` -> ``logit_softcap``; Gemma 3 too when its config sets it);
* Gemma 3 only: q/k-norm per head ((1 + w) RMSNorms, before RoPE), and a RoPE base of the
  windowed layers' own (``rope_local_base_freq`` -> ``rope_local_base``), never scaled, while
  ``rope_scaling`` (linear) stretches the global layers.

What Hugging Face computes is what we compute: Gemma 3's ``attn_logit_softcapping`` is read
as no cap, since transformers' Gemma 3 never applies it; what we cannot compute (a pattern of
windowed and global layers that is not periodic, bidirectional attention, RoPE scalings other
than linear) is refused. Written too (`config_to_gemma2`, `config_to_gemma3`), the norms as
Gemma's are (see `hf_gemma`): within one rounding of 1 + w.
"""

from __future__ import annotations

import re
from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_gemma, hf_llama
from glassformer.formats.hf_gemma import OffsetByOne
from glassformer.formats.hf_rope import DEFAULT_BASE, read_rope
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped

IGNORED = hf_llama.IGNORED
NORM = re.compile(r"norm\.weight$")  # every norm of Gemma 2 and 3 is x / rms(x) * (1 + w)
DEFAULT_PERIOD = {"gemma2": 2, "gemma3_text": 6}  # one global layer in every k, when no layer_types
HARMLESS = {
    "sliding_window_pattern": "layer_types says which layers are windowed, and is read first",
    "_sliding_window_pattern": "layer_types says which layers are windowed, and is read first",
}
OURS = {  # their norm -> ours, in each block
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "attn_post_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "ffn_post_norm",
}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    kind = hf["model_type"]
    if hf.get("use_bidirectional_attention"):
        raise ValueError(
            f"{kind} use_bidirectional_attention=True (an embedding model's encoder) is not supported: "
            "Glassformer reads Gemma as a causal decoder"
        )
    gemma3 = kind == "gemma3_text"
    # Gemma 3's global layers and its windowed ones have RoPE settings of their own; Gemma 2's are one
    base_default = DEFAULT_BASE.get(kind, 10000.0)
    rope = read_rope(hf, default_base=base_default, layer_type="full_attention" if gemma3 else None)
    local = read_rope(hf, scalings=(), layer_type="sliding_attention") if gemma3 else None
    activation = hf.get("hidden_activation") or hf.get("hidden_act") or "gelu_pytorch_tanh"
    llama = overlay(hf, hidden_act=activation, use_sliding_window=False)
    base = hf_llama.config_from_hf(
        overlay(llama, tie_word_embeddings=hf.get("tie_word_embeddings", True)), keys, rope=rope
    )
    window, every = _windows(hf)
    attn_softcap = hf.get("attn_logit_softcapping")  # transformers' Gemma 3 never passes it to its attention
    scalar = hf.get("query_pre_attn_scalar", base.d_head)
    return base.replace(
        embed_scale=True,
        norm_placement="sandwich",
        ffn_bias=False,  # Gemma's MLP has none, whatever mlp_bias says
        attn_scale=None if scalar == base.d_head else scalar**-0.5,
        attn_window=window,
        global_every=every,
        attn_softcap=None if gemma3 else attn_softcap,
        logit_softcap=hf.get("final_logit_softcapping"),
        qk_norm=gemma3,
        rope_local_base=local.base if local and window else None,
    )


def _windows(hf: dict[str, Any]) -> tuple[int | None, int]:
    """(attn_window, global_every) for ``layer_types``: every layer windowed (k = 0), none
    (no window), or the global ones exactly every k-th (layers k - 1, 2k - 1, ...)."""
    n = hf["num_hidden_layers"]
    types = hf.get("layer_types")
    if not types:  # configs written before layer_types: a period (Gemma 3's sliding_window_pattern)
        k = hf.get("sliding_window_pattern") or DEFAULT_PERIOD[hf["model_type"]]
        types = ["full_attention" if (i + 1) % k == 0 else "sliding_attention" for i in range(n)]
    unknown = sorted(set(types) - {"sliding_attention", "full_attention"})
    if unknown:
        raise ValueError(f"{hf['model_type']} layer_types {unknown} are not supported")
    full = [i for i, kind in enumerate(types) if kind == "full_attention"]
    if len(full) == len(types) or not hf.get("sliding_window"):
        return None, 0
    if not full:
        return hf["sliding_window"], 0
    k = full[0] + 1
    if full != list(range(k - 1, len(types), k)):
        raise ValueError(
            f"{hf['model_type']} layer_types put global attention in layers {full}: Glassformer's "
            f"global_every places it in every k-th layer only (k = {k} would give "
            f"{list(range(k - 1, len(types), k))})"
        )
    return hf["sliding_window"], k


def config_to_gemma2(config: ModelConfig) -> dict[str, Any]:
    """A ``Gemma2ForCausalLM`` config.json: Gemma's (`hf_gemma.config_to_hf`), with each layer's
    attention named (``layer_types``), the attention scale as ``query_pre_attn_scalar`` and the
    soft-caps. What Gemma 2 cannot hold (q/k-norm, a local RoPE base) reads back without, and is
    refused."""
    scalar: float = config.d_head  # attention scale scalar ** -0.5
    if config.attn_scale is not None:
        scalar = config.attn_scale**-2
        if round(scalar) ** -0.5 == config.attn_scale:  # Gemma's are whole numbers (224, 256)
            scalar = round(scalar)
    kinds = [
        "full_attention" if config.layer_window(i) is None else "sliding_attention"
        for i in range(config.n_layers)
    ]
    return {
        **hf_gemma.config_to_hf(config),
        "model_type": "gemma2",
        "architectures": ["Gemma2ForCausalLM"],
        "query_pre_attn_scalar": scalar,
        "sliding_window": config.attn_window,
        "layer_types": kinds,
        "attn_logit_softcapping": config.attn_softcap,
        "final_logit_softcapping": config.logit_softcap,
    }


def config_to_gemma3(config: ModelConfig) -> dict[str, Any]:
    """A ``Gemma3ForCausalLM`` (``gemma3_text``) config.json: Gemma 2's, with the windowed
    layers' RoPE base and no attention soft-cap (HF's Gemma 3 applies none); q/k-norm is
    implied."""
    local_base = 10000.0 if config.rope_local_base is None else config.rope_local_base
    hf = config_to_gemma2(config)
    local = {"rope_type": "default", "rope_theta": local_base}
    return {
        **hf,
        "rope_parameters": {"full_attention": hf["rope_parameters"], "sliding_attention": local},
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "attn_logit_softcapping": None,
        "rope_local_base_freq": local_base,  # HF's default; a model without one reads back with it
        "use_bidirectional_attention": False,
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    out = hf_llama.layout(config, OURS)  # Llama's, with four norms per block
    return [Mapped(m.ours, m.theirs, OffsetByOne()) if NORM.search(m.theirs) else m for m in out]
