"""Normalizers: the text rewritten before it is cut into pieces (HF ``tokenizer.json``'s
``normalizer``), with each new character's place in the original text.

A normalizer is a list of steps, applied in order:

* ``NFC`` / ``NFKC`` / ``NFD`` / ``NFKD``: Unicode normalization forms (Qwen 2.5 and 3: NFC);
* ``Replace``: every occurrence of a literal string by another (SentencePiece: " " -> "▁");
* ``Prepend``: a string before a non-empty text (Llama 2: "▁");
* ``Replace`` of a ``Regex`` pattern (T5: runs of spaces ``" {2,}"`` -> "▁"), read by ``regex``;
* ``Strip``: whitespace off the left and/or right end (T5: the right);
* ``Precompiled``: SentencePiece's compiled rules, e.g. nmt_nfkc (T5, mT5, ALBERT, XLM-R;
  `glassformer.tokenizers.precompiled`);
* ``Lowercase`` (character by character) and ``StripAccents`` (every combining mark dropped,
  after NFKD: ALBERT).

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

import regex

from glassformer.tokenizers.precompiled import Precompiled

UNICODE_FORMS = ("NFC", "NFKC", "NFD", "NFKD")
Spans = list[tuple[int, int]]  # per character of a text: the (start, end) it came from in the original
# what HF's Strip removes: Rust's char::is_whitespace (White_Space), narrower than str.isspace
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


def refuse(source: str, part: str, value: Any, expected: str) -> ValueError:
    """The error for a part of a tokenizer.json we do not read: it names the part and its value."""
    shown = json.dumps(value, ensure_ascii=False)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return ValueError(f"{source}: {part} {shown} is not supported; expected {expected}")


@dataclass(frozen=True)
class Normalizer:
    """The steps ``(kind, *arguments)``: ("NFC",), ("Replace", old, new), ("Prepend", text),
    ("ReplaceRegex", pattern, new), ("Strip", left, right), ("Precompiled", base64 charsmap),
    ("Lowercase",), ("StripAccents",)."""

    steps: tuple[tuple[Any, ...], ...] = ()

    @classmethod
    def from_hf(cls, spec: dict[str, Any] | None, source: str = "tokenizer.json") -> Normalizer:
        """A normalizer from its HF ``tokenizer.json`` object (None: no normalizer)."""
        expected = (
            "NFC, NFKC, NFD, NFKD, Lowercase, StripAccents, Replace, Prepend, Strip, Precompiled, or a "
            "Sequence of them"
        )
        if spec is None:
            return cls()
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind == "Sequence":
            steps: list[tuple[str, ...]] = []
            for inner in spec.get("normalizers") or []:
                steps += cls.from_hf(inner, source).steps
            return cls(tuple(steps))
        if kind in UNICODE_FORMS or kind in ("Lowercase", "StripAccents"):
            return cls(((kind,),))
        if kind == "Replace" and set(spec.get("pattern") or {}) == {"String"}:
            if not spec["pattern"]["String"]:
                raise refuse(source, "normalizer", spec, "a Replace of a non-empty string")
            return cls((("Replace", spec["pattern"]["String"], spec["content"]),))
        if kind == "Replace" and set(spec.get("pattern") or {}) == {"Regex"}:
            try:
                regex.compile(spec["pattern"]["Regex"])
            except regex.error as error:
                raise refuse(source, "normalizer", spec, f"a Regex Python's regex reads ({error})") from None
            return cls((("ReplaceRegex", spec["pattern"]["Regex"], spec["content"]),))
        if kind == "Prepend":
            return cls((("Prepend", spec["prepend"]),))
        if kind == "Strip":
            return cls((("Strip", bool(spec.get("strip_left", True)), bool(spec.get("strip_right", True))),))
        if kind == "Precompiled":
            try:
                Precompiled.from_base64(spec.get("precompiled_charsmap") or "")
            except ValueError as error:
                raise refuse(
                    source, "normalizer", spec, f"a readable precompiled_charsmap ({error})"
                ) from None
            return cls((("Precompiled", spec["precompiled_charsmap"]),))
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
            elif kind == "Prepend":
                text = arguments[0] + text if text else text  # HF prepends to a non-empty text only
            else:
                text = self._other_step(kind, arguments, text, None)[0]
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
            elif kind == "Prepend":
                if text:
                    text, spans = arguments[0] + text, [spans[0]] * len(arguments[0]) + spans
            else:
                text, spans = self._other_step(kind, arguments, text, spans)
        return text, spans

    @staticmethod
    def _other_step(kind: str, arguments: list, text: str, spans: Spans | None) -> tuple[str, Spans]:
        """ReplaceRegex, Strip, Precompiled, Lowercase, StripAccents (``spans`` None: the text alone
        is wanted)."""
        spans = [(i, i + 1) for i in range(len(text))] if spans is None else spans
        if kind == "Lowercase":  # character by character, as HF: "ΟΔΟΣ" -> "οδοσ", no final sigma
            lowered = [(character.lower(), span) for character, span in zip(text, spans, strict=True)]
            return "".join(low for low, _ in lowered), [span for low, span in lowered for _ in low]
        if kind == "StripAccents":  # every combining mark (Mn, Mc, Me) dropped, as HF
            kept = [
                (c, span)
                for c, span in zip(text, spans, strict=True)
                if not unicodedata.category(c)[0] == "M"
            ]
            return "".join(c for c, _ in kept), [span for _, span in kept]
        if kind == "Precompiled":
            return Precompiled.from_base64(arguments[0]).aligned(text, spans)
        if kind == "Strip":
            left, right = arguments
            start = len(text) - len(text.lstrip(WHITESPACE)) if left else 0
            end = len(text.rstrip(WHITESPACE)) if right else len(text)
            end = max(start, end)
            return text[start:end], spans[start:end]
        return _replace_regex(text, spans, *arguments)


def _step_to_hf(step: tuple[str, ...]) -> dict[str, Any]:
    kind, *arguments = step
    if kind == "Replace":
        return {"type": "Replace", "pattern": {"String": arguments[0]}, "content": arguments[1]}
    if kind == "Prepend":
        return {"type": "Prepend", "prepend": arguments[0]}
    if kind == "ReplaceRegex":
        return {"type": "Replace", "pattern": {"Regex": arguments[0]}, "content": arguments[1]}
    if kind == "Strip":
        return {"type": "Strip", "strip_left": arguments[0], "strip_right": arguments[1]}
    if kind == "Precompiled":
        return {"type": "Precompiled", "precompiled_charsmap": arguments[0]}
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


def _replace_regex(text: str, spans: Spans, pattern: str, new: str) -> tuple[str, Spans]:
    """Every match of ``pattern`` replaced by ``new``, whose characters take the match's span (an
    empty match: the span of the character after it, or before it at the end)."""
    parts, new_spans, position = [], [], 0
    for match in regex.finditer(pattern, text):
        start, end = match.span()
        parts.append(text[position:start])
        new_spans += spans[position:start]
        parts.append(new)
        if start < end:
            span = (spans[start][0], spans[end - 1][1])
        else:
            near = spans[start] if start < len(spans) else spans[-1] if spans else (0, 0)
            span = (near[0], near[0]) if start < len(spans) else (near[1], near[1])
        new_spans += [span] * len(new)
        position = end
    parts.append(text[position:])
    new_spans += spans[position:]
    return "".join(parts), new_spans
