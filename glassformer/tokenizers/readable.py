"""Tokens as a reader sees them: real characters, and a byte that is no character as a byte.

A byte-level BPE cuts text into bytes, so one token may hold part of a character: the wave
emoji is the four bytes F0 9F 8C 8A, and a tokenizer may give " F0 9F" and "8C 8A" as two
tokens. GPT-2's files spell such bytes with a byte-to-unicode map ("ĠðŁ"), which is no text
at all, and never reaches a page, a figure or the terminal here. A token is shown as what it
is: the characters its bytes make, and each byte of a character it does not hold whole as
hex in angle brackets (`readable_bytes`); neighbours whose bytes together make characters
are a group, shown with those characters (`character_groups`).

>>> readable_bytes(" 🌊".encode()[:3])
' ⟨F0 9F⟩'
>>> character_groups([" 🌊".encode()[:3], " 🌊".encode()[3:], b"!"])
[{'first': 0, 'last': 1, 'text': '🌊'}]
"""

from __future__ import annotations

from collections.abc import Sequence

OPEN, CLOSE = "\u27e8", "\u27e9"  # ⟨ ⟩: a run of bytes that make no whole character
_ESCAPED = range(0xDC80, 0xDD00)  # surrogateescape's stand-ins for the bytes 80..FF


def readable_bytes(data: bytes) -> str:
    """The characters ``data`` makes whole, and each other byte as hex, runs in one bracket:
    b"caf\\xc3" -> "caf⟨C3⟩"."""
    out: list[str] = []
    run: list[str] = []
    for ch in data.decode("utf-8", errors="surrogateescape"):
        if ord(ch) in _ESCAPED:
            run.append(f"{ord(ch) - 0xDC00:02X}")
            continue
        if run:
            out.append(OPEN + " ".join(run) + CLOSE)
            run = []
        out.append(ch)
    if run:
        out.append(OPEN + " ".join(run) + CLOSE)
    return "".join(out)


def character_groups(pieces: Sequence[bytes | None]) -> list[dict[str, int | str]]:
    """The runs of neighbouring tokens (``pieces``: each token's bytes, None for one that is no
    bytes, such as a special token) whose bytes make characters none of them holds whole:
    ``[{"first": i, "last": j, "text": the characters}]``, tokens i..j, in order."""
    owner: list[int] = []  # the token each byte of the text came from
    data = bytearray()
    for i, piece in enumerate(pieces):
        piece = piece or b""
        owner += [i] * len(piece)
        data += piece
    groups: list[dict[str, int | str]] = []
    position = 0
    for ch in bytes(data).decode("utf-8", errors="surrogateescape"):
        size = 1 if ord(ch) in _ESCAPED else len(ch.encode("utf-8"))
        first, last = owner[position], owner[position + size - 1]
        position += size
        if first == last or ord(ch) in _ESCAPED:  # held whole by one token, or no character at all
            continue
        if groups and groups[-1]["last"] >= first:  # the same tokens go on making characters
            groups[-1]["last"] = max(groups[-1]["last"], last)
            groups[-1]["text"] += ch
        else:
            groups.append({"first": first, "last": last, "text": ch})
    return groups
