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
cross-attention). A vision transformer's input and embedding steps mean something else (an image
cut into patches, [CLS], a position per patch): `VISION` holds them (`stage_vision.py`), read for
a model whose config says ``vision``. `architecture.stages(net)` applies it to the model's own
``hook_points``; the payload carries the result, and the walk, the overview, the tour, the equations and the
lessons' links read it there.
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
from glassformer.workshop import stage_words as words
from glassformer.workshop.stage_vision import VISION_STEPS
from glassformer.workshop.stage_words import POOLING_NAMES, POSITION_NAMES, Context, Words

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # glassformer/


@dataclass(frozen=True)
class Entry:
    shape: Callable[[Context], str]
    title: Words
    plain: Words
    words: Words
    code: Callable[[Context], Any]  # the function or class that computes the step
    equation: str = ""  # the template's name in equations.js ("" : the kind itself)


def _projections(ctx: Context):
    """Where q, k and v are made: one fused projection for self-attention, Attention.forward
    for cross-attention (keys and values from the encoder's output)."""
    return Attention.forward if ctx.cross else Attention._self_projections


CATALOGUE: dict[str, Entry] = {
    "tokens": Entry(
        words.fixed("t"),
        words.fixed("tokens"),
        words.fixed("cut the text into tokens"),
        words.fixed("The text is cut into pieces called tokens, and each piece gets a number: its id."),
        lambda ctx: ModelInputs.ids,
    ),
    "embed.tokens": Entry(
        words.fixed("t d"),
        words.fixed("token embedding E[T]"),
        words.fixed("look up each token's vector"),
        words.fixed(
            "Each token is looked up in a big table and becomes a long list of numbers (a "
            "vector) that stands for it."
        ),
        lambda ctx: Embeddings.forward,
    ),
    "embed.positions": Entry(
        words.fixed("t d"),
        lambda ctx: POSITION_NAMES[ctx.config.positions],
        words.fixed("add where each token stands"),
        words.fixed("A vector for each position is added, so the model knows the order of the tokens."),
        lambda ctx: Embeddings.forward,
    ),
    "embed.out": Entry(
        words.fixed("t d"),
        words.fixed("the stream entering block 0"),
        words.fixed("the residual stream begins"),
        words.embed_out_words,
        lambda ctx: Embeddings.forward,
    ),
    "attn.in": Entry(
        words.fixed("t d"),
        lambda ctx: words.self_or_cross(ctx, f"input ({ctx.norm} first)" if ctx.pre else "input"),
        lambda ctx: "normalize, then attention" if ctx.pre else "into attention",
        words.attention_in_words,
        lambda ctx: Block._sublayer,
    ),
    "attn.q": Entry(
        words.fixed("h t e"),
        words.q_title,
        words.fixed("queries: what each token looks for"),
        lambda ctx: f'Each {words.who(ctx, True)}token makes a query: a question, "what am I looking for?"',
        _projections,
    ),
    "attn.k": Entry(
        words.kv_shape,
        words.k_title,
        words.fixed("keys: what each token offers"),
        lambda ctx: f'Each {words.who(ctx, False)}token makes a key: a label, "this is what I contain".',
        _projections,
    ),
    "attn.v": Entry(
        words.kv_shape,
        lambda ctx: f"values V ({ctx.kind})",
        words.fixed("values: what each token passes on"),
        lambda ctx: (
            f"Each {words.who(ctx, False)}token makes a value: what it passes on when another "
            "token looks at it."
        ),
        _projections,
    ),
    "attn.scores": Entry(
        words.fixed("h t s"),
        words.scores_title,
        words.fixed("match every query with every key"),
        words.fixed("Every query is compared with every key: a high score means a good match."),
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.capped": Entry(
        words.fixed("h t s"),
        words.capped_title,
        words.fixed("keep every score in range"),
        words.capped_words,
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.mask": Entry(
        words.fixed("t s"), words.mask_title, words.mask_plain, words.mask_words, lambda ctx: build_mask
    ),
    "attn.pattern": Entry(
        words.fixed("h t s"),
        words.fixed("softmax: attention weights"),
        words.fixed("attention weights: who looks at whom"),
        words.fixed(
            "The scores become weights that add up to 1 for each token: how much it looks at "
            "each other token."
        ),
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.z": Entry(
        words.fixed("h t e"),
        words.fixed("weighted values: pattern @ V"),
        words.fixed("mix the values by those weights"),
        words.fixed("Each token collects the values of the tokens it looks at, mixed by those weights."),
        lambda ctx: Attention.explicit_attention,
    ),
    "attn.out": Entry(
        words.fixed("t d"),
        words.fixed("output projection W_O"),
        words.fixed("combine the heads"),
        words.fixed("The results of the attention heads are combined back into one vector per token."),
        lambda ctx: Attention.forward,
    ),
    "attn.post_norm": Entry(
        words.fixed("t d"),
        lambda ctx: words.post_norm_title(ctx, "cross-attention" if ctx.cross else "attention"),
        words.fixed("normalize what attention found"),
        lambda ctx: words.post_norm_words(ctx, "Cross-attention" if ctx.cross else "Attention"),
        lambda ctx: Block._sublayer,
    ),
    "resid_mid": Entry(
        words.fixed("t d"),
        words.add_title,
        words.add_plain,
        lambda ctx: (
            "Attention's result is added to the stream: the token's vector now carries context."
            + words.then_normalized(ctx)
        ),
        lambda ctx: Block.forward,
    ),
    "resid_cross": Entry(
        words.fixed("t d"),
        words.add_title,
        words.add_plain,
        lambda ctx: (
            "What the decoder read from the encoder is added to the stream." + words.then_normalized(ctx)
        ),
        lambda ctx: Block.forward,
    ),
    "ffn.in": Entry(
        words.fixed("t d"),
        lambda ctx: f"feed-forward input ({ctx.norm} first)" if ctx.pre else "feed-forward input",
        lambda ctx: "normalize, then the feed-forward layer" if ctx.pre else "into the feed-forward layer",
        lambda ctx: (
            (words.PARALLEL_WORDS if ctx.config.parallel_residual else "")
            + (f"The vectors are {words.NORM_WORDS}, then " if ctx.pre else "Now ")
            + "each token is processed on its own by a small neural network: the feed-forward layer."
        ),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.hidden": Entry(
        words.fixed("t f"),
        words.ffn_hidden_title,
        words.fixed("stretch each vector"),
        words.fixed("The vector is stretched into a much longer one…"),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.act": Entry(
        words.fixed("t f"),
        words.ffn_act_title,
        words.fixed("switch parts on and off"),
        words.fixed("…a non-linear function switches parts of it on and off…"),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.out": Entry(
        words.fixed("t d"),
        words.fixed("W_down: back to d_model"),
        words.fixed("squeeze it back"),
        words.fixed("…and it is squeezed back to the stream's size."),
        lambda ctx: FeedForward.forward,
    ),
    "ffn.router_logits": Entry(
        words.fixed("t n"),
        words.fixed("router logits: x W_router"),
        words.fixed("score every expert"),
        words.router_words,
        lambda ctx: MoEFeedForward.forward,
    ),
    "ffn.router_probs": Entry(
        words.fixed("t n"),
        lambda ctx: f"router scores: {ctx.config.router}(logits)",
        words.fixed("turn the scores into shares"),
        words.router_probs_words,
        lambda ctx: router_scores,
    ),
    "ffn.experts": Entry(
        words.fixed("t k"),
        lambda ctx: f"the top-{ctx.config.experts_per_token} experts of each token",
        words.fixed("pick the best experts"),
        lambda ctx: (
            f"Each token picks the {ctx.config.experts_per_token} experts with the highest scores; "
            f"the other {ctx.config.n_experts - ctx.config.experts_per_token} do no work for it."
        ),
        lambda ctx: MoEFeedForward.forward,
    ),
    "ffn.expert_weights": Entry(
        words.fixed("t k"),
        words.expert_weights_title,
        words.fixed("how much each chosen expert counts"),
        words.expert_weights_words,
        lambda ctx: MoEFeedForward.forward,
    ),
    "ffn.expert_out": Entry(
        words.fixed("k t d"),
        words.fixed("each chosen expert's output FFN_E(x)"),
        words.fixed("each chosen expert does its work"),
        words.fixed(
            "Each chosen expert, a feed-forward layer of its own, processes the token: one "
            "vector per expert the token picked."
        ),
        lambda ctx: MoEFeedForward._run_experts,
    ),
    "ffn.shared_out": Entry(
        words.fixed("t d"),
        words.fixed("the shared expert: sigmoid(x w_s) FFN_shared(x)"),
        words.fixed("the expert every token uses"),
        words.fixed(
            "One more expert works on every token, and a gate between 0 and 1 decides how much "
            "of its answer to add."
        ),
        lambda ctx: MoEFeedForward.forward,
    ),
    "ffn.post_norm": Entry(
        words.fixed("t d"),
        lambda ctx: words.post_norm_title(ctx, "feed-forward"),
        words.fixed("normalize what the feed-forward layer made"),
        lambda ctx: words.post_norm_words(ctx, "The feed-forward layer"),
        lambda ctx: Block._sublayer,
    ),
    "resid_post": Entry(
        words.fixed("t d"),
        words.add_title,
        words.add_plain,
        lambda ctx: (
            f"The feed-forward result is added to the stream.{words.then_normalized(ctx)} The "
            "block is done; the next block repeats it."
        ),
        lambda ctx: Block.forward,
    ),
    "final_norm": Entry(
        words.fixed("t d"),
        lambda ctx: f"final {ctx.norm}",
        words.fixed("normalize one last time"),
        words.fixed("After the last block, the vectors are normalized one last time."),
        lambda ctx: TransformerStack.forward,
    ),
    "logits_raw": Entry(
        words.fixed("t v"),
        words.fixed("raw logits: the LM head, before the soft-cap"),
        words.fixed("score every token in the vocabulary"),
        words.logits_raw_words,
        lambda ctx: TransformerModel.head_logits,
    ),
    "logits": Entry(
        words.fixed("t v"),
        words.logits_title,
        words.fixed("score every token in the vocabulary"),
        words.logits_words,
        lambda ctx: TransformerModel.unembed,
    ),
    "classifier.pooled": Entry(
        words.fixed("d"),
        lambda ctx: f"pooled: {POOLING_NAMES[ctx.config.classifier_pooling]}",
        lambda ctx: f"one vector for the whole {'image' if ctx.config.vision else 'text'}",
        words.classifier_pooled_words,
        lambda ctx: pool_sequence,
    ),
    "classifier.logits": Entry(
        words.fixed("c"),
        words.fixed("class logits: W_c pooled + b_c"),
        words.fixed("score each label"),
        lambda ctx: (
            f"That vector gets one score per label ({', '.join(ctx.config.labels)}); the "
            "softmax turns the scores into probabilities."
        ),
        lambda ctx: ClassificationHead.forward,
    ),
    "sentence.pooled": Entry(
        words.fixed("d"),
        lambda ctx: f"pooled: {POOLING_NAMES[ctx.config.sentence_pooling]}",
        words.fixed("one vector for the whole text"),
        words.sentence_pooled_words,
        lambda ctx: pool_sequence,
    ),
    "sentence.vector": Entry(
        words.fixed("d"),
        words.fixed("the sentence vector: pooled / ‖pooled‖"),
        words.fixed("scale it to length 1: the sentence vector"),
        words.fixed(
            "That vector is scaled to length 1: the sentence vector. Texts with a similar "
            "meaning get vectors that point the same way."
        ),
        lambda ctx: SentenceHead.forward,
    ),
}


# a vision transformer's input and embedding steps (`stage_vision.py`), read for a model whose
# config says vision
VISION: dict[str, Entry] = {kind: Entry(*fields) for kind, fields in VISION_STEPS.items()}


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
