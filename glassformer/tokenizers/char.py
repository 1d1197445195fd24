"""Character tokenizer: one token per character, as in nanoGPT's Shakespeare example.

The vocabulary is a string of distinct characters; a character's id is its position in
that string. Optional special tokens (``<|endoftext|>``, a pad or unknown token) come
after the characters, so the character ids stay those of nanoGPT (``sorted(set(text))``).

    >>> tok = CharTokenizer.from_text("hello world")
    >>> tok.chars, tok.vocab_size
    (' dehlorw', 8)
    >>> tok.encode("hold")
    [3, 5, 4, 1]
    >>> tok.decode([3, 5, 4, 1])
    'hold'

A character outside the vocabulary is an error by default (it names the character and
where it is); configure ``unk_token`` to map every unknown character to one id instead:

    >>> tok.encode("help!")
    Traceback (most recent call last):
    ...
    ValueError: character 'p' (U+0070) at position 3 is not in this tokenizer's 8 characters; ...
    >>> tok = CharTokenizer.from_text("hello world", unk_token="<unk>")
    >>> tok.encode("help!"), tok.decode(tok.encode("help!"))
    ([3, 2, 4, 8, 8], 'hel<unk><unk>')
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.special import SpecialOption, resolve_special, split_special


def _describe(char: str) -> str:
    """'p' -> "'p' (U+0070)": the code point makes invisible characters identifiable."""
    return f"{char!r} (U+{ord(char):04X})"


class CharTokenizer(Tokenizer):
    """Token = character; ids ``0 .. len(chars)-1`` for ``chars``, then the special tokens.

    ``unk_token`` and ``pad_token`` (strings such as ``"<unk>"``) become special tokens
    too. A special token's spelling in the text follows `glassformer.tokenizers.special`:
    an error unless ``allowed_special`` (its id) or ``disallowed_special="none"`` (characters).
    """

    kind: ClassVar[str] = "char"

    def __init__(
        self,
        chars: str | Sequence[str],
        special_tokens: Sequence[str] = (),
        unk_token: str | None = None,
        pad_token: str | None = None,
    ):
        chars = "".join(chars)
        repeated = sorted(c for c, count in Counter(chars).items() if count > 1)
        if repeated:
            raise ValueError(
                f"the vocabulary lists {', '.join(map(_describe, repeated))} more than once; "
                "give each character once (CharTokenizer.from_text does)"
            )
        self.chars = chars
        self._char_to_id = {c: i for i, c in enumerate(chars)}
        specials = list(special_tokens)
        for extra in (unk_token, pad_token):
            if extra is not None and extra not in specials:
                specials.append(extra)
        for token in specials:
            if not token:
                raise ValueError("a special token cannot be the empty string")
            if token in self._char_to_id:
                raise ValueError(
                    f"special token {token!r} is also a character of the vocabulary; "
                    "use a multi-character name such as '<unk>' or drop the character"
                )
        if len(set(specials)) != len(specials):
            raise ValueError(f"special tokens must be distinct, got {specials}")
        self.special_tokens = {token: len(chars) + i for i, token in enumerate(specials)}
        self._id_to_special = {i: token for token, i in self.special_tokens.items()}
        self.unk_token, self.pad_token = unk_token, pad_token
        self.unk_token_id = None if unk_token is None else self.special_tokens[unk_token]
        self.pad_token_id = None if pad_token is None else self.special_tokens[pad_token]

    @classmethod
    def from_text(
        cls,
        text: str,
        special_tokens: Sequence[str] = (),
        unk_token: str | None = None,
        pad_token: str | None = None,
    ) -> CharTokenizer:
        """The vocabulary of every character in ``text``, sorted: nanoGPT's ``sorted(set(text))``."""
        if not text:
            raise ValueError("the text is empty: a character vocabulary needs at least one character")
        return cls("".join(sorted(set(text))), special_tokens, unk_token, pad_token)

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + len(self.special_tokens)

    def _pieces(
        self, text: str, allowed_special: SpecialOption, disallowed_special: SpecialOption
    ) -> list[tuple[int, int, int, str]]:
        """(id, start, end, rule) for each token of ``text``; rule: character, special or unknown."""
        policy = resolve_special(self.special_tokens, allowed_special, disallowed_special)
        pieces: list[tuple[int, int, int, str]] = []
        for start, end, special in split_special(text, policy):
            if special:
                pieces.append((self.special_tokens[text[start:end]], start, end, "special"))
            else:
                pieces += self._char_pieces(text, start, end)
        return pieces

    def _char_pieces(self, text: str, start: int, end: int) -> list[tuple[int, int, int, str]]:
        pieces = []
        for position in range(start, end):
            char = text[position]
            token_id = self._char_to_id.get(char, self.unk_token_id)
            if token_id is None:
                raise ValueError(
                    f"character {_describe(char)} at position {position} is not in this tokenizer's "
                    f"{len(self.chars)} characters; build the vocabulary from text that contains it "
                    "(CharTokenizer.from_text(corpus + extra_chars)) or pass unk_token='<unk>' to map "
                    "unknown characters to one id"
                )
            rule = "character" if char in self._char_to_id else "unknown"
            pieces.append((token_id, position, position + 1, rule))
        return pieces

    def encode(
        self, text: str, *, allowed_special: SpecialOption = "none", disallowed_special: SpecialOption = "all"
    ) -> list[int]:
        """Ids of ``text``: one per character, one per allowed special token."""
        return [token_id for token_id, *_ in self._pieces(text, allowed_special, disallowed_special)]

    def offsets(
        self, text: str, *, allowed_special: SpecialOption = "none", disallowed_special: SpecialOption = "all"
    ) -> list[tuple[int, int]]:
        """(i, i + 1) for each character; a special token spans its string."""
        return [(start, end) for _, start, end, _ in self._pieces(text, allowed_special, disallowed_special)]

    def decode(self, ids: Sequence[int]) -> str:
        """The characters of ``ids`` joined; special tokens (``<unk>`` too) appear as their strings."""
        return "".join(self.id_to_token(i) for i in ids)

    def id_to_token(self, token_id: int) -> str:
        if 0 <= token_id < len(self.chars):
            return self.chars[token_id]
        if token_id in self._id_to_special:
            return self._id_to_special[token_id]
        raise ValueError(
            f"token id {token_id} is out of range: this tokenizer has ids 0 .. {self.vocab_size - 1}"
        )

    def explain(
        self, text: str, *, allowed_special: SpecialOption = "none", disallowed_special: SpecialOption = "all"
    ) -> list[dict[str, Any]]:
        """One entry per token: the text it covers, its id, and the rule that chose it.

        >>> step = CharTokenizer.from_text("ab").explain("b")[0]
        >>> step["text"], step["ids"], step["steps"][0]["rule"], step["steps"][0]["name"]
        ('b', [1], 'character', 'LATIN SMALL LETTER B')
        """
        steps = []
        for token_id, start, end, rule in self._pieces(text, allowed_special, disallowed_special):
            piece = text[start:end]
            detail = {"rule": rule}
            if rule != "special":
                detail.update(code_point=f"U+{ord(piece):04X}", name=unicodedata.name(piece, ""))
            steps.append({"text": piece, "ids": [token_id], "start": start, "end": end, "steps": [detail]})
        return steps

    def to_dict(self) -> dict[str, Any]:
        # every special token in id order (unk and pad included), so ids survive a round trip
        return {
            "chars": self.chars,
            "special_tokens": list(self.special_tokens),
            "unk_token": self.unk_token,
            "pad_token": self.pad_token,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CharTokenizer:
        if not isinstance(data.get("chars"), str):
            raise ValueError("a char tokenizer needs 'chars': the vocabulary as one string")
        return cls(
            data["chars"], data.get("special_tokens", ()), data.get("unk_token"), data.get("pad_token")
        )
