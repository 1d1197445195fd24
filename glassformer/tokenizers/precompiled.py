"""SentencePiece's compiled normalization rules (``precompiled_charsmap``): the ``Precompiled``
normalizer of T5, mT5, ALBERT and XLM-R ``tokenizer.json`` files and of GGUF ``t5`` vocabularies.

SentencePiece compiles a rule set such as ``nmt_nfkc`` (NFKC, plus control characters dropped and
odd spaces made plain) into one blob, read here by hand:

==================  ==========================================================================
trie size           uint32, little-endian: the byte length of the trie that follows
trie                ``trie size / 4`` uint32 units: a darts-clone double-array trie whose keys are
                    UTF-8 byte strings (a character or a short sequence, e.g. "ﬁ", "e\\u0301")
normalized          the replacements, each a UTF-8 string ended by a NUL byte; a key's value
                    is the byte offset of its replacement here
==================  ==========================================================================

A double array walks a key one byte at a time with no search: from node ``p``, the child for
byte ``c`` is the unit at ``p ^ offset(unit at p) ^ c``, and it is really a child when that
unit's *label* is ``c``. Each 32-bit unit packs (darts-clone's layout):

* bits 0-7: the label, the byte that leads to this node (bit 31 set marks a leaf unit, whose
  bits 0-30 are a value instead, so a leaf never matches a label);
* bit 8: this node ends a key: the unit at ``p ^ offset`` is the leaf holding its value;
* bits 10-31: the offset to the children, shifted left by 8 more when bit 9 is set.

A *common-prefix search* walks the text's bytes and collects every key that is a prefix of it.

How a text is rewritten, two ways:

* SentencePiece (`Precompiled.normalize_sentencepiece`, its ``Normalizer::NormalizePrefix``, also
  llama.cpp's): at each place, the *longest* key that starts there is replaced; with none, one
  character is copied.
* HF ``tokenizers`` (`Precompiled.aligned`, what a ``tokenizer.json`` means): the text is cut
  into grapheme clusters (``\\X``); a cluster of under 6 UTF-8 bytes that starts with a key is
  replaced *whole* by the *shortest* key's replacement; otherwise each character alone is
  replaced when it is a key, else kept. The two agree on ordinary text; they differ where a
  key is longer than one character or a cluster's first character is a key followed by a mark
  (HF: "ﬁ\\u0301" -> "fi", the accent dropped; SentencePiece: "fi\\u0301").

>>> import base64
>>> rules = Precompiled.from_rules({"ﬁ": "fi", "①": "1", "\\u3000": " "})
>>> rules.aligned("ﬁx ①")
('fix 1', [(0, 1), (0, 1), (1, 2), (2, 3), (3, 4)])
>>> Precompiled.from_base64(base64.b64encode(rules.blob).decode()).normalize_sentencepiece("a\\u3000b")
'a b'
"""

from __future__ import annotations

import base64
import binascii
import functools
import struct
import unicodedata

import numpy as np
import regex

from glassformer.tokenizers.double_array import build_double_array

Spans = list[tuple[int, int]]  # per character: its (start, end) in the original text
HF_CLUSTER_BYTES = 6  # HF replaces a grapheme cluster whole only when it is shorter than this
_CLUSTER = regex.compile(r"\X")
LEAF_BIT, HAS_LEAF_BIT, VALUE_MASK = 1 << 31, 1 << 8, (1 << 31) - 1


def _offset(unit: int) -> int:
    """Where a node's children are, relative to it (bits 10-31, << 8 more if bit 9 is set)."""
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


class Precompiled:
    """A parsed ``precompiled_charsmap``: the trie's units and the replacement strings."""

    def __init__(self, blob: bytes):
        if len(blob) < 4:
            raise ValueError(
                f"a precompiled_charsmap starts with a 4-byte trie size; this one has {len(blob)} bytes"
            )
        (trie_size,) = struct.unpack_from("<I", blob)
        if trie_size % 4 or trie_size == 0 or 4 + trie_size > len(blob):
            raise ValueError(
                f"precompiled_charsmap: a trie of {trie_size:,} bytes does not fit the {len(blob):,}-byte "
                "blob in whole 4-byte units"
            )
        self.blob = bytes(blob)
        self.units: list[int] = np.frombuffer(blob, "<u4", trie_size // 4, 4).tolist()
        self.normalized = self.blob[4 + trie_size :]
        self._replacements: dict[int, str] = {}
        self._transforms: dict[str, str | None] = {}

    def __repr__(self) -> str:
        return f"Precompiled({len(self.units):,} trie units, {len(self.normalized):,} bytes of replacements)"

    @classmethod
    def from_base64(cls, text: str) -> Precompiled:
        """The charsmap as a ``tokenizer.json`` holds it (base64)."""
        return _parsed(text)

    @classmethod
    def from_rules(cls, rules: dict[str, str]) -> Precompiled:
        """A charsmap made from ``{key: replacement}`` (for examples and tests)."""
        normalized, values = b"", {}
        for key, replacement in rules.items():
            values[key.encode("utf-8")] = len(normalized)
            normalized += replacement.encode("utf-8") + b"\0"
        units = build_double_array(values)
        trie = struct.pack(f"<{len(units)}I", *units)
        return cls(struct.pack("<I", len(trie)) + trie + normalized)

    def prefix_matches(self, key: bytes) -> list[tuple[int, int]]:
        """(length in bytes, value) of every key that is a prefix of ``key``, shortest first. A NUL
        byte ends the search (darts-clone's keys hold none)."""
        units, found = self.units, []
        node = _offset(units[0])
        for depth, byte in enumerate(key):
            if byte == 0:
                break
            node ^= byte
            if node >= len(units) or units[node] & (LEAF_BIT | 0xFF) != byte:
                break
            unit = units[node]
            node ^= _offset(unit)
            if unit & HAS_LEAF_BIT:
                if node >= len(units):
                    break
                found.append((depth + 1, units[node] & VALUE_MASK))
        return found

    def replacement(self, value: int) -> str:
        """The NUL-ended string at byte ``value`` of the replacements."""
        if value not in self._replacements:
            end = self.normalized.find(b"\0", value)
            if not 0 <= value <= len(self.normalized) or end == -1:
                raise ValueError(f"precompiled_charsmap: a value {value} points outside its replacements")
            self._replacements[value] = self.normalized[value:end].decode("utf-8", errors="replace")
        return self._replacements[value]

    def transform(self, chunk: str) -> str | None:
        """HF's rule for one chunk: the shortest key that begins it gives the replacement of the
        whole chunk (None: no key begins it)."""
        if chunk not in self._transforms:
            matches = self.prefix_matches(chunk.encode("utf-8"))
            self._transforms[chunk] = self.replacement(matches[0][1]) if matches else None
        return self._transforms[chunk]

    def aligned(self, text: str, spans: Spans | None = None) -> tuple[str, Spans]:
        """HF's normalization, with each new character's original span (``spans``: those of
        ``text``'s characters, default their own places). A replaced chunk's characters all
        take the chunk's span."""
        spans = [(i, i + 1) for i in range(len(text))] if spans is None else spans
        out: list[str] = []
        new_spans: Spans = []
        for start, end in _clusters(text):
            if len(text[start:end].encode("utf-8")) < HF_CLUSTER_BYTES:
                replaced = self.transform(text[start:end])
                if replaced is not None:
                    out.append(replaced)
                    new_spans += [(spans[start][0], spans[end - 1][1])] * len(replaced)
                    continue
            for i in range(start, end):
                replaced = self.transform(text[i])
                out.append(text[i] if replaced is None else replaced)
                new_spans += [spans[i]] * (1 if replaced is None else len(replaced))
        return "".join(out), new_spans

    def normalize(self, text: str) -> str:
        """HF's normalization (`aligned` without the spans)."""
        return self.aligned(text)[0]

    def normalize_sentencepiece(self, text: str) -> str:
        """SentencePiece's: at each place the longest key is replaced, else one character copied."""
        data, out, at = text.encode("utf-8"), [], 0
        while at < len(data):
            matches = self.prefix_matches(data[at : at + 64])  # no key is longer than a few characters
            if matches:
                length, value = matches[-1]
                out.append(self.replacement(value))
            else:
                length = _utf8_length(data[at])
                out.append(data[at : at + length].decode("utf-8", errors="replace"))
            at += length
        return "".join(out)


def _clusters(text: str) -> list[tuple[int, int]]:
    """(start, end) of each grapheme cluster: ``regex``'s ``\\X``, cut again after a virama
    (combining class 9) before a character that is not a mark. ``regex`` joins any letter, virama,
    letter (Unicode 15.1's conjuncts, rule GB9c, which HF's segmenter keeps to Indic consonants):
    "Ÿ्न" is one cluster there, two for HF. A real conjunct is 6 bytes or more either way, so
    it is still read a character at a time."""
    cuts = []
    for match in _CLUSTER.finditer(text):
        start, end = match.span()
        for i in range(start + 1, end):
            if unicodedata.combining(text[i - 1]) == 9 and not unicodedata.category(text[i]).startswith("M"):
                cuts.append((start, i))
                start = i
        cuts.append((start, end))
    return cuts


def _utf8_length(lead: int) -> int:
    """The byte length of the UTF-8 character that starts with ``lead``."""
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> Precompiled:
    """One parse per charsmap: a normalizer names its charsmap by its base64 text."""
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError) as error:
        raise ValueError(f"precompiled_charsmap is not base64: {error}") from None
    return Precompiled(blob)
