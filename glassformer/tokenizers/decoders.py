"""Decoders of HF ``tokenizer.json`` files: the token strings of some ids -> the text.

A decoder is a list of steps, each turning the list of token strings into another:

* ``Replace(old, new)`` in every token ("▁" -> " ");
* ``ByteFallback``: a run of byte tokens ``<0xE4><0xB8><0x80>`` becomes the characters its
  bytes make (bytes that are no valid UTF-8: one U+FFFD "�" per byte);
* ``Fuse``: all tokens joined into one;
* ``Strip(content, start, stop)``: up to ``start`` leading and ``stop`` trailing ``content``
  characters removed from each token (Llama 2: the space SentencePiece put before the text);
* ``Metaspace(replacement, prepend_scheme)``: "▁" -> " ", and in the first token dropped
  unless the scheme is ``never``;
* ``ByteLevel``: GPT-2's byte-to-unicode characters back to bytes, decoded as UTF-8.

>>> llama2 = Decoder.from_hf({"type": "Sequence", "decoders": [
...     {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
...     {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})
>>> llama2.decode(["▁Hi", "▁", "<0xE4>", "<0xB8>", "<0x80>", "!"])
'Hi 一!'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from glassformer.tokenizers.byte_unicode import unicode_to_bytes
from glassformer.tokenizers.normalizers import refuse

KINDS = ("Replace", "ByteFallback", "Fuse", "Strip", "Metaspace", "ByteLevel")


def byte_of_token(token: str) -> int | None:
    """The byte a byte-fallback token stands for ("<0x0A>" -> 10), else None."""
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        try:
            return int(token[3:5], 16)
        except ValueError:
            return None
    return None


@dataclass(frozen=True)
class Decoder:
    """The steps ``(kind, *arguments)`` in order."""

    steps: tuple[tuple, ...] = ()

    @classmethod
    def from_hf(cls, spec: dict[str, Any] | None, source: str = "tokenizer.json") -> Decoder:
        if spec is None:
            return cls()
        kind = spec.get("type")
        if kind == "Sequence":
            return cls(
                tuple(step for inner in spec.get("decoders") or [] for step in cls.from_hf(inner).steps)
            )
        if kind == "Replace" and set(spec.get("pattern") or {}) == {"String"}:
            return cls((("Replace", spec["pattern"]["String"], spec["content"]),))
        if kind in ("ByteFallback", "Fuse", "ByteLevel"):
            return cls(((kind,),))
        if kind == "Strip":
            return cls((("Strip", spec["content"], int(spec.get("start", 0)), int(spec.get("stop", 0))),))
        if kind == "Metaspace":
            scheme = spec.get("prepend_scheme")
            if scheme is None:
                scheme = "always" if spec.get("add_prefix_space", True) else "never"
            return cls((("Metaspace", spec.get("replacement", "\u2581"), scheme),))
        raise refuse(source, "decoder", spec, "a Sequence of " + ", ".join(KINDS))

    def to_hf(self) -> dict[str, Any] | None:
        specs = [_step_to_hf(step) for step in self.steps]
        if not specs:
            return None
        return specs[0] if len(specs) == 1 else {"type": "Sequence", "decoders": specs}

    def decode(self, tokens: list[str]) -> str:
        """The text of the token strings (HF: the steps, then the tokens joined)."""
        for kind, *arguments in self.steps:
            if kind == "Replace":
                tokens = [token.replace(arguments[0], arguments[1]) for token in tokens]
            elif kind == "ByteFallback":
                tokens = _byte_fallback(tokens)
            elif kind == "Fuse":
                tokens = ["".join(tokens)]
            elif kind == "Strip":
                tokens = [_strip(token, *arguments) for token in tokens]
            elif kind == "Metaspace":
                replacement, scheme = arguments
                first = "" if scheme != "never" else " "
                tokens = [t.replace(replacement, first if i == 0 else " ") for i, t in enumerate(tokens)]
            else:  # ByteLevel: a token spelled in the byte map is its bytes, any other its UTF-8
                tokens = [b"".join(map(_byte_level_bytes, tokens)).decode("utf-8", errors="replace")]
        return "".join(tokens)


def _step_to_hf(step: tuple) -> dict[str, Any]:
    kind, *arguments = step
    if kind == "Replace":
        return {"type": "Replace", "pattern": {"String": arguments[0]}, "content": arguments[1]}
    if kind == "Strip":
        return {"type": "Strip", "content": arguments[0], "start": arguments[1], "stop": arguments[2]}
    if kind == "Metaspace":
        return {
            "type": "Metaspace",
            "replacement": arguments[0],
            "prepend_scheme": arguments[1],
            "split": True,
        }
    if kind == "ByteLevel":
        return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"type": kind}


def _byte_level_bytes(token: str) -> bytes:
    try:
        return unicode_to_bytes(token)
    except ValueError:
        return token.encode("utf-8")


def _byte_fallback(tokens: list[str]) -> list[str]:
    out: list[str] = []
    run = bytearray()
    for token in tokens + [None]:
        byte = None if token is None else byte_of_token(token)
        if byte is not None:
            run.append(byte)
            continue
        if run:
            try:
                out.append(run.decode("utf-8"))
            except UnicodeDecodeError:
                out += ["\ufffd"] * len(run)
            run = bytearray()
        if token is not None:
            out.append(token)
    return out


def _strip(token: str, content: str, start: int, stop: int) -> str:
    begin = 0
    while begin < min(start, len(token)) and token[begin] == content:
        begin += 1
    end = len(token)
    while len(token) - end < stop and end > begin and token[end - 1] == content:
        end -= 1
    return token[begin:end]
