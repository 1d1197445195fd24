"""What SentencePiece-style tokenizers share: text -> normalizer -> pre-tokenizer -> pieces ->
the model's tokens per piece; ids -> token strings -> decoder -> text.

Their vocabulary is strings, not bytes: "▁" marks a space (SentencePiece's word boundary) and
``<0xE4>`` is a byte-fallback token, one byte of a character the vocabulary lacks. Two
models fill in `PieceTokenizer._tokenize`, the tokens of one piece:

* `glassformer.tokenizers.sentencepiece_bpe.SentencePieceBPE` (Llama 2, Mistral 7B, Gemma, Phi-3):
  BPE merges over characters;
* `glassformer.tokenizers.unigram.Unigram` (T5, mT5, ALBERT, XLM-R): the most probable
  segmentation (Viterbi).

A token is shown (`id_to_token`) as the text it stands for: "▁" as a space, a byte-fallback
token as its byte (hex when it is part of a character, as for byte-level BPE;
`glassformer.tokenizers.readable`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.decoders import Decoder, byte_of_token
from glassformer.tokenizers.hf_added_tokens import added_tokens, added_tokens_to_hf
from glassformer.tokenizers.hf_pretokenizers import PreTokenizer
from glassformer.tokenizers.normalizers import Normalizer
from glassformer.tokenizers.readable import readable_bytes
from glassformer.tokenizers.special import SpecialOption, resolve_special, split_special

SPACE_MARK = "\u2581"  # ▁, SentencePiece's space
Token = tuple[int, int, int]  # (id, first character, end character) within a piece


class _TokenCache(dict):
    """piece -> its tokens; a miss tokenizes the piece. Cleared when full (bounded memory)."""

    def __init__(self, tokenize, max_size: int = 100_000):
        super().__init__()
        self.tokenize, self.max_size = tokenize, max_size

    def __missing__(self, piece: str) -> list[Token]:
        if len(self) >= self.max_size:
            self.clear()
        tokens = self[piece] = self.tokenize(piece)
        return tokens


class PieceTokenizer(Tokenizer):
    """``pieces``: token string -> id; ``special_tokens``: the added tokens cut out first."""

    kind: ClassVar[str]

    def __init__(
        self,
        pieces: dict[str, int],
        special_tokens: dict[str, int] | None = None,
        normalizer: Normalizer | None = None,
        pre_tokenizer: PreTokenizer | None = None,
        decoder: Decoder | None = None,
        pad_token_id: int | None = None,
    ):
        self.pieces = dict(pieces)
        self.special_tokens = dict(special_tokens or {})
        self.normalizer = normalizer or Normalizer()
        self.pre_tokenizer = pre_tokenizer or PreTokenizer()
        self.decoder = decoder or Decoder()
        self.piece_of: dict[int, str] = {i: piece for piece, i in self.pieces.items()}
        if len(self.piece_of) != len(self.pieces):
            raise ValueError("the vocabulary maps two pieces to the same id; ids must be unique")
        self.piece_of.update({i: text for text, i in self.special_tokens.items()})
        if pad_token_id is not None and pad_token_id not in self.piece_of:
            raise ValueError(f"pad_token_id={pad_token_id} is not an id of this vocabulary")
        self.pad_token_id = pad_token_id
        self._vocab_size = max(self.piece_of, default=-1) + 1
        self._special_ids = set(self.special_tokens.values())
        self._cache = _TokenCache(self._tokenize)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @abstractmethod
    def _tokenize(self, piece: str) -> list[Token]:
        """The tokens of one piece: (id, start, end) with start:end its characters in the piece."""

    @abstractmethod
    def _explain_piece(self, piece: str) -> dict[str, Any]:
        """The model's account of one piece: at least ``parts`` and ``steps``."""

    # --- text -> pieces ---------------------------------------------------------------------

    def _chunks(self, text: str, allowed_special: SpecialOption, disallowed_special: SpecialOption):
        """(piece, spans, is_special) for every special token and piece of ``text``; spans:
        the original span of each character of the piece."""
        policy = resolve_special(self.special_tokens, allowed_special, disallowed_special)
        for start, end, special in split_special(text, policy):
            if special:
                yield text[start:end], [(start, end)], True
                continue
            normalized, spans = self.normalizer.aligned(text[start:end], start)
            for piece, piece_spans in self.pre_tokenizer.pieces(normalized, spans):
                yield piece, piece_spans, False

    def encode(
        self, text: str, *, allowed_special: SpecialOption = "none", disallowed_special: SpecialOption = "all"
    ) -> list[int]:
        """Token ids of ``text``; special tokens by our rule (`glassformer.tokenizers.special`)."""
        ids: list[int] = []
        for piece, _, special in self._chunks(text, allowed_special, disallowed_special):
            if special:
                ids.append(self.special_tokens[piece])
            else:
                ids += [token_id for token_id, _, _ in self._cache[piece]]
        return ids

    def offsets(
        self, text: str, *, allowed_special: SpecialOption = "none", disallowed_special: SpecialOption = "all"
    ) -> list[tuple[int, int]]:
        """(start, end) in ``text`` of each token: the original characters its characters came from."""
        out = []
        for piece, spans, special in self._chunks(text, allowed_special, disallowed_special):
            if special:
                out.append(spans[0])
                continue
            out += [(spans[a][0], spans[b - 1][1]) for _, a, b in self._cache[piece]]
        return out

    def explain(
        self, text: str, *, allowed_special: SpecialOption = "none", disallowed_special: SpecialOption = "all"
    ) -> list[dict[str, Any]]:
        """Each piece (its text as the model sees it, "▁" and all), how the model cut it, its ids."""
        out = []
        for piece, spans, special in self._chunks(text, allowed_special, disallowed_special):
            entry = {"text": piece, "start": spans[0][0], "end": spans[-1][1], "special": special}
            if special:
                out.append(entry | {"parts": [piece], "steps": [], "ids": [self.special_tokens[piece]]})
                continue
            ids = [token_id for token_id, _, _ in self._cache[piece]]
            out.append(entry | self._explain_piece(piece) | {"ids": ids})
        return out

    # --- ids -> text ------------------------------------------------------------------------

    def _check_ids(self, ids: Sequence[int]) -> list[int]:
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        for i in ids:
            if not isinstance(i, Hashable) or i not in self.piece_of:
                raise ValueError(f"unknown token id {i!r}: this tokenizer's ids are 0..{self.vocab_size - 1}")
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of the ids, as HF's ``decode(ids, skip_special_tokens=False)``: the token
        strings through the decoder (none: joined by spaces, as HF does)."""
        tokens = [self.piece_of[i] for i in self._check_ids(ids)]
        return self.decoder.decode(tokens) if self.decoder.steps else " ".join(tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes the token stands for: "▁" a space, ``<0xE4>`` the byte E4."""
        piece = self.piece_of[self._check_ids([token_id])[0]]
        if token_id in self._special_ids:
            return piece.encode("utf-8")
        byte = byte_of_token(piece)
        return bytes([byte]) if byte is not None else piece.replace(SPACE_MARK, " ").encode("utf-8")

    def id_to_token(self, token_id: int) -> str:
        """The token as a reader sees it: "▁the" as " the", ``<0xE4>`` as ⟨E4⟩."""
        return readable_bytes(self.token_bytes(token_id))

    # --- files --------------------------------------------------------------------------------

    @abstractmethod
    def _model_to_hf(self) -> dict[str, Any]:
        """The ``model`` object of the tokenizer.json (BPE's vocab and merges, Unigram's scores)."""

    def to_hf_dict(self) -> dict[str, Any]:
        """The contents of an HF ``tokenizer.json`` (``tokenizers.Tokenizer.from_str`` reads it)."""
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added_tokens_to_hf(self.special_tokens),
            "normalizer": self.normalizer.to_hf(),
            "pre_tokenizer": self.pre_tokenizer.to_hf(),
            "post_processor": None,
            "decoder": self.decoder.to_hf(),
            "model": self._model_to_hf(),
        }

    def to_dict(self) -> dict[str, Any]:
        """Our format holds the HF ``tokenizer.json`` contents: one description of the pipeline."""
        return {"tokenizer_json": self.to_hf_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PieceTokenizer:
        if "tokenizer_json" not in data:
            raise ValueError(f"{cls.kind} tokenizer data lacks the field 'tokenizer_json'")
        return cls.from_hf(data["tokenizer_json"], f"our {cls.kind} tokenizer file")

    @classmethod
    @abstractmethod
    def from_hf(cls, data: dict[str, Any], source: str) -> PieceTokenizer:
        """The tokenizer a parsed tokenizer.json holds; ``source`` names it in errors."""


def pipeline_from_hf(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The parts every `PieceTokenizer` reads from a ``tokenizer.json``, as keyword arguments."""
    normalizer = Normalizer.from_hf(data.get("normalizer"), source)
    return {
        "special_tokens": added_tokens(data.get("added_tokens"), normalizer, source),
        "normalizer": normalizer,
        "pre_tokenizer": PreTokenizer.from_hf(data.get("pre_tokenizer"), source),
        "decoder": Decoder.from_hf(data.get("decoder"), source),
        "pad_token_id": (data.get("padding") or {}).get("pad_id"),
    }
