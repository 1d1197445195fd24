"""The words of the stage catalogue (`stage_catalogue.py`): a step's title, plain name and
sentence, worded for the model at hand. `Context` is what they depend on: the model's config,
whether the step's stack is causal, whether it is a cross-attention step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from glassformer.config import ModelConfig

POSITION_NAMES = {
    "learned": "learned position vectors, added",
    "sinusoidal": "sinusoidal position vectors, added",
    "rope": "RoPE: q and k rotated by position",
    "alibi": "ALiBi: a distance penalty added to the scores",
    "t5_relative": "T5 relative position bias added to the scores",
    "none": "no position information",
}
POOLING_NAMES = {  # glassformer/models/classifier.py, pool_sequence
    "cls": "the first token's vector",
    "mean": "the mean of the token vectors",
    "pooler": "tanh(W_p x_0 + b_p), BERT's pooler",
    "last": "the last token's vector",
}
PARALLEL_WORDS = (  # a parallel residual (GPT-NeoX, GPT-J): the FFN reads the block's input
    "This model runs the feed-forward layer beside attention, on the block's input, not after it. "
)
NORM_WORDS = "rescaled to a steady size (normalized), so the numbers stay in a good range"
POSITIONS_IN_ATTENTION = ("rope", "alibi", "t5_relative")


def attention_kind(config: ModelConfig) -> str:
    """MHA (g = h), GQA (1 < g < h) or MQA (g = 1)."""
    if config.n_kv_heads == config.n_heads:
        return "MHA"
    return "MQA" if config.n_kv_heads == 1 else "GQA"


@dataclass(frozen=True)
class Context:
    """What a step's words depend on: the model, and where the step sits."""

    config: ModelConfig
    causal: bool = False  # its stack's self-attention hides later tokens (a decoder's)
    cross: bool = False  # a cross-attention step (the decoder reads the encoder)

    @property
    def pre(self) -> bool:
        return self.config.norm_placement == "pre"

    @property
    def norm(self) -> str:
        return "RMSNorm" if self.config.norm == "rmsnorm" else "LayerNorm"

    @property
    def kind(self) -> str:
        return attention_kind(self.config)

    @property
    def window(self) -> int | None:
        """The sliding window of self-attention (cross-attention sees every encoder token)."""
        return None if self.cross else self.config.attn_window


Words = Callable[[Context], str]


def fixed(text: str) -> Words:
    return lambda ctx: text


def add_title(ctx: Context) -> str:
    return "residual add: x + out" if ctx.pre else f"residual add, then {ctx.norm}: {ctx.norm}(x + out)"


def add_plain(ctx: Context) -> str:
    return "add to the stream" if ctx.pre else "add to the stream, then normalize"


def then_normalized(ctx: Context) -> str:
    if ctx.pre:
        return ""
    return f" Then the sum is {NORM_WORDS}: this model normalizes after each addition (post-norm)."


def scores_title(ctx: Context) -> str:
    scale = ctx.config.attn_scale
    text = "Q K^T" if scale == 1.0 else "Q K^T / sqrt(d_head)" if scale is None else f"Q K^T * {scale:g}"
    return text + (
        " + position bias" if ctx.config.positions in ("alibi", "t5_relative") and not ctx.cross else ""
    )


def mask_title(ctx: Context) -> str:
    title = "causal mask: no looking ahead" if ctx.causal else "mask"
    return title + (f", sliding window of {ctx.window}" if ctx.window else "")


def mask_plain(ctx: Context) -> str:
    if ctx.causal:
        return "hide the future"
    return "hide the distant past" if ctx.window else "nothing hidden"


def mask_words(ctx: Context) -> str:
    window = ctx.window
    if ctx.causal:
        reach = f" Nor may it look {window} or more tokens back: a sliding window." if window else ""
        return (
            "A token may not look at the tokens after it: when predicting, the future is not "
            f"known yet.{reach}"
        )
    if window:
        return (
            f"A token may look at every token after it, but not {window} or more tokens back: "
            "a sliding window."
        )
    return "Nothing is hidden here: every token may look at every token."


def attention_in_words(ctx: Context) -> str:
    first = f"Each token's vector is first {NORM_WORDS}. " if ctx.pre else ""
    then = (
        "Now the decoder's tokens get to look at the encoder's tokens."
        if ctx.cross
        else "Attention is where tokens look at each other."
    )
    return first + then


def who(ctx: Context, reader: bool) -> str:
    """Whose tokens make a query (the reader) or a key / value, in cross-attention."""
    if not ctx.cross:
        return ""
    return "decoder " if reader else "encoder "


def kv_shape(ctx: Context) -> str:
    return "g s e" if ctx.kind != "MHA" else "h s e"


def ffn_hidden_title(ctx: Context) -> str:
    c = ctx.config
    return f"x W_gate (the gate, {c.activation})" if c.gated else "x W_up"


def ffn_act_title(ctx: Context) -> str:
    c = ctx.config
    return f"{c.activation}(x W_gate) * x W_up" if c.gated else f"{c.activation}(x W_up)"


def embed_out_words(ctx: Context) -> str:
    later = " Word order is not added here: it enters later, inside attention."
    return (
        "This is the start of the residual stream: one vector per token, which every block reads and adds to."
        + (later if ctx.config.positions in POSITIONS_IN_ATTENTION else "")
    )


def logits_title(ctx: Context) -> str:
    return "logits: the masked-LM head" if ctx.config.masked_lm else "logits: the LM head"


def logits_words(ctx: Context) -> str:
    if ctx.config.masked_lm:
        return (
            "Each vector is compared with every word in the vocabulary: a score for each "
            "word that could stand at that position."
        )
    return (
        "The last token's vector is compared with every word in the vocabulary: a score "
        "for each possible next token."
    )


def classifier_pooled_words(ctx: Context) -> str:
    if ctx.config.classifier_pooling == "mean":
        return "The vectors of all the tokens are averaged into one vector for the whole text."
    return "One vector is picked to stand for the whole text."


def sentence_pooled_words(ctx: Context) -> str:
    if ctx.config.sentence_pooling == "mean":
        return "The vectors of all the tokens are averaged into one vector for the whole text."
    return "The first token's vector is taken to stand for the whole text."


def q_title(ctx: Context) -> str:
    after = _after_projection(ctx)
    return f"queries Q ({after})" if after else "queries Q"


def k_title(ctx: Context) -> str:
    after = _after_projection(ctx)
    return f"keys K ({ctx.kind}; {after})" if after else f"keys K ({ctx.kind})"


def _after_projection(ctx: Context) -> str:
    """What q and k go through after their projection: q/k-norm, then RoPE ("" for neither)."""
    steps = [f"{ctx.norm} per head" if ctx.config.qk_norm else ""]
    rope = ctx.config.positions == "rope" and not ctx.cross
    partial = ctx.config.rotary_dim
    turned = f"RoPE on its first {partial} of {ctx.config.d_head} features" if partial else "RoPE"
    steps.append(turned if rope else "")
    steps = [step for step in steps if step]
    return f"{', then '.join(steps)} applied" if steps else ""


def self_or_cross(ctx: Context, what: str) -> str:
    name = "cross-attention" if ctx.cross else "self-attention"
    return f"{name} {what}"
