"""Unigram tokenization (Kudo 2018): the segmentation of a piece whose pieces are most probable.

The vocabulary gives each piece ``w`` a score, its log-probability ``log p(w)``. A piece of
text ``x`` can be cut into vocabulary pieces in many ways; the unigram model takes the pieces
as independent, so a segmentation ``w_1 ... w_k`` (with ``w_1 + ... + w_k = x``) has

    log P(w_1 ... w_k) = sum_i log p(w_i)

and the tokenizer returns the best one, ``argmax_{w_1 ... w_k} sum_i log p(w_i)``. Viterbi
finds it without listing the segmentations: ``best[j]``, the best score of a segmentation of
the first ``j`` characters, is ``max over pieces w ending at j of best[j - len(w)] + log p(w)``
(``best[0] = 0``); following each ``best[j]``'s piece back from the end gives the path. The
*lattice* is every (position, piece) that matches the text, with its score (`Unigram.lattice`).

A character that no piece covers is the unknown token, scored ``min(scores) - 10`` (HF
``tokenizers``' and SentencePiece's penalty); neighbouring unknown characters are fused into
one. With ``byte_fallback`` an unknown run becomes its UTF-8 bytes as ``<0xE4>`` tokens.

>>> pieces = [("<unk>", 0.0), ("▁", -2.0), ("a", -3.0), ("b", -3.0), ("▁a", -2.5), ("ab", -2.0)]
>>> tok = Unigram(pieces, unk_id=0, pre_tokenizer=PreTokenizer((Metaspace(),)))
>>> tok.tokens("ab")  # ▁ab: "▁a" + "b" scores -5.5, "▁" + "ab" -4.0
[' ', 'ab']
>>> tok.explain("ab")[0]["score"]
-4.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from glassformer.tokenizers.hf_pretokenizers import Metaspace, PreTokenizer
from glassformer.tokenizers.piece_tokenizer import PieceTokenizer, Token, pipeline_from_hf

__all__ = ["Metaspace", "PreTokenizer", "Unigram"]

UNKNOWN_PENALTY = 10.0  # an unknown character scores this much below the least likely piece


class Unigram(PieceTokenizer):
    """``scored_pieces``: (piece, log-probability) in id order; ``unk_id``: the unknown token."""

    kind: ClassVar[str] = "unigram"

    def __init__(
        self,
        scored_pieces: Sequence[tuple[str, float]],
        unk_id: int | None = None,
        *,
        byte_fallback: bool = False,
        **pipeline: Any,
    ):
        self.scores = [float(score) for _, score in scored_pieces]
        super().__init__({piece: i for i, (piece, _) in enumerate(scored_pieces)}, **pipeline)
        if unk_id is not None and not 0 <= unk_id < len(self.scores):
            raise ValueError(f"unk_id={unk_id} is not an id of the {len(self.scores)} pieces")
        self.unk_id, self.byte_fallback = unk_id, byte_fallback
        self.unknown_score = min(self.scores, default=0.0) - UNKNOWN_PENALTY
        self.longest = max((len(piece) for piece in self.pieces), default=1)

    def __repr__(self) -> str:
        return f"Unigram(vocab_size={self.vocab_size}, unk_id={self.unk_id})"

    def lattice(self, piece: str) -> list[dict[str, Any]]:
        """Every vocabulary piece that matches ``piece`` at some character: ``{"at", "end",
        "piece", "id", "score"}``, by position then length (an unknown character included)."""
        nodes = []
        for start in range(len(piece)):
            found_single = False
            for end in range(start + 1, min(len(piece), start + self.longest) + 1):
                token_id = self.pieces.get(piece[start:end])
                if token_id is not None:
                    found_single |= end == start + 1
                    nodes.append(
                        {"at": start, "end": end, "piece": piece[start:end], "id": token_id,
                         "score": self.scores[token_id]}
                    )  # fmt: skip
            if not found_single:  # no piece is this one character: it may be unknown
                nodes.append(
                    {"at": start, "end": start + 1, "piece": piece[start], "id": self.unk_id,
                     "score": self.unknown_score, "unknown": True}
                )  # fmt: skip
        return nodes

    def best_path(self, piece: str, nodes: list[dict[str, Any]] | None = None) -> tuple[list[dict], float]:
        """Viterbi: the lattice nodes of the best segmentation, in order, and its total score."""
        nodes = self.lattice(piece) if nodes is None else nodes
        best: list[tuple[float, dict] | None] = [None] * (len(piece) + 1)  # best[j]: (score, last node)
        best[0] = (0.0, {})
        for node in nodes:  # ordered by start: best[node["at"]] is final when its nodes come
            before = best[node["at"]]
            if before is None:
                continue
            score = before[0] + node["score"]
            if best[node["end"]] is None or score > best[node["end"]][0]:  # ties: the shorter (HF)
                best[node["end"]] = (score, node)
        path, end = [], len(piece)
        while end > 0:
            node = best[end][1]
            path.append(node)
            end = node["at"]
        return path[::-1], best[len(piece)][0]

    def _tokenize(self, piece: str) -> list[Token]:
        tokens: list[Token] = []
        for node in self._fused(self.best_path(piece)[0]):
            if not node.get("unknown"):
                tokens.append((node["id"], node["at"], node["end"]))
                continue
            fallback = [f"<0x{byte:02X}>" for byte in node["piece"].encode("utf-8")]
            if self.byte_fallback and all(token in self.pieces for token in fallback):
                tokens += [(self.pieces[token], node["at"], node["end"]) for token in fallback]
            elif self.unk_id is None:
                raise ValueError(
                    f"{node['piece']!r} matches no piece of the vocabulary and this Unigram tokenizer "
                    "has no unknown token (unk_id)"
                )
            else:
                tokens.append((self.unk_id, node["at"], node["end"]))
        return tokens

    @staticmethod
    def _fused(path: list[dict]) -> list[dict]:
        """Neighbouring unknown characters joined into one unknown node (HF's fuse_unk)."""
        out: list[dict] = []
        for node in path:
            if node.get("unknown") and out and out[-1].get("unknown"):
                out[-1] = out[-1] | {"end": node["end"], "piece": out[-1]["piece"] + node["piece"],
                                     "score": out[-1]["score"] + node["score"]}  # fmt: skip
            else:
                out.append(node)
        return out

    def _explain_piece(self, piece: str) -> dict[str, Any]:
        """The lattice (every matching piece and its score; ``best``: on the best path) and the
        best path's pieces and total score, the sum of their log-probabilities."""
        nodes = self.lattice(piece)
        path, score = self.best_path(piece, nodes)
        chosen = {id(node) for node in path}
        steps = [
            {key: value for key, value in node.items() if key != "id"} | {"best": id(node) in chosen}
            for node in nodes
        ]
        return {"parts": [node["piece"] for node in path], "steps": steps, "score": score}

    def _model_to_hf(self) -> dict[str, Any]:
        by_id = sorted(self.pieces.items(), key=lambda item: item[1])
        return {
            "type": "Unigram",
            "unk_id": self.unk_id,
            "vocab": [[piece, self.scores[i]] for piece, i in by_id],
            "byte_fallback": self.byte_fallback,
        }

    @classmethod
    def from_hf(cls, data: dict[str, Any], source: str = "tokenizer.json") -> Unigram:
        """The Unigram model of a ``tokenizer.json`` (``vocab``: [[piece, score], ...])."""
        model = data["model"]
        vocab = model.get("vocab")
        if not isinstance(vocab, list) or not all(isinstance(e, list) and len(e) == 2 for e in vocab):
            raise ValueError(f"{source}: a Unigram vocab is a list of [piece, score] pairs")
        return cls(
            [(piece, score) for piece, score in vocab],
            model.get("unk_id"),
            byte_fallback=bool(model.get("byte_fallback")),
            **pipeline_from_hf(data, source),
        )
