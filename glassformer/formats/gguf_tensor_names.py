"""llama.cpp's tensor names of a decoder -> our parameters (``blk.0.attn_q.weight`` -> rows 0 to
h e of ``stack.blocks.0.attn.qkv_proj.weight``), with what its converter changed on the way.

One map serves every decoder architecture we read (`gguf_architectures.SUPPORTED_ARCHITECTURES`
less the encoders of `gguf_encoders`); the config says which optional tensors there are:

==========================  =====================================  ============================
llama.cpp                   ours                                   when
==========================  =====================================  ============================
``token_embd``              ``stack.embed.token``                  always
``position_embd``           ``stack.embed.position``               learned positions (GPT-2)
``output_norm``             ``stack.final_norm``                   always (a bias: LayerNorm)
``output``                  ``lm_head`` (and its bias)             an untied head (Phi-2: bias)
``blk.i.attn_qkv``          ``attn.qkv_proj``                      fused [W_Q; W_K; W_V]
``blk.i.attn_q/k/v``        the row blocks of ``attn.qkv_proj``    Llama's rows permuted
``blk.i.attn_output``       ``attn.o_proj``                        always
``blk.i.attn_norm`` ...     ``attn_norm`` ...                      by `NORMS`; one (Phi-2)
``blk.i.ffn_gate/up/down``  ``ffn.gate_proj/up_proj/down_proj``    Phi-3: [gate; up] in one
``blk.i.ffn_*_exps``        ``ffn.experts.j.*``                    a mixture, stacked (n, f, d)
==========================  =====================================  ============================
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from glassformer.config import ModelConfig
from glassformer.formats.key_map import Mapped, TheirRows, stacked_qkv, with_bias

# llama.cpp rotates these with adjacent pairs (2i, 2i + 1) ("NORM" RoPE), so the converter
# permuted the Hugging Face Q and K rows (rotate-half pairs (i, i + e/2)); the others are
# "NEOX" RoPE, rotate-half, and stored as Hugging Face has them.
PERMUTED = ("llama",)
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
SHARED_NORM = {"attn_norm": "attn_norm"}  # a parallel block's one norm (Phi-2)


def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: per head, rows (0, 2, 4, ..., 1, 3, ...) back
    to the rotate-half order. A weight (heads*e, d) or a bias (heads*e,), same shape out.

    >>> unpermute_rope_rows(torch.tensor([0.0, 2.0, 1.0, 3.0]), 1)  # pairs (0, 1) (2, 3) -> halves
    tensor([0., 1., 2., 3.])
    """
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


def decoder_key_map(config: ModelConfig, arch: str, tensors: set[str]) -> list[Mapped]:
    """GGUF tensor -> our parameter, for ``config`` read from a decoder file of architecture
    ``arch`` holding ``tensors`` (q, k and v -> the row blocks of ``qkv_proj``)."""
    layernorm = config.norm == "layernorm"
    out = [Mapped("stack.embed.token.weight", "token_embd.weight")]
    if config.positions == "learned":
        out.append(Mapped("stack.embed.position.weight", "position_embd.weight"))
    out += with_bias("stack.final_norm", "output_norm", layernorm)
    if not config.tie_embeddings:
        out += with_bias("lm_head", "output", config.lm_head_bias)
    norms = SHARED_NORM if config.shared_norm else NORMS[config.norm_placement]
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"blk.{i}"
        out += _attention(config, arch, tensors, ours, theirs)
        for mine, name in norms.items():
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
