"""Normalizers: the text rewritten before it is cut into pieces (HF ``tokenizer.json``'s
``normalizer``), with each new character's place in the original text.

A normalizer is a list of steps, applied in order:

* ``NFC`` / ``NFKC`` / ``NFD`` / ``NFKD``: Unicode normalization forms (Qwen 2.5 and 3: NFC);
* ``Replace``: every occurrence of a literal string by another (SentencePiece: " " -> "▁");
* ``Prepend``: a string before a non-empty text (Llama 2: "▁").

An empty ``Sequence`` (DeepSeek-V3) is no step at all. Any other kind is refused by name.
`Normalizer.aligned` also gives, for each character of the result, the span of the original
characters it came from, so a token's offsets point into the text the user gave.

>>> nfc = Normalizer.from_hf({"type": "NFC"})
>>> nfc.normalize("e\\u0301!") == "\\u00e9!"
True
>>> Normalizer.from_hf({"type": "Sequence", "normalizers": [
...     {"type": "Prepend", "prepend": "▁"},
...     {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}).aligned("a b")
('▁a▁b', [(0, 1), (0, 1), (1, 2), (2, 3)])
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

UNICODE_FORMS = ("NFC", "NFKC", "NFD", "NFKD")
Spans = list[tuple[int, int]]  # per character of a text: the (start, end) it came from in the original


def refuse(source: str, part: str, value: Any, expected: str) -> ValueError:
    """The error for a part of a tokenizer.json we do not read: it names the part and its value."""
    shown = json.dumps(value, ensure_ascii=False)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return ValueError(f"{source}: {part} {shown} is not supported; expected {expected}")


@dataclass(frozen=True)
class Normalizer:
    """The steps ``(kind, *arguments)``: ("NFC",), ("Replace", old, new), ("Prepend", text)."""

    steps: tuple[tuple[str, ...], ...] = ()

    @classmethod
    def from_hf(cls, spec: dict[str, Any] | None, source: str = "tokenizer.json") -> Normalizer:
        """A normalizer from its HF ``tokenizer.json`` object (None: no normalizer)."""
        expected = "NFC, NFKC, NFD, NFKD, Replace (a String pattern), Prepend, or a Sequence of them"
        if spec is None:
            return cls()
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind == "Sequence":
            steps: list[tuple[str, ...]] = []
            for inner in spec.get("normalizers") or []:
                steps += cls.from_hf(inner, source).steps
            return cls(tuple(steps))
        if kind in UNICODE_FORMS:
            return cls(((kind,),))
        if kind == "Replace" and set(spec.get("pattern") or {}) == {"String"}:
            if not spec["pattern"]["String"]:
                raise refuse(source, "normalizer", spec, "a Replace of a non-empty string")
            return cls((("Replace", spec["pattern"]["String"], spec["content"]),))
        if kind == "Prepend":
            return cls((("Prepend", spec["prepend"]),))
        raise refuse(source, "normalizer", spec, expected)

    def to_hf(self) -> dict[str, Any] | None:
        """The HF ``tokenizer.json`` object (None for no step)."""
        specs = [_step_to_hf(step) for step in self.steps]
        if not specs:
            return None
        return specs[0] if len(specs) == 1 else {"type": "Sequence", "normalizers": specs}

    def __bool__(self) -> bool:
        return bool(self.steps)

    def normalize(self, text: str) -> str:
        """The normalized text (what `aligned` gives, without the spans)."""
        for kind, *arguments in self.steps:
            if kind in UNICODE_FORMS:
                text = unicodedata.normalize(kind, text)
            elif kind == "Replace":
                text = text.replace(arguments[0], arguments[1])
            elif text:  # Prepend: HF prepends to a non-empty text only
                text = arguments[0] + text
        return text

    def aligned(self, text: str, start: int = 0) -> tuple[str, Spans]:
        """The normalized text and, per character of it, its original span (``start``: where
        ``text`` begins in the whole text)."""
        spans = [(start + i, start + i + 1) for i in range(len(text))]
        for kind, *arguments in self.steps:
            if kind in UNICODE_FORMS:
                text, spans = _unicode_form(kind, text, spans)
            elif kind == "Replace":
                text, spans = _replace(text, spans, *arguments)
            elif text:
                text, spans = arguments[0] + text, [spans[0]] * len(arguments[0]) + spans
        return text, spans


def _step_to_hf(step: tuple[str, ...]) -> dict[str, Any]:
    kind, *arguments = step
    if kind == "Replace":
        return {"type": "Replace", "pattern": {"String": arguments[0]}, "content": arguments[1]}
    if kind == "Prepend":
        return {"type": "Prepend", "prepend": arguments[0]}
    return {"type": kind}


def _unicode_form(form: str, text: str, spans: Spans) -> tuple[str, Spans]:
    """A Unicode normalization with spans: the text is cut before each character of combining
    class 0 and each cut normalized alone; a character of a cut that changed gets the span of
    the whole cut. If the cuts do not normalize to the whole's normalization (Hangul jamo
    compose across them), the whole text is one cut."""
    whole = unicodedata.normalize(form, text)
    if whole == text:
        return text, spans
    starts = [i for i, ch in enumerate(text) if i == 0 or unicodedata.combining(ch) == 0] + [len(text)]
    cuts = list(zip(starts, starts[1:], strict=False))
    pieces = [unicodedata.normalize(form, text[a:b]) for a, b in cuts]
    if "".join(pieces) != whole:
        cuts, pieces = [(0, len(text))], [whole]
    new_spans: Spans = []
    for (a, b), piece in zip(cuts, pieces, strict=True):
        if piece == text[a:b]:
            new_spans += spans[a:b]
        else:
            new_spans += [(spans[a][0], spans[b - 1][1])] * len(piece)
    return whole, new_spans


def _replace(text: str, spans: Spans, old: str, new: str) -> tuple[str, Spans]:
    """Every ``old`` replaced by ``new``; the new characters take the span of the old ones."""
    parts, new_spans, position = [], [], 0
    while (found := text.find(old, position)) != -1:
        parts.append(text[position:found])
        new_spans += spans[position:found]
        parts.append(new)
        span = (spans[found][0], spans[found + len(old) - 1][1])
        new_spans += [span] * len(new)
        position = found + len(old)
    parts.append(text[position:])
    new_spans += spans[position:]
    return "".join(parts), new_spans
