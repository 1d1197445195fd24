"""One prediction explained for the page: `explain(lm, text, method, target)` -> a JSON-able dict.

The library does the work (`glassformer.inspect.explain_methods.explain_tokens`); this
turns its `Attribution` into what the page draws as coloured tokens:

    {"tokens": [str] t, "scores": [float | None] t, "method": "LIME", "what": the score F,
     "score": F(x), "notes": [str], "assumes": str, "disagreement": str}

A score is None where a method has none (JSON has no NaN). Two calls with two methods on
the same text and target explain the same F, so the page can show them side by side.
"""

from __future__ import annotations

import math
from typing import Any

from glassformer.inspect.explain_methods import ASSUMPTIONS, DISAGREEMENT, METHODS, explain_tokens


def explain(
    lm,
    text: str,
    method: str,
    target: str | int | None = None,
    *,
    keep_first: bool = False,
    samples: int | None = None,
) -> dict:
    """Explain ``lm``'s prediction on ``text`` with ``method`` (one of `METHODS`): the
    probability of the next token ``target`` (None: the top prediction), or for a sentence
    encoder the similarity to the sentence ``target``. ``keep_first``: hold the first token
    (a decoder's attention sink) fixed. ``samples``: LIME's samples / SHAP's evaluations
    (None: the library's default)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}; allowed values: {', '.join(METHODS)}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text is empty: there is nothing to explain")
    result = explain_tokens(lm, text, method, target, keep_first=keep_first, samples=samples)
    notes = [note for note in result.extra.get("notes", []) if note != ASSUMPTIONS[method]]
    return {
        "tokens": list(result.tokens),
        "scores": [_number(v) for v in result.scores.tolist()],
        "method": result.method,
        "what": result.target,
        "score": _number(result.extra.get("score")),
        "notes": notes,
        "assumes": ASSUMPTIONS[method],
        "disagreement": DISAGREEMENT,
    }


def _number(value: Any) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else float(value)
