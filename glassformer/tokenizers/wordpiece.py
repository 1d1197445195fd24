"""WordPiece, BERT's tokenizer: normalize, split into words, then greedy longest-match subwords.

1. **Clean and normalize** each character (HF ``BertNormalizer``): drop NUL, U+FFFD and
   control/format characters; turn whitespace into spaces; put spaces around CJK
   ideographs; when lowercasing, also strip accents (NFD, then drop the combining marks,
   category Mn) and lowercase.
2. **Split into words** on whitespace, with every punctuation character a word of its own.
3. **WordPiece** each word: take the longest vocabulary entry that starts the word, then
   the longest ``##``-prefixed entry that continues it, and so on; a word that cannot be
   covered (or is longer than ``max_input_chars_per_word``) becomes one ``[UNK]``.

Every normalized character remembers the original character it came from, so token
offsets point into the text as given (before lowercasing and accent stripping).

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

import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.char import resolve_allowed_special, special_pattern

# The Unicode White_Space property (what HF's Rust `char::is_whitespace` tests).
WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
# CJK Unified Ideographs blocks, as in google-research/bert (HF `tokenizers` starts the
# Extension E range at U+2B920 instead of U+2B820: 256 characters differ).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_control(char: str) -> bool:
    """Removed by cleaning: control, format and private-use characters (not tab/newline/CR).

    Unassigned code points (Cn) are kept, as HF ``tokenizers`` keeps them.
    """
    return char not in "\t\n\r" and unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(char: str) -> bool:
    """BERT's punctuation: all ASCII non-alphanumeric symbols ($, +, ^, ...) and Unicode P*."""
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def is_cjk(char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in CJK_RANGES)


def normalize(
    text: str, clean_text: bool = True, cjk: bool = True, strip_accents: bool = True, lowercase: bool = True
) -> tuple[str, list[int]]:
    """BERT's normalization, and for each output character the index of its source character.

    >>> normalize("Café 中!")
    ('cafe  中 !', [0, 1, 2, 3, 4, 5, 5, 5, 6])
    """
    out: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if clean_text:
            if char in "\x00\ufffd" or is_control(char):
                continue
            char = " " if char in WHITESPACE else char
        pieces = f" {char} " if cjk and is_cjk(char) else char
        if strip_accents:  # before lowercasing, as HF does (the original BERT lowercases first)
            decomposed = unicodedata.normalize("NFD", pieces)
            pieces = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
        if lowercase:
            # one character at a time, so no context rule applies: 'Σ' -> 'σ' even word-finally
            pieces = "".join(c.lower() for c in pieces)
        out.append(pieces)
        origin += [index] * len(pieces)
    return "".join(out), origin


def split_words(normalized: str) -> list[tuple[int, int]]:
    """(start, end) of each word: split on whitespace, each punctuation character alone.

    >>> split_words("hi, you")
    [(0, 2), (2, 3), (4, 7)]
    """
    words, start = [], None
    for i, char in enumerate(normalized):
        if char in WHITESPACE or is_punctuation(char):
            if start is not None:
                words.append((start, i))
                start = None
            if char not in WHITESPACE:
                words.append((i, i + 1))
        elif start is None:
            start = i
    if start is not None:
        words.append((start, len(normalized)))
    return words


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

    def _segment(self, text: str, allowed: set[str], type_id: int, first_word: int) -> list[Piece]:
        """The pieces of one text: special tokens where allowed, WordPiece for the rest."""
        pieces: list[Piece] = []
        chunks, position = [], 0
        pattern = special_pattern(allowed)
        for match in pattern.finditer(text) if pattern else ():
            chunks += [(position, match.start()), (match.start(), match.end())]
            position = match.end()
        chunks.append((position, len(text)))
        word_index = first_word
        for n, (chunk_start, chunk_end) in enumerate(chunks):
            if n % 2:  # a special token in the text keeps its real offsets (HF does the same)
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
        pair: str | None = None,
        add_special_tokens: bool = True,
        allowed_special: str | Iterable[str] = "all",
    ) -> list[Piece]:
        """[CLS] text [SEP] (pair [SEP]) as pieces; added tokens get offsets (0, 0)."""
        allowed = resolve_allowed_special(allowed_special, self.special_tokens)
        first = self._segment(text, allowed, 0, 0)
        next_word = 1 + max((p.word for p in first), default=-1)
        second = [] if pair is None else self._segment(pair, allowed, 1, next_word)
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
        allowed_special: str | Iterable[str] = "all",
    ) -> list[int]:
        """Ids of ``[CLS] text [SEP]`` (or ``[CLS] text [SEP] pair [SEP]``).

        Special-token strings in the text ("[MASK]") become those tokens, as in HF; pass
        ``allowed_special="none"`` (or a set of them) to treat them as ordinary text.
        """
        return [p.id for p in self._pieces(text, pair, add_special_tokens, allowed_special)]

    def encode_with_types(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        allowed_special: str | Iterable[str] = "all",
    ) -> tuple[list[int], list[int]]:
        """(ids, token_type_ids): type 0 for the first segment, 1 for the pair and its [SEP]."""
        pieces = self._pieces(text, pair, add_special_tokens, allowed_special)
        return [p.id for p in pieces], [p.type_id for p in pieces]

    def offsets(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        allowed_special: str | Iterable[str] = "all",
    ) -> list[tuple[int, int]]:
        """Character spans in the original text (pair tokens: in ``pair``); [CLS]/[SEP] get (0, 0)."""
        return [(p.start, p.end) for p in self._pieces(text, pair, add_special_tokens, allowed_special)]

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
        self, text: str, pair: str | None = None, add_special_tokens: bool = True, **options: Any
    ) -> list[dict[str, Any]]:
        """One entry per word (and special token): its original text, normalized form and pieces.

        >>> tok = WordPiece(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able"])
        >>> entries = tok.explain("UNAFFABLE", add_special_tokens=False)
        >>> [(e["text"], e["normalized"], e["tokens"]) for e in entries]
        [('UNAFFABLE', 'unaffable', ['un', '##aff', '##able'])]
        """
        entries: list[dict[str, Any]] = []
        for piece in self._pieces(text, pair, add_special_tokens, **options):
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
