"""llama.cpp's architectures in Glassformer's terms: a GGUF file's metadata -> `ModelConfig`,
its tensor names -> our parameters.

A GGUF file names its architecture (``general.architecture``) and keeps the sizes under
``{arch}.*`` keys (``qwen2.block_count``, ``gemma2.attn_logit_softcapping``); llama.cpp's
converter (``convert_hf_to_gguf.py``) renames each Hugging Face tensor (``model.layers.0.
self_attn.q_proj.weight`` -> ``blk.0.attn_q.weight``: the `gguf` package's ``TensorNameMap``)
and changes some of them on the way. What llama.cpp does not store, its runtime knows from
the architecture's name; we read both here (the decoders' tensor names in `gguf_tensor_names`,
BERT's and T5's config and names in `gguf_encoders`):

==========  ==================================  =================================================
arch        Hugging Face families               stored differently, or known only by the runtime
==========  ==================================  =================================================
llama       Llama, Mistral, Mixtral             Q and K rows (and biases) permuted (`RopeRows`
                                                undoes it); Mixtral (``expert_count`` > 0): each
                                                layer's experts stacked in one tensor
                                                (`StoredRows` cuts expert j out), the k chosen
                                                weights renormalized; Llama 3.1's scaling as
                                                divisors (``rope_freqs``: `gguf_rope_freqs`)
qwen2       Qwen2, Qwen2.5                      as Hugging Face has them (q/k/v biases)
qwen3       Qwen3                               q/k-norm per head (``attn_q_norm``)
qwen2moe    Qwen2-MoE, Qwen1.5-MoE              experts stacked; a shared expert (``*_shexp``)
                                                gated by sigmoid(x w); weights not renormalized
gemma       Gemma                               norms stored as 1 + w (our weight as is); the
                                                sqrt(d) token scale, GeGLU (tanh), tied head
gemma2      Gemma 2                             and sandwich norms (``post_attention_norm``,
                                                ``post_ffw_norm``), soft-caps (50 and 30 unless
                                                stored), a window (4096 unless stored) on layers
                                                0, 2, 4, ...
gemma3      Gemma 3 (text)                      and q/k-norm, a window on 5 layers of each 6 with
                                                their own RoPE base (``rope.freq_base_swa``,
                                                10000 unless stored), no score cap
olmo2       OLMo 2                              norms on each sublayer's output, q/k-norm over
                                                the whole projection
phi3        Phi-3                               fused ``attn_qkv`` = [W_Q; W_K; W_V] and
                                                ``ffn_up`` = [W_gate; W_up]
gptneox     GPT-NeoX, Pythia                    LayerNorms with biases, a parallel residual,
                                                RoPE over ``rope.dimension_count`` features,
                                                ``attn_qkv`` already [W_Q; W_K; W_V]
gpt2        GPT-2                               Conv1D weights transposed to (out, in), so
                                                ``attn_qkv`` is our ``qkv_proj``; learned
                                                positions (``position_embd``); tanh-GELU; an
                                                ``output`` copy of the embedding read as a head
phi2        Phi-2 (``PhiForCausalLM``)          one LayerNorm per parallel block (``attn_norm``),
                                                RoPE (rotate-half) over ``rope.dimension_count``
                                                features, tanh-GELU, a head with a bias
bert        BERT (sentence encoders)            post-norm; no MLM head and no pooler (the
                                                converter drops them): ``pooling_type``
t5          T5, T5 v1.1, Flan-T5                ``enc.blk.i`` / ``dec.blk.i``; relative position
                                                buckets (``attn_rel_b`` of block 0); a gate
                                                tensor means gated GELU, else ReLU
==========  ==================================  =================================================

Where the runtime decides something no key holds, we follow llama.cpp (its ``src/models/
{arch}.cpp``): Gemma 2's and 3's ``query_pre_attn_scalar`` is not stored, and llama.cpp
scales scores by 1/sqrt(key_length), except for the 27B models (46 and 62 layers), whose
scalar is d_model / n_heads; Phi-3's ``sliding_window`` is stored but llama.cpp ignores it
(so does our Hugging Face reader); GPT-NeoX's GELU is Hugging Face's exact one (ggml's
``gelu`` is the tanh approximation). llama.cpp reads no sliding window for ``llama`` (a
Mistral file from its converter runs with full attention); a file that does hold
``llama.attention.sliding_window`` gets it. Biases are read where the file holds them
(``blk.0.attn_q.bias``: Qwen2, a Llama with ``attention_bias``).

Refused by name: other architectures, RoPE scalings other than linear and Llama 3.1's (YaRN,
LongRoPE), heads of different sizes per layer, windowed and global layers in no fixed period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from glassformer.config import LLAMA_STYLE, ModelConfig
from glassformer.formats.gguf_encoders import ENCODERS, encoder_config, encoder_key_map
from glassformer.formats.gguf_metadata import REQUIRED, field, flag, number
from glassformer.formats.gguf_tensor_names import PERMUTED, decoder_key_map
from glassformer.formats.key_map import Mapped

SUPPORTED_ARCHITECTURES = (
    "llama", "qwen2", "qwen3", "qwen2moe", "gemma", "gemma2", "gemma3", "olmo2", "phi3", "gptneox",
    "gpt2", "phi2", "bert", "t5",
)  # fmt: skip
LAYERNORM_DECODERS = ("gptneox", "gpt2", "phi2")  # LayerNorm with biases, GELU (`_layernorm_decoder`)
# Tensors llama.cpp may store beside the weights: RoPE's frequency divisors (Llama 3.1 and later),
# read into the config, not into a parameter (`gguf_rope_freqs`).
IGNORED_TENSORS = {"rope_freqs.weight"}
# (sliding window when the file stores none, one global layer in every k when no pattern is stored)
WINDOWS = {"gemma2": (4096, 2), "gemma3": (None, 6), "olmo2": (None, 4), "llama": (None, 0)}
LAYERS_OF_27B = {"gemma2": 46, "gemma3": 62}  # llama.cpp's rule for the score scale (see above)


def architecture(header) -> str:
    """``general.architecture``, refused unless it is one of `SUPPORTED_ARCHITECTURES`."""
    arch = field(header, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ValueError(
            f"GGUF architecture {arch!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    return arch


def config_from_gguf(header, n_tokens: int, tensors: set[str], special: dict[str, int | None]) -> ModelConfig:
    """The `ModelConfig` of a GGUF file: its ``{arch}.*`` metadata, what llama.cpp's runtime knows
    of the architecture, and which optional tensors (biases, an untied head) ``tensors`` holds."""
    arch = architecture(header)
    for name, value in special.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f"the GGUF tokenizer's {name} should be an integer, not {value!r:.60}")

    def get(key: str, kind: type = int, default: Any = REQUIRED) -> Any:
        return number(header, f"{arch}.{key}", kind, default)

    n_heads, d_model = get("attention.head_count"), get("embedding_length")
    # llama.cpp: key_length, else d_model / heads; Llama's files give it as rope.dimension_count
    fallback = get("rope.dimension_count", int, None) if arch in PERMUTED else None
    d_head = get("attention.key_length", int, None) or fallback or d_model // max(n_heads, 1)
    if get("attention.value_length", int, d_head) != d_head:
        raise ValueError(f"{arch}.attention.value_length differs from key_length {d_head}: not supported")
    sizes = dict(
        vocab_size=get("vocab_size", int, n_tokens),
        d_model=d_model,
        n_layers=get("block_count"),
        n_heads=n_heads,
        n_kv_heads=get("attention.head_count_kv", int, n_heads),
        d_head=d_head,
        d_ff=get("feed_forward_length"),
        max_seq_len=get("context_length", int, 512 if arch in ENCODERS else 2048),
        **special,
    )
    if arch in ENCODERS:
        return encoder_config(header, arch, sizes, tensors)
    rotary = get("rope.dimension_count", int, d_head)
    if arch in PERMUTED and rotary != d_head:  # llama.cpp refuses it too
        raise ValueError(f"{arch}.rope.dimension_count={rotary} must equal the head size {d_head}")
    fields = dict(
        **sizes,
        rope_base=get("rope.freq_base", float, 10000.0),
        rotary_dim=None if rotary == d_head else rotary,
        **_rope_scaling(header, arch),
        qkv_bias="blk.0.attn_q.bias" in tensors or "blk.0.attn_qkv.bias" in tensors,
        out_bias="blk.0.attn_output.bias" in tensors,
        ffn_bias="blk.0.ffn_down.bias" in tensors,
        tie_embeddings=arch in ("gemma", "gemma2") or "output.weight" not in tensors,
    )
    if arch in LAYERNORM_DECODERS:
        return ModelConfig(**fields, **_layernorm_decoder(header, arch, tensors))
    fields["norm_eps"] = get("attention.layer_norm_rms_epsilon", float, 1e-6)
    if arch == "phi3" and {"rope_factors_long.weight", "rope_factors_short.weight"} & tensors:
        raise ValueError("Phi-3's LongRoPE (rope_factors_long / rope_factors_short) is not supported")
    return ModelConfig(**{**LLAMA_STYLE, **fields, **LLAMA_LIKE[arch].fields(header, arch, fields)})


def key_map(config: ModelConfig, arch: str, tensors: set[str]) -> list[Mapped]:
    """GGUF tensor -> our parameter, for ``config`` read from a file of architecture ``arch``
    holding ``tensors``: `gguf_encoders.encoder_key_map` or `gguf_tensor_names.decoder_key_map`."""
    if arch in ENCODERS:
        return encoder_key_map(config, arch, tensors)
    return decoder_key_map(config, arch, tensors)


def _rope_scaling(header, arch: str) -> dict[str, Any]:
    """Linear RoPE scaling (positions divided by the factor), or none; YaRN, LongRoPE refused."""
    kind = field(header, f"{arch}.rope.scaling.type", "linear")  # llama.cpp's default type
    factor = number(header, f"{arch}.rope.scaling.factor", float, 0.0)
    if kind == "none" or (kind == "linear" and factor in (0.0, 1.0)):
        return {}
    if kind != "linear":
        raise ValueError(f"{arch}.rope.scaling.type={kind!r:.40} is not supported (only linear)")
    return {"rope_scaling": "linear", "rope_scaling_factor": factor}


def _layernorm_decoder(header, arch: str, tensors: set[str]) -> dict[str, Any]:
    """GPT-NeoX's, GPT-2's and Phi-2's fields: LayerNorm with biases and GELU; NeoX's parallel
    residual unless the file says otherwise (its exact GELU, as Hugging Face's), GPT-2's learned
    positions, Phi-2's parallel block with one norm and a head with a bias (both tanh-GELU)."""
    out = dict(
        positions="learned" if arch == "gpt2" else "rope",
        norm="layernorm",
        norm_eps=number(header, f"{arch}.attention.layer_norm_epsilon", float, 1e-5),
        activation="gelu" if arch == "gptneox" else "gelu_tanh",
    )
    if arch == "gptneox":
        out["parallel_residual"] = flag(header, f"{arch}.use_parallel_residual", True)
    if arch == "phi2":
        out.update(parallel_residual=True, shared_norm=True, lm_head_bias="output.bias" in tensors)
    return out


def _experts(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """A mixture's sizes: Mixtral's (``llama`` with ``expert_count``) or Qwen2-MoE's."""
    d_ff = sizes["d_ff"]
    n = number(header, f"{arch}.expert_count", int, 0)
    if not n:
        if arch == "qwen2moe":
            raise ValueError("qwen2moe.expert_count is missing or 0: a Qwen2-MoE file has experts")
        return {}
    k = number(header, f"{arch}.expert_used_count", int)
    if arch == "llama":  # Mixtral: each expert is feed_forward_length wide, the k weights renormalized
        return dict(n_experts=n, experts_per_token=k, expert_d_ff=d_ff)
    expert_d_ff = number(header, f"{arch}.expert_feed_forward_length", int, d_ff // max(k, 1))
    return dict(  # llama.cpp's qwen2moe never renormalizes the k weights (norm_topk_prob false)
        d_ff=expert_d_ff,
        n_experts=n,
        experts_per_token=k,
        expert_d_ff=expert_d_ff,
        normalize_expert_weights=False,
        shared_expert_d_ff=number(header, f"{arch}.expert_shared_feed_forward_length", int, d_ff),
    )


def _windows(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """``attn_window`` and ``global_every`` from ``attention.sliding_window`` (0: none) and
    ``attention.sliding_window_pattern``: an integer k (llama.cpp: layer i is windowed unless
    i % k == k - 1; k = 0 every layer), or one bool per layer (True: windowed)."""
    default_window, default_period = WINDOWS[arch]
    window = number(header, f"{arch}.attention.sliding_window", int, default_window)
    if not window:
        return {}
    pattern = field(header, f"{arch}.attention.sliding_window_pattern", default_period)
    n = sizes["n_layers"]
    if isinstance(pattern, list):
        full = [i for i, windowed in enumerate(pattern) if not windowed]
        k = full[0] + 1 if full else 0
        if len(pattern) != n or (full and full != list(range(k - 1, n, k))):
            raise ValueError(
                f"{arch}.attention.sliding_window_pattern puts global attention in layers {full[:12]}: "
                "Glassformer's global_every places it in every k-th layer only"
            )
    elif isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 0:
        k = pattern
    else:
        raise ValueError(f"{arch}.attention.sliding_window_pattern={pattern!r:.60} is not a period or a list")
    if k == 1:  # every layer global: no window at all
        return {}
    out: dict[str, Any] = {"attn_window": window, "global_every": k}
    if arch == "gemma3":  # windowed layers: their own base, never scaled (llama.cpp's default 10000)
        out["rope_local_base"] = number(header, f"{arch}.rope.freq_base_swa", float, 10000.0)
    else:  # their own base where stored, else the global one; OLMo's windowed layers never scaled
        local = number(header, f"{arch}.rope.freq_base_swa", float, sizes["rope_base"])
        if local != sizes["rope_base"] or (arch == "olmo2" and "rope_scaling" in sizes):
            out["rope_local_base"] = local
    return out


def _score_scale(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """Gemma 2's and 3's 27B models scale scores by (d_model / heads)^-0.5 (see above)."""
    per_head = sizes["d_model"] // sizes["n_heads"]
    if sizes["n_layers"] == LAYERS_OF_27B[arch] and per_head != sizes["d_head"]:
        return {"attn_scale": per_head**-0.5}
    return {}


def _gemma2_caps(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """Gemma 2's soft-caps: llama.cpp's defaults are Gemma 2's own (50 on scores, 30 on logits)."""
    return {
        "attn_softcap": number(header, f"{arch}.attn_logit_softcapping", float, 50.0) or None,
        "logit_softcap": number(header, f"{arch}.final_logit_softcapping", float, 30.0) or None,
    }


def _gemma3_cap(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3: scores never capped; logits only when the file says so."""
    return {"logit_softcap": number(header, f"{arch}.final_logit_softcapping", float, 0.0) or None}


Reader = Callable[[Any, str, dict[str, Any]], dict[str, Any]]  # (header, arch, sizes) -> fields


@dataclass(frozen=True)
class LlamaLike:
    """What one Llama-like architecture changes in Llama's layout (see the table above): the
    fields it always has, and readers of the fields its file (or llama.cpp's defaults) decides."""

    fixed: tuple[tuple[str, Any], ...] = ()
    readers: tuple[Reader, ...] = ()

    def fields(self, header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
        out = dict(self.fixed)
        for read in self.readers:
            out.update(read(header, arch, sizes))
        return out


GEMMA = (("activation", "geglu_tanh"), ("embed_scale", True))  # GeGLU (tanh), the sqrt(d) token scale
SANDWICH = (*GEMMA, ("norm_placement", "sandwich"))
LLAMA_LIKE = {
    "llama": LlamaLike(readers=(_experts, _windows)),
    "qwen2": LlamaLike(),
    "qwen3": LlamaLike((("qk_norm", True),)),
    "qwen2moe": LlamaLike(readers=(_experts,)),
    "gemma": LlamaLike(GEMMA),
    "gemma2": LlamaLike(SANDWICH, (_score_scale, _gemma2_caps, _windows)),
    "gemma3": LlamaLike((*SANDWICH, ("qk_norm", True)), (_score_scale, _gemma3_cap, _windows)),
    "olmo2": LlamaLike(
        (("norm_placement", "output"), ("qk_norm", True), ("qk_norm_scope", "all")), (_windows,)
    ),
    "phi3": LlamaLike(),
}
