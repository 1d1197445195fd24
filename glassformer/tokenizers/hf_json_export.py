"""Writing HF ``tokenizer.json`` files: every tokenizer we read, written back.

`to_hf_dict` gives the contents ``tokenizers.Tokenizer.from_str`` reads and `from_hf_dict`
reads back: WordPiece with BERT's [CLS] ... [SEP] template; byte-level BPE with its
pre-tokenizer (a named pattern, a regex ``Split`` or several steps), normalizer and
``ignore_merges`` (a tiktoken-ranked vocabulary gets merges derived from its ranks,
`merges_from_ranks`, and ``ignore_merges``, which is tiktoken's whole-piece rule); the
SentencePiece-style tokenizers (`PieceTokenizer`) write their own pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from glassformer.atomic import write_text_atomic
from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.byte_unicode import bytes_to_unicode
from glassformer.tokenizers.hf_added_tokens import added_tokens_to_hf
from glassformer.tokenizers.hf_pretokenizers import PreTokenizer
from glassformer.tokenizers.piece_tokenizer import PieceTokenizer
from glassformer.tokenizers.wordpiece import WordPiece

# tiktoken's cl100k regex uses possessive quantifiers ("\p{N}{1,3}+") and "$", which HF's
# Oniguruma reads differently; this is the form HF tokenizer.json files use for it.
HF_CL100K = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def to_hf_dict(tok) -> dict[str, Any]:
    """A `ByteBPE`, `WordPiece` or `PieceTokenizer` as the contents of an HF ``tokenizer.json``
    (``tokenizers.Tokenizer.from_str``)."""
    if isinstance(tok, WordPiece):
        return _wordpiece_dict(tok)
    if isinstance(tok, PieceTokenizer):
        return tok.to_hf_dict()
    if not isinstance(tok, ByteBPE):
        raise TypeError(
            f"to_hf_json writes byte-level BPE, WordPiece, SentencePiece BPE and Unigram tokenizers, "
            f"not {type(tok).__name__}"
        )
    merges = tok.merges if tok.merges is not None else merges_from_ranks(tok.vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if isinstance(tok.pattern, PreTokenizer):  # several steps: theirs, then ByteLevel maps bytes
        steps = tok.pattern.to_hf()
        steps = [] if steps is None else steps.get("pretokenizers", [steps])
        pre = {"type": "Sequence", "pretokenizers": [*steps, byte_level | {"use_regex": False}]}
    elif tok.pattern == "gpt2":
        pre = byte_level
    elif tok.pattern == "smollm":
        pre = {
            "type": "Sequence",
            "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level],
        }
    else:  # cl100k or a regex of one's own: the regex splits, ByteLevel only maps bytes
        regex = HF_CL100K if tok.pattern == "cl100k" else tok.pattern
        split = {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}
        pre = {"type": "Sequence", "pretokenizers": [split, byte_level | {"use_regex": False}]}
    vocab = {bytes_to_unicode(token): i for token, i in tok.vocab.items()}
    for text, i in tok.special_tokens.items():  # HF gives an added token its vocab id, else a new one
        if vocab.setdefault(text, i) != i:
            raise ValueError(f"special token {text!r} is spelled like the ordinary token {vocab[text]}")
    vocab = dict(sorted(vocab.items(), key=lambda item: item[1]))
    added = added_tokens_to_hf(tok.special_tokens)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": tok.normalizer.to_hf(),
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": dict(byte_level),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            # tiktoken takes a pre-token that is a token whole; HF does so with ignore_merges
            "ignore_merges": tok.ignore_merges,
            "vocab": vocab,
            "merges": [[bytes_to_unicode(a), bytes_to_unicode(b)] for a, b in merges],
        },
    }


def _wordpiece_dict(tok: WordPiece) -> dict[str, Any]:
    """BERT's layout, the inverse of `_wordpiece`: BertNormalizer, BertPreTokenizer, the
    WordPiece model, and [CLS] ... [SEP] (pairs: [CLS] A [SEP] B [SEP]) around every text."""
    post = None
    if tok.cls_token is not None and tok.sep_token is not None:
        cls, sep = tok.cls_token, tok.sep_token
        special = {t: {"id": t, "ids": [tok.vocab[t]], "tokens": [t]} for t in (cls, sep)}
        piece = lambda token, type_id: {"SpecialToken": {"id": token, "type_id": type_id}}  # noqa: E731
        text = lambda name, type_id: {"Sequence": {"id": name, "type_id": type_id}}  # noqa: E731
        post = {
            "type": "TemplateProcessing",
            "single": [piece(cls, 0), text("A", 0), piece(sep, 0)],
            "pair": [piece(cls, 0), text("A", 0), piece(sep, 0), text("B", 1), piece(sep, 1)],
            "special_tokens": special,
        }
    prefix = tok.continuing_subword_prefix
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens_to_hf(tok.special_tokens),
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": tok.clean_text,
            "handle_chinese_chars": tok.tokenize_chinese_chars,
            "strip_accents": tok.strip_accents,
            "lowercase": tok.do_lower_case,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": prefix, "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": tok.unk_token,
            "continuing_subword_prefix": prefix,
            "max_input_chars_per_word": tok.max_input_chars_per_word,
            "vocab": dict(sorted(tok.vocab.items(), key=lambda item: item[1])),
        },
    }


def merges_from_ranks(vocab: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """A merge list for a tiktoken-style vocabulary (rank = id), in rank order.

    Each token's merge is the last step of BPE on its own bytes using only lower-ranked
    tokens, the conversion HF ``transformers`` uses for tiktoken files. A token that such
    BPE cannot build (it only occurs as a whole pre-token) gets no merge.

    >>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    >>> merges_from_ranks(vocab)
    [(b'a', b'b'), (b'ab', b'c')]
    """
    never = len(vocab) + max(vocab.values()) + 1
    merges = []
    for token, rank in sorted(vocab.items(), key=lambda item: item[1]):
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            ranks = [vocab.get(a + b, never) for a, b in zip(parts, parts[1:], strict=False)]
            best = min(ranks)
            if best >= rank:
                break
            i = ranks.index(best)  # leftmost on ties, as tiktoken
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
    return merges


def to_hf_json(tok, path: str | Path) -> None:
    """Write a tokenizer as an HF ``tokenizer.json`` (atomically). ``tokenizers`` loads it and
    encodes as ``tok.encode(text, allowed_special="all")`` does."""
    write_text_atomic(Path(path), json.dumps(to_hf_dict(tok), ensure_ascii=False, indent=1))
