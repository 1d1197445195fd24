"""Terminal rendering of a tokenization: coloured tokens, then one line per token.

>>> from glassformer.tokenizers.char import CharTokenizer
>>> print(render(CharTokenizer.from_text("abc"), "cab", color=False))
|c|a|b|
3 tokens, 3 characters
    #    id  token  offsets
    0     2  'c'    0:1
    1     0  'a'    1:2
    2     1  'b'    2:3
"""

from __future__ import annotations

from glassformer.tokenizers.base import Tokenizer

# Background colours that keep black text readable, cycled token by token.
BACKGROUNDS = ("48;5;153", "48;5;229", "48;5;194", "48;5;224", "48;5;183", "48;5;223")


def coloured(text: str, spans: list[tuple[int, int]], color: bool = True) -> str:
    """The text with each token's span on its own background (or between bars).

    Tokens that share a character (bytes of one emoji split over several tokens) show the
    character once, with the first of them.
    """
    pieces, cursor = [], 0
    for a, b in spans:
        pieces.append(text[max(a, cursor) : b] if b > cursor else "")
        cursor = max(cursor, b)
    if not color:
        return "|" + "|".join(p for p in pieces if p) + "|"
    parts = []
    for i, piece in enumerate(pieces):
        if piece:
            piece = piece.replace("\n", "\u21b5\n")  # show newlines
            parts.append(f"\x1b[30;{BACKGROUNDS[i % len(BACKGROUNDS)]}m{piece}\x1b[0m")
    return "".join(parts)


def render(tokenizer: Tokenizer, text: str, color: bool = True, **options) -> str:
    """Coloured tokens and a table of index, id, token and character offsets."""
    ids = tokenizer.encode(text, **options)
    spans = tokenizer.offsets(text, **options)
    labels = [repr(tokenizer.id_to_token(i)) for i in ids]
    width = max((len(label) for label in labels), default=5)
    lines = [coloured(text, spans, color), f"{len(ids)} tokens, {len(text)} characters"]
    lines.append(f"    {'#':>4}  {'id':>6}  {'token':<{width}}  offsets")
    for n, (token_id, label, (a, b)) in enumerate(zip(ids, labels, spans, strict=True)):
        lines.append(f"    {n:>4}  {token_id:>6}  {label:<{width}}  {a}:{b}")
    return "\n".join(lines)


def render_explanation(steps: list[dict]) -> str:
    """The tokenizer's ``explain`` data as indented text, one pre-token at a time."""
    lines = []
    for item in steps:
        lines.append(f"{item.get('text', '')!r}" + (f" -> ids {item['ids']}" if "ids" in item else ""))
        for step in item.get("steps", []):
            detail = ", ".join(f"{k}={v!r}" for k, v in step.items())
            lines.append(f"    {detail}")
    return "\n".join(lines)
