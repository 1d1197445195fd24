"""The trace contract in one place: what each kind of step of a forward pass is, for the page.

A step's *kind* is its hook-point name without the stack and block: ``blocks.3.attn.q`` and
``decoder.blocks.0.cross_attn.q`` are both ``attn.q``. For each kind the catalogue holds

    title     what it computes, in the maths' words ("Q K^T / sqrt(d_head)")
    plain     a beginner's name for it ("match every query with every key")
    words     a beginner's sentence about it
    shape     the letters of its axes (t tokens, s keys, h heads, g key/value heads, e d_head,
              d d_model, f d_ff, v vocabulary, c classes)
    equation  the name of its equation template (static/js/equations/equations.js)
    code      the function that computes it: its file, name and first line, found with `inspect`

each written once and worded for the model at hand (`Context`: its config, which stack, whether
cross-attention). A vision transformer's input and embedding steps mean something else (an image
cut into patches, [CLS], a position per patch): `VISION` holds them (`stage_vision.py`), read for
a model whose config says ``vision``. `architecture.stages(net)` applies it to the model's own
``hook_points``; the walk, the overview, the tour, the equations and the lessons read it in the payload.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from glassformer.nn.moe import MoEFeedForward, router_scores
from glassformer.workshop.walk import stage_words as words
from glassformer.workshop.walk.stage_vision import VISION_STEPS
from glassformer.workshop.walk.stage_words import POOLING_NAMES, POSITION_NAMES, Context, Words, fixed

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # glassformer/


@dataclass(frozen=True, init=False)
class Entry:
    """One kind of step: ``shape``, ``title``, ``plain``, ``words`` a string or a function of the
    `Context`; ``code`` what computes it, or ``code_for`` a function of the context giving it;
    ``equation`` its template in equations.js ("": the kind). Read, each is a function of ctx."""

    shape: Words
    title: Words
    plain: Words
    words: Words
    code: Callable[[Context], Any]
    equation: str

    def __init__(
        self,
        *,
        shape: str | Words,
        title: str | Words,
        plain: str | Words,
        words: str | Words,
        code: Any = None,
        code_for: Callable[[Context], Any] | None = None,
        equation: str = "",
    ) -> None:
        if (code is None) == (code_for is None):
            raise TypeError("an Entry has one of code and code_for")
        texts = {"shape": shape, "title": title, "plain": plain, "words": words}
        self.__dict__.update({name: fixed(v) if isinstance(v, str) else v for name, v in texts.items()})
        self.__dict__.update(code=code_for or (lambda ctx: code), equation=equation)  # frozen from here


def _projections(ctx: Context):
    """Where q, k and v are made: one fused projection for self-attention, Attention.forward
    for cross-attention (keys and values from the encoder's output)."""
    return Attention.forward if ctx.cross else Attention._self_projections


CATALOGUE: dict[str, Entry] = {
    "tokens": Entry(
        shape="t",
        title="tokens",
        plain="cut the text into tokens",
        words="The text is cut into pieces called tokens, and each piece gets a number: its id.",
        code=ModelInputs.ids,
    ),
    "embed.tokens": Entry(
        shape="t d",
        title="token embedding E[T]",
        plain="look up each token's vector",
        words="Each token is looked up in a big table and becomes a long list of numbers (a "
        "vector) that stands for it.",
        code=Embeddings.forward,
    ),
    "embed.positions": Entry(
        shape="t d",
        title=lambda ctx: POSITION_NAMES[ctx.config.positions],
        plain="add where each token stands",
        words="A vector for each position is added, so the model knows the order of the tokens.",
        code=Embeddings.forward,
    ),
    "embed.out": Entry(
        shape="t d",
        title="the stream entering block 0",
        plain="the residual stream begins",
        words=words.embed_out_words,
        code=Embeddings.forward,
    ),
    "attn.in": Entry(
        shape="t d",
        title=lambda ctx: words.self_or_cross(ctx, f"input ({ctx.norm} first)" if ctx.pre else "input"),
        plain=lambda ctx: "normalize, then attention" if ctx.pre else "into attention",
        words=words.attention_in_words,
        code=Block._sublayer,
    ),
    "attn.q": Entry(
        shape="h t e",
        title=words.q_title,
        plain="queries: what each token looks for",
        words=lambda ctx: (
            f'Each {words.who(ctx, True)}token makes a query: a question, "what am I looking for?"'
        ),
        code_for=_projections,
    ),
    "attn.k": Entry(
        shape=words.kv_shape,
        title=words.k_title,
        plain="keys: what each token offers",
        words=lambda ctx: (
            f'Each {words.who(ctx, False)}token makes a key: a label, "this is what I contain".'
        ),
        code_for=_projections,
    ),
    "attn.v": Entry(
        shape=words.kv_shape,
        title=lambda ctx: f"values V ({ctx.kind})",
        plain="values: what each token passes on",
        words=lambda ctx: (
            f"Each {words.who(ctx, False)}token makes a value: what it passes on when another "
            "token looks at it."
        ),
        code_for=_projections,
    ),
    "attn.scores": Entry(
        shape="h t s",
        title=words.scores_title,
        plain="match every query with every key",
        words="Every query is compared with every key: a high score means a good match.",
        code=Attention.explicit_attention,
    ),
    "attn.capped": Entry(
        shape="h t s",
        title=words.capped_title,
        plain="keep every score in range",
        words=words.capped_words,
        code=Attention.explicit_attention,
    ),
    "attn.mask": Entry(
        shape="t s", title=words.mask_title, plain=words.mask_plain, words=words.mask_words, code=build_mask
    ),
    "attn.pattern": Entry(
        shape="h t s",
        title="softmax: attention weights",
        plain="attention weights: who looks at whom",
        words="The scores become weights that add up to 1 for each token: how much it looks at "
        "each other token.",
        code=Attention.explicit_attention,
    ),
    "attn.z": Entry(
        shape="h t e",
        title="weighted values: pattern @ V",
        plain="mix the values by those weights",
        words="Each token collects the values of the tokens it looks at, mixed by those weights.",
        code=Attention.explicit_attention,
    ),
    "attn.out": Entry(
        shape="t d",
        title="output projection W_O",
        plain="combine the heads",
        words="The results of the attention heads are combined back into one vector per token.",
        code=Attention.forward,
    ),
    "attn.post_norm": Entry(
        shape="t d",
        title=lambda ctx: words.post_norm_title(ctx, "cross-attention" if ctx.cross else "attention"),
        plain="normalize what attention found",
        words=lambda ctx: words.post_norm_words(ctx, "Cross-attention" if ctx.cross else "Attention"),
        code=Block._sublayer,
    ),
    "resid_mid": Entry(
        shape="t d",
        title=words.add_title,
        plain=words.add_plain,
        words=lambda ctx: (
            "Attention's result is added to the stream: the token's vector now carries context."
            + words.then_normalized(ctx)
        ),
        code=Block.forward,
    ),
    "resid_cross": Entry(
        shape="t d",
        title=words.add_title,
        plain=words.add_plain,
        words=lambda ctx: (
            "What the decoder read from the encoder is added to the stream." + words.then_normalized(ctx)
        ),
        code=Block.forward,
    ),
    "ffn.in": Entry(
        shape="t d",
        title=lambda ctx: f"feed-forward input ({ctx.norm} first)" if ctx.pre else "feed-forward input",
        plain=lambda ctx: (
            "normalize, then the feed-forward layer" if ctx.pre else "into the feed-forward layer"
        ),
        words=lambda ctx: (
            (words.PARALLEL_WORDS if ctx.config.parallel_residual else "")
            + (f"The vectors are {words.NORM_WORDS}, then " if ctx.pre else "Now ")
            + "each token is processed on its own by a small neural network: the feed-forward layer."
        ),
        code=FeedForward.forward,
    ),
    "ffn.hidden": Entry(
        shape="t f",
        title=words.ffn_hidden_title,
        plain="stretch each vector",
        words="The vector is stretched into a much longer one…",
        code=FeedForward.forward,
    ),
    "ffn.act": Entry(
        shape="t f",
        title=words.ffn_act_title,
        plain="switch parts on and off",
        words="…a non-linear function switches parts of it on and off…",
        code=FeedForward.forward,
    ),
    "ffn.out": Entry(
        shape="t d",
        title="W_down: back to d_model",
        plain="squeeze it back",
        words="…and it is squeezed back to the stream's size.",
        code=FeedForward.forward,
    ),
    "ffn.router_logits": Entry(
        shape="t n",
        title="router logits: x W_router",
        plain="score every expert",
        words=words.router_words,
        code=MoEFeedForward.forward,
    ),
    "ffn.router_probs": Entry(
        shape="t n",
        title=lambda ctx: f"router scores: {ctx.config.router}(logits)",
        plain="turn the scores into shares",
        words=words.router_probs_words,
        code=router_scores,
    ),
    "ffn.experts": Entry(
        shape="t k",
        title=lambda ctx: f"the top-{ctx.config.experts_per_token} experts of each token",
        plain="pick the best experts",
        words=lambda ctx: (
            f"Each token picks the {ctx.config.experts_per_token} experts with the highest scores; "
            f"the other {ctx.config.n_experts - ctx.config.experts_per_token} do no work for it."
        ),
        code=MoEFeedForward.forward,
    ),
    "ffn.expert_weights": Entry(
        shape="t k",
        title=words.expert_weights_title,
        plain="how much each chosen expert counts",
        words=words.expert_weights_words,
        code=MoEFeedForward.forward,
    ),
    "ffn.expert_out": Entry(
        shape="k t d",
        title="each chosen expert's output FFN_E(x)",
        plain="each chosen expert does its work",
        words="Each chosen expert, a feed-forward layer of its own, processes the token: one "
        "vector per expert the token picked.",
        code=MoEFeedForward._run_experts,
    ),
    "ffn.shared_out": Entry(
        shape="t d",
        title="the shared expert: sigmoid(x w_s) FFN_shared(x)",
        plain="the expert every token uses",
        words="One more expert works on every token, and a gate between 0 and 1 decides how much "
        "of its answer to add.",
        code=MoEFeedForward.forward,
    ),
    "ffn.post_norm": Entry(
        shape="t d",
        title=lambda ctx: words.post_norm_title(ctx, "feed-forward"),
        plain="normalize what the feed-forward layer made",
        words=lambda ctx: words.post_norm_words(ctx, "The feed-forward layer"),
        code=Block._sublayer,
    ),
    "resid_post": Entry(
        shape="t d",
        title=words.add_title,
        plain=words.add_plain,
        words=lambda ctx: (
            f"The feed-forward result is added to the stream.{words.then_normalized(ctx)} The "
            "block is done; the next block repeats it."
        ),
        code=Block.forward,
    ),
    "final_norm": Entry(
        shape="t d",
        title=lambda ctx: f"final {ctx.norm}",
        plain="normalize one last time",
        words="After the last block, the vectors are normalized one last time.",
        code=TransformerStack.forward,
    ),
    "logits_raw": Entry(
        shape="t v",
        title="raw logits: the LM head, before the soft-cap",
        plain="score every token in the vocabulary",
        words=words.logits_raw_words,
        code=TransformerModel.head_logits,
    ),
    "logits": Entry(
        shape="t v",
        title=words.logits_title,
        plain="score every token in the vocabulary",
        words=words.logits_words,
        code=TransformerModel.unembed,
    ),
    "classifier.pooled": Entry(
        shape="d",
        title=lambda ctx: f"pooled: {POOLING_NAMES[ctx.config.classifier_pooling]}",
        plain=lambda ctx: f"one vector for the whole {'image' if ctx.config.vision else 'text'}",
        words=words.classifier_pooled_words,
        code=pool_sequence,
    ),
    "classifier.logits": Entry(
        shape="c",
        title="class logits: W_c pooled + b_c",
        plain="score each label",
        words=lambda ctx: (
            f"That vector gets one score per label ({', '.join(ctx.config.labels)}); the "
            "softmax turns the scores into probabilities."
        ),
        code=ClassificationHead.forward,
    ),
    "sentence.pooled": Entry(
        shape="d",
        title=lambda ctx: f"pooled: {POOLING_NAMES[ctx.config.sentence_pooling]}",
        plain="one vector for the whole text",
        words=words.sentence_pooled_words,
        code=pool_sequence,
    ),
    "sentence.vector": Entry(
        shape="d",
        title="the sentence vector: pooled / ‖pooled‖",
        plain="scale it to length 1: the sentence vector",
        words="That vector is scaled to length 1: the sentence vector. Texts with a similar "
        "meaning get vectors that point the same way.",
        code=SentenceHead.forward,
    ),
}


# a vision transformer's input and embedding steps (`stage_vision.py`), read for a model whose
# config says vision
VISION: dict[str, Entry] = {kind: Entry(**fields) for kind, fields in VISION_STEPS.items()}


@functools.cache  # reading the source file is slow: a model's 455 steps name a dozen functions
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
    entry = VISION.get(kind) if ctx.config.vision else None
    entry = entry or CATALOGUE[kind]
    return {
        "title": entry.title(ctx),
        "plain": entry.plain(ctx),
        "words": entry.words(ctx),
        "shape": entry.shape(ctx),
        "equation": entry.equation or kind,
        "code": code_location(entry.code(ctx)),
    }
