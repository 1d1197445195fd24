"""`ModelConfig`'s validation: each field alone, then the fields that must fit together.

`check` runs when a config is made; a bad value fails with a message that names the
field, what was wrong and the values allowed.
"""

from __future__ import annotations

from typing import Any

FAMILIES = ("decoder", "encoder", "encoder_decoder")
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "t5_relative", "none")
NORMS = ("layernorm", "rmsnorm")
# x + f(N(x)); N(x + f(x)); x + N2(f(N1(x))) (Gemma 2, 3); x + N(f(x)) (OLMo 2)
NORM_PLACEMENTS = ("pre", "post", "sandwich", "output")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "geglu_tanh")
GATED_ACTIVATIONS = ("swiglu", "geglu", "geglu_tanh")
ROPE_STYLES = ("rotate_half", "interleaved")
ROPE_SCALINGS = ("none", "linear", "ntk", "llama3")
SINUSOIDAL_STYLES = ("interleaved", "halved")
QK_NORM_SCOPES = ("head", "all")  # one norm per head (Qwen3, Gemma 3), over all heads at once (OLMo 2)
ROUTERS = ("softmax", "sigmoid")  # how a mixture of experts scores its experts
INITS = ("gpt2", "xavier")
# What one vector per sequence is made of, for the classification head (models/classifier.py)
CLASSIFIER_POOLINGS = ("cls", "mean", "pooler", "last")
DEFAULT_POOLING = {"encoder": "cls", "decoder": "last"}
SENTENCE_POOLINGS = ("mean", "cls", "pooler")  # a sentence encoder's (sentence-transformers' 1_Pooling)
DROPOUT_FIELDS = ("embed_dropout", "attn_dropout", "resid_dropout", "ffn_dropout")

POSITIVE_INTEGERS = (
    "vocab_size",
    "d_model",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "d_head",
    "d_ff",
    "max_seq_len",
    "n_decoder_layers",
    "experts_per_token",
    "expert_d_ff",
    "patch_size",
    "n_channels",
)
CHOICES = {
    "family": FAMILIES,
    "positions": POSITIONS,
    "norm": NORMS,
    "norm_placement": NORM_PLACEMENTS,
    "activation": ACTIVATIONS,
    "rope_style": ROPE_STYLES,
    "rope_scaling": ROPE_SCALINGS,
    "sinusoidal_style": SINUSOIDAL_STYLES,
    "init": INITS,
    "sentence_pooling": SENTENCE_POOLINGS,
    "qk_norm_scope": QK_NORM_SCOPES,
    "router": ROUTERS,
}


def check(config: Any) -> None:
    """Raise ValueError naming the first field (or pair of fields) of ``config`` (a
    ModelConfig) that is not valid."""
    _check_fields(config)
    _check_combinations(config)
    _check_experts(config)
    _check_vision(config)
    _check_classifier(config)


def _check_fields(config: Any) -> None:
    """Each field alone: one of its allowed values, or in its range."""
    for name, allowed in CHOICES.items():
        value = getattr(config, name)
        if value not in allowed:
            raise ValueError(
                f"{name}={value!r} is not supported; allowed values: " + ", ".join(repr(a) for a in allowed)
            )
    for name in POSITIVE_INTEGERS:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer")
    for name in ("n_experts", "shared_expert_d_ff", "image_size", "global_every"):
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name}={value!r} must be an integer >= 0")
    for name in DROPOUT_FIELDS:
        value = getattr(config, name)
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name}={value} must lie in [0, 1)")
    if config.attn_window is not None and config.attn_window < 1:
        raise ValueError(f"attn_window={config.attn_window} must be a positive integer or None")
    for name in ("attn_softcap", "logit_softcap", "rope_local_base"):
        value = getattr(config, name)
        if value is not None and not value > 0:
            raise ValueError(f"{name}={value} must be a positive number or None")
    if config.norm_eps <= 0:
        raise ValueError(f"norm_eps={config.norm_eps} must be positive")
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        value = getattr(config, name)
        if value is not None and not 0 <= value < config.vocab_size:
            raise ValueError(f"{name}={value} must lie in [0, vocab_size={config.vocab_size})")


def _check_combinations(config: Any) -> None:
    """Fields that are each valid but do not fit together."""
    if config.n_heads % config.n_kv_heads:
        raise ValueError(
            f"n_heads={config.n_heads} must be divisible by n_kv_heads={config.n_kv_heads} "
            "(each kv head serves a whole group of query heads)"
        )
    if config.positions == "rope" and config.d_head % 2:
        raise ValueError(f"positions='rope' needs an even d_head, got d_head={config.d_head}")
    if config.rotary_dim is not None and not (
        0 < config.rotary_dim <= config.d_head and config.rotary_dim % 2 == 0
    ):
        raise ValueError(
            f"rotary_dim={config.rotary_dim} must be an even number in (0, d_head={config.d_head}]"
        )
    if config.rope_local_base is not None and (config.positions != "rope" or config.attn_window is None):
        raise ValueError(
            "rope_local_base is the sliding-window layers' RoPE base: it needs positions='rope' "
            "and an attn_window"
        )
    if config.global_every and config.attn_window is None:
        raise ValueError("global_every picks which layers skip the sliding window: set attn_window too")
    if config.shared_norm and not config.parallel_residual:
        raise ValueError("shared_norm=True is for a parallel block: set parallel_residual=True")
    if config.parallel_residual and config.norm_placement != "pre":
        raise ValueError("parallel_residual=True needs norm_placement='pre' (each sublayer reads LN(x))")
    if config.positions == "sinusoidal" and config.d_model % 2:
        raise ValueError(f"positions='sinusoidal' needs an even d_model, got d_model={config.d_model}")
    if config.rope_scaling != "none" and config.rope_scaling_factor < 1.0:
        raise ValueError(
            f"rope_scaling_factor={config.rope_scaling_factor} must be >= 1 "
            f"when rope_scaling={config.rope_scaling!r}"
        )
    if config.rope_scaling == "llama3" and not (
        0 < config.rope_low_freq_factor < config.rope_high_freq_factor and config.rope_original_max_len > 0
    ):
        raise ValueError(
            "rope_scaling='llama3' needs 0 < rope_low_freq_factor < rope_high_freq_factor and "
            f"rope_original_max_len > 0, got {config.rope_low_freq_factor}, {config.rope_high_freq_factor}, "
            f"{config.rope_original_max_len}"
        )
    if config.type_vocab_size and config.seq2seq:
        raise ValueError("type_vocab_size (segment embeddings) is for encoder or decoder models")
    if config.pooler and config.family != "encoder":
        raise ValueError(f"pooler=True is only for family='encoder', not {config.family!r}")
    if config.sentence_pooling == "pooler" and not config.pooler:
        raise ValueError(
            "sentence_pooling='pooler' needs BERT's pooler: set pooler=True, or use 'mean' or 'cls'"
        )


def _check_experts(config: Any) -> None:
    """A mixture of experts: k of n experts per token."""
    if not config.n_experts:
        if config.shared_expert_d_ff:
            raise ValueError("shared_expert_d_ff is part of a mixture of experts: set n_experts too")
        return
    if config.experts_per_token > config.n_experts:
        raise ValueError(
            f"experts_per_token={config.experts_per_token} must be at most n_experts={config.n_experts}"
        )
    if config.parallel_residual:
        raise ValueError("a mixture of experts sits in a sequential block: set parallel_residual=False")


def _check_vision(config: Any) -> None:
    """A vision transformer: an encoder over an image's patches and [CLS]."""
    if not config.image_size:
        return
    size, patch = config.image_size, config.patch_size
    if config.family != "encoder":
        raise ValueError(f"image_size={size}: a vision transformer is an encoder, not {config.family!r}")
    if size % patch:
        raise ValueError(f"image_size={size} must be a multiple of patch_size={patch} (whole patches)")
    if config.positions != "learned":
        raise ValueError("a vision transformer learns its positions (one per patch): set positions='learned'")
    if config.mlm_head:
        raise ValueError("a vision transformer has no masked-LM head (no vocabulary): set mlm_head=False")
    if config.vocab_size != 1:
        raise ValueError(
            f"vocab_size={config.vocab_size}: a vision transformer reads pixels, not token ids; "
            "set vocab_size=1"
        )
    if config.max_seq_len < config.n_patches + 1:
        raise ValueError(
            f"max_seq_len={config.max_seq_len} must hold the {config.n_patches} patches and [CLS]: "
            f"set it to {config.n_patches + 1}"
        )


def _check_classifier(config: Any) -> None:
    """The classification head: how many classes, how a sequence is pooled, their names."""
    n = config.n_classes
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or n == 1:
        raise ValueError(f"n_classes={n!r} must be 0 (no classification head) or an integer >= 2")
    names = config.class_names
    if not isinstance(names, tuple) or not all(isinstance(x, str) and x for x in names):
        raise ValueError(f"class_names={names!r} must be a list of non-empty strings")
    if names and (len(names) != n or len(set(names)) != n):
        raise ValueError(f"class_names={list(names)} must name each of the n_classes={n} classes once")
    if not n:
        return
    if config.family not in DEFAULT_POOLING:
        raise ValueError(
            f"n_classes={n}: a classification head sits on an encoder or a decoder, not {config.family!r}"
        )
    pooling = config.classifier_pooling
    if pooling not in CLASSIFIER_POOLINGS:
        raise ValueError(
            f"classifier_pooling={pooling!r} is not supported; allowed values: "
            + ", ".join(repr(a) for a in CLASSIFIER_POOLINGS)
        )
    if config.causal and pooling not in ("last", "mean"):
        raise ValueError(
            f"classifier_pooling={pooling!r} does not suit a decoder: under the causal mask only the "
            "last token has seen the whole sequence; use 'last' (or 'mean')"
        )
    if not config.causal and pooling == "last":
        raise ValueError(
            "classifier_pooling='last' is for decoders; an encoder uses 'cls', 'mean' or 'pooler'"
        )
    if pooling == "pooler" and not config.pooler:
        raise ValueError(
            "classifier_pooling='pooler' needs BERT's pooler: set pooler=True, or use 'cls' or 'mean'"
        )
