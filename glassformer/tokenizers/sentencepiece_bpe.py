"""SentencePiece-style BPE (Llama 2, Mistral 7B, Gemma 1/2/3, Phi-3): BPE over characters,
with byte fallback.

The text is first made into SentencePiece's form ("Hello world" -> "▁Hello▁world", by a
``Metaspace`` pre-tokenizer or ``Prepend`` / ``Replace`` normalizers). Each piece then:

1. starts as one part per character; a character the vocabulary lacks becomes its UTF-8 bytes
   as byte-fallback tokens ``<0xE4><0xB8><0x80>`` (``byte_fallback``), else the unknown token
   (neighbouring unknowns fused into one with ``fuse_unk``);
2. merges the adjacent pair listed first in ``merges``, again and again, until no adjacent
   pair is listed (Sennrich et al. 2016; the loop is `glassformer.tokenizers.bpe_merge`);
3. with ``ignore_merges``, a piece that is itself in the vocabulary is one token at once.

>>> pieces = {"▁": 0, "a": 1, "b": 2, "▁a": 3, "▁ab": 4, "<0xC3>": 5, "<0xA9>": 6}
>>> tok = SentencePieceBPE(pieces, [("▁", "a"), ("▁a", "b")], byte_fallback=True,
...     pre_tokenizer=PreTokenizer((Metaspace(prepend_scheme="first"),)))
>>> tok.encode("ab é")
[4, 0, 5, 6]
>>> tok.tokens("ab é")
[' ab', ' ', '⟨C3⟩', '⟨A9⟩']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from glassformer.tokenizers.bpe_merge import merge, pair_ranker
from glassformer.tokenizers.hf_pretokenizers import Metaspace, PreTokenizer
from glassformer.tokenizers.normalizers import refuse
from glassformer.tokenizers.piece_tokenizer import PieceTokenizer, Token, pipeline_from_hf
from glassformer.tokenizers.readable import readable_bytes

__all__ = ["Metaspace", "PreTokenizer", "SentencePieceBPE"]


class SentencePieceBPE(PieceTokenizer):
    """``pieces``: token -> id; ``merges``: pairs of tokens, the first listed merges first."""

    kind: ClassVar[str] = "sentencepiece_bpe"

    def __init__(
        self,
        pieces: dict[str, int],
        merges: Sequence[tuple[str, str]],
        *,
        unk_token: str | None = None,
        byte_fallback: bool = False,
        fuse_unk: bool = False,
        ignore_merges: bool = False,
        **pipeline: Any,
    ):
        super().__init__(pieces, **pipeline)
        self.merges = [(a, b) for a, b in merges]
        for index, (a, b) in enumerate(self.merges):
            if a + b not in self.pieces:  # HF refuses such a file too
                raise ValueError(
                    f"merge {index} ({a!r}, {b!r}) makes {a + b!r}, which is not in the vocabulary"
                )
        if unk_token is not None and unk_token not in self.pieces:
            raise ValueError(f"unk_token {unk_token!r} is not in the vocabulary")
        self.unk_token, self.byte_fallback, self.fuse_unk = unk_token, byte_fallback, fuse_unk
        self.ignore_merges = ignore_merges
        self.pair_rank = pair_ranker(self.pieces, self.merges)

    def __repr__(self) -> str:
        return f"SentencePieceBPE(vocab_size={self.vocab_size}, {len(self.merges)} merges)"

    def initial_parts(self, piece: str) -> list[tuple[str, int, int]]:
        """(part, start, end) before merging: characters, byte-fallback tokens, unknowns."""
        parts: list[tuple[str, int, int]] = []
        for i, char in enumerate(piece):
            if char in self.pieces:
                parts.append((char, i, i + 1))
                continue
            fallback = [f"<0x{byte:02X}>" for byte in char.encode("utf-8")]
            if self.byte_fallback and all(token in self.pieces for token in fallback):
                parts += [(token, i, i + 1) for token in fallback]
            elif self.unk_token is None:
                raise ValueError(
                    f"the character {char!r} (U+{ord(char):04X}) is not in the vocabulary and this "
                    "tokenizer has neither byte fallback nor an unknown token (HF drops it silently)"
                )
            elif self.fuse_unk and parts and parts[-1][0] == self.unk_token and parts[-1][2] == i:
                parts[-1] = (self.unk_token, parts[-1][1], i + 1)
            else:
                parts.append((self.unk_token, i, i + 1))
        return parts

    def _tokenize(self, piece: str) -> list[Token]:
        if self.ignore_merges and piece in self.pieces:
            return [(self.pieces[piece], 0, len(piece))]
        parts = self.initial_parts(piece)
        merged = merge([part for part, _, _ in parts], self.pair_rank)
        tokens, index = [], 0
        for part in merged:  # each merged part is a run of initial parts: find its characters
            first, length = index, 0
            while length < len(part):
                length += len(parts[index][0])
                index += 1
            tokens.append((self.pieces[part], parts[first][1], parts[index - 1][2]))
        return tokens

    def _explain_piece(self, piece: str) -> dict[str, Any]:
        """The initial parts and each merge (``rank``: its place in ``merges``), as the BPE
        lessons show byte-level merges; parts written as a reader sees them."""
        parts = [part for part, _, _ in self.initial_parts(piece)]
        steps: list[dict] = []
        if self.ignore_merges and piece in self.pieces and len(parts) > 1:
            steps.append(
                {"merge": parts, "rank": self.pieces[piece], "at": 0, "parts": [piece], "whole_piece": True}
            )
        else:
            merge(list(parts), self.pair_rank, steps)
        for step in steps:
            step["merge"] = [self._shown(p) for p in step["merge"]]
            if "parts" in step:
                step["parts"] = [self._shown(p) for p in step["parts"]]
        return {"parts": [self._shown(p) for p in parts], "steps": steps}

    def _shown(self, part: str) -> str:
        return readable_bytes(self.token_bytes(self.pieces[part]))

    def _model_to_hf(self) -> dict[str, Any]:
        return {
            "type": "BPE",
            "dropout": None,
            "unk_token": self.unk_token,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": self.fuse_unk,
            "byte_fallback": self.byte_fallback,
            "ignore_merges": self.ignore_merges,
            "vocab": dict(sorted(self.pieces.items(), key=lambda item: item[1])),
            "merges": [list(pair) for pair in self.merges],
        }

    @classmethod
    def from_hf(cls, data: dict[str, Any], source: str = "tokenizer.json") -> SentencePieceBPE:
        """The BPE model of a ``tokenizer.json`` whose tokens are text (not GPT-2's byte map)."""
        model = data["model"]
        for option, harmless in (
            ("dropout", (None, 0, 0.0)),
            ("continuing_subword_prefix", (None, "")),
            ("end_of_word_suffix", (None, "")),
        ):
            if model.get(option) not in harmless:
                raise refuse(source, f"BPE option {option}=", model[option], f"one of {list(harmless)}")
        merges = []
        for entry in model.get("merges") or []:
            pair = entry.split(" ") if isinstance(entry, str) else entry
            if len(pair) != 2:
                raise ValueError(f"{source}: merge {entry!r} is not two tokens")
            merges.append(tuple(pair))
        return cls(
            model["vocab"],
            merges,
            unk_token=model.get("unk_token"),
            byte_fallback=bool(model.get("byte_fallback")),
            fuse_unk=bool(model.get("fuse_unk")),
            ignore_merges=bool(model.get("ignore_merges")),
            **pipeline_from_hf(data, source),
        )
