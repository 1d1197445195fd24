"""Pre-tokenizer steps of HF ``tokenizer.json`` files: how a text is cut into pieces.

A piece is a text with the original span of each of its characters (``(text, spans)``, see
`glassformer.tokenizers.normalizers`). Each step turns every piece into zero or more pieces:

* ``Split(pattern, behavior, invert)``: the pattern's matches are delimiters (``invert``: the
  matches are the content and the rest delimits). ``behavior`` says what becomes of a
  delimiter: ``Removed`` (dropped), ``Isolated`` (a piece of its own), ``MergedWithPrevious``
  / ``MergedWithNext`` (joined to the piece before / after it), ``Contiguous`` (a run of
  delimiters is one piece);
* ``Digits``, ``WhitespaceSplit`` and ``ByteLevel(use_regex=true)``: such splits with fixed
  patterns (every number character, white space removed, GPT-2's regex);
* ``Metaspace``: spaces become "▁", a "▁" goes before the text (``prepend_scheme``:
  ``always``, ``first``: only before a piece that starts the text, ``never``), then, with
  ``split``, a cut before every "▁" (SentencePiece's words).

>>> pieces = PreTokenizer.from_hf({"type": "Split", "pattern": {"String": "-"},
...     "behavior": "MergedWithPrevious", "invert": False}).split("a-b-c")
>>> pieces
['a-', 'b-', 'c']
>>> PreTokenizer((Metaspace(prepend_scheme="first"),)).split("Hey you")
['▁Hey', '▁you']
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import regex

from glassformer.tokenizers.normalizers import Spans, refuse
from glassformer.tokenizers.pretokenize import PATTERNS

BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
PREPEND_SCHEMES = ("always", "first", "never")
Piece = tuple[str, Spans]


@dataclass(frozen=True)
class Split:
    """Cut at a regex (``literal``: a plain string) with one of HF's `BEHAVIORS`."""

    pattern: str
    behavior: str = "Isolated"
    invert: bool = False
    literal: bool = False

    def __post_init__(self) -> None:
        if self.behavior not in BEHAVIORS:
            raise ValueError(f"Split behavior {self.behavior!r} is unknown; known: {', '.join(BEHAVIORS)}")
        _compile(self.pattern, self.literal)  # fail now on a bad regex, not at the first encode

    def cuts(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) of each piece of ``text``, in order; empty pieces left out."""
        marked, previous = [], 0  # (start, end, is_delimiter)
        for match in _compile(self.pattern, self.literal).finditer(text):
            if match.start() > previous:
                marked.append([previous, match.start(), self.invert])
            marked.append([match.start(), match.end(), not self.invert])
            previous = match.end()
        if previous < len(text):
            marked.append([previous, len(text), self.invert])
        out: list[list] = []
        if self.behavior == "Removed":
            out = [span for span in marked if not span[2]]
        elif self.behavior == "Isolated":
            out = marked
        elif self.behavior == "MergedWithNext":  # HF walks from the end: a delimiter starts the next
            out = _merge_delimiters([[-b, -a, d] for a, b, d in reversed(marked)])
            out = [[-b, -a, d] for a, b, d in reversed(out)]
        else:
            out = _merge_delimiters(marked, contiguous=self.behavior == "Contiguous")
        return [(a, b) for a, b, _ in out if b > a]

    def apply(self, piece: Piece) -> list[Piece]:
        text, spans = piece
        return [(text[a:b], spans[a:b]) for a, b in self.cuts(text)]

    def to_hf(self) -> dict[str, Any]:
        pattern = {"String": self.pattern} if self.literal else {"Regex": self.pattern}
        return {"type": "Split", "pattern": pattern, "behavior": self.behavior, "invert": self.invert}


@functools.lru_cache(maxsize=64)
def _compile(pattern: str, literal: bool) -> regex.Pattern:
    try:
        return regex.compile(regex.escape(pattern) if literal else pattern)
    except regex.error as error:
        raise ValueError(f"Split pattern {pattern!r} is not a valid regex: {error}") from None


def _merge_delimiters(marked: list[list], contiguous: bool = False) -> list[list]:
    """HF's MergedWithPrevious (a delimiter after content joins it) or Contiguous (runs of
    the same kind join)."""
    out: list[list] = []
    previous_delimiter = False
    for start, end, delimiter in marked:
        join = delimiter == previous_delimiter if contiguous else delimiter and not previous_delimiter
        if join and out:
            out[-1][1] = end
        else:
            out.append([start, end, delimiter])
        previous_delimiter = delimiter
    return out


@dataclass(frozen=True)
class Metaspace:
    """SentencePiece's words: " " -> ``replacement``, one before the text, cut before each."""

    replacement: str = "\u2581"
    prepend_scheme: str = "always"
    split: bool = True

    def __post_init__(self) -> None:
        if self.prepend_scheme not in PREPEND_SCHEMES:
            raise ValueError(
                f"Metaspace prepend_scheme {self.prepend_scheme!r} is unknown; "
                f"known: {', '.join(PREPEND_SCHEMES)}"
            )

    def apply(self, piece: Piece) -> list[Piece]:
        text, spans = piece
        text = text.replace(" ", self.replacement)
        # "first": only a piece that starts the original text (HF: offsets_original().0 == 0)
        prepend = self.prepend_scheme == "always" or (self.prepend_scheme == "first" and spans[0][0] == 0)
        if text and prepend and not text.startswith(self.replacement):
            text, spans = self.replacement + text, [spans[0]] + spans
        if not self.split:
            return [(text, spans)]
        return Split(self.replacement, "MergedWithNext", literal=True).apply((text, spans))

    def to_hf(self) -> dict[str, Any]:
        return {
            "type": "Metaspace",
            "replacement": self.replacement,
            "prepend_scheme": self.prepend_scheme,
            "split": self.split,
        }


Step = Split | Metaspace


@dataclass(frozen=True)
class PreTokenizer:
    """The steps in order; each cuts every piece the one before it made."""

    steps: tuple[Step, ...] = ()

    def pieces(self, text: str, spans: Spans) -> list[Piece]:
        """``text`` (``spans``: the original span of each character) as pieces."""
        pieces = [(text, spans)] if text else []
        for step in self.steps:
            pieces = [new for piece in pieces for new in step.apply(piece)]
        return pieces

    def split(self, text: str, start: int = 0) -> list[str]:
        """The pieces' texts (``start``: where ``text`` begins in the original)."""
        spans = [(start + i, start + i + 1) for i in range(len(text))]
        return [piece for piece, _ in self.pieces(text, spans)]

    def to_hf(self) -> dict[str, Any] | None:
        specs = [step.to_hf() for step in self.steps]
        if not specs:
            return None
        return specs[0] if len(specs) == 1 else {"type": "Sequence", "pretokenizers": specs}

    @classmethod
    def from_hf(
        cls, spec: dict[str, Any] | None, source: str = "tokenizer.json", byte_level_last: bool = False
    ) -> PreTokenizer:
        """The steps of an HF ``pre_tokenizer`` (None: none). ``byte_level_last``: a byte-level
        BPE's, whose last step must be ``ByteLevel`` (it maps bytes; it may also split)."""
        specs = (spec.get("pretokenizers") or []) if spec and spec.get("type") == "Sequence" else [spec]
        specs = [s for s in specs if s is not None]
        if byte_level_last and (not specs or specs[-1].get("type") != "ByteLevel"):
            raise refuse(source, "pre_tokenizer", spec, "a ByteLevel step last, for a byte-level BPE")
        steps: list[Step] = []
        for step in specs:
            steps += _step_from_hf(step, source, byte_level_last)
        return cls(tuple(steps))


def _step_from_hf(spec: dict[str, Any], source: str, byte_level: bool) -> list[Step]:
    kind = spec.get("type")
    if kind == "Split":
        pattern = spec.get("pattern") or {}
        if set(pattern) not in ({"Regex"}, {"String"}):
            raise refuse(source, "Split pattern", pattern, 'a {"Regex": ...} or a {"String": ...}')
        if spec.get("behavior") not in BEHAVIORS:
            raise refuse(source, "Split behavior", spec.get("behavior"), f"one of {list(BEHAVIORS)}")
        literal = "String" in pattern
        text = pattern["String"] if literal else pattern["Regex"]
        return [Split(text, spec["behavior"], bool(spec.get("invert", False)), literal)]
    if kind == "Digits":
        return [Split(r"\p{N}" if spec.get("individual_digits") else r"\p{N}+", "Isolated")]
    if kind == "WhitespaceSplit":
        return [Split(r"\s+", "Removed")]
    if kind == "Metaspace" and not byte_level:
        scheme = spec.get("prepend_scheme")
        if scheme is None:  # files before tokenizers 0.19: add_prefix_space
            scheme = "always" if spec.get("add_prefix_space", True) else "never"
        if scheme not in PREPEND_SCHEMES:
            raise refuse(source, "Metaspace prepend_scheme", scheme, f"one of {list(PREPEND_SCHEMES)}")
        return [Metaspace(spec.get("replacement", "\u2581"), scheme, bool(spec.get("split", True)))]
    if kind == "ByteLevel" and byte_level:
        if spec.get("add_prefix_space"):
            raise refuse(source, "ByteLevel add_prefix_space", True, "false (no space put before the text)")
        return [Split(PATTERNS["gpt2"], "Isolated")] if spec.get("use_regex", True) else []
    expected = "Split, Digits, WhitespaceSplit, " + ("ByteLevel" if byte_level else "Metaspace")
    raise refuse(source, "pre_tokenizer step", spec, expected)
