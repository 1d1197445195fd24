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
    layer: int | None = None  # its block (None: not in a block)

    @property
    def pre(self) -> bool:
        """A norm on each sublayer's input: pre-norm, and the first norm of a sandwich."""
        return self.config.norm_on_input

    @property
    def post(self) -> bool:
        """A norm after each residual add (post-norm, the original Transformer, BERT)."""
        return self.config.norm_after_add

    @property
    def normed_output(self) -> bool:
        """A norm on each sublayer's output, before the add: a sandwich's second, OLMo 2's only."""
        return self.config.norm_on_output

    @property
    def norm(self) -> str:
        return "RMSNorm" if self.config.norm == "rmsnorm" else "LayerNorm"

    @property
    def kind(self) -> str:
        return attention_kind(self.config)

    @property
    def window(self) -> int | None:
        """The sliding window of this block's self-attention (None: global; Gemma 2, 3 mix both;
        cross-attention sees every encoder token)."""
        if self.cross:
            return None
        return self.config.attn_window if self.layer is None else self.config.layer_window(self.layer)


Words = Callable[[Context], str]


def fixed(text: str) -> Words:
    return lambda ctx: text


def add_title(ctx: Context) -> str:
    if ctx.post:
        return f"residual add, then {ctx.norm}: {ctx.norm}(x + out)"
    return f"residual add: x + {ctx.norm}(out)" if ctx.normed_output else "residual add: x + out"


def add_plain(ctx: Context) -> str:
    return "add to the stream, then normalize" if ctx.post else "add to the stream"


def then_normalized(ctx: Context) -> str:
    if not ctx.post:
        return ""
    return f" Then the sum is {NORM_WORDS}: this model normalizes after each addition (post-norm)."


def post_norm_title(ctx: Context, what: str) -> str:
    which = "the second norm, " if ctx.pre else ""
    return f"{what} output, {ctx.norm} ({which}before the add)"


def post_norm_words(ctx: Context, what: str) -> str:
    placement = (
        "a norm on each sublayer's input and another on its output (a sandwich, Gemma 2 and 3)"
        if ctx.pre
        else "its norms on each sublayer's output, not its input (OLMo 2)"
    )
    return (
        f"{what}'s result is {NORM_WORDS} before it joins the stream: this model has {placement}, "
        "so no sublayer can add a huge vector to the stream."
    )


def capped_title(ctx: Context) -> str:
    cap = ctx.config.attn_softcap
    return f"soft-cap: {cap:g} * tanh(S / {cap:g})"


def capped_words(ctx: Context) -> str:
    cap = ctx.config.attn_softcap
    return (
        f"Each score is squashed smoothly into the range -{cap:g} to {cap:g}: small scores stay as "
        "they are, large ones flatten out, so no single match can take all the attention."
    )


def logits_raw_words(ctx: Context) -> str:
    return (
        "The last token's vector is compared with every word in the vocabulary: a raw score for each "
        "possible next token, before this model limits how large a score may grow."
    )


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
    cap = ctx.config.logit_softcap
    if cap is not None:
        return f"logits, soft-capped: {cap:g} * tanh(z / {cap:g})"
    return "logits: the masked-LM head" if ctx.config.masked_lm else "logits: the LM head"


def logits_words(ctx: Context) -> str:
    cap = ctx.config.logit_softcap
    if cap is not None:
        return (
            f"The raw scores are squashed smoothly into the range -{cap:g} to {cap:g}: the order of "
            "the tokens stays, but no score can run away."
        )
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
    if ctx.config.vision and ctx.config.classifier_pooling == "cls":
        return (
            "[CLS]'s vector stands for the whole image: through attention it has gathered from every patch."
        )
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
    scope = "over all heads" if ctx.config.qk_norm_scope == "all" else "per head"
    steps = [f"{ctx.norm} {scope}" if ctx.config.qk_norm else ""]
    rope = ctx.config.positions == "rope" and not ctx.cross
    partial = ctx.config.rotary_dim
    turned = f"RoPE on its first {partial} of {ctx.config.d_head} features" if partial else "RoPE"
    local = ctx.config.rope_local_base
    if local is not None and ctx.window is not None:  # Gemma 3: a windowed layer's own base
        turned += f" (base {local:g}, this windowed layer's own)"
    steps.append(turned if rope else "")
    steps = [step for step in steps if step]
    return f"{', then '.join(steps)} applied" if steps else ""


def self_or_cross(ctx: Context, what: str) -> str:
    name = "cross-attention" if ctx.cross else "self-attention"
    return f"{name} {what}"


def router_words(ctx: Context) -> str:
    n = ctx.config.n_experts
    return (
        f"This layer has {n} experts, {n} small feed-forward networks, and a router that gives "
        "every token a score for each of them."
    )


def router_probs_words(ctx: Context) -> str:
    if ctx.config.router == "softmax":
        return "The softmax turns each token's scores into shares of 1 across the experts."
    return "A sigmoid turns each score into a number between 0 and 1, each expert on its own."


def expert_weights_title(ctx: Context) -> str:
    if ctx.config.normalize_expert_weights:
        return "expert weights w: the top-k scores / their sum"
    return "expert weights w: the top-k scores"


def expert_weights_words(ctx: Context) -> str:
    rescaled = " rescaled to add up to 1" if ctx.config.normalize_expert_weights else ""
    return f"The chosen experts' scores,{rescaled}, say how much each one's answer counts."
