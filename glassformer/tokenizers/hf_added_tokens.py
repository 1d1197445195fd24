"""HF ``added_tokens``: the tokens cut out of the text before anything else, read by their flags.

HF ``tokenizers`` matches every added token in the text (the longest at the leftmost place
first) and keeps the text between them for the normalizer, the pre-tokenizer and the model.
Each entry has five flags; we read them or refuse them by name:

* ``special``: left out by HF's ``decode(skip_special_tokens=True)``; either way the token
  is one of our `special_tokens` (all follow our special-token rule, `glassformer.tokenizers.special`);
* ``normalized``: matched in the normalized text, not the raw text. The same thing when the
  normalizer changes no added token and cannot join one to its neighbours (none, or a Unicode
  form); refused otherwise;
* ``single_word``, ``lstrip``, ``rstrip``: match only a whole word / swallow the white space
  before / after it. Refused when true (no file we read sets them).

>>> from glassformer.tokenizers.normalizers import Normalizer
>>> added_tokens([{"id": 5, "content": "<s>", "special": True, "normalized": False}], Normalizer())
{'<s>': 5}
"""

from __future__ import annotations

import unicodedata
from typing import Any

from glassformer.tokenizers.normalizers import UNICODE_FORMS, Normalizer, refuse

UNSUPPORTED_FLAGS = ("single_word", "lstrip", "rstrip")


def added_tokens(
    entries: list[dict[str, Any]] | None, normalizer: Normalizer, source: str = "tokenizer.json"
):
    """``{content: id}`` of the ``added_tokens`` entries; an option we do not implement is an error."""
    tokens: dict[str, int] = {}
    for entry in entries or []:
        content = entry["content"]
        for flag in UNSUPPORTED_FLAGS:
            if entry.get(flag):
                raise refuse(source, f"added token {content!r} option {flag}=", True, "false")
        if entry.get("normalized") and not _same_when_normalized(content, normalizer):
            raise refuse(
                source,
                f"added token {content!r} option normalized=",
                True,
                f"false, or a normalizer that leaves the token alone (this one: {normalizer.to_hf()})",
            )
        tokens[content] = entry["id"]
    return tokens


def _same_when_normalized(content: str, normalizer: Normalizer) -> bool:
    """Whether matching ``content`` in the normalized text is matching it in the raw text."""
    if not all(step[0] in UNICODE_FORMS for step in normalizer.steps):
        return False  # Replace/Prepend could make or unmake the token's text across its edges
    starts_clean = not content or unicodedata.combining(content[0]) == 0
    return starts_clean and normalizer.normalize(content) == content


def added_tokens_to_hf(tokens: dict[str, int], special: bool = True) -> list[dict[str, Any]]:
    """HF ``added_tokens`` entries for our special tokens (matched in the raw text)."""
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": special}
    return [
        {"id": i, "content": text, **flags} for text, i in sorted(tokens.items(), key=lambda item: item[1])
    ]
