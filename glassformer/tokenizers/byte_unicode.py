"""GPT-2's reversible map between bytes and printable unicode characters.

Byte-level BPE vocabularies (GPT-2, RoBERTa, Llama 3, SmolLM2) store tokens as strings in
which every byte is one printable character: the 188 printable Latin-1 bytes map to
themselves, the other 68 (control characters, space, ...) to U+0100 onwards. So the
space byte 0x20 becomes "Ġ" and the newline 0x0A becomes "Ċ".

>>> BYTE_TO_UNICODE[ord(" ")], BYTE_TO_UNICODE[ord("\\n")]
('Ġ', 'Ċ')
>>> unicode_to_bytes("Ġcat")
b' cat'

Vocabulary files write a merge as two such strings and one space (`split_merge`). Text
becomes bytes by UTF-8, which a lone surrogate does not have (`reject_surrogates`).
"""

from __future__ import annotations

import re

SURROGATE = re.compile("[\ud800-\udfff]")


def _byte_to_unicode() -> dict[int, str]:
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


BYTE_TO_UNICODE: dict[int, str] = _byte_to_unicode()
UNICODE_TO_BYTE: dict[str, int] = {c: b for b, c in BYTE_TO_UNICODE.items()}


def bytes_to_unicode(data: bytes) -> str:
    """b' cat' -> 'Ġcat'."""
    return "".join(BYTE_TO_UNICODE[b] for b in data)


BYTE_CHARS = frozenset(BYTE_TO_UNICODE.values())  # the 256 characters of the byte-level form
# each byte-level character -> the character whose code is its byte, so that str.translate and a
# latin-1 encoding turn a whole token back into bytes in C (a 49k vocabulary and its merges: ~10x)
_AS_LATIN1 = str.maketrans({c: chr(b) for c, b in UNICODE_TO_BYTE.items()})


def unicode_to_bytes(text: str) -> bytes:
    """'Ġcat' -> b' cat'; a character outside the map is an error naming it."""
    if not BYTE_CHARS.issuperset(text):
        bad = next(c for c in text if c not in BYTE_CHARS)
        raise ValueError(f"{text!r} is not a byte-level token string: {bad!r} is not in the byte map")
    return text.translate(_AS_LATIN1).encode("latin-1")


def split_merge(line: str) -> tuple[bytes, bytes]:
    """'Ġ t' -> (b' ', b't'): a merge line of vocab.bpe (or our JSON) as its two tokens."""
    parts = line.split(" ")
    if len(parts) != 2:
        raise ValueError(f"a merge is two byte-level tokens separated by one space, got {line!r}")
    return unicode_to_bytes(parts[0]), unicode_to_bytes(parts[1])


def reject_surrogates(text: str) -> None:
    """Raise if ``text`` holds a lone surrogate: it has no UTF-8 bytes, so no byte-level tokens."""
    if found := SURROGATE.search(text):
        raise ValueError(
            f"the text has a lone surrogate {found.group()!r} at character {found.start()}: it is not a "
            "Unicode character and has no UTF-8 bytes (it often comes from errors='surrogateescape' or a "
            "broken UTF-16 pair); repair the text first, e.g. text.encode('utf-8', 'replace').decode()"
        )
