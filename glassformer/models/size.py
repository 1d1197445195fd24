"""How big a model a config makes, from the config alone: parameters by component, and a
config too big for this machine refused before one tensor is allocated (`check_size`).

The parameter equations live here, beside the modules that make the parameters, so that
`build` can check a config before building it; `glassformer.inspect.costs` reads them from
here for ``glassformer count`` (one home for them). Sizes: d=d_model, h=heads, g=kv heads,
e=d_head, f=d_ff, v=vocab, L=layers.

Why check first: building is the slow part. ``n_layers: 100000000`` in a config.json makes
a hundred million blocks, which takes minutes and then all the memory; counting them takes
microseconds.

>>> check_size(ModelConfig(n_layers=100_000_000))
Traceback (most recent call last):
...
glassformer.models.size.ModelTooLarge: this config makes a model of 19,827,200,065,792 parameters ...
"""

from __future__ import annotations

import os

import torch

from glassformer.config import ModelConfig

MAX_PARAMETERS_VARIABLE = "GLASSFORMER_MAX_PARAMETERS"
MEMORY_SHARE = 0.5  # a model's weights may take at most this share of the machine's memory


class ModelTooLarge(ValueError):
    """A config whose weights would not fit this machine (see `check_size`)."""


# parameters -------------------------------------------------------------------------------
def _linear(n_in: int, n_out: int, bias: bool) -> int:
    """nn.Linear(n_in, n_out): n_in n_out weights (+ n_out biases)."""
    return n_in * n_out + (n_out if bias else 0)


def _norm(config: ModelConfig, size: int | None = None) -> int:
    """LayerNorm over ``size`` (d_model by default) features: gamma and beta (2 size);
    RMSNorm: gamma only (size)."""
    return (size or config.d_model) * (2 if config.norm == "layernorm" else 1)


def _attention(config: ModelConfig, prefix: str, layers: int) -> dict[str, int]:
    """W_Q (d x he), W_K and W_V (d x ge each: GQA / MQA have g < h), W_O (he x d), in ``layers``
    blocks; biases as ``qkv_bias`` / ``out_bias`` say."""
    d, h, g, e = config.d_model, config.n_heads, config.n_kv_heads, config.d_head
    bias = config.qkv_bias
    counts = {
        f"{prefix} q": layers * _linear(d, h * e, bias),
        f"{prefix} k": layers * _linear(d, g * e, bias),
        f"{prefix} v": layers * _linear(d, g * e, bias),
        f"{prefix} out": layers * _linear(h * e, d, config.out_bias),
    }
    if config.qk_norm and config.qk_norm_scope == "all":  # over the whole projections: h e, g e (OLMo 2)
        counts[f"{prefix} q/k norms"] = layers * (_norm(config, h * e) + _norm(config, g * e))
    elif config.qk_norm:  # one norm over d_head for the queries, one for the keys (Qwen3)
        counts[f"{prefix} q/k norms"] = layers * 2 * _norm(config, e)
    return counts


def _ffn(config: ModelConfig, layers: int) -> dict[str, int]:
    """W_up and W_down (d x f each); gated activations (SwiGLU, GeGLU) add W_gate. A mixture of
    experts: the router W_r (d x n), n experts of their own f, the shared expert and its gate."""
    if not config.moe:
        return {f"ffn {name}": layers * n for name, n in _ffn_matrices(config, config.d_ff).items()}
    n, d = config.n_experts, config.d_model
    counts = {"router": layers * d * n}
    counts |= {f"experts {k}": layers * n * v for k, v in _ffn_matrices(config, config.expert_d_ff).items()}
    if config.shared_expert_d_ff:
        shared = _ffn_matrices(config, config.shared_expert_d_ff)
        counts["shared expert"] = layers * (sum(shared.values()) + d)  # + its gate w_s (d)
    return counts


def _ffn_matrices(config: ModelConfig, f: int) -> dict[str, int]:
    """One FFN of hidden size f: up, gate (when gated) and down, with their biases."""
    d, bias = config.d_model, config.ffn_bias
    counts = {"up": _linear(d, f, bias)}
    if config.gated:
        counts["gate"] = _linear(d, f, bias)
    counts["down"] = _linear(f, d, bias)
    return counts


def block_matmul_weights(config: ModelConfig, cross: bool = False) -> int:
    """Weights of one block's matrix products that a token passes through (no biases, norms or
    lookups): W_Q, W_K, W_V, W_O and the FFN's; a mixture's router, the k experts a token uses,
    the shared expert and its gate. With ``cross``, the cross-attention's W_Q and W_O (its W_K,
    W_V act on the source tokens: counted apart). The FLOPs of a token are 2 x these.

    >>> block_matmul_weights(ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4))
    12288
    """
    d, h, g, e, f = config.d_model, config.n_heads, config.n_kv_heads, config.d_head, config.d_ff
    attention = d * (h + 2 * g) * e + h * e * d
    matrices = 3 if config.gated else 2
    ffn = matrices * d * f
    if config.moe:
        ffn = d * config.n_experts + matrices * d * config.experts_per_token * config.expert_d_ff
        ffn += (matrices * d * config.shared_expert_d_ff + d) if config.shared_expert_d_ff else 0
    return attention + ffn + (2 * d * h * e if cross else 0)


def active_parameters(config: ModelConfig) -> int:
    """Parameters one token passes through: all of them, less the experts it does not use
    ((n - k) experts per layer of a mixture).

    >>> moe = ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4, n_experts=8, expert_d_ff=64)
    >>> sum(parameter_counts(moe).values()), active_parameters(moe)
    (87744, 37440)
    """
    total = sum(parameter_counts(config).values())
    if not config.moe:
        return total
    idle = config.n_experts - config.experts_per_token
    return total - sum(config.stack_depths) * idle * sum(_ffn_matrices(config, config.expert_d_ff).values())


def _head(config: ModelConfig) -> dict[str, int]:
    """The output side: LM head (d x v, nothing new when tied), BERT's MLM head (dense d x d,
    norm, d x v decoder with its v biases), pooler (d x d), classifier (d x c)."""
    d, v = config.d_model, config.vocab_size
    tied = config.tie_embeddings
    counts: dict[str, int] = {}
    if config.causal:  # a decoder's (or an encoder-decoder's) LM head
        counts["lm head"] = (0 if tied else d * v) + (v if config.lm_head_bias else 0)
    elif config.mlm_head:
        counts["mlm head"] = _linear(d, d, True) + _norm(config) + (0 if tied else d * v) + v
    if config.pooler:
        counts["pooler"] = _linear(d, d, True)
    if config.n_classes:
        counts["classifier"] = _linear(d, config.n_classes, True)
    return counts


def parameter_counts(config: ModelConfig) -> dict[str, int]:
    """Parameters by component, summed over layers (and over both stacks of an encoder-decoder).

    The token table is counted once: a tied LM or MLM head (``tie_embeddings``) reuses it, so
    its entry holds only its biases. Sinusoidal, RoPE and ALiBi positions have no parameters;
    learned positions are max_seq_len x d, a T5 relative bias buckets x h per stack. A vision
    transformer has no token table: its patch embedding is W_patch, (C P P) x d, and its bias
    (d), and the [CLS] vector (d) (`glassformer.nn.patches`).

    >>> counts = parameter_counts(ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4))
    >>> counts["token embedding"], counts["lm head"], sum(counts.values())
    (3200, 0, 36864)
    """
    d, depths = config.d_model, config.stack_depths
    layers, stacks = sum(depths), len(depths)
    if config.vision:  # W_patch and its bias, [CLS]; the learned positions follow
        patch = config.n_channels * config.patch_size**2
        counts = {"patch embedding": _linear(patch, d, True), "cls token": d}
    else:
        counts = {"token embedding": config.vocab_size * d}
    if config.positions == "learned":
        counts["position embedding"] = stacks * config.max_seq_len * d
    if config.positions == "t5_relative":
        counts["position bias"] = stacks * config.relative_buckets * config.n_heads
    if config.type_vocab_size:
        counts["segment embedding"] = config.type_vocab_size * d
    if config.embed_norm:
        counts["embedding norm"] = stacks * _norm(config)
    counts.update(_attention(config, "attention", layers))
    cross_layers = sum(stack.layers for stack in config.stacks if stack.cross)
    if cross_layers:
        counts.update(_attention(config, "cross-attention", cross_layers))
    counts.update(_ffn(config, layers))
    per_block = 1 if config.shared_norm else 2  # a parallel block may share one norm (Phi-2)
    per_sublayer = 2 if config.norm_on_input and config.norm_on_output else 1  # sandwich: input and output
    counts["block norms"] = per_sublayer * (per_block * layers + cross_layers) * _norm(config)
    if config.has_final_norm:  # post-norm blocks end in their own norm
        counts["final norm"] = stacks * _norm(config)
    counts.update(_head(config))
    return counts


def embedding_parameters(config: ModelConfig) -> int:
    """Parameters of the lookup tables (tokens, learned positions, segments; a ViT's [CLS]): what
    Kaplan et al.'s "non-embedding" count leaves out. A ViT's W_patch is a matrix every patch is
    multiplied by, not a lookup: it counts as non-embedding."""
    counts = parameter_counts(config)
    tables = ("token embedding", "cls token", "position embedding", "segment embedding")
    return sum(counts.get(k, 0) for k in tables)


# the check --------------------------------------------------------------------------------
def check_size(
    config: ModelConfig, dtype: torch.dtype = torch.float32, max_parameters: int | None = None
) -> int:
    """The parameter count of ``config``; `ModelTooLarge` when its weights in ``dtype`` would
    take more than half of this machine's physical memory, or more parameters than
    ``max_parameters`` (else the ``GLASSFORMER_MAX_PARAMETERS`` environment variable) allows.
    Either of those, when given, replaces the memory rule: it is how to allow a model
    anyway. Counting takes microseconds, whatever the sizes.

    >>> check_size(ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4))
    36864
    """
    parameters = sum(parameter_counts(config).values())
    weight_bytes = parameters * dtype.itemsize
    limit = max_parameters if max_parameters is not None else _allowed_by_environment()
    if limit is not None:
        if parameters <= limit:
            return parameters
        because = f"more than the {limit:,} parameters allowed"
    else:
        memory = physical_memory()
        if memory is None or weight_bytes <= MEMORY_SHARE * memory:
            return parameters
        because = f"more than half of this machine's {_gibibytes(memory)} of memory"
    raise ModelTooLarge(
        f"this config makes a model of {parameters:,} parameters ({_sizes(config)}): "
        f"{_gibibytes(weight_bytes)} of {str(dtype).removeprefix('torch.')} weights, {because}; "
        "nothing was built. Check the sizes in the config; to build it anyway, set "
        f"{MAX_PARAMETERS_VARIABLE}={parameters} (or call build(config, max_parameters={parameters}))"
    )


def physical_memory() -> int | None:
    """Bytes of physical memory, or None where the system does not say (not POSIX)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _allowed_by_environment() -> int | None:
    text = os.environ.get(MAX_PARAMETERS_VARIABLE, "").strip().replace("_", "")
    if not text:
        return None
    if not text.isdigit():
        raise ValueError(
            f"{MAX_PARAMETERS_VARIABLE}={os.environ[MAX_PARAMETERS_VARIABLE]!r} must be a whole number "
            "of parameters, such as 2000000000"
        )
    return int(text)


def _sizes(config: ModelConfig) -> str:
    """The sizes that make a model big, as the config names them."""
    layers = " + ".join(f"{n:,}" for n in config.stack_depths)
    return f"{layers} layers, d_model {config.d_model:,}, d_ff {config.d_ff:,}, vocab {config.vocab_size:,}"


def _gibibytes(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
