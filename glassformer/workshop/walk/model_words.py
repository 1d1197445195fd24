"""The model and the beginner's tour in plain words: the prose the page shows beside the
diagram (static/js/panels/architecture.js) and along the tour (static/js/walk/tour.js), kept here with the
stage catalogue's words (`stage_words.py`) so that the workshop's words have one home.

`model_words(config)` travels in the walk payload's ``architecture`` (``architecture.summary``):
what this model is, its blocks, where its norms sit. `tour_words(config)` is the payload's
``tour``: the tour's sentences, sent once per walk. A sentence fixed by the model is written
out whole; one that shows this input's numbers (a norm's sizes, the tokens a sampler kept, the
number of stops) is a template whose ``{fields}`` the page fills.

>>> from glassformer.config import ModelConfig
>>> words = model_words(ModelConfig(family="encoder", norm_placement="post", n_layers=2))
>>> words["plain"].split(":")[0], words["blocks"], words["placement"]
('is an encoder (like BERT)', '2 blocks', 'post-norm: after each residual add')
"""

from __future__ import annotations

import math

from glassformer.config import ModelConfig
from glassformer.workshop.walk.stage_words import attention_kind

FAMILY_WORDS = {  # what each family of text model does, for a beginner
    "decoder": "a decoder (like GPT): it reads the text left to right and predicts the next token",
    "encoder": (
        "an encoder (like BERT): it reads the whole text at once, in both directions, "
        "and makes one vector per token"
    ),
    "encoder_decoder": (
        "an encoder-decoder (like T5): the encoder reads your text, and the decoder writes, "
        "looking back at the encoder through cross-attention"
    ),
}
VISION_WORDS = (
    "a vision transformer (ViT): it cuts an image into small patches, reads them all at once "
    "as tokens, and gives the image a label"
)
PLACEMENT_WORDS = {  # where a block's norms sit (config.norm_placement)
    "pre": "pre-norm: before each sublayer",
    "post": "post-norm: after each residual add",
    "sandwich": "a sandwich: before and after each sublayer",
    "output": "on each sublayer's output, before the add",
}
NORM_HOW = {  # what a norm does to each vector, before its learned weight
    "rmsnorm": "RMSNorm divides each vector by the root of its mean square",
    "layernorm": "LayerNorm subtracts each vector's mean and divides by its spread",
}


def model_words(config: ModelConfig) -> dict[str, str]:
    """This model in words: the beginner's sentence, after the model's name (``plain``: what it
    is, its blocks), the clause of its size (``parameters``, filled by the page from the model's
    entry), and for the facts its blocks (``blocks``) and where its norms sit (``placement``)."""
    model = VISION_WORDS if config.vision else FAMILY_WORDS.get(config.family, config.family)
    blocks = " and ".join(
        f"{stack.layers} {f'{stack.name} ' if stack.name else ''}block{'' if stack.layers == 1 else 's'}"
        for stack in config.stacks
    )
    return {
        "blocks": blocks,
        "placement": PLACEMENT_WORDS.get(config.norm_placement, config.norm_placement),
        "plain": f"is {model}. It has {blocks}, each with attention and a small feed-forward network",
        "parameters": ", and {parameters} numbers (parameters) learned in training",
    }


def tour_words(config: ModelConfig) -> dict[str, str]:
    """The beginner tour's sentences for ``config``; ``{fields}`` are this input's numbers."""
    how = NORM_HOW["rmsnorm" if config.norm == "rmsnorm" else "layernorm"]
    return {
        "intro": (
            "A tour of the forward pass in {stops} stops. "
            "The intermediate and advanced levels show all {steps} steps."
        ),
        "open": "see the numbers",
        "close": "hide the numbers",
        # the stop of the blocks after the first: {others} of them (a stack of two: one, said so)
        "others_title": "the other {others} blocks do the same",
        "others": (
            "The other {others} blocks do the same: each reads the stream, lets the tokens look at "
            "each other, runs its feed-forward layer, and adds what it found. Their weights differ, "
            "so each block adds something else. {trend} The picture of the whole model above opens "
            "any block."
        ),
        "others_title_one": "the other block does the same",
        "others_one": (
            "The other block does the same: it reads the stream, lets the tokens look at each other, "
            "runs its feed-forward layer, and adds what it found. Its weights differ, so it adds "
            "something else. {trend} The picture of the whole model above opens it."
        ),
        # the chart of the stream's mean length after the embedding and each block: its words
        # follow what it shows, first to last (page: a change under STEADY is "steady")
        **_trend_words(config),
        # a norm: the stream's mean length before it and after it
        "norm": (
            f"Why the sizes change: {how}, then multiplies each feature by a learned weight. "
            "The vectors' average length goes from {before} to {after}: the stream may grow large, "
            "but what enters the next layer always has a steady size."
        ),
        "features": (
            "Each token's vector here has {features} numbers, its features. No single feature has "
            "a meaning anyone chose: together they encode what the model has worked out about the "
            "token so far. Open its numbers to see the first ones: orange positive, blue negative."
        ),
        "heads": (
            "Open this stop to see one head at a time: this model has "
            f"{config.n_heads} heads per block, each with its own queries and keys, "
            "so each looks for something else."
        ),
        "stops": stop_words(config),
        # a causal stack's weights, in its attention stop: {ahead}
        "ahead": "; its weights on the tokens after it are 0, as it may not look ahead",
        "logits": (
            f"Every one of the {config.vocab_size:,} tokens gets a score (a logit); the softmax "
            "turns the scores into probabilities. The highest for the next token:"
        ),
        # an MLM encoder's words: at each mask token, or (no mask in the text) at each position
        "masked": "At each {mask} the model's likeliest words:",
        "unmasked": (
            "The likeliest word at the first positions "
            "(with no mask token in the text, the model sees each word itself):"
        ),
        "position": "position {position}: ",
        # the stop after the logits: how the next token was picked
        "sample_title": "pick the next token",
        "greedy": "With temperature 0 the likeliest token is taken.",
        "sampled": (
            "Temperature {temperature}{top_k}{top_p}: {kept} tokens stay possible, "
            "and one is drawn at random by its probability (seed {seed})."
        ),
        "top_k": ", top-k {top_k}",
        "top_p": ", top-p {top_p}",
        "drawn": "The next token: ",
    }


def _trend_words(config: ModelConfig) -> dict[str, str]:
    chart = "The chart shows the stream's average length after the embedding and after each block"
    post = (
        " This model normalizes the stream after each addition (post-norm): each norm's learned "
        "weights, not what the blocks add, set its length."
        if config.norm_after_add
        else ""
    )
    return {
        "grows": f"{chart}: it grows from {{first}} to {{last}}, as every block adds to it.",
        "shrinks": f"{chart}: it shrinks from {{first}} to {{last}}.{post}",
        "steady": f"{chart}: it stays about the same, from {{first}} to {{last}}.{post}",
    }


def stop_words(config: ModelConfig) -> dict[str, str]:
    """What each tour stop's numbers are, in this model's sizes, by the step's kind: the sizes
    the config fixes written out (576 -> 1,536 -> 576, 9 query heads sharing 3 key/value
    heads), this input's as ``{fields}`` the page fills: ``t`` the tokens (queries), ``s`` the
    keys, ``scores`` h x t x s, ``before`` / ``after`` the stream's mean length around a step,
    ``ahead`` a causal stack's words (`tour_words`' ``ahead``) or "".

    >>> from glassformer.config import ModelConfig
    >>> words = stop_words(ModelConfig(d_model=576, d_ff=1536, n_heads=9, n_kv_heads=3, activation="swiglu"))
    >>> words["ffn.out"].split(":")[-1]
    ' 576 → 1,536 → 576.'
    >>> words["attn.k"].split(":")[0]
    'W_K makes 3 keys of 64 numbers for each token (3 × 64 = 192)'
    """
    c = config
    d, h, e, v = f"{c.d_model:,}", c.n_heads, c.d_head, f"{c.vocab_size:,}"
    last = f"{c.vocab_size - 1:,}"
    return {
        "tokens": f"Your text is {{t}} tokens, each an id from 0 to {last} (this model knows {v}).",
        "embed.tokens": (
            f"The table has {v} rows, one per token of the vocabulary, each a vector of {d} numbers: "
            f"your {{t}} tokens take {{t}} of its rows, {{t}} × {d} numbers."
        ),
        "embed.positions": _positions_words(c),
        "embed.out": (
            f"The stream starts as {{t}} vectors of {d} numbers, one per token, and keeps that size to "
            "the end: every block reads it and adds to it."
        ),
        "attn.q": (
            f"W_Q ({d} × {h * e:,}) turns each token's {d} numbers into {h} queries of {e} numbers, "
            f"one per head ({h} × {e} = {h * e:,}): {{t}} tokens × {h} heads × {e}."
        ),
        "attn.k": _keys_words(c),
        "attn.scores": _scores_words(c),
        "attn.pattern": (
            f"Each of the {h} heads gives each token {{s}} weights, one per key, that add up to 1{{ahead}} "
            f"({{scores}} weights in this block)."
        ),
        "attn.out": (
            f"The {h} heads' results, {h} × {e} = {h * e:,} numbers per token, are set side by side "
            f"and multiplied by W_O ({h * e:,} × {d}): one vector of {d} numbers per token again."
        ),
        "resid_mid": _added_words("Attention's", d),
        "resid_cross": _added_words("Cross-attention's", d),
        "resid_post": _added_words("The feed-forward layer's", d),
        **_ffn_words(c),
        **(_classifier_words(c) if c.n_classes else {}),
        "sentence.pooled": f"{{t}} vectors of {d} numbers become one vector of {d} numbers.",
        "sentence.vector": f"Its {d} numbers are divided by the vector's length, so it has length 1.",
    }


def _classifier_words(c: ModelConfig) -> dict[str, str]:
    d, n = f"{c.d_model:,}", c.n_classes
    return {
        "classifier.pooled": f"One vector of {d} numbers now stands for the whole input.",
        "classifier.logits": (
            f"W_c ({d} × {n}) gives {n} scores, one per label; the softmax makes them probabilities "
            "that add up to 1."
        ),
    }


def _positions_words(c: ModelConfig) -> str:
    d = f"{c.d_model:,}"
    made = "learned in training" if c.positions == "learned" else "made of sines and cosines, not learned"
    return (
        f"One vector of {d} numbers for each of the {c.max_seq_len:,} positions this model can read, "
        f"{made}: token i gets position i's vector added, {{t}} × {d} numbers."
    )


def _keys_words(c: ModelConfig) -> str:
    h, g, e = c.n_heads, c.n_kv_heads, c.d_head
    made = f"W_K makes {g} key{'s' if g > 1 else ''} of {e} numbers for each token ({g} × {e} = {g * e:,})"
    kind = attention_kind(c)
    if kind == "MHA":
        return f"{made}: one key per head, as many as the queries. W_V makes the values the same way."
    shared = (
        f"each key serves {h // g} of the {h} query heads (grouped-query attention, GQA)"
        if kind == "GQA"
        else f"the one key serves all {h} query heads (multi-query attention, MQA)"
    )
    return f"{made}: {shared}, so the cache of keys and values is {h // g} times smaller."


def _scores_words(c: ModelConfig) -> str:
    e = c.d_head
    if c.attn_scale is None:
        scaled = f", times 1/√{e} = {1 / math.sqrt(e):.4g}"
    elif c.attn_scale == 1.0:
        scaled = ", not scaled"
    else:
        scaled = f", times {c.attn_scale:g}"
    return (
        f"Each score is a dot product of a query and a key, {e} numbers each{scaled}. Each of the "
        f"{c.n_heads} heads scores each of the {{t}} queries against each of the {{s}} keys: "
        f"{c.n_heads} × {{t}} × {{s}} = {{scores}} scores."
    )


def _added_words(what: str, d: str) -> str:
    return (
        f"{what} {d} numbers per token are added to the stream's {d}, feature by feature: the size "
        "stays the same, and the vectors' average length goes from {before} to {after}."
    )


def _ffn_words(c: ModelConfig) -> dict[str, str]:
    """The feed-forward stops: stretch, switch, squeeze (a mixture's experts: each its own)."""
    d, f = f"{c.d_model:,}", f"{c.d_ff:,}"
    if c.moe:
        k, f = c.experts_per_token, f"{(c.expert_d_ff or c.d_ff):,}"
        return {
            "ffn.out": (
                f"Each of the token's {k} chosen experts takes its {d} numbers to {f} and back to {d}; "
                f"their answers, weighted, are added: {d} numbers per token, the stream's size."
            )
        }
    ratio = f"{c.d_ff / c.d_model:.3g}"
    if c.gated:
        hidden = (
            f"W_gate and W_up, two matrices of {d} × {f}, each stretch a token's {d} numbers to {f} "
            f"({ratio} times as many). Shown here: the gate, x W_gate."
        )
        act = (
            f"{c.activation}(x W_gate) * x W_up: each of the {f} gate numbers, switched smoothly, decides "
            "how much of the matching number of x W_up gets through; near 0 is off."
        )
    else:
        hidden = f"W_up ({d} × {f}) stretches each token's {d} numbers to {f}, {ratio} times as many."
        act = (
            f"{c.activation} works on each of the {f} numbers alone: below 0 it gives (almost) 0, "
            "above 0 it lets the number through."
        )
    squeeze = f"W_down ({f} × {d}) squeezes the {f} numbers back to {d}, the stream's size: {d} → {f} → {d}."
    return {"ffn.hidden": hidden, "ffn.act": act, "ffn.out": squeeze}
