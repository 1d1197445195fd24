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

from glassformer.config import ModelConfig

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
        # the stop of the blocks after the first: {others} of them
        "others_title": "the other {others} blocks do the same",
        "others": (
            "The other {others} blocks do the same: each reads the stream, lets the tokens look at "
            "each other, runs its feed-forward layer, and adds what it found. Their weights differ, "
            "so each block adds something else. The chart shows how the stream grows, block after "
            "block; the picture of the whole model above opens any block."
        ),
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
