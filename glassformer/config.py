"""`ModelConfig`: the single, frozen, validated source of a model's architecture.

Every architectural choice the course discusses is a field here; the model code reads
nothing else. Construction validates each field and every combination, and a bad value
fails with a message that names the field and the allowed values:

>>> ModelConfig(d_model=100, n_heads=3)
Traceback (most recent call last):
...
ValueError: d_model=100 must be divisible by n_heads=3 (or set d_head explicitly)

Dimension legend used across the package: b=batch, t=query positions, s=key positions,
h=heads, g=kv heads, d=d_model, e=d_head, f=d_ff, v=vocab.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from glassformer.config_checks import DEFAULT_POOLING, GATED_ACTIVATIONS, check


class Stack(NamedTuple):
    """One stack of blocks: name ("", "encoder", "decoder"), depth, causal, cross-attending."""

    name: str
    layers: int
    causal: bool
    cross: bool


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a transformer, from GPT-2 to Llama, BERT, T5 and the original.

    Defaults describe a small GPT-2-style decoder. Optional sizes left as ``None`` are
    derived in ``__post_init__``: ``n_kv_heads = n_heads`` (multi-head attention),
    ``d_head = d_model // n_heads``, ``d_ff = 4 * d_model``,
    ``n_decoder_layers = n_layers``, and for a classifier (``n_classes > 0``)
    ``classifier_pooling``: ``"cls"`` (the first token) for an encoder, ``"last"`` (the
    last real token) for a decoder.
    """

    family: str = "decoder"
    # sizes
    vocab_size: int = 256
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None  # < n_heads: grouped-query; 1: multi-query
    d_head: int | None = None
    d_ff: int | None = None
    max_seq_len: int = 256
    n_decoder_layers: int | None = None  # encoder_decoder only (see decoder_depth)
    type_vocab_size: int = 0  # BERT segment embeddings; 0 = none
    # positions
    positions: str = "learned"
    sinusoidal_style: str = "interleaved"  # "halved": sin in the first half (Marian)
    rope_base: float = 10000.0
    rope_style: str = "rotate_half"  # GPT-NeoX / Llama; "interleaved" is GPT-J
    rope_scaling: str = "none"  # linear, ntk, or llama3 (Llama 3.1+: `nn.positions.llama3_frequencies`)
    rope_scaling_factor: float = 1.0
    rope_low_freq_factor: float = 1.0  # llama3: wavelengths past original / low slowed by the factor,
    rope_high_freq_factor: float = 4.0  # under original / high kept, blended between
    rope_original_max_len: int = 8192  # llama3: the context the model was first trained for
    rope_local_base: float | None = None  # the sliding-window layers' own RoPE base (Gemma 3)
    rotary_dim: int | None = None  # RoPE over each head's first rotary_dim features (NeoX); None: all
    relative_buckets: int = 32  # T5 relative position bias
    relative_max_distance: int = 128
    # attention
    attn_scale: float | None = None  # None = 1/sqrt(d_head); T5 uses 1.0
    attn_window: int | None = None  # sliding window: attend to the last `window` keys
    global_every: int = 0  # with attn_window: layer i is global when (i + 1) % k == 0 (Gemma 2: 2, 3: 6)
    attn_softcap: float | None = None  # scores -> cap * tanh(scores / cap) (Gemma 2)
    qkv_bias: bool = True
    qk_norm: bool = False  # a norm (config.norm, learned weight) over q and k, before RoPE (Qwen3)
    qk_norm_scope: str = "head"  # "head": each head's e features; "all": the whole projection (OLMo 2)
    out_bias: bool = True
    # feed-forward
    activation: str = "gelu_tanh"
    ffn_bias: bool = True
    # mixture of experts (n_experts > 0): each token's FFN is the weighted sum of its top-k experts
    n_experts: int = 0  # 0 = one dense FFN
    experts_per_token: int = 2  # k
    router: str = "softmax"  # the router's scores over all experts: softmax, or sigmoid (each alone)
    normalize_expert_weights: bool = True  # the k chosen weights rescaled to sum to 1 (Mixtral)
    expert_d_ff: int | None = None  # each expert's hidden size; None = d_ff
    shared_expert_d_ff: int = 0  # an expert every token uses, gated by sigmoid(x w) (Qwen2-MoE); 0 = none
    # normalization
    norm: str = "layernorm"
    norm_placement: str = "pre"
    parallel_residual: bool = False  # x + Attn(LN1(x)) + FFN(LN2(x)): both read the block's input
    shared_norm: bool = False  # a parallel block's one norm: x + Attn(LN(x)) + FFN(LN(x)) (Phi-2, GPT-J)
    norm_eps: float = 1e-5
    embed_norm: bool = False  # LayerNorm right after the embeddings (BERT)
    # vision (image_size > 0): the tokens are an image's patches, cut by a strided convolution (ViT)
    image_size: int = 0  # H = W in pixels; 0 = the tokens are text
    patch_size: int = 16  # P: each token is a P x P patch; (H / P)^2 patches, plus [CLS]
    n_channels: int = 3
    # embeddings and head
    embed_scale: bool = False  # multiply token embeddings by sqrt(d_model) (original)
    tie_embeddings: bool = True
    lm_head_bias: bool = False
    lm_head_input_scale: float = 1.0  # T5 with tied embeddings: d_model**-0.5
    logit_softcap: float | None = None  # logits -> cap * tanh(logits / cap) (Gemma 2)
    mlm_head: bool = True  # encoder only: masked-LM head (absent in sentence encoders)
    pooler: bool = False  # BERT's tanh pooler on the first token (encoder only)
    sentence_pooling: str = "mean"  # a sentence encoder (no MLM head): how its sentence vector pools
    # sequence classification (encoder or decoder): a head W_c over one pooled vector
    n_classes: int = 0  # 0 = no classification head
    classifier_pooling: str | None = None  # None: "cls" for an encoder, "last" for a decoder
    class_names: tuple[str, ...] = ()  # optional, one per class (e.g. "comedy", "history")
    # dropout
    embed_dropout: float = 0.0
    attn_dropout: float = 0.0
    resid_dropout: float = 0.0
    ffn_dropout: float = 0.0
    # initialization
    init: str = "gpt2"
    init_std: float = 0.02
    # special token ids, used by generation
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    decoder_start_token_id: int | None = None

    def __post_init__(self) -> None:
        fill = {
            "n_kv_heads": self.n_heads,
            "d_head": None if self.d_head else self._derived_d_head(),
            "d_ff": 4 * self.d_model,
            "n_decoder_layers": self.n_layers,
            "expert_d_ff": self.d_ff or 4 * self.d_model,
        }
        if self.n_classes and self.family in DEFAULT_POOLING:
            fill["classifier_pooling"] = DEFAULT_POOLING[self.family]
        for name, value in fill.items():
            if getattr(self, name) is None and value is not None:
                object.__setattr__(self, name, value)
        if isinstance(self.class_names, list):  # from JSON
            object.__setattr__(self, "class_names", tuple(self.class_names))
        self._validate()

    def _derived_d_head(self) -> int:
        if self.n_heads > 0 and self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by n_heads={self.n_heads} "
                "(or set d_head explicitly)"
            )
        return self.d_model // max(self.n_heads, 1)

    def _validate(self) -> None:
        check(self)

    # derived views ---------------------------------------------------------------
    @property
    def gated(self) -> bool:
        """Whether the FFN has a gate matrix (SwiGLU, GeGLU: three matrices)."""
        return self.activation in GATED_ACTIVATIONS

    # capabilities: what a model of this config has and does; callers ask these, never the
    # family's name (the family is read here, where a model is built, and in the formats)
    @property
    def stacks(self) -> tuple[Stack, ...]:
        """The model's stacks in forward order: one for a decoder or an encoder; an
        encoder-decoder's bidirectional encoder, then its causal decoder that reads it."""
        if self.family == "encoder_decoder":
            return (
                Stack("encoder", self.n_layers, causal=False, cross=False),
                Stack("decoder", self.n_decoder_layers, causal=True, cross=True),
            )
        return (Stack("", self.n_layers, causal=self.family == "decoder", cross=False),)

    @property
    def stack_depths(self) -> tuple[int, ...]:
        """Blocks in each stack, in forward order: (n_layers,), or (n_layers, n_decoder_layers)
        for an encoder-decoder."""
        return tuple(stack.layers for stack in self.stacks)

    @property
    def seq2seq(self) -> bool:
        """Two stacks: an encoder, and a decoder with its own input that reads it."""
        return len(self.stacks) == 2

    @property
    def causal(self) -> bool:
        """Whether the stack the output comes from hides later tokens (it can predict them)."""
        return self.stacks[-1].causal

    @property
    def has_lm_head(self) -> bool:
        """Scores over the vocabulary at every position: an LM head, or an encoder's masked-LM
        head; not a sentence encoder (its vectors are its output) nor a classifier."""
        return not self.n_classes and (self.causal or self.mlm_head)

    @property
    def generates(self) -> bool:
        """Whether it writes text: the next token from a causal stack's LM head."""
        return self.has_lm_head and self.causal

    @property
    def masked_lm(self) -> bool:
        """An encoder that fills in masked tokens (BERT's head over a bidirectional stack)."""
        return self.has_lm_head and not self.causal

    @property
    def sentence_encoder(self) -> bool:
        """An encoder whose output is one vector per text (pooled, normalized), no head."""
        return not (self.causal or self.mlm_head or self.n_classes)

    @property
    def decoder_depth(self) -> int:
        """Blocks of the causal stack, the one that keeps a KV cache (0 in an encoder)."""
        return self.stack_depths[-1] if self.causal else 0

    @property
    def moe(self) -> bool:
        """Whether each block's FFN is a mixture of experts (a router over n_experts FFNs)."""
        return self.n_experts > 0

    @property
    def vision(self) -> bool:
        """Whether the tokens are an image's patches (a ViT) rather than text."""
        return self.image_size > 0

    @property
    def n_patches(self) -> int:
        """(H / P)^2 patch tokens of a vision model (0 for text)."""
        return (self.image_size // self.patch_size) ** 2 if self.vision else 0

    # where each sublayer f's norms sit (`norm_placement`), as its residual step; callers ask these
    @property
    def norm_on_input(self) -> bool:
        """The sublayer reads its input normed: x <- x + f(N(x)) (pre-norm; a sandwich's first norm)."""
        return self.norm_placement in ("pre", "sandwich")

    @property
    def norm_on_output(self) -> bool:
        """The sublayer's output is normed before the add: x <- x + N2(f(.)) (a sandwich's second
        norm, Gemma 2 and 3; OLMo 2's only one)."""
        return self.norm_placement in ("sandwich", "output")

    @property
    def norm_after_add(self) -> bool:
        """The sum is normed: x <- N(x + f(x)) (post-norm: the original Transformer, BERT)."""
        return self.norm_placement == "post"

    @property
    def has_final_norm(self) -> bool:
        """The stack ends in x <- N(x); not after post-norm blocks, whose last step is already N."""
        return not self.norm_after_add

    def layer_window(self, layer: int) -> int | None:
        """The sliding window of block ``layer`` (None: it attends to every earlier key)."""
        if self.attn_window is None or (self.global_every and (layer + 1) % self.global_every == 0):
            return None
        return self.attn_window

    @property
    def labels(self) -> tuple[str, ...]:
        """A classifier's label names: ``class_names``, or the class numbers "0", "1", ...;
        () without a classification head."""
        return self.class_names or tuple(str(k) for k in range(self.n_classes))

    # serialization ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown ModelConfig field(s): {', '.join(unknown)}; known fields: "
                + ", ".join(sorted(known))
            )
        return cls(**data)

    def to_json(self, path: str | Path | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True)
        if path is not None:
            from glassformer.atomic import write_text_atomic

            write_text_atomic(Path(path), text + "\n")
        return text

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> ModelConfig:
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text()
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated like any new config)."""
        return dataclasses.replace(self, **changes)


# The Llama family's architecture (Touvron et al., 2023): RoPE (rotate-half pairs),
# RMSNorm before each sublayer, SwiGLU, no biases. SmolLM2, Mistral and Qwen share it.
LLAMA_STYLE: dict[str, Any] = {
    "family": "decoder",
    "positions": "rope",
    "rope_style": "rotate_half",
    "norm": "rmsnorm",
    "norm_placement": "pre",
    "activation": "swiglu",
    "qkv_bias": False,
    "out_bias": False,
    "ffn_bias": False,
}


def llama_style(**fields: Any) -> ModelConfig:
    """A Llama-style decoder config: `LLAMA_STYLE` with ``fields`` (sizes, ids, ...) on top.

    >>> llama_style(vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2).activation
    'swiglu'
    """
    return ModelConfig(**{**LLAMA_STYLE, **fields})
