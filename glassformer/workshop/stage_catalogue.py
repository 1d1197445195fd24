"""The trace contract in one place: what each kind of step of a forward pass is, for the page.

A step's *kind* is its hook-point name without the stack and block: ``blocks.3.attn.q`` and
``decoder.blocks.0.cross_attn.q`` are both ``attn.q``. For each kind the catalogue holds

    title     what it computes, in the maths' words ("Q K^T / sqrt(d_head)")
    plain     a beginner's name for it ("match every query with every key")
    words     a beginner's sentence about it
    shape     the letters of its axes (t tokens, s keys, h heads, g key/value heads, e d_head,
              d d_model, f d_ff, v vocabulary, c classes)
    equation  the name of its equation template (static/js/equations.js)
    code      the function that computes it: its file, name and first line, found with `inspect`

each written once and worded for the model at hand (`Context`: its config, which stack, whether
cross-attention). `architecture.stages(net)` applies it to the model's own ``hook_points``;
the payload carries the result, and the walk, the overview, the tour, the equations and the
lessons' links read it there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glassformer.config import ModelConfig
from glassformer.inputs import ModelInputs
from glassformer.models.base import TransformerModel
from glassformer.models.classifier import ClassificationHead, pool_sequence
from glassformer.models.sentence import SentenceHead
from glassformer.models.stack import TransformerStack
from glassformer.nn.attention import Attention
from glassformer.nn.blocks import Block
from glassformer.nn.embeddings import Embeddings
from glassformer.nn.ffn import FeedForward
from glassformer.nn.masks import build_mask

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # glassformer/

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


@dataclass(frozen=True)
class Entry:
    shape: Callable[[Context], str]
    title: Words
    plain: Words
    words: Words
    code: Callable[[Context], Any]  # the function or class that computes the step
    equation: str = ""  # the template's name in equations.js ("" : the kind itself)


def _fixed(text: str) -> Words:
    return lambda ctx: text


def _add_title(ctx: Context) -> str:
    return "residual add: x + out" if ctx.pre else f"residual add, then {ctx.norm}: {ctx.norm}(x + out)"


def _add_plain(ctx: Context) -> str:
    return "add to the stream" if ctx.pre else "add to the stream, then normalize"


def _then_normalized(ctx: Context) -> str:
    if ctx.pre:
        return ""
    return f" Then the sum is {NORM_WORDS}: this model normalizes after each addition (post-norm)."


def _scores_title(ctx: Context) -> str:
    scale = ctx.config.attn_scale
    text = "Q K^T" if scale == 1.0 else "Q K^T / sqrt(d_head)" if scale is None else f"Q K^T * {scale:g}"
    return text + (
        " + position bias" if ctx.config.positions in ("alibi", "t5_relative") and not ctx.cross else ""
    )


def _mask_title(ctx: Context) -> str:
    title = "causal mask: no looking ahead" if ctx.causal else "mask"
    return title + (f", sliding window of {ctx.window}" if ctx.window else "")


def _mask_plain(ctx: Context) -> str:
    if ctx.causal:
        return "hide the future"
    return "hide the distant past" if ctx.window else "nothing hidden"


def _mask_words(ctx: Context) -> str:
    window = ctx.window
    if ctx.causal:
        reach = f" Nor may it look {window} or more tokens back: a sliding window." if window else ""
        return f"A token may not look at the tokens after it: when predicting, the future is not known yet.{reach}"
    if window:
        return f"A token may look at every token after it, but not {window} or more tokens back: a sliding window."
    return "Nothing is hidden here: every token may look at every token."


def _attention_in_words(ctx: Context) -> str:
    first = f"Each token's vector is first {NORM_WORDS}. " if ctx.pre else ""
    then = (
        "Now the decoder's tokens get to look at the encoder's tokens."
        if ctx.cross
        else "Attention is where tokens look at each other."
    )
    return first + then


def _who(ctx: Context, reader: bool) -> str:
    """Whose tokens make a query (the reader) or a key / value, in cross-attention."""
    if not ctx.cross:
        return ""
    return "decoder " if reader else "encoder "


def _kv_shape(ctx: Context) -> str:
    return "g s e" if ctx.kind != "MHA" else "h s e"


def _ffn_hidden_title(ctx: Context) -> str:
    c = ctx.config
    return f"x W_gate (the gate, {c.activation})" if c.gated else "x W_up"


def _ffn_act_title(ctx: Context) -> str:
    c = ctx.config
    return f"{c.activation}(x W_gate) * x W_up" if c.gated else f"{c.activation}(x W_up)"


def _embed_out_words(ctx: Context) -> str:
    later = " Word order is not added here: it enters later, inside attention."
    return (
        "This is the start of the residual stream: one vector per token, which every block reads and adds to."
        + (later if ctx.config.positions in POSITIONS_IN_ATTENTION else "")
    )


def _logits_title(ctx: Context) -> str:
    return "logits: the masked-LM head" if ctx.config.family == "encoder" else "logits: the LM head"


def _logits_words(ctx: Context) -> str:
    if ctx.config.family == "encoder":
        return "Each vector is compared with every word in the vocabulary: a score for each word that could stand at that position."
    return "The last token's vector is compared with every word in the vocabulary: a score for each possible next token."


def _classifier_pooled_words(ctx: Context) -> str:
    if ctx.config.classifier_pooling == "mean":
        return "The vectors of all the tokens are averaged into one vector for the whole text."
    return "One vector is picked to stand for the whole text."


def _sentence_pooled_words(ctx: Context) -> str:
    if ctx.config.sentence_pooling == "mean":
        return "The vectors of all the tokens are averaged into one vector for the whole text."
    return "The first token's vector is taken to stand for the whole text."


def _q_title(ctx: Context) -> str:
    return "queries Q" + (" (RoPE applied)" if ctx.config.positions == "rope" and not ctx.cross else "")


def _self_or_cross(ctx: Context, what: str) -> str:
    name = "cross-attention" if ctx.cross else "self-attention"
    return f"{name} {what}"


def _projections(ctx: Context):
    """Where q, k and v are made: one fused projection for self-attention, Attention.forward
    for cross-attention (keys and values from the encoder's output)."""
    return Attention.forward if ctx.cross else Attention._self_projections


CATALOGUE: dict[str, Entry] = {
    "tokens": Entry(
        _fixed("t"),
        _fixed("tokens"),
        _fixed("cut the text into tokens"),
        _fixed("The text is cut into pieces called tokens, and each piece gets a number: its id."),
        lambda ctx: ModelInputs.ids,
    ),
    "embed.tokens": Entry(
        _fixed("t d"),
        _fixed("token embedding E[T]"),
        _fixed("look up each token's vector"),
        _fixed(
            "Each token is looked up in a big table and becomes a long list of numbers (a vector) that stands for it."
        ),
        lambda ctx: Embeddings.forward,
    ),
    "embed.positions": Entry(
        _fixed("t d"),
        lambda ctx: POSITION_NAMES[ctx.config.positions],
        _fixed("add where each token stands"),
        _fixed("A vector for each position is added, so the model knows the order of the tokens."),
        lambda ctx: Embeddings.forward,
    ),
    "embed.out": Entry(
        _fixed("t d"),
        _fixed("the stream entering block 0"),
        _fixed("the residual stream begins"),
        _embed_out_words,
        lambda ctx: Embeddings.forward,
    ),
    "attn.in": Entry(
        _fixed("t d"),
        lambda ctx: _self_or_cross(ctx, f"input ({ctx.norm} first)" if ctx.pre else "input"),
        lambda ctx: "normalize, then attention" if ctx.pre else "into attention",
        _attention_in_words,
        lambda ctx: Block._sublayer,
    ),
    "attn.q": Entry(
        _fixed("h t e"),
        _q_title,
        _fixed("queries: what each token looks for"),
        lambda ctx: f'Each {_who(ctx, True)}token makes a query: a question, "what am I looking for?"',
        _projections,
    ),
    "attn.k": Entry(
        _kv_shape,
        lambda ctx: f"keys K ({ctx.kind})",
        _fixed("keys: what each token offers"),
        lambda ctx: f'Each {_who(ctx, False)}token makes a key: a label, "this is what I contain".',
        _projections,
    ),
    "attn.v": Entry(
        _kv_shape,
        lambda ctx: f"values V ({ctx.kind})",
        _fixed("values: what each token passes on"),
        lambda ctx: (
            f"Each {_who(ctx, False)}token makes a value: what it passes on when another token looks at it."
        ),
        _projections,
    ),
    "attn.scores": Entry(
        _fixed("h t s"),
        _scores_title,
        _fixed("match every query with every key"),
        _fixed("Every query is compared with every key: a high score means a good match."),
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.mask": Entry(_fixed("t s"), _mask_title, _mask_plain, _mask_words, lambda ctx: build_mask),
    "attn.pattern": Entry(
        _fixed("h t s"),
        _fixed("softmax: attention weights"),
        _fixed("attention weights: who looks at whom"),
        _fixed(
            "The scores become weights that add up to 1 for each token: how much it looks at each other token."
        ),
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.z": Entry(
        _fixed("h t e"),
        _fixed("weighted values: pattern @ V"),
        _fixed("mix the values by those weights"),
        _fixed("Each token collects the values of the tokens it looks at, mixed by those weights."),
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.out": Entry(
        _fixed("t d"),
        _fixed("output projection W_O"),
        _fixed("combine the heads"),
        _fixed("The results of the attention heads are combined back into one vector per token."),
        lambda ctx: Attention.forward,
    ),
    "resid_mid": Entry(
        _fixed("t d"),
        _add_title,
        _add_plain,
        lambda ctx: (
            "Attention's result is added to the stream: the token's vector now carries context."
            + _then_normalized(ctx)
        ),
        lambda ctx: Block.forward,
    ),
    "resid_cross": Entry(
        _fixed("t d"),
        _add_title,
        _add_plain,
        lambda ctx: "What the decoder read from the encoder is added to the stream." + _then_normalized(ctx),
        lambda ctx: Block.forward,
    ),
    "ffn.in": Entry(
        _fixed("t d"),
        lambda ctx: f"feed-forward input ({ctx.norm} first)" if ctx.pre else "feed-forward input",
        lambda ctx: "normalize, then the feed-forward layer" if ctx.pre else "into the feed-forward layer",
        lambda ctx: (
            (f"The vectors are {NORM_WORDS}, then " if ctx.pre else "Now ")
            + "each token is processed on its own by a small neural network: the feed-forward layer."
        ),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.hidden": Entry(
        _fixed("t f"),
        _ffn_hidden_title,
        _fixed("stretch each vector"),
        _fixed("The vector is stretched into a much longer one…"),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.act": Entry(
        _fixed("t f"),
        _ffn_act_title,
        _fixed("switch parts on and off"),
        _fixed("…a non-linear function switches parts of it on and off…"),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.out": Entry(
        _fixed("t d"),
        _fixed("W_down: back to d_model"),
        _fixed("squeeze it back"),
        _fixed("…and it is squeezed back to the stream's size."),
        lambda ctx: FeedForward.forward,
    ),
    "resid_post": Entry(
        _fixed("t d"),
        _add_title,
        _add_plain,
        lambda ctx: (
            f"The feed-forward result is added to the stream.{_then_normalized(ctx)} The block is done; the next block repeats it."
        ),
        lambda ctx: Block.forward,
    ),
    "final_norm": Entry(
        _fixed("t d"),
        lambda ctx: f"final {ctx.norm}",
        _fixed("normalize one last time"),
        _fixed("After the last block, the vectors are normalized one last time."),
        lambda ctx: TransformerStack.forward,
    ),
    "logits": Entry(
        _fixed("t v"),
        _logits_title,
        _fixed("score every token in the vocabulary"),
        _logits_words,
        lambda ctx: TransformerModel.unembed,
    ),
    "classifier.pooled": Entry(
        _fixed("d"),
        lambda ctx: f"pooled: {POOLING_NAMES[ctx.config.classifier_pooling]}",
        _fixed("one vector for the whole text"),
        _classifier_pooled_words,
        lambda ctx: pool_sequence,
    ),
    "classifier.logits": Entry(
        _fixed("c"),
        _fixed("class logits: W_c pooled + b_c"),
        _fixed("score each label"),
        lambda ctx: (
            f"That vector gets one score per label ({', '.join(ctx.config.labels)}); the softmax turns the scores into probabilities."
        ),
        lambda ctx: ClassificationHead.forward,
    ),
    "sentence.pooled": Entry(
        _fixed("d"),
        lambda ctx: f"pooled: {POOLING_NAMES[ctx.config.sentence_pooling]}",
        _fixed("one vector for the whole text"),
        _sentence_pooled_words,
        lambda ctx: pool_sequence,
    ),
    "sentence.vector": Entry(
        _fixed("d"),
        _fixed("the sentence vector: pooled / ‖pooled‖"),
        _fixed("scale it to length 1: the sentence vector"),
        _fixed(
            "That vector is scaled to length 1: the sentence vector. Texts with a similar meaning get vectors that point the same way."
        ),
        lambda ctx: SentenceHead.forward,
    ),
}


def code_location(target: Any) -> dict[str, Any]:
    """Where ``target`` (a function or class) is defined: {"file" (relative to the repository
    root when it is inside the package), "name" (its qualified name), "line"}."""
    target = inspect.unwrap(target)
    _, line = inspect.getsourcelines(target)
    path = Path(inspect.getsourcefile(target)).resolve()
    shown = (
        path.relative_to(PACKAGE_ROOT.parent) if path.is_relative_to(PACKAGE_ROOT.parent) else Path(path.name)
    )
    return {"file": shown.as_posix(), "name": target.__qualname__, "line": line}


def describe(kind: str, ctx: Context) -> dict[str, Any]:
    """The catalogue's fields for a step of ``kind`` in ``ctx``: title, plain, words, shape,
    equation, code."""
    entry = CATALOGUE[kind]
    return {
        "title": entry.title(ctx),
        "plain": entry.plain(ctx),
        "words": entry.words(ctx),
        "shape": entry.shape(ctx),
        "equation": entry.equation or kind,
        "code": code_location(entry.code(ctx)),
    }
