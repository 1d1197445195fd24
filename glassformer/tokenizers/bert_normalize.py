"""BERT's text preparation before WordPiece: normalize, then split into words.

1. **Clean and normalize** each character (HF ``BertNormalizer``): drop NUL, U+FFFD and
   control/format characters; turn whitespace into spaces; put spaces around CJK
   ideographs; when lowercasing, also strip accents (NFD, then drop the combining marks,
   category Mn) and lowercase.
2. **Split into words** (HF ``BertPreTokenizer``) on whitespace, with every punctuation
   character a word of its own.

Every normalized character remembers the original character it came from, so token
offsets can point into the text as given (before lowercasing and accent stripping).

    >>> normalized, origin = normalize("Héllo, World!")
    >>> normalized, [normalized[a:b] for a, b in split_words(normalized)]
    ('hello, world!', ['hello', ',', 'world', '!'])

Reference: google-research/bert ``tokenization.py``; the order of the steps follows HF
``tokenizers``.
"""

from __future__ import annotations

import string
import unicodedata

# The Unicode White_Space property (what HF's Rust `char::is_whitespace` tests).
WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
# CJK Unified Ideographs blocks, as in google-research/bert (HF `tokenizers` starts the
# Extension E range at U+2B920 instead of U+2B820: 256 characters differ).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_control(char: str) -> bool:
    """Removed by cleaning: control, format and private-use characters (not tab/newline/CR).

    Unassigned code points (Cn) are kept, as HF ``tokenizers`` keeps them.
    """
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: all ASCII non-alphanumeric symbols ($, +, ^, ...) and Unicode P*."""
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def is_cjk(char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in CJK_RANGES)


def normalize(
    text: str, clean_text: bool = True, cjk: bool = True, strip_accents: bool = True, lowercase: bool = True
) -> tuple[str, list[int]]:
    """BERT's normalization, and for each output character the index of its source character.

    >>> normalize("Café 中!")
    ('cafe  中 !', [0, 1, 2, 3, 4, 5, 5, 5, 6])
    """
    out: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if clean_text:
            if char in "\x00\ufffd" or is_control(char):
                continue
            char = " " if char in WHITESPACE else char
        pieces = f" {char} " if cjk and is_cjk(char) else char
        if strip_accents:  # before lowercasing, as HF does (the original BERT lowercases first)
            decomposed = unicodedata.normalize("NFD", pieces)
            pieces = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
        if lowercase:
            # one character at a time, so no context rule applies: 'Σ' -> 'σ' even word-finally
            pieces = "".join(c.lower() for c in pieces)
        out.append(pieces)
        origin += [index] * len(pieces)
    return "".join(out), origin


def split_words(normalized: str) -> list[tuple[int, int]]:
    """(start, end) of each word: split on whitespace, each punctuation character alone.

    >>> split_words("hi, you")
    [(0, 2), (2, 3), (4, 7)]
    """
    words, start = [], None
    for i, char in enumerate(normalized):
        if char in WHITESPACE or is_punctuation(char):
            if start is not None:
                words.append((start, i))
                start = None
            if char not in WHITESPACE:
                words.append((i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        words.append((start, len(normalized)))
    return words
