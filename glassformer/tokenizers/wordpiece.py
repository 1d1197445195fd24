"""WordPiece, BERT's tokenizer: normalize, split into words, then greedy longest-match subwords.

1. **Clean and normalize** each character (HF ``BertNormalizer``): drop NUL, U+FFFD and
   control/format characters; turn whitespace into spaces; put spaces around CJK
   ideographs; when lowercasing, also strip accents (NFD, then drop the combining marks,
   category Mn) and lowercase (`glassformer.tokenizers.bert_normalize`).
2. **Split into words** on whitespace, with every punctuation character a word of its own.
3. **WordPiece** each word: take the longest vocabulary entry that starts the word, then
   the longest ``##``-prefixed entry that continues it, and so on; a word that cannot be
   covered (or is longer than ``max_input_chars_per_word``) becomes one ``[UNK]``.

Every normalized character remembers the original character it came from, so token
offsets point into the text as given (before lowercasing and accent stripping). The
spelling of a special token in the text ("[MASK]") follows the rule of every tokenizer
(`glassformer.tokenizers.special`): an error unless allowed (``allowed_special="all"``: its
id, as HF does) or turned into text (``disallowed_special="none"``). The [CLS] and [SEP]
that ``add_special_tokens`` puts around the text are not text and do not depend on it.

    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "cafe", "!"]
    >>> tok = WordPiece(vocab)
    >>> tok.tokens("Unaffable café!")
    ['[CLS]', 'un', '##aff', '##able', 'cafe', '!', '[SEP]']
    >>> tok.offsets("Unaffable café!")
    [(0, 0), (0, 2), (2, 5), (5, 9), (10, 14), (14, 15), (0, 0)]
    >>> tok.encode_with_types("cafe", pair="un!")
    ([2, 8, 3, 5, 9, 3], [0, 0, 0, 1, 1, 1])
    >>> tok.decode(tok.encode("Unaffable café!"), skip_special_tokens=True)
    'unaffable cafe!'

Reference: Devlin et al. 2018 (BERT) and google-research/bert ``tokenization.py``; the
details (order of the normalization steps, offsets, decoding) follow HF ``tokenizers``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.bert_normalize import normalize, split_words
from glassformer.tokenizers.special import SpecialOption, SpecialPolicy, resolve_special, split_special


class Piece(NamedTuple):
    """One token: its id, its span in the original text, its segment (0 or 1), how it arose."""

    id: int
    start: int
    end: int
    type_id: int
    word: int  # index of the word it belongs to (-1: a special token)


class WordPiece(Tokenizer):
    """BERT's WordPiece tokenizer over a vocabulary (token -> id, or a list in id order).

    ``strip_accents=None`` follows ``do_lower_case`` (BERT's uncased models do both). The
    role tokens (``[UNK]``, ``[CLS]``, ...) must be in the vocabulary, or be passed as None.
    """

    kind: ClassVar[str] = "wordpiece"
    ROLES: ClassVar[tuple[str, ...]] = ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token")

    def __init__(
        self,
        vocab: dict[str, int] | Sequence[str],
        *,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        clean_text: bool = True,
        unk_token: str | None = "[UNK]",
        cls_token: str | None = "[CLS]",
        sep_token: str | None = "[SEP]",
        pad_token: str | None = "[PAD]",
        mask_token: str | None = "[MASK]",
        additional_special_tokens: Sequence[str] = (),
        max_input_chars_per_word: int = 100,
        continuing_subword_prefix: str = "##",
    ):
        if not isinstance(vocab, dict):
            repeated = sorted(token for token, count in Counter(vocab).items() if count > 1)
            if repeated:
                raise ValueError(f"the vocabulary lists {repeated[:5]} more than once; give each token once")
            vocab = {token: i for i, token in enumerate(vocab)}
        if sorted(vocab.values()) != list(range(len(vocab))):
            raise ValueError(f"vocabulary ids must be 0 .. {len(vocab) - 1}, each used once")
        self.vocab = dict(vocab)
        self._id_to_token = sorted(self.vocab, key=self.vocab.__getitem__)
        self.do_lower_case, self.tokenize_chinese_chars, self.clean_text = (
            do_lower_case,
            tokenize_chinese_chars,
            clean_text,
        )
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents
        self.max_input_chars_per_word = max_input_chars_per_word
        self.continuing_subword_prefix = continuing_subword_prefix
        self.unk_token, self.cls_token, self.sep_token = unk_token, cls_token, sep_token
        self.pad_token, self.mask_token = pad_token, mask_token
        self.additional_special_tokens = list(additional_special_tokens)
        self.special_tokens = {}
        for name, token in [(role, getattr(self, role)) for role in self.ROLES] + [
            ("additional_special_tokens", t) for t in self.additional_special_tokens
        ]:
            if token is None:
                continue
            if token not in self.vocab:
                raise ValueError(f"{name}={token!r} is not in the vocabulary; add it or pass {name}=None")
            self.special_tokens[token] = self.vocab[token]
        self.pad_token_id = None if pad_token is None else self.vocab[pad_token]

    @classmethod
    def from_vocab_txt(cls, path: str | Path, do_lower_case: bool = True, **options: Any) -> WordPiece:
        """BERT's ``vocab.txt``: one token per line, the id is the line number (from 0)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no vocabulary file at {path} (expected BERT's vocab.txt)")
        with path.open(encoding="utf-8") as lines:
            tokens = [line.rstrip("\n") for line in lines]
        return cls(tokens, do_lower_case=do_lower_case, **options)

    @property
    def vocab_size(self) -> int:
        return len(self._id_to_token)

    # -- splitting ---------------------------------------------------------------------------

    def _normalize(self, text: str) -> tuple[str, list[int]]:
        return normalize(
            text, self.clean_text, self.tokenize_chinese_chars, self.strip_accents, self.do_lower_case
        )

    def word_pieces(self, word: str) -> list[tuple[str, int, int]] | None:
        """Greedy longest-match-first: (token, start, end) within ``word``, or None if impossible.

        >>> WordPiece(["[UNK]", "un", "##aff", "##able"], cls_token=None, sep_token=None,
        ...           pad_token=None, mask_token=None).word_pieces("unaffable")
        [('un', 0, 2), ('##aff', 2, 5), ('##able', 5, 9)]
        """
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                candidate = (
                    word[start:end] if start == 0 else self.continuing_subword_prefix + word[start:end]
                )
                if candidate in self.vocab:
                    pieces.append((candidate, start, end))
                    start = end
                    break
            else:
                return None
        return pieces

    def _segment(self, text: str, policy: SpecialPolicy, type_id: int, first_word: int) -> list[Piece]:
        """The pieces of one text: special tokens where allowed, WordPiece for the rest."""
        pieces: list[Piece] = []
        word_index = first_word
        for chunk_start, chunk_end, special in split_special(text, policy, "pair" if type_id else "text"):
            if special:  # a special token in the text keeps its real offsets (HF does the same)
                token_id = self.special_tokens[text[chunk_start:chunk_end]]
                pieces.append(Piece(token_id, chunk_start, chunk_end, type_id, -1))
                continue
            normalized, origin = self._normalize(text[chunk_start:chunk_end])
            for word_start, word_end in split_words(normalized):
                pieces += self._word(
                    normalized, origin, word_start, word_end, chunk_start, type_id, word_index
                )
                word_index += 1
        return pieces

    def _word(self, normalized, origin, word_start, word_end, shift, type_id, word_index) -> list[Piece]:
        word = normalized[word_start:word_end]
        found = self.word_pieces(word) if len(word) <= self.max_input_chars_per_word else None
        if found is None:
            if self.unk_token is None:
                raise ValueError(
                    f"the word {word!r} cannot be split into vocabulary pieces and unk_token is None"
                )
            found = [(self.unk_token, 0, len(word))]
        return [
            Piece(
                self.vocab[token],
                shift + origin[word_start + start],
                shift + origin[word_start + end - 1] + 1,
                type_id,
                word_index,
            )
            for token, start, end in found
        ]

    def _pieces(
        self,
        text: str,
        pair: str | None,
        add_special_tokens: bool,
        allowed_special: SpecialOption,
        disallowed_special: SpecialOption,
    ) -> list[Piece]:
        """[CLS] text [SEP] (pair [SEP]) as pieces; added tokens get offsets (0, 0)."""
        policy = resolve_special(self.special_tokens, allowed_special, disallowed_special)
        first = self._segment(text, policy, 0, 0)
        next_word = 1 + max((p.word for p in first), default=-1)
        second = [] if pair is None else self._segment(pair, policy, 1, next_word)
        if not add_special_tokens:
            return first + second
        if self.cls_token is None or self.sep_token is None:
            raise ValueError(
                "add_special_tokens=True needs cls_token and sep_token; pass add_special_tokens=False"
            )
        cls, sep = self.vocab[self.cls_token], self.vocab[self.sep_token]
        pieces = [Piece(cls, 0, 0, 0, -1), *first, Piece(sep, 0, 0, 0, -1)]
        return pieces + (second + [Piece(sep, 0, 0, 1, -1)] if pair is not None else [])

    # -- the Tokenizer interface -------------------------------------------------------------

    def encode(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> list[int]:
        """Ids of ``[CLS] text [SEP]`` (or ``[CLS] text [SEP] pair [SEP]``).

        The spelling of a special token in the text ("[MASK]") is an error by default; pass
        ``allowed_special="all"`` (or a set of them) for their ids, as HF gives, or
        ``disallowed_special="none"`` to treat them as ordinary text.

        >>> tok = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "[", "]", "mask"])
        >>> tok.encode("a [MASK]", allowed_special="all"), tok.encode("a [MASK]", disallowed_special="none")
        ([2, 5, 4, 3], [2, 5, 6, 8, 7, 3])
        """
        pieces = self._pieces(text, pair, add_special_tokens, allowed_special, disallowed_special)
        return [p.id for p in pieces]

    def encode_with_types(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> tuple[list[int], list[int]]:
        """(ids, token_type_ids): type 0 for the first segment, 1 for the pair and its [SEP]."""
        pieces = self._pieces(text, pair, add_special_tokens, allowed_special, disallowed_special)
        return [p.id for p in pieces], [p.type_id for p in pieces]

    def offsets(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> list[tuple[int, int]]:
        """Character spans in the original text (pair tokens: in ``pair``); [CLS]/[SEP] get (0, 0)."""
        pieces = self._pieces(text, pair, add_special_tokens, allowed_special, disallowed_special)
        return [(p.start, p.end) for p in pieces]

    def id_to_token(self, token_id: int) -> str:
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(
                f"token id {token_id} is out of range: this vocabulary has ids 0 .. {self.vocab_size - 1}"
            )
        return self._id_to_token[token_id]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, cleanup: bool = True) -> str:
        """Tokens joined by spaces, ``##`` pieces glued on; HF's cleanup glues ``. , ! ?`` back.

        Lowercasing and accent stripping cannot be undone: decode gives the normalized text.
        """
        tokens = [self.id_to_token(i) for i in ids]
        if skip_special_tokens:
            tokens = [t for t in tokens if t not in self.special_tokens]
        prefix, out = self.continuing_subword_prefix, []
        for i, token in enumerate(tokens):
            if i > 0:
                token = token[len(prefix) :] if token.startswith(prefix) else " " + token
            if cleanup:  # HF's WordPiece decoder cleans each token on its own, in this order
                for dirty, clean in CLEANUP:
                    token = token.replace(dirty, clean)
            out.append(token)
        return "".join(out)

    def explain(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        *,
        allowed_special: SpecialOption = "none",
        disallowed_special: SpecialOption = "all",
    ) -> list[dict[str, Any]]:
        """One entry per word (and special token): its original text, normalized form and pieces.

        >>> tok = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able"])
        >>> entries = tok.explain("UNAFFABLE", add_special_tokens=False)
        >>> [(e["text"], e["normalized"], e["tokens"]) for e in entries]
        [('UNAFFABLE', 'unaffable', ['un', '##aff', '##able'])]
        """
        entries: list[dict[str, Any]] = []
        for piece in self._pieces(text, pair, add_special_tokens, allowed_special, disallowed_special):
            source = pair if piece.type_id == 1 and pair is not None else text
            if piece.word < 0 or not entries or entries[-1]["word"] != piece.word:
                entries.append({"word": piece.word, "start": piece.start, "end": piece.end, "ids": []})
            entry = entries[-1]
            entry["end"] = piece.end
            entry["ids"].append(piece.id)
            entry["text"] = source[entry["start"] : entry["end"]]
        for entry in entries:
            entry["tokens"] = [self.id_to_token(i) for i in entry["ids"]]
            if entry["word"] < 0:
                entry["normalized"] = entry["tokens"][0]
                rule = (
                    "special token in the text" if entry["end"] > entry["start"] else "added around the text"
                )
                entry["steps"] = [{"rule": rule, "pieces": entry["tokens"]}]
                continue
            entry["normalized"] = self._normalize(entry["text"])[0].strip()
            if entry["tokens"] == [self.unk_token]:
                rule = (
                    f"longer than max_input_chars_per_word={self.max_input_chars_per_word}"
                    if len(entry["normalized"]) > self.max_input_chars_per_word
                    else "no vocabulary pieces cover it"
                )
            else:
                rule = "greedy longest match"
            entry["steps"] = [{"rule": rule, "normalized": entry["normalized"], "pieces": entry["tokens"]}]
        return entries

    # -- saving --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "vocab": list(self._id_to_token),
            "do_lower_case": self.do_lower_case,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "clean_text": self.clean_text,
            **{role: getattr(self, role) for role in self.ROLES},
            "additional_special_tokens": self.additional_special_tokens,
            "max_input_chars_per_word": self.max_input_chars_per_word,
            "continuing_subword_prefix": self.continuing_subword_prefix,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WordPiece:
        data = dict(data)
        if not isinstance(data.get("vocab"), list):
            raise ValueError("a wordpiece tokenizer needs 'vocab': the list of tokens in id order")
        return cls(data.pop("vocab"), **data)


# HF tokenizers' `decoders::wordpiece::cleanup`, applied to each token in turn.
CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)
