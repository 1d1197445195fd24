"""GGUF's SentencePiece vocabularies as our tokenizers: ``tokenizer.ggml.model = "llama"``
(SentencePiece BPE: Llama 2, Mistral 7B, Gemma, Phi-3) as a `SentencePieceBPE`, and ``"t5"``
(SentencePiece Unigram: T5, mT5) as a `Unigram`.

Both kinds store the pieces (``tokenizer.ggml.tokens``, id = index), a score per piece
(``tokenizer.ggml.scores``) and a type per piece (``tokenizer.ggml.token_type``):

====  =============  ===================================================================
type  name           what we make of it
====  =============  ===================================================================
1     normal         a piece of the vocabulary; BPE merges are made of these only
2     unknown        the unknown token (``<unk>``); "llama": also matched whole in the text
3     control        a special token (``<s>``, ``</s>``), matched whole in the text
4     user-defined   matched whole in the text, like a control token
5     unused         kept in the vocabulary, never produced
6     byte           a byte-fallback piece ``<0xE4>``: its presence turns byte fallback on
====  =============  ===================================================================

A "llama" file has no merge list: a SentencePiece BPE merges, at each step, the neighbouring
pair whose joined piece scores highest. Listing every split ``(left, right)`` of every normal
piece, both halves normal pieces too, best joined score first (ties: the lower id), gives HF's BPE
the same order (HF's converter does the same; for a vocabulary converted from a
``tokenizer.json`` without scores, llama.cpp writes ``-id``, or one score for all, and the ids
break the ties in the vocabulary's order). The text is made SentencePiece's as Llama 2's
``tokenizer.json`` does: ``Prepend("▁")`` (when ``tokenizer.ggml.add_space_prefix``, true unless
the file says otherwise) and ``Replace(" ", "▁")``; decoded by Replace, ByteFallback, Fuse and
Strip of the prefix space.

A "t5" file adds ``tokenizer.ggml.precompiled_charsmap``, SentencePiece's normalization rules
(`glassformer.tokenizers.precompiled`); it becomes the pipeline transformers' T5 converter
writes: ``Precompiled``, ``Strip`` (right), ``Replace(" {2,}", "▁")``, ``Metaspace``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from glassformer.tokenizers.decoders import Decoder
from glassformer.tokenizers.hf_pretokenizers import Metaspace, PreTokenizer
from glassformer.tokenizers.normalizers import Normalizer
from glassformer.tokenizers.sentencepiece_bpe import SentencePieceBPE
from glassformer.tokenizers.unigram import Unigram

# ``info`` below is the GGUFTokenizer of the module gguf_vocab, which imports this one (so this one
# cannot import it)
GGUFTokenizer = Any

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE_MARK = "\u2581"


def _checked(info: GGUFTokenizer) -> tuple[list[str], list[float], list[int]]:
    """The pieces, their scores and types, refused by name where they do not fit together."""
    tokens, count = list(info.tokens), len(info.tokens)
    scores = list(info.scores) if info.scores else [float(-i) for i in range(count)]
    types = list(info.token_types) if info.token_types else [NORMAL] * count
    for name, values in (("tokenizer.ggml.scores", scores), ("tokenizer.ggml.token_type", types)):
        if len(values) != count:
            raise ValueError(f"{info.source}: {count} tokens but {len(values)} values in {name}")
    unknown_types = sorted(set(types) - {NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE})
    if unknown_types:
        raise ValueError(f"{info.source}: tokenizer.ggml.token_type holds unknown types {unknown_types[:5]}")
    seen: dict[str, int] = {}
    for token_id, token in enumerate(tokens):
        if token in seen:
            raise ValueError(
                f"{info.source}: token {token_id} ({token!r}) repeats token {seen[token]}; "
                "a SentencePiece vocabulary has each piece once"
            )
        seen[token] = token_id
    for name in ("bos_token_id", "eos_token_id", "unk_token_id", "pad_token_id"):
        value = getattr(info, name)
        if value is not None and not 0 <= value < count:
            raise ValueError(
                f"{info.source}: tokenizer.ggml.{name}={value} is not one of the {count} token ids"
            )
    return tokens, scores, types


def _special(tokens: Sequence[str], types: Sequence[int], kinds: tuple[int, ...]) -> dict[str, int]:
    return {token: i for i, (token, kind) in enumerate(zip(tokens, types, strict=True)) if kind in kinds}


def merges_from_scores(
    tokens: Sequence[str], scores: Sequence[float], types: Sequence[int]
) -> list[tuple[str, str]]:
    """Every (left, right) that joins into a normal piece, both normal pieces: the best joined
    score first, then the lower id, then the shorter left half."""
    normal = {token for token, kind in zip(tokens, types, strict=True) if kind == NORMAL}
    ranked = []
    for token_id, (token, kind) in enumerate(zip(tokens, types, strict=True)):
        if kind != NORMAL:
            continue
        for cut in range(1, len(token)):
            if token[:cut] in normal and token[cut:] in normal:
                ranked.append((-scores[token_id], token_id, cut, token[:cut], token[cut:]))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def sentencepiece_bpe_from_gguf(info: GGUFTokenizer) -> SentencePieceBPE:
    """A "llama" vocabulary as a `SentencePieceBPE` with Llama 2's pipeline."""
    tokens, scores, types = _checked(info)
    # Gemma's files spell a piece of spaces with real spaces; the text has "▁" there
    tokens = [
        SPACE_MARK * len(t) if t and not t.strip(" ") and SPACE_MARK * len(t) not in tokens else t
        for t in tokens
    ]
    prefix = info.add_space_prefix is not False
    unk = tokens[info.unk_token_id] if info.unk_token_id is not None else None
    if unk is None and UNKNOWN in types:
        unk = tokens[types.index(UNKNOWN)]
    steps = (("Prepend", SPACE_MARK),) if prefix else ()
    decoder = [("Replace", SPACE_MARK, " "), ("ByteFallback",), ("Fuse",)]
    return SentencePieceBPE(
        {token: i for i, token in enumerate(tokens)},
        merges_from_scores(tokens, scores, types),
        unk_token=unk,
        byte_fallback=BYTE in types,
        fuse_unk=True,
        special_tokens=_special(tokens, types, (UNKNOWN, CONTROL, USER_DEFINED)),
        normalizer=Normalizer((*steps, ("Replace", " ", SPACE_MARK))),
        decoder=Decoder(tuple(decoder + ([("Strip", " ", 1, 0)] if prefix else []))),
        pad_token_id=info.pad_token_id,
    )


def unigram_from_gguf(info: GGUFTokenizer) -> Unigram:
    """A "t5" vocabulary as a `Unigram` with T5's pipeline (its charsmap as ``Precompiled``)."""
    tokens, scores, types = _checked(info)
    if not info.scores:
        raise ValueError(f"{info.source}: a Unigram vocabulary ('t5') needs tokenizer.ggml.scores")
    unk_id = info.unk_token_id
    if unk_id is None and UNKNOWN in types:
        unk_id = types.index(UNKNOWN)
    steps: tuple[tuple, ...] = ()
    if info.precompiled_charsmap:
        charsmap = base64.b64encode(bytes(info.precompiled_charsmap)).decode("ascii")
        try:
            steps = Normalizer.from_hf({"type": "Precompiled", "precompiled_charsmap": charsmap}).steps
        except ValueError as error:
            raise ValueError(
                f"{info.source}: tokenizer.ggml.precompiled_charsmap is damaged: {error}"
            ) from None
    if info.remove_extra_whitespaces is not False:
        steps += (("Strip", False, True), ("ReplaceRegex", " {2,}", SPACE_MARK))
    scheme = "never" if info.add_space_prefix is False else "always"
    return Unigram(
        list(zip(tokens, scores, strict=True)),
        unk_id,
        byte_fallback=BYTE in types,
        special_tokens=_special(tokens, types, (CONTROL, USER_DEFINED)),
        normalizer=Normalizer(steps),
        pre_tokenizer=PreTokenizer((Metaspace(prepend_scheme=scheme),)),
        decoder=Decoder((("Metaspace", SPACE_MARK, scheme),)),
        pad_token_id=info.pad_token_id,
    )
