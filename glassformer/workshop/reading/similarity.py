"""How alike two sentences are to a sentence encoder: the cosine of their sentence vectors.

    u = vector(text), w = vector(other)     unit length (`glassformer.models.sentence`)
    cos(u, w) = u · w                        1: the same direction, 0: unrelated, -1: opposite

The vectors are `LanguageModel.embed`'s, as sentence-transformers computes them; the answer
carries both vectors whole, for the page's strip of features.
"""

from __future__ import annotations

from typing import Any

from glassformer.workshop.walk.arrays import pack


def similarity(lm, text: str, other: str) -> dict[str, Any]:
    """{"cosine", "vectors": [packed u, packed w], "pooling"} for two texts."""
    if not lm.config.sentence_encoder:
        raise ValueError("similarity compares sentence vectors: choose a sentence encoder (such as MiniLM)")
    vectors = lm.embed([text, other]).float()  # 2 d, unit rows
    return {
        "cosine": float(vectors[0] @ vectors[1]),
        "vectors": [pack(vectors[0]), pack(vectors[1])],
        "pooling": lm.config.sentence_pooling,
    }
