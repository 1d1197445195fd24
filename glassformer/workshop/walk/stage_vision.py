"""A vision transformer's steps, for the stage catalogue (`stage_catalogue.VISION`): its input and
its embedding mean something else than a text model's. The input is an image cut into P x P
patches, each patch a token; the embedding multiplies each flattened patch by one matrix
W_patch (a strided convolution), puts [CLS] in front and adds a learned vector per place in
the grid (`glassformer/nn/patches.py`). Each step's fields are the catalogue's `Entry`'s:
shape, title, plain name, words, code, equation template (`static/js/equations/equations_vision.js`).
"""

from __future__ import annotations

from glassformer.inputs import ModelInputs
from glassformer.nn.patches import PatchEmbedding
from glassformer.nn.positions import LearnedPositions
from glassformer.workshop.walk.stage_words import Context


def _grid(ctx: Context) -> tuple[int, int, int]:
    """The image's side H, the patch side P, and the patches along a side H / P."""
    c = ctx.config
    return c.image_size, c.patch_size, c.image_size // c.patch_size


def image_title(ctx: Context) -> str:
    side, p, across = _grid(ctx)
    pixels = f"{ctx.config.n_channels} x {side} x {side} pixels"
    return f"the image: {pixels} cut into {across} x {across} patches of {p} x {p}"


def image_words(ctx: Context) -> str:
    side, p, across = _grid(ctx)
    return (
        f"The image ({side} x {side} pixels) is cut into a grid of {across} x {across} small squares of "
        f"{p} x {p} pixels, the patches. Each patch becomes one token, as a word does in a text, and "
        f"one more token, [CLS], is put in front: {ctx.config.n_patches + 1} tokens."
    )


def patches_title(ctx: Context) -> str:
    p = ctx.config.patch_size
    return f"patch embedding: flatten(patch) W_patch + b (a {p} x {p} convolution, stride {p})"


def patches_words(ctx: Context) -> str:
    c = ctx.config
    numbers = c.n_channels * c.patch_size**2
    return (
        f"Each patch's {numbers} pixel values are multiplied by one learned matrix, W_patch, the same for "
        f"every patch: each patch becomes a vector of {c.d_model} numbers. This is a convolution whose "
        f"{c.patch_size} x {c.patch_size} window jumps {c.patch_size} pixels at a time, so its windows tile "
        "the image without overlapping."
    )


VISION_TOKENS_WORDS = (
    "A learned vector, [CLS], is put in front of the patches. It stands for no part of the image: "
    "through attention it gathers from every patch, and the classifier reads its final vector."
)
VISION_POSITIONS_WORDS = (
    "A learned vector for each position is added: one for [CLS] and one for each place in the grid, "
    "so the model knows where in the image each patch comes from."
)
VISION_STREAM_WORDS = (
    "This is the start of the residual stream: one vector per token ([CLS] and each patch), which every "
    "block reads and adds to."
)


VISION_STEPS = {  # kind -> the Entry's fields (stage_catalogue.Entry)
    "tokens": dict(
        shape="t",
        title=image_title,
        plain="cut the image into patches",
        words=image_words,
        code=ModelInputs.pixels,
        equation="vit.tokens",
    ),
    "embed.patches": dict(
        shape="n d",
        title=patches_title,
        plain="turn each patch into a vector",
        words=patches_words,
        code=PatchEmbedding.forward,
        equation="vit.embed.patches",
    ),
    "embed.tokens": dict(
        shape="t d",
        title="[CLS] + the patches: the tokens",
        plain="put [CLS] in front of the patches",
        words=VISION_TOKENS_WORDS,
        code=PatchEmbedding.forward,
        equation="vit.embed.tokens",
    ),
    "embed.positions": dict(
        shape="t d",
        title="learned position vectors E_pos: one per place in the grid",
        plain="add where each patch sits",
        words=VISION_POSITIONS_WORDS,
        code=LearnedPositions.forward,
        equation="vit.embed.positions",
    ),
    "embed.out": dict(
        shape="t d",
        title="z_0 = [x_cls; patches] + E_pos: the stream entering block 0",
        plain="the residual stream begins",
        words=VISION_STREAM_WORDS,
        code=PatchEmbedding.forward,
        equation="vit.embed.out",
    ),
}
