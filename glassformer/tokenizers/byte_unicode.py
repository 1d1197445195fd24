"""GPT-2's reversible map between bytes and printable unicode characters.

Byte-level BPE vocabularies (GPT-2, RoBERTa, Llama 3, SmolLM2) store tokens as strings in
which every byte is one printable character: the 188 printable Latin-1 bytes map to
themselves, the other 68 (control characters, space, ...) to U+0100 onwards. So the
space byte 0x20 becomes "Ġ" and the newline 0x0A becomes "Ċ".

>>> BYTE_TO_UNICODE[ord(" ")], BYTE_TO_UNICODE[ord("\\n")]
('Ġ', 'Ċ')
>>> unicode_to_bytes("Ġcat")
b' cat'
"""

from __future__ import annotations


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


def unicode_to_bytes(text: str) -> bytes:
    """'Ġcat' -> b' cat'; a character outside the map is an error naming it."""
    try:
        return bytes(UNICODE_TO_BYTE[c] for c in text)
    except KeyError as error:
        raise ValueError(
            f"{text!r} is not a byte-level token string: {error.args[0]!r} is not in the byte map"
        ) from None
