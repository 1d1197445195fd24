"""What a model costs, from its `ModelConfig` alone: parameters, FLOPs, KV cache, activations.

No weights are needed: every figure follows from the sizes (b=batch, t=s=seq_len, h=heads,
g=kv heads, d=d_model, e=d_head, f=d_ff, v=vocab, L=layers)::

    parameters        by component; a tied head shares the token table and is counted once
                      (the equations: `glassformer.models.size`, which `build` checks first)
    forward FLOPs     2 N_matmul + 4 L s h e            per token (Kaplan et al., 2020, table 1)
    training FLOPs    3 x forward                       (the backward pass is two matmuls per one)
    KV cache          2 L g e bytes(dtype)              per token of one sequence
    activations       what autograd keeps for backward  (see `activation_bytes`)

`tests/test_count.py` checks each against the real thing: the built model's parameter
count, `torch.utils.flop_counter.FlopCounterMode` on a forward pass, a `KVCache`'s
tensors, and the bytes of the tensors autograd saves (`saved_activation_bytes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from glassformer.config import ModelConfig
from glassformer.models.size import (  # re-exported: count's figures
    active_parameters,
    block_matmul_weights,
    embedding_parameters,
    parameter_counts,
)
from glassformer.nn.kv_cache import KVCache

DTYPE_NAMES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INDEX_BYTES = 8  # token and position ids are int64
STATS_BYTES = 4  # softmax log-sum-exp rows are float32

__all__ = [
    "FlopsPerToken",
    "activation_bytes",
    "active_parameters",
    "as_dtype",
    "bytes_per_number",
    "cross_kv_bytes",
    "embedding_parameters",
    "flops_per_token",
    "kv_cache_bytes",
    "parameter_counts",
]


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """torch.float32 / bfloat16 / float16, or their names."""
    if isinstance(dtype, str):
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype {dtype!r} is not supported; choose one of: {', '.join(DTYPE_NAMES)}")
        return DTYPE_NAMES[dtype]
    return dtype


def bytes_per_number(dtype: torch.dtype | str) -> int:
    """4 for float32, 2 for bfloat16 and float16."""
    return torch.empty((), dtype=as_dtype(dtype)).element_size()


# FLOPs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlopsPerToken:
    """Forward FLOPs per token, split as the 2N rule and the attention term, and training's."""

    weights: int  # 2 N_matmul: every weight matrix a token passes through, one multiply-add each
    attention: int  # 4 L s h e: QK^T and pattern @ V over all s keys (the full square)
    head: int  # of ``weights``: the vocabulary projection (2 d v), tied or not

    @property
    def forward(self) -> int:
        return self.weights + self.attention

    @property
    def training(self) -> int:
        """Forward + backward ≈ 3 x forward: the backward pass multiplies each matrix twice,
        for the gradient of its input and of its weight."""
        return 3 * self.forward


def flops_per_token(config: ModelConfig, seq_len: int) -> FlopsPerToken:
    """Forward FLOPs per token at ``seq_len`` (FLOPs = 2 x multiply-adds)::

        weights   = 2 N_matmul,   N_matmul = L (d(h+2g)e + hed + 2|3 df) + head
        attention = L x 2 x 2 s h e        (scores QK^T, then pattern @ V: s h e each)

    The attention term counts the full t x s square, also under a causal mask: the fused
    kernel (`scaled_dot_product_attention`) and the explicit path both compute it, and
    ``FlopCounterMode`` counts it so; the useful half of a causal square is attention / 2.
    Embedding lookups, biases, norms, softmax and activations are not matrix products and
    are left out (a few percent at most). The head is the vocabulary projection 2 d v
    (an encoder's MLM head adds its d x d transform; a sentence encoder has none);
    a classifier or pooler acts once per sequence and is left out. A vision transformer adds its
    patch projection W_patch, 2 C P^2 d per token (every token counted as a patch; its one [CLS]
    per image is a lookup, so this overcounts by 1/(n+1) of that term).

    An encoder-decoder reads seq_len source tokens per seq_len target tokens: per token,
    both stacks, the cross-attention's W_Q, W_O (target) and W_K, W_V (source), and a
    cross-attention term of 4 s h e per decoder layer.
    """
    if seq_len < 1:
        raise ValueError(f"seq_len={seq_len} must be a positive integer")
    d, v, h, g, e = config.d_model, config.vocab_size, config.n_heads, config.n_kv_heads, config.d_head
    head = 0
    if config.causal:  # the LM head
        head = d * v
    elif config.mlm_head:
        head = d * d + d * v
    matmul = config.n_layers * block_matmul_weights(config, cross=False) + head
    if config.vision:  # a ViT's W_patch: (C P P) x d for each patch (see above)
        matmul += config.n_channels * config.patch_size**2 * d
    attention_layers = config.n_layers
    for stack in config.stacks[1:]:  # an encoder-decoder's decoder: self- and cross-attention
        matmul += stack.layers * (block_matmul_weights(config, cross=True) + d * 2 * g * e)
        attention_layers += 2 * stack.layers
    return FlopsPerToken(weights=2 * matmul, attention=attention_layers * 4 * seq_len * h * e, head=2 * head)


# KV cache -----------------------------------------------------------------------------------
def kv_cache_bytes(
    config: ModelConfig, seq_len: int, batch: int = 1, dtype: torch.dtype | str = "float32"
) -> int:
    """Self-attention KV cache for ``batch`` sequences of ``seq_len`` tokens::

        bytes = 2 (K and V) x L_causal x g x e x bytes(dtype) x seq_len x batch

    L_causal is the causal stack's depth (`ModelConfig.decoder_depth`: 0 for an encoder, which
    generates nothing). What `glassformer.nn.kv_cache.KVCache` allocates for ``max_len=seq_len``;
    an encoder-decoder also keeps the cross-attention K/V of the source (`cross_kv_bytes`).
    """
    return KVCache.bytes_per_token(config, as_dtype(dtype)) * seq_len * batch


def cross_kv_bytes(
    config: ModelConfig, seq_len: int, batch: int = 1, dtype: torch.dtype | str = "float32"
) -> int:
    """An encoder-decoder's cross-attention K/V, computed once from ``seq_len`` source tokens:
    2 x n_decoder_layers x g x e x bytes(dtype) x seq_len x batch (0 for other families)."""
    # one K and V per source token in each decoder layer: the self-attention cache's size per token
    return kv_cache_bytes(config, seq_len, batch, dtype) if config.seq2seq else 0


# activations ----------------------------------------------------------------------------------
def _norm_kept(config: ModelConfig) -> int:
    """Numbers per token a norm keeps for backward: LayerNorm its input and mean, 1/std (d + 2);
    RMSNorm its input, 1/rms and the normalized x before the gain (2d + 1)."""
    d = config.d_model
    return d + 2 if config.norm == "layernorm" else 2 * d + 1


def _ffn_kept(config: ModelConfig, f: int | None = None) -> int:
    """Plain: x W_up and act(x W_up), 2f (ReLU keeps only its output, f); gated: x W_gate, its
    activation, x W_up and their product, 4f."""
    f = f or config.d_ff
    if config.gated:
        return 4 * f
    return f if config.activation == "relu" else 2 * f


def _moe_kept(config: ModelConfig) -> tuple[int, int, int]:
    """(numbers in the dtype, float32 numbers, int64 ids) per token a mixture keeps: each of its
    k slots the expert's input (d), its FFN's and its output (d), with the slot's index
    twice (gathered, put back); the router's probabilities (n, float32), the top-k's indices
    (k), the weights' sum and the weights twice (2k + 1). A shared expert adds its FFN's, its
    gate's sigmoid and their product's input (d + 2)."""
    k, d = config.experts_per_token, config.d_model
    numbers = k * (2 * d + _ffn_kept(config, config.expert_d_ff)) + 2 * k + 1
    if config.shared_expert_d_ff:
        numbers += _ffn_kept(config, config.shared_expert_d_ff) + d + 2
    return numbers, config.n_experts, 3 * k


def _attention_kept(
    config: ModelConfig, seq_len: int, batch: int, causal: bool, cross: bool
) -> tuple[int, int]:
    """(numbers in the dtype, float32 numbers) per token one attention sublayer keeps.

    Fused path (`scaled_dot_product_attention`, what training runs): Q, K, V (the projection's
    output, (h+2g)e; RoPE adds the rotated q and k, (h+g)e), the output z (he: the kernel
    writes it b t h e, so W_O reads the same memory) and its row log-sum-exp (h, float32). No t x s matrix,
    except a float attention mask where the kernel takes one: ALiBi's bias (h s per token),
    a sliding window's mask (t x s per layer, shared by the batch). A learned T5 bias needs
    the gradient of the mask, which only torch's math path gives: it keeps q, k, v and o's
    input (4 he) and the pattern (h s). Cross-attention: q and the source's K, V (2ge per
    source token, as many as target tokens here).
    """
    h, g, e, s = config.n_heads, config.n_kv_heads, config.d_head, seq_len
    if config.positions == "t5_relative" and not cross:
        return 4 * h * e + h * s, 0
    qkv = (h + 2 * g) * e
    if config.positions == "rope" and not cross:
        qkv += (h + g) * e
    if config.qk_norm and not cross:
        qkv += _qk_norm_kept(config)
    if config.attn_softcap is not None:  # always the explicit path (2 h s) and tanh's output (h s)
        qkv += 3 * h * s
    mask = 0
    if config.positions == "alibi" and not cross:
        mask = h * s
    elif causal and config.attn_window is not None and not cross:
        mask = s // batch  # a t x s float mask per layer, not per sequence
    return qkv + h * e + mask, h


def _qk_norm_kept(config: ModelConfig) -> int:
    """Numbers per token q/k-norm keeps: what RoPE reads ((h+g)e per head; over the whole
    projections the re-joined (h+2g)e) and, for each normed row, RMSNorm's normalized x and
    1/rms, LayerNorm's mean and 1/std (rows: h + g per head, 2 over the whole projections)."""
    h, g, e = config.n_heads, config.n_kv_heads, config.d_head
    every = config.qk_norm_scope == "all"
    rows, joined = (2, (h + 2 * g) * e) if every else (h + g, (h + g) * e)
    per_row = (h + g) * e // rows + 1 if config.norm == "rmsnorm" else 2
    return joined + rows * per_row


def _stack_kept(config: ModelConfig, seq_len: int, batch: int, layers: int, causal: bool, cross: bool):
    """(numbers in the dtype, float32 numbers, int64 ids) per token one stack keeps."""
    d, s = config.d_model, seq_len
    ids = 1 + (config.positions == "learned") + (config.type_vocab_size > 0)
    numbers = (config.d_model + (_norm_kept(config) - d)) if config.embed_norm else 0
    if config.positions == "rope":
        numbers += 2 * config.d_head  # cos and sin of every position
    if config.positions == "t5_relative":
        ids += s  # the bucket of every (query, key) pair
    # the norm's input and statistics, the sublayer's input; a sandwich's second norm, on its output
    sublayer = (2 if config.norm_on_input and config.norm_on_output else 1) * _norm_kept(config) + d
    attention, float32 = _attention_kept(config, seq_len, batch, causal, cross=False)
    ffn, ffn_float32, ffn_ids = _moe_kept(config) if config.moe else (_ffn_kept(config), 0, 0)
    block = 2 * sublayer + attention + ffn
    float32 += ffn_float32
    ids += layers * ffn_ids
    if cross:
        cross_numbers, cross_float32 = _attention_kept(config, seq_len, batch, causal, cross=True)
        block += sublayer + cross_numbers
        float32 += cross_float32
    numbers += layers * block
    if config.has_final_norm:
        numbers += _norm_kept(config)
    return numbers, layers * float32, ids


def activation_bytes(
    config: ModelConfig, seq_len: int, batch: int = 1, dtype: torch.dtype | str = "float32"
) -> int:
    """Bytes of the tensors a training step's forward pass keeps for backward (fused attention,
    no dropout), for ``batch`` sequences of ``seq_len`` tokens. Per token and layer::

        2 x (norm: d + 2 | RMSNorm 2d + 1, sublayer input d)      two sublayers (sandwich: two norms each)
        + (h+2g)e [+ (h+g)e RoPE] + he + h                         attention (`_attention_kept`)
        + 2f | 4f gated | f ReLU                                   FFN

    plus per stack the ids (8 bytes each), RoPE's cos and sin (2e), the final norm (all but post-norm),
    the stack's output where a matrix reads it (d), and the loss's log-softmax (v). Weights,
    gradients and optimizer state are not activations. Every number is counted at ``dtype``
    (mixed precision keeps some float32 copies: RMSNorm's input, softmax statistics). Dropout
    with p > 0 adds a mask per dropout; the explicit attention path (hooks reading scores or
    pattern) adds 2 h s per layer, a soft-capped one (always explicit) 3 h s, and a soft-cap on the
    logits v per token; q/k-norm adds its output and its statistics (`_qk_norm_kept`). Checked
    within 2% of `saved_tensors_hooks` on small models.
    """
    if seq_len < 1 or batch < 1:
        raise ValueError(f"seq_len={seq_len} and batch={batch} must be positive integers")
    d, v = config.d_model, config.vocab_size
    stacks = [
        _stack_kept(config, seq_len, batch, stack.layers, causal=stack.causal, cross=stack.cross)
        for stack in config.stacks
    ]
    if config.seq2seq:
        head = 2 * d + v  # the encoder output read by W_K, W_V; the decoder output read by the head
    elif config.causal:
        head = d + v
    elif config.mlm_head:
        transform = 3 * d - (d if config.activation == "relu" else 0)
        head = transform + _norm_kept(config) + v  # dense in and out, activation, norm, logits
    else:
        head = 0
    if head and config.logit_softcap is not None:
        head += v  # tanh's output, for the soft-cap
    numbers = sum(n for n, _, _ in stacks) + head
    float32 = sum(f for _, f, _ in stacks)
    ids = sum(i for _, _, i in stacks)
    per_token = numbers * bytes_per_number(dtype) + float32 * STATS_BYTES + ids * INDEX_BYTES
    return per_token * seq_len * batch


OPTIMIZER_STATE = {"adamw": 2, "sgd": 1}  # numbers kept per parameter: AdamW's two moments, SGD's momentum


def training_bytes(
    config: ModelConfig,
    seq_len: int,
    batch: int,
    optimizer: str = "adamw",
    dtype: torch.dtype | str = "float32",
) -> int:
    """Bytes a training step holds at its peak, in float32 parameters::

        parameters x (weights + gradients + optimizer state) x 4 bytes + activations

    (`activation_bytes` at ``dtype``, for ``batch`` sequences of ``seq_len`` tokens; the state
    numbers per parameter in `OPTIMIZER_STATE`)."""
    parameters = sum(parameter_counts(config).values())
    per_parameter = (2 + OPTIMIZER_STATE[optimizer]) * torch.float32.itemsize
    return parameters * per_parameter + activation_bytes(config, seq_len, batch, dtype)


def saved_activation_bytes(net: torch.nn.Module, run: Callable[[], object]) -> int:
    """What `activation_bytes` estimates, measured: the bytes of the distinct storages autograd
    saves for backward while ``run()`` computes ``net``'s forward pass (and its loss), the
    weights left out (`torch.autograd.graph.saved_tensors_hooks`)."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    weights = {p.untyped_storage().data_ptr() for p in net.parameters()}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return sum(n for ptr, n in storages.items() if ptr not in weights)
