"""The plain data every view is built from, checked: arrays of the right rank, one token
label per position, labels short enough to draw.

Views take token strings and tensors or arrays (not analysis objects), so that one view
serves every model family and every analysis; these checks turn a wrong shape into a
ValueError that names the shape expected and what to pass instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def to_array(value: Any, ndim: int, name: str, letters: str, hint: str = "") -> np.ndarray:
    """``value`` (tensor, array or nested list) as a float numpy array with ``ndim`` dims.

    >>> to_array([[[0.5, 0.5]]], 2, "pattern", "t s").shape      # a batch of one is dropped
    (1, 2)
    """
    if hasattr(value, "detach"):  # a torch tensor, maybe bfloat16 or on a GPU
        value = value.detach().float().cpu().numpy()
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numbers ({letters}), got {type(value).__name__}") from error
    while array.ndim > ndim and array.shape[0] == 1:
        array = array[0]
    if array.ndim != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimension{'s' * (ndim > 1)} ({letters}), got shape "
            f"{tuple(array.shape)}" + (f"; {hint}" if hint else "")
        )
    if array.size == 0:
        raise ValueError(f"{name} is empty (shape {tuple(array.shape)})")
    return array


def check_tokens(tokens: Any, n: int, name: str, what: str) -> list[str]:
    """``tokens`` as a list of n strings (one per position of ``what``), or a ValueError
    saying what was expected. Every view, figure and HTML alike, checks its labels here.

    >>> check_tokens(["The", " cat"], 2, "tokens", "query positions")
    ['The', ' cat']
    >>> check_tokens(["The"], 2, "tokens", "query positions")
    Traceback (most recent call last):
    ...
    ValueError: 1 tokens for 2 query positions: pass one label per position (trace.tokens)
    """
    if isinstance(tokens, str) or not isinstance(tokens, Iterable):
        got = "one string" if isinstance(tokens, str) else type(tokens).__name__
        raise ValueError(f"{name} must be a list of token strings (trace.tokens), not {got}")
    labels = [str(token) for token in tokens]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} {name} for {n} {what}: pass one label per position (trace.tokens)")
    return labels


def token_label(token: str, limit: int = 14) -> str:
    """A token as a readable label: control characters escaped, an all-space token shown
    as ``␣``, long tokens cut with an ellipsis.

    >>> token_label(" cat"), token_label("\\n"), token_label("  "), token_label("x" * 20, 6)
    (' cat', '\\\\n', '␣␣', 'xxxxx…')
    """
    text = token.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    if text and not text.strip():
        text = "␣" * len(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
