"""llama.cpp's architectures in Glassformer's terms: a GGUF file's metadata -> `ModelConfig`,
its tensor names -> our parameters.

A GGUF file names its architecture (``general.architecture``) and keeps the sizes under
``{arch}.*`` keys (``qwen2.block_count``, ``gemma2.attn_logit_softcapping``); llama.cpp's
converter (``convert_hf_to_gguf.py``) renames each Hugging Face tensor (``model.layers.0.
self_attn.q_proj.weight`` -> ``blk.0.attn_q.weight``: the `gguf` package's ``TensorNameMap``)
and changes some of them on the way. What llama.cpp does not store, its runtime knows from
the architecture's name; we read both here:

==========  ==================================  =================================================
arch        Hugging Face families               stored differently, or known only by the runtime
==========  ==================================  =================================================
llama       Llama, Mistral, Mixtral             Q and K rows (and biases) permuted (`RopeRows`
                                                undoes it); Mixtral (``expert_count`` > 0): each
                                                layer's experts stacked in one tensor
                                                (`StoredRows` cuts expert j out), the k chosen
                                                weights renormalized
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

Refused by name: other architectures, RoPE scalings other than linear (YaRN, LongRoPE),
heads of different sizes per layer, windowed and global layers in no fixed period.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from glassformer.config import LLAMA_STYLE, ModelConfig
from glassformer.formats.key_map import Mapped, TheirRows, stacked_qkv, with_bias

SUPPORTED_ARCHITECTURES = (
    "llama", "qwen2", "qwen3", "qwen2moe", "gemma", "gemma2", "gemma3", "olmo2", "phi3", "gptneox"
)  # fmt: skip
# llama.cpp rotates these with adjacent pairs (2i, 2i + 1) ("NORM" RoPE), so the converter
# permuted the Hugging Face Q and K rows (rotate-half pairs (i, i + e/2)); the others are
# "NEOX" RoPE, rotate-half, and stored as Hugging Face has them.
PERMUTED = ("llama",)
GEMMA = ("gemma", "gemma2", "gemma3")
# Tensors llama.cpp may store beside the weights: RoPE's frequency factors (Llama 3.1 and later),
# which load only when all are 1 (`gguf._check_rope_freqs`).
IGNORED_TENSORS = {"rope_freqs.weight"}
# our norm -> llama.cpp's, in each block, by where the norms sit (`ModelConfig.norm_placement`)
NORMS = {
    "pre": {"attn_norm": "attn_norm", "ffn_norm": "ffn_norm"},
    "sandwich": {
        "attn_norm": "attn_norm",
        "attn_post_norm": "post_attention_norm",
        "ffn_norm": "ffn_norm",
        "ffn_post_norm": "post_ffw_norm",
    },
    "output": {"attn_post_norm": "post_attention_norm", "ffn_post_norm": "post_ffw_norm"},
}
# (sliding window when the file stores none, one global layer in every k when no pattern is stored)
WINDOWS = {"gemma2": (4096, 2), "gemma3": (None, 6), "olmo2": (None, 4), "llama": (None, 0)}
LAYERS_OF_27B = {"gemma2": 46, "gemma3": 62}  # llama.cpp's rule for the score scale (see above)
FLOAT32_MAX = float(np.finfo(np.float32).max)
_REQUIRED = object()


def _field(header, key: str, default: Any = _REQUIRED) -> Any:
    """A metadata value of a `GGUFHeader` (its strings already checked as UTF-8 when read)."""
    if key in header.metadata:
        return header.metadata[key]
    if default is _REQUIRED:
        raise ValueError(f"the GGUF metadata lacks {key!r}")
    return default


def _number(header, key: str, kind: type, default: Any = _REQUIRED) -> Any:
    """A metadata field that must be an integer (``kind=int``) or a number (``kind=float``)."""
    value = _field(header, key, default)
    if value is default and default is not _REQUIRED:
        return value
    allowed = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise ValueError(f"the GGUF metadata {key!r} should be a {kind.__name__}, not {value!r:.60}")
    if kind is float and abs(value) <= FLOAT32_MAX and float(np.float32(value)) == value:
        return float(str(np.float32(value)))  # llama.cpp writes float32: 1e-06, not 9.99999997e-07
    return kind(value)


def architecture(header) -> str:
    """``general.architecture``, refused unless it is one of `SUPPORTED_ARCHITECTURES`."""
    arch = _field(header, "general.architecture")
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

    def number(key: str, kind: type = int, default: Any = _REQUIRED) -> Any:
        return _number(header, f"{arch}.{key}", kind, default)

    n_heads, d_model = number("attention.head_count"), number("embedding_length")
    # llama.cpp: key_length, else d_model / heads; Llama's files give it as rope.dimension_count
    fallback = number("rope.dimension_count", int, None) if arch in PERMUTED else None
    d_head = number("attention.key_length", int, None) or fallback or d_model // max(n_heads, 1)
    if number("attention.value_length", int, d_head) != d_head:
        raise ValueError(f"{arch}.attention.value_length differs from key_length {d_head}: not supported")
    rotary = number("rope.dimension_count", int, d_head)
    if arch in PERMUTED and rotary != d_head:  # llama.cpp refuses it too
        raise ValueError(f"{arch}.rope.dimension_count={rotary} must equal the head size {d_head}")
    fields = dict(
        vocab_size=number("vocab_size", int, n_tokens),
        d_model=d_model,
        n_layers=number("block_count"),
        n_heads=n_heads,
        n_kv_heads=number("attention.head_count_kv", int, n_heads),
        d_head=d_head,
        d_ff=number("feed_forward_length"),
        max_seq_len=number("context_length", int, 2048),
        rope_base=number("rope.freq_base", float, 10000.0),
        rotary_dim=None if rotary == d_head else rotary,
        **_rope_scaling(header, arch),
        qkv_bias="blk.0.attn_q.bias" in tensors or "blk.0.attn_qkv.bias" in tensors,
        out_bias="blk.0.attn_output.bias" in tensors,
        ffn_bias="blk.0.ffn_down.bias" in tensors,
        tie_embeddings=arch in ("gemma", "gemma2") or "output.weight" not in tensors,
        **special,
    )
    if arch == "gptneox":
        return ModelConfig(**fields, **_neox(header, arch))
    fields["norm_eps"] = number("attention.layer_norm_rms_epsilon", float, 1e-6)
    if arch == "phi3" and {"rope_factors_long.weight", "rope_factors_short.weight"} & tensors:
        raise ValueError("Phi-3's LongRoPE (rope_factors_long / rope_factors_short) is not supported")
    return ModelConfig(**{**LLAMA_STYLE, **fields, **_family(header, arch, fields)})


def _rope_scaling(header, arch: str) -> dict[str, Any]:
    """Linear RoPE scaling (positions divided by the factor), or none; YaRN, LongRoPE refused."""
    kind = _field(header, f"{arch}.rope.scaling.type", "linear")  # llama.cpp's default type
    factor = _number(header, f"{arch}.rope.scaling.factor", float, 0.0)
    if kind == "none" or (kind == "linear" and factor in (0.0, 1.0)):
        return {}
    if kind != "linear":
        raise ValueError(f"{arch}.rope.scaling.type={kind!r:.40} is not supported (only linear)")
    return {"rope_scaling": "linear", "rope_scaling_factor": factor}


def _neox(header, arch: str) -> dict[str, Any]:
    """GPT-NeoX's fields: LayerNorm, GELU, a parallel residual unless the file says otherwise."""
    key = f"{arch}.use_parallel_residual"
    parallel = _field(header, key, True)
    if not isinstance(parallel, bool):
        raise ValueError(f"the GGUF metadata {key!r} should be a bool, not {parallel!r:.60}")
    return dict(
        positions="rope",
        norm="layernorm",
        norm_eps=_number(header, f"{arch}.attention.layer_norm_epsilon", float, 1e-5),
        activation="gelu",
        parallel_residual=parallel,
    )


def _family(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """What each Llama-like architecture changes in Llama's layout (see the table above)."""
    out: dict[str, Any] = {}
    if arch in ("llama", "qwen2moe"):
        out.update(_experts(header, arch, sizes["d_ff"]))
    if arch in GEMMA:
        out.update(activation="geglu_tanh", embed_scale=True)
    if arch in ("gemma2", "gemma3"):
        out.update(norm_placement="sandwich", qk_norm=arch == "gemma3")
        per_head = sizes["d_model"] // sizes["n_heads"]
        if sizes["n_layers"] == LAYERS_OF_27B[arch] and per_head != sizes["d_head"]:
            out["attn_scale"] = per_head**-0.5
    if arch == "gemma2":  # llama.cpp's defaults are Gemma 2's caps
        out["attn_softcap"] = _number(header, f"{arch}.attn_logit_softcapping", float, 50.0) or None
        out["logit_softcap"] = _number(header, f"{arch}.final_logit_softcapping", float, 30.0) or None
    if arch == "gemma3":  # scores never capped; logits only when the file says so
        out["logit_softcap"] = _number(header, f"{arch}.final_logit_softcapping", float, 0.0) or None
    if arch == "qwen3":
        out["qk_norm"] = True
    if arch == "olmo2":
        out.update(norm_placement="output", qk_norm=True, qk_norm_scope="all")
    if arch in WINDOWS:
        out.update(_windows(header, arch, sizes))
    return out


def _experts(header, arch: str, d_ff: int) -> dict[str, Any]:
    """A mixture's sizes: Mixtral's (``llama`` with ``expert_count``) or Qwen2-MoE's."""
    n = _number(header, f"{arch}.expert_count", int, 0)
    if not n:
        if arch == "qwen2moe":
            raise ValueError("qwen2moe.expert_count is missing or 0: a Qwen2-MoE file has experts")
        return {}
    k = _number(header, f"{arch}.expert_used_count", int)
    if arch == "llama":  # Mixtral: each expert is feed_forward_length wide, the k weights renormalized
        return dict(n_experts=n, experts_per_token=k, expert_d_ff=d_ff)
    expert_d_ff = _number(header, f"{arch}.expert_feed_forward_length", int, d_ff // max(k, 1))
    return dict(  # llama.cpp's qwen2moe never renormalizes the k weights (norm_topk_prob false)
        d_ff=expert_d_ff,
        n_experts=n,
        experts_per_token=k,
        expert_d_ff=expert_d_ff,
        normalize_expert_weights=False,
        shared_expert_d_ff=_number(header, f"{arch}.expert_shared_feed_forward_length", int, d_ff),
    )


def _windows(header, arch: str, sizes: dict[str, Any]) -> dict[str, Any]:
    """``attn_window`` and ``global_every`` from ``attention.sliding_window`` (0: none) and
    ``attention.sliding_window_pattern``: an integer k (llama.cpp: layer i is windowed unless
    i % k == k - 1; k = 0 every layer), or one bool per layer (True: windowed)."""
    default_window, default_period = WINDOWS[arch]
    window = _number(header, f"{arch}.attention.sliding_window", int, default_window)
    if not window:
        return {}
    pattern = _field(header, f"{arch}.attention.sliding_window_pattern", default_period)
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
        out["rope_local_base"] = _number(header, f"{arch}.rope.freq_base_swa", float, 10000.0)
    else:  # their own base where stored, else the global one; OLMo's windowed layers never scaled
        local = _number(header, f"{arch}.rope.freq_base_swa", float, sizes["rope_base"])
        if local != sizes["rope_base"] or (arch == "olmo2" and "rope_scaling" in sizes):
            out["rope_local_base"] = local
    return out


# -- tensor names -> our parameters ------------------------------------------------------------


def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: per head, rows (0, 2, 4, ..., 1, 3, ...) back
    to the rotate-half order. A weight (heads*e, d) or a bias (heads*e,), same shape out."""
    rows, rest = weight.shape[0], weight.shape[1:]
    return weight.reshape(n_heads, rows // n_heads // 2, 2, *rest).transpose(1, 2).reshape(weight.shape)


@dataclass(frozen=True)
class RopeRows:
    """Import transform of the Q and K matrices: `unpermute_rope_rows` over ``heads`` heads."""

    heads: int

    def __call__(self, weight: torch.Tensor) -> torch.Tensor:
        return unpermute_rope_rows(weight, self.heads)


class StoredRows(TheirRows):
    """Our parameter is rows ``start:stop`` of a stored tensor whose dims before the last are
    ``stored``, its rows counted as if it were flat: expert j of experts stacked (n, f, d) is
    rows j f to (j + 1) f; Phi-3's gate in ``ffn_up`` (2f, d) rows 0 to f.

    >>> StoredRows(2, 4, (2, 2))(torch.arange(8.0).reshape(2, 2, 2))  # expert 1 of 2
    tensor([[4., 5.],
            [6., 7.]])
    """

    def __init__(self, start: int, stop: int, stored: tuple[int, ...]) -> None:
        super().__init__(start, stop)
        self.stored = stored

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return super().__call__(w.reshape(-1, w.shape[-1]))


def key_map(config: ModelConfig, arch: str, tensors: set[str]) -> list[Mapped]:
    """GGUF tensor -> our parameter, for ``config`` read from a file of architecture ``arch``
    holding ``tensors`` (q, k and v -> the row blocks of ``qkv_proj``)."""
    layernorm = config.norm == "layernorm"
    out = [Mapped("stack.embed.token.weight", "token_embd.weight")]
    out += with_bias("stack.final_norm", "output_norm", layernorm)
    if not config.tie_embeddings:
        out.append(Mapped("lm_head.weight", "output.weight"))
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"blk.{i}"
        out += _attention(config, arch, tensors, ours, theirs)
        for mine, name in NORMS[config.norm_placement].items():
            out += with_bias(f"{ours}.{mine}", f"{theirs}.{name}", layernorm)
        out += _ffn(config, arch, ours, theirs)
    return out


def _attention(config: ModelConfig, arch: str, tensors: set[str], ours: str, theirs: str) -> list[Mapped]:
    if arch not in PERMUTED and f"{theirs}.attn_qkv.weight" in tensors:  # stored [W_Q; W_K; W_V] like ours
        out = with_bias(f"{ours}.attn.qkv_proj", f"{theirs}.attn_qkv", config.qkv_bias)
    else:
        names = (f"{theirs}.attn_q", f"{theirs}.attn_k", f"{theirs}.attn_v")
        out = stacked_qkv(f"{ours}.attn", *names, config)
        for index, item in enumerate(out if arch in PERMUTED else []):  # q's and k's rows were permuted
            kind = item.theirs.split(".")[2]  # blk.0.attn_q.weight (or .bias) -> attn_q
            if kind in ("attn_q", "attn_k"):
                heads = config.n_heads if kind == "attn_q" else config.n_kv_heads
                out[index] = replace(item, transform=RopeRows(heads))
    out += with_bias(f"{ours}.attn.o_proj", f"{theirs}.attn_output", config.out_bias)
    if config.qk_norm:
        out += [Mapped(f"{ours}.attn.{n}_norm.weight", f"{theirs}.attn_{n}_norm.weight") for n in "qk"]
    return out


def _ffn(config: ModelConfig, arch: str, ours: str, theirs: str) -> list[Mapped]:
    f, bias = config.d_ff, config.ffn_bias
    if config.moe:
        return _mixture(config, f"{ours}.ffn", theirs)
    if arch == "phi3":  # ffn_up = [W_gate; W_up], 2f rows (llama.cpp's swiglu splits it in half)
        return [
            Mapped(f"{ours}.ffn.gate_proj.weight", f"{theirs}.ffn_up.weight", StoredRows(0, f, (2 * f,))),
            Mapped(f"{ours}.ffn.up_proj.weight", f"{theirs}.ffn_up.weight", StoredRows(f, 2 * f, (2 * f,))),
            Mapped(f"{ours}.ffn.down_proj.weight", f"{theirs}.ffn_down.weight"),
        ]
    out = with_bias(f"{ours}.ffn.gate_proj", f"{theirs}.ffn_gate", bias) if config.gated else []
    out += with_bias(f"{ours}.ffn.up_proj", f"{theirs}.ffn_up", bias)
    return out + with_bias(f"{ours}.ffn.down_proj", f"{theirs}.ffn_down", bias)


def _mixture(config: ModelConfig, ours: str, theirs: str) -> list[Mapped]:
    """The router (``ffn_gate_inp``), each expert cut from the stacked ``ffn_*_exps`` (n, f, d),
    and Qwen2-MoE's shared expert (``ffn_*_shexp``) with its gate (``ffn_gate_inp_shexp``)."""
    n, f, d = config.n_experts, config.expert_d_ff, config.d_model
    out = [Mapped(f"{ours}.router.weight", f"{theirs}.ffn_gate_inp.weight")]
    for j in range(n):
        for mine, rows in (("gate", f), ("up", f), ("down", d)):
            cut = StoredRows(j * rows, (j + 1) * rows, (n, rows))
            expert = f"{ours}.experts.{j}.{mine}_proj.weight"
            out.append(Mapped(expert, f"{theirs}.ffn_{mine}_exps.weight", cut))
    if config.shared_expert_d_ff:
        for mine in ("gate", "up", "down"):
            shared = f"{ours}.shared_expert.{mine}_proj.weight"
            out.append(Mapped(shared, f"{theirs}.ffn_{mine}_shexp.weight"))
        out.append(Mapped(f"{ours}.shared_expert_gate.weight", f"{theirs}.ffn_gate_inp_shexp.weight"))
    return out
