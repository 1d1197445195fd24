"""The one interface every tokenizer implements, and batch encoding on top of it.

    tok.encode("text", allowed_special=..., disallowed_special=...) -> list[int]
    tok.decode(ids) -> str
    tok.tokens("text") -> list[str]          one display string per token
    tok.offsets("text") -> list[(start, end)]   character span of each token in the text
    tok.explain("text") -> list[dict]        JSON-able data: how the text was split
    tok.vocab_size, tok.special_tokens, tok.save(path)
    tok.encode_batch(texts, padding=..., max_length=..., truncation=...) -> BatchEncoding

``encode``, ``offsets``, ``explain`` and ``tokens`` treat the spelling of a special token in
the text by one rule for every tokenizer (tiktoken's; `glassformer.tokenizers.special`): by
default it is an error; ``allowed_special`` names those that become their id,
``disallowed_special="none"`` lets the rest be ordinary text.

Our own file format is one JSON object (written atomically)::

    {"format": "glassformer-tokenizer", "version": 1,
     "type": "bpe" | "char" | "wordpiece" | "sentencepiece_bpe" | "unigram", ...}

where the rest is the tokenizer's ``to_dict()``; `glassformer.tokenizers.load_tokenizer`
reads it back (and every other supported format).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from glassformer.atomic import write_text_atomic

FORMAT = "glassformer-tokenizer"
FORMAT_VERSION = 1
PADDINGS = ("longest", "max_length", "none")


@dataclass(frozen=True)
class BatchEncoding:
    """Token ids and attention masks (1 = token, 0 = padding) of a batch of texts."""

    ids: list[list[int]]
    attention_mask: list[list[int]]

    def tensors(self):
        """(ids, attention_mask) as b t long tensors (rows must have equal length)."""
        import torch

        return torch.tensor(self.ids, dtype=torch.long), torch.tensor(self.attention_mask, dtype=torch.long)


class Tokenizer(ABC):
    """Base class: subclasses implement encode / decode / id_to_token / offsets / explain /
    to_dict / from_dict and set ``kind``."""

    kind: ClassVar[str]
    special_tokens: dict[str, int]
    pad_token_id: int | None = None

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode(self, text: str, **options: Any) -> list[int]: ...

    @abstractmethod
    def decode(self, ids: Sequence[int]) -> str: ...

    @abstractmethod
    def id_to_token(self, token_id: int) -> str:
        """A readable string for one token id (what `tokens` lists)."""

    def token_bytes(self, token_id: int) -> bytes | None:
        """The bytes a token stands for, for a byte-level tokenizer; None for one whose tokens
        are characters or words (its `id_to_token` is then the token's text)."""
        return None

    @abstractmethod
    def offsets(self, text: str, **options: Any) -> list[tuple[int, int]]:
        """(start, end) character offsets in ``text`` of each token of ``encode(text)``."""

    @abstractmethod
    def explain(self, text: str, **options: Any) -> list[dict[str, Any]]: ...

    @abstractmethod
    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def from_dict(cls, data: dict[str, Any]) -> Tokenizer: ...

    def tokens(self, text: str, **options: Any) -> list[str]:
        return [self.id_to_token(i) for i in self.encode(text, **options)]

    def save(self, path: str | Path) -> None:
        """Write our JSON format atomically."""
        data = {"format": FORMAT, "version": FORMAT_VERSION, "type": self.kind, **self.to_dict()}
        write_text_atomic(Path(path), json.dumps(data, ensure_ascii=False))

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        padding: str = "longest",
        max_length: int | None = None,
        truncation: bool = False,
        pad_side: str = "right",
        **options: Any,
    ) -> BatchEncoding:
        """Encode several texts; pad to the longest (or to ``max_length``), optionally truncate."""
        if isinstance(texts, str):
            raise TypeError("encode_batch takes a list of texts; for one text use encode()")
        if padding not in PADDINGS:
            raise ValueError(f"padding={padding!r}; allowed values: {', '.join(PADDINGS)}")
        if pad_side not in ("left", "right"):
            raise ValueError(f"pad_side={pad_side!r}; allowed values: 'left', 'right'")
        if (truncation or padding == "max_length") and (max_length is None or max_length < 1):
            raise ValueError("truncation=True and padding='max_length' need max_length >= 1")
        rows = [self.encode(text, **options) for text in texts]
        if truncation:
            rows = [row[:max_length] for row in rows]
        width = max_length if padding == "max_length" else max((len(r) for r in rows), default=0)
        if padding != "none" and any(len(r) > width for r in rows):
            longest = max(len(r) for r in rows)
            raise ValueError(
                f"a text has {longest} tokens, more than max_length={width}; pass truncation=True"
            )
        if padding == "none":
            return BatchEncoding(rows, [[1] * len(r) for r in rows])
        if self.pad_token_id is None:
            raise ValueError("this tokenizer has no pad token: padding needs one (or pass padding='none')")
        ids, masks = [], []
        for row in rows:
            gap = width - len(row)
            pad, ones = [self.pad_token_id] * gap, [1] * len(row)
            ids.append(pad + row if pad_side == "left" else row + pad)
            masks.append([0] * gap + ones if pad_side == "left" else ones + [0] * gap)
        return BatchEncoding(ids, masks)
