"""A GGUF file's metadata values, checked as they are read: each ``{arch}.*`` key an architecture
module needs (``llama.block_count``, ``bert.attention.layer_norm_epsilon``), with the type the
key must have, or llama.cpp's default where the file has none.

    >>> from types import SimpleNamespace
    >>> header = SimpleNamespace(metadata={"gpt2.block_count": 12, "gpt2.attention.layer_norm_epsilon": 1e-5})
    >>> number(header, "gpt2.block_count", int), number(header, "gpt2.context_length", int, 1024)
    (12, 1024)
    >>> number(header, "gpt2.attention.layer_norm_epsilon", float)  # as llama.cpp wrote it (float32)
    1e-05
"""

from __future__ import annotations

from typing import Any

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)
REQUIRED = object()


def field(header, key: str, default: Any = REQUIRED) -> Any:
    """A metadata value of a `GGUFHeader` (its strings already checked as UTF-8 when read)."""
    if key in header.metadata:
        return header.metadata[key]
    if default is REQUIRED:
        raise ValueError(f"the GGUF metadata lacks {key!r}")
    return default


def number(header, key: str, kind: type, default: Any = REQUIRED) -> Any:
    """A metadata field that must be an integer (``kind=int``) or a number (``kind=float``)."""
    value = field(header, key, default)
    if value is default and default is not REQUIRED:
        return value
    allowed = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, allowed):
        raise ValueError(f"the GGUF metadata {key!r} should be a {kind.__name__}, not {value!r:.60}")
    if kind is float and abs(value) <= FLOAT32_MAX and float(np.float32(value)) == value:
        return float(str(np.float32(value)))  # llama.cpp writes float32: 1e-06, not 9.99999997e-07
    return kind(value)


def flag(header, key: str, default: bool) -> bool:
    """A metadata field that must be a bool (``gptneox.use_parallel_residual``)."""
    value = field(header, key, default)
    if not isinstance(value, bool):
        raise ValueError(f"the GGUF metadata {key!r} should be a bool, not {value!r:.60}")
    return value
