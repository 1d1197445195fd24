"""Special-token text inside the text to encode: one rule for every tokenizer (tiktoken's).

A special token (``<|endoftext|>``, ``[MASK]``, ``<pad>``) has one id and a spelling. When
that spelling appears in a text, ``encode``, ``offsets``, ``explain`` and ``tokens`` of every
tokenizer (`ByteBPE`, `WordPiece`, `CharTokenizer`) decide by two keyword options:

* ``allowed_special``: these become their one id. Default ``"none"``.
* ``disallowed_special``: these are a ValueError. Default ``"all"``: every special token that
  is not allowed.
* any other special token is ordinary text, encoded like any other characters.

Both options take ``"all"``, ``"none"`` or a collection of special-token strings
(``{"<|endoftext|>"}``, ``()``); anything else is an error, and so is a name that is not one of
the tokenizer's special tokens, or one both allowed and disallowed. `resolve_special` applies
the rule; `split_special` cuts a text with it.

So by default a special token's spelling is an error: it neither silently becomes a control
token (a user's text could then end a document or fake a chat turn) nor silently becomes text.
The error says both ways out:

    >>> from glassformer.tokenizers.char import CharTokenizer
    >>> tok = CharTokenizer.from_text("<eos> ab", special_tokens=["<eos>"])
    >>> tok.encode("ab<eos>", allowed_special="all")            # the special token
    [3, 4, 8]
    >>> tok.encode("ab<eos>", disallowed_special="none")        # its characters
    [3, 4, 1, 5, 6, 7, 2]
    >>> tok.encode("ab<eos>")
    Traceback (most recent call last):
    ...
    ValueError: the text contains '<eos>' (at character 2), the spelling of a special token; ...

This is tiktoken's rule with tiktoken's keywords (``tiktoken.Encoding.encode``), so a
`ByteBPE` gives tiktoken's ids and errors for the same arguments. Beyond tiktoken: ``"none"``
(the same as ``()``), and errors for a name that is not a special token (tiktoken ignores it
in ``allowed_special`` and searches the text for it in ``disallowed_special``) and for a name
given in both. HF ``tokenizers`` turns every special token's spelling into its id: pass
``allowed_special="all"`` for its results (`WordPiece` tests against it that way). The
[CLS] ... [SEP] that `WordPiece` adds around a text is not text and does not depend on this.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal

SpecialOption = Literal["all", "none"] | Collection[str]
SHOWN_NAMES = 10  # an error lists at most this many of a tokenizer's special tokens


@dataclass(frozen=True)
class SpecialPolicy:
    """Which special-token spellings become their id (``allowed``) and which are an error."""

    allowed: frozenset[str]
    disallowed: frozenset[str]


def resolve_special(
    special_tokens: Iterable[str],
    allowed_special: SpecialOption = "none",
    disallowed_special: SpecialOption = "all",
) -> SpecialPolicy:
    """The rule above for a tokenizer whose special tokens are ``special_tokens``.

    >>> resolve_special({"<a>": 5, "<b>": 6}, allowed_special={"<a>"})
    SpecialPolicy(allowed=frozenset({'<a>'}), disallowed=frozenset({'<b>'}))
    >>> resolve_special({"<a>": 5, "<b>": 6}, allowed_special="<a>")
    Traceback (most recent call last):
    ...
    ValueError: allowed_special='<a>' is one string; pass 'all', 'none' or a collection ...
    """
    known = frozenset(special_tokens)
    allowed = _names(allowed_special, "allowed_special", known)
    if isinstance(disallowed_special, str) and disallowed_special == "all":
        return SpecialPolicy(allowed, known - allowed)
    disallowed = _names(disallowed_special, "disallowed_special", known)
    if both := allowed & disallowed:
        raise ValueError(
            f"allowed_special and disallowed_special both name {sorted(both)}; a special token's "
            "spelling either becomes its id or is an error, not both"
        )
    return SpecialPolicy(allowed, disallowed)


def _names(value: SpecialOption, option: str, known: frozenset[str]) -> frozenset[str]:
    """One option's value as the set of special tokens it names."""
    if isinstance(value, str):
        if value == "all":
            return known
        if value == "none":
            return frozenset()
        raise ValueError(
            f"{option}={value!r} is one string; pass 'all', 'none' or a collection of special "
            f"tokens, e.g. {option}={{{value!r}}}"
        )
    if not isinstance(value, Iterable):
        raise TypeError(
            f"{option} must be 'all', 'none' or a collection of special tokens, got {type(value).__name__}"
        )
    chosen = frozenset(value)
    if unknown := chosen - known:
        names = sorted(known)
        shown = ", ".join(map(repr, names[:SHOWN_NAMES])) or "none"
        if len(names) > SHOWN_NAMES:
            shown += f" and {len(names) - SHOWN_NAMES} more"
        raise ValueError(
            f"{option} names {sorted(unknown, key=str)}, which are not special tokens of this "
            f"tokenizer; its special tokens: {shown}"
        )
    return chosen


def split_special(text: str, policy: SpecialPolicy, name: str = "text") -> list[tuple[int, int, bool]]:
    """``text`` cut at its allowed special tokens: ``(start, end, is_special)`` spans that cover
    it in order. A disallowed special token anywhere in ``text`` is a ValueError (``name``
    says which text, e.g. "pair").

    >>> split_special("a<b>c", SpecialPolicy(frozenset({"<b>"}), frozenset()))
    [(0, 1, False), (1, 4, True), (4, 5, False)]
    """
    if not isinstance(text, str):
        hint = " (decode it first: data.decode('utf-8'))" if isinstance(text, bytes | bytearray) else ""
        raise TypeError(f"the {name} must be a str, got {type(text).__name__}{hint}")
    if policy.disallowed and (found := special_regex(policy.disallowed).search(text)):
        raise ValueError(
            f"the {name} contains {found.group()!r} (at character {found.start()}), the spelling of a "
            f"special token; to encode it as that special token pass allowed_special={{{found.group()!r}}} "
            "(or allowed_special='all'), to encode it as ordinary text pass disallowed_special='none'"
        )
    spans, position = [], 0
    for found in special_regex(policy.allowed).finditer(text) if policy.allowed else ():
        if found.start() > position:
            spans.append((position, found.start(), False))
        spans.append((found.start(), found.end(), True))
        position = found.end()
    if position < len(text):
        spans.append((position, len(text), False))
    return spans


@functools.lru_cache(maxsize=64)
def special_regex(tokens: frozenset[str]) -> re.Pattern[str]:
    """One regex matching any of ``tokens``; the longest first, so "<|a|>b" wins over "<|a|>"."""
    alternatives = sorted(tokens, key=lambda token: (-len(token), token))
    return re.compile("|".join(map(re.escape, alternatives)))
