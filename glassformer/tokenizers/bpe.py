"""Byte-level BPE, the tokenizer of GPT-2, GPT-4, Llama 3 and SmolLM2: text -> UTF-8 bytes -> tokens.

How ``encode`` turns a text into ids:

1. special tokens such as ``<|endoftext|>`` are cut out first (only those you allow; the rule
   for every tokenizer, tiktoken's, is in `glassformer.tokenizers.special`);
2. the pre-tokenizer regex cuts the rest into pieces (`glassformer.tokenizers.pretokenize`);
3. a piece's UTF-8 bytes start as one part per byte; the adjacent pair with the lowest rank is
   merged into one part, again and again, until no adjacent pair has a rank (Sennrich et al.
   2016, on bytes as in GPT-2; the loop is `glassformer.tokenizers.bpe_merge`);
4. every final part is a token of the vocabulary: its id is the output.

A pair's rank comes from one of two sources, as in the two reference implementations:

- ``merges=None`` (tiktoken): rank(a, b) = vocab[a + b], the id of the merged token; and a
  piece that is itself a token is taken whole without merging.
- ``merges=[(a, b), ...]`` (GPT-2's vocab.bpe, HF tokenizer.json): rank(a, b) = position of
  (a, b) in the list; only listed pairs merge.

>>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
>>> tok = ByteBPE(vocab)
>>> tok.encode("abcab")
[257, 256]
>>> tok.decode([257, 256]), tok.id_to_token(257)
('abcab', 'abc')

Where we differ from tiktoken on purpose: a lone surrogate ("\\ud800") is a ValueError (tiktoken
silently turns it into U+FFFD); a custom regex that skips characters is a ValueError (tiktoken
drops them); a special-token option that names no special token, or is one string such as
``allowed_special="<|endoftext|>"``, is a ValueError (`glassformer.tokenizers.special`). The
``regex`` package's Unicode tables may be newer than tiktoken's: characters added to Unicode
recently can be pre-tokenized differently (ids differ, decoding still round-trips).

Files of HF ``tokenizers`` add two steps before the pieces: a ``normalizer`` (Qwen: NFC;
`glassformer.tokenizers.normalizers`) and a pre-tokenizer of several steps instead of one regex
(DeepSeek-V3: three ``Split`` s; `glassformer.tokenizers.hf_pretokenizers.PreTokenizer`, given
as ``pattern``). ``ignore_merges`` (Llama 3) takes a piece that is a token whole, as tiktoken.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, ClassVar

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.bpe_files import read_gpt2_files, read_js_tiktoken, read_tiktoken
from glassformer.tokenizers.bpe_merge import SINGLE_BYTES, merge, pair_ranker
from glassformer.tokenizers.byte_unicode import (
    bytes_to_unicode,
    reject_surrogates,
    split_merge,
    unicode_to_bytes,
)
from glassformer.tokenizers.hf_pretokenizers import PreTokenizer
from glassformer.tokenizers.normalizers import Normalizer
from glassformer.tokenizers.pretokenize import PATTERNS, check_covers, compile_pattern, pattern_name, split
from glassformer.tokenizers.readable import readable_bytes
from glassformer.tokenizers.special import SpecialOption, resolve_special, split_special


class _PieceCache(dict):
    """piece -> ids; a miss encodes the piece. Cleared when full, so memory stays bounded."""

    def __init__(self, encode_piece, max_size: int = 200_000):
        super().__init__()
        self.encode_piece, self.max_size = encode_piece, max_size

    def __missing__(self, piece: str) -> list[int]:
        if len(self) >= self.max_size:
            self.clear()
        ids = self[piece] = self.encode_piece(piece)
        return ids


class ByteBPE(Tokenizer):
    """Byte-level BPE tokenizer. ``vocab`` maps token bytes to ids; ``merges`` (optional) ranks
    pairs in list order; ``pattern`` is a pre-tokenizer name, a regex or a `PreTokenizer`;
    ``ignore_merges`` (default: when there are no merges) takes a piece that is a token whole."""

    kind: ClassVar[str] = "bpe"

    def __init__(
        self,
        vocab: dict[bytes, int],
        merges: Sequence[tuple[bytes, bytes]] | None = None,
        pattern: str | PreTokenizer = "gpt2",
        special_tokens: dict[str, int] | None = None,
        pad_token_id: int | None = None,
        normalizer: Normalizer | None = None,
        ignore_merges: bool | None = None,
    ):
        self.vocab = dict(vocab)
        self.merges = None if merges is None else [(bytes(a), bytes(b)) for a, b in merges]
        self.ignore_merges = self.merges is None if ignore_merges is None else bool(ignore_merges)
        self.normalizer = normalizer or Normalizer()
        self.pattern = pattern if isinstance(pattern, PreTokenizer) else (pattern_name(pattern) or pattern)
        if isinstance(self.pattern, str):
            compile_pattern(self.pattern)  # fail now on a bad pattern, not at the first encode
        self.special_tokens = dict(special_tokens or {})
        self._validate()
        self.decoder: dict[int, bytes] = {i: token for token, i in self.vocab.items()}
        self.decoder.update({i: text.encode("utf-8") for text, i in self.special_tokens.items()})
        if pad_token_id is not None and pad_token_id not in self.decoder:
            raise ValueError(f"pad_token_id={pad_token_id} is not an id of this vocabulary")
        self.pad_token_id = pad_token_id
        self._vocab_size = max(self.decoder) + 1
        self.pair_rank = pair_ranker(self.vocab, self.merges)  # (a, b) -> rank, NO_MERGE if never
        self._cache = _PieceCache(self._encode_piece)

    def _validate(self) -> None:
        if len(set(self.vocab.values())) != len(self.vocab):
            raise ValueError("vocab maps two tokens to the same id; ids must be unique")
        for index, (a, b) in enumerate(self.merges or ()):
            for token in (a, b, a + b):
                if token not in self.vocab:
                    raise ValueError(f"merge {index} ({a!r}, {b!r}) uses {token!r}, which is not in vocab")
        for text in self.special_tokens:
            if not text or not isinstance(text, str):
                raise ValueError(f"special token {text!r} must be a non-empty string")
        special_ids = list(self.special_tokens.values())
        clash = set(special_ids) & set(self.vocab.values())
        if clash or len(set(special_ids)) != len(special_ids):
            raise ValueError(f"special token ids {special_ids} clash with each other or with the vocab")

    @property
    def vocab_size(self) -> int:
        """Largest id + 1 (ids may have gaps, as in cl100k_base): the rows an embedding needs."""
        return self._vocab_size

    def __repr__(self) -> str:
        ranking = "tiktoken ranks" if self.merges is None else f"{len(self.merges)} merges"
        return f"ByteBPE(vocab_size={self.vocab_size}, {ranking}, pattern={self.pattern!r})"

    # --- one piece -------------------------------------------------------------------------

    def merge(self, parts: list[bytes], steps: list[dict] | None = None) -> list[bytes]:
        """Merge adjacent parts, lowest rank first (leftmost on ties), until no pair has a rank
        (`glassformer.tokenizers.bpe_merge.merge`).

        >>> ByteBPE({bytes([b]): b for b in range(256)} | {b"ab": 256}).merge([b"a", b"b", b"c"])
        [b'ab', b'c']
        """
        return merge(parts, self.pair_rank, steps)

    def _encode_piece(self, piece: str) -> list[int]:
        data = piece.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError, caught in encode
        if self.ignore_merges and data in self.vocab:
            return [self.vocab[data]]  # tiktoken's rule: a piece that is a token is taken whole
        try:
            return [
                self.vocab[part] for part in merge(list(map(SINGLE_BYTES.__getitem__, data)), self.pair_rank)
            ]
        except KeyError as error:
            # Some vocabularies (SmolLM2) lack a few bytes that valid UTF-8 rarely or never uses.
            raise ValueError(
                f"{piece!r} needs the byte {error.args[0]!r}, which has no token in this vocabulary "
                "(it lacks some single bytes); remove or replace that character"
            ) from None

    # --- special tokens -------------------------------------------------------------------

    def _segments(
        self, text: str, allowed_special: SpecialOption, disallowed_special: SpecialOption
    ) -> list[tuple[int, str, bool]]:
        """``text`` cut at allowed special tokens: [(start, chunk, is_special), ...]."""
        policy = resolve_special(self.special_tokens, allowed_special, disallowed_special)
        return [(start, text[start:end], special) for start, end, special in split_special(text, policy)]

    # --- the Tokenizer interface ----------------------------------------------------------

    def encode(
        self,
        text: str,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> list[int]:
        """Token ids of ``text``, with tiktoken's rule for special tokens (`glassformer.tokenizers.special`).

        By default the text of a special token (``"<|endoftext|>"``) is an error: pass
        ``allowed_special={"<|endoftext|>"}`` (or ``"all"``) to turn it into its one id, or
        ``disallowed_special="none"`` (tiktoken: ``()``) to encode it like any other text.

        >>> tok = ByteBPE({bytes([b]): b for b in range(256)}, special_tokens={"<|end|>": 256})
        >>> tok.encode("hi<|end|>", allowed_special="all")
        [104, 105, 256]
        """
        ids: list[int] = []
        try:
            for _, chunk, special in self._segments(text, allowed_special, disallowed_special):
                if special:
                    ids.append(self.special_tokens[chunk])
                    continue
                chunk = self.normalizer.normalize(chunk) if self.normalizer else chunk
                if isinstance(self.pattern, PreTokenizer):
                    pieces = self.pattern.split(chunk)
                else:
                    pieces = split(chunk, self.pattern)
                    if self.pattern not in PATTERNS:
                        check_covers(chunk, pieces, self.pattern)
                ids += chain.from_iterable(map(self._cache.__getitem__, pieces))
        except UnicodeEncodeError:
            reject_surrogates(text)
            raise
        return ids

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The bytes of the tokens, joined. ``b"".join`` of ``id -> bytes`` lookups."""
        ids = ids.tolist() if hasattr(ids, "tolist") else ids  # a tensor or array of ids
        try:
            return b"".join(map(self.decoder.__getitem__, ids))
        except (KeyError, TypeError):
            bad = next(i for i in ids if not isinstance(i, Hashable) or i not in self.decoder)
            raise ValueError(
                f"unknown token id {bad!r}: this tokenizer's ids are 0..{self.vocab_size - 1}"
            ) from None

    def decode(self, ids: Sequence[int]) -> str:
        """Text of the ids. Bytes that are not valid UTF-8 (a character cut between tokens, as
        when decoding a prefix of a generation) become U+FFFD "�" (``errors="replace"``); use
        `decode_bytes` to keep them exactly."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def id_to_token(self, token_id: int) -> str:
        """The token as a reader sees it: its characters (" cat"), and a byte of a character it
        does not hold whole as hex (half of "é", b"\\xc3", shows as "⟨C3⟩";
        `glassformer.tokenizers.readable`)."""
        return readable_bytes(self.token_bytes(token_id))

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes token ``token_id`` stands for (a special token: its text's)."""
        if token_id not in self.decoder:
            raise ValueError(
                f"unknown token id {token_id!r}: this tokenizer's ids are 0..{self.vocab_size - 1}"
            )
        return self.decoder[token_id]

    def _pieces(self, text: str, allowed_special: SpecialOption, disallowed_special: SpecialOption):
        """(piece, spans, is_special) for every special token and pre-token of ``text``; spans:
        each character's span in ``text`` (a normalizer may change characters)."""
        segments = self._segments(text, allowed_special, disallowed_special)
        reject_surrogates(text)
        for start, chunk, special in segments:
            if special:
                yield chunk, [(start, start + len(chunk))] * len(chunk), True
                continue
            chunk, spans = self.normalizer.aligned(chunk, start)
            if isinstance(self.pattern, PreTokenizer):
                yield from (
                    (piece, piece_spans, False) for piece, piece_spans in self.pattern.pieces(chunk, spans)
                )
                continue
            pieces, position = split(chunk, self.pattern), 0
            check_covers(chunk, pieces, self.pattern)
            for piece in pieces:
                yield piece, spans[position : position + len(piece)], False
                position += len(piece)

    def offsets(
        self,
        text: str,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> list[tuple[int, int]]:
        """(start, end) character span of every token of ``encode(text)``.

        A token is given the characters its bytes touch. When a character's UTF-8 bytes are
        split between tokens (an emoji made of two tokens), each of those tokens gets the whole
        character, so their spans overlap.

        >>> tok = ByteBPE({bytes([b]): b for b in range(256)})
        >>> tok.offsets("é!")  # "é" is two bytes, two tokens
        [(0, 1), (0, 1), (1, 2)]
        """
        spans: list[tuple[int, int]] = []
        for piece, piece_spans, special in self._pieces(text, allowed_special, disallowed_special):
            if special:
                spans.append(piece_spans[0])
                continue
            char_of_byte = [c for c, char in enumerate(piece) for _ in range(len(char.encode("utf-8")))]
            position = 0
            for token_id in self._cache[piece]:
                last = position + len(self.decoder[token_id]) - 1
                spans.append((piece_spans[char_of_byte[position]][0], piece_spans[char_of_byte[last]][1]))
                position = last + 1
        return spans

    def explain(
        self,
        text: str,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> list[dict[str, Any]]:
        """How each pre-token was merged, as JSON-able dicts (the data of the BPE lessons).

        Parts are written as a reader sees them (`readable.readable_bytes`): their characters,
        and a byte of a character a part does not hold whole as hex ("⟨F0 9F⟩"). ``rank`` is
        the pair's priority.

        >>> tok = ByteBPE({bytes([b]): b for b in range(256)} | {b"ab": 256})
        >>> tok.explain("ab")[0]["steps"]
        [{'merge': ['a', 'b'], 'rank': 256, 'at': 0, 'parts': ['ab']}]
        """
        out = []
        for piece, spans, special in self._pieces(text, allowed_special, disallowed_special):
            entry = {"text": piece, "start": spans[0][0], "end": spans[-1][1], "special": special}
            if special:
                out.append(entry | {"parts": [piece], "steps": [], "ids": [self.special_tokens[piece]]})
                continue
            data, steps = piece.encode("utf-8"), []
            initial = list(map(SINGLE_BYTES.__getitem__, data))
            parts = self.merge(list(initial), steps)
            if self.ignore_merges and data in self.vocab and parts != [data]:
                steps.append(
                    {"merge": parts, "rank": self.vocab[data], "at": 0, "parts": [data], "whole_piece": True}
                )
                parts = [data]
            for step in steps:
                step["merge"] = [readable_bytes(p) for p in step["merge"]]
                if "parts" in step:  # short pieces only (`bpe_merge.PARTS_RECORDED`)
                    step["parts"] = [readable_bytes(p) for p in step["parts"]]
            ids = [self.vocab[part] for part in parts]
            out.append(entry | {"parts": [readable_bytes(p) for p in initial], "steps": steps, "ids": ids})
        return out

    # --- files ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Tokens in GPT-2's byte-to-unicode form; merges as "a b" strings, as HF tokenizer.json."""
        merges = None
        if self.merges is not None:
            merges = [f"{bytes_to_unicode(a)} {bytes_to_unicode(b)}" for a, b in self.merges]
        by_id = sorted(self.vocab.items(), key=lambda item: item[1])
        vocab = {bytes_to_unicode(token): i for token, i in by_id}
        pattern = self.pattern
        return {
            "pattern": {"pre_tokenizer": pattern.to_hf()} if isinstance(pattern, PreTokenizer) else pattern,
            "vocab": vocab,
            "merges": merges,
            "special_tokens": dict(self.special_tokens),
            "pad_token_id": self.pad_token_id,
            "normalizer": self.normalizer.to_hf(),
            "ignore_merges": self.ignore_merges,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ByteBPE:
        if data.get("type", cls.kind) != cls.kind:
            raise ValueError(f"this is a {data['type']!r} tokenizer, not a byte-level BPE ({cls.kind!r})")
        if missing := {"vocab", "pattern"} - set(data):
            raise ValueError(f"BPE tokenizer data lacks the fields {sorted(missing)}")
        merges, pattern = data.get("merges"), data["pattern"]
        if isinstance(pattern, dict):  # several steps, in HF's words (`PreTokenizer`)
            pattern = PreTokenizer.from_hf(pattern.get("pre_tokenizer"), "BPE tokenizer data")
        return cls(
            vocab={unicode_to_bytes(token): i for token, i in data["vocab"].items()},
            merges=None if merges is None else [split_merge(line) for line in merges],
            pattern=pattern,
            special_tokens=data.get("special_tokens"),
            pad_token_id=data.get("pad_token_id"),
            normalizer=Normalizer.from_hf(data.get("normalizer"), "BPE tokenizer data"),
            ignore_merges=data.get("ignore_merges"),
        )

    @classmethod
    def from_gpt2_files(
        cls, encoder_json: str | Path, vocab_bpe: str | Path, pattern: str = "gpt2"
    ) -> ByteBPE:
        """GPT-2's own encoder.json + vocab.bpe (see `glassformer.tokenizers.bpe_files`)."""
        return cls(**read_gpt2_files(encoder_json, vocab_bpe, pattern)._asdict())

    @classmethod
    def from_tiktoken(
        cls, path: str | Path, pattern: str, special_tokens: dict[str, int] | None = None
    ) -> ByteBPE:
        """A tiktoken .tiktoken rank file (see `glassformer.tokenizers.bpe_files`)."""
        return cls(**read_tiktoken(path, pattern, special_tokens)._asdict())

    @classmethod
    def from_js_tiktoken(cls, path: str | Path) -> ByteBPE:
        """A js-tiktoken ranks file (see `glassformer.tokenizers.bpe_files`)."""
        return cls(**read_js_tiktoken(path)._asdict())
