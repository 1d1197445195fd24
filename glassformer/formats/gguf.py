"""GGUF files (llama.cpp's format) -> Glassformer models, weights dequantized to floats.

What a GGUF file stores: a header of typed key/value metadata (``llama.block_count``,
``llama.attention.head_count``, ``tokenizer.ggml.tokens``, ``tokenizer.chat_template``,
...) and then the tensors, each with a name (``blk.0.attn_q.weight``), a shape and a
storage type. Small tensors (norm gains) are plain F32; matrices are F32, F16, BF16 or
quantized: each row is cut into blocks, and a block stores small integers q plus the
fp16 numbers that turn them back into floats (sizes per block of 32 or 256 values):

* Q8_0 (34 bytes / 32 values, 8.5 bits each): a scale d and 32 int8 q: ``x = d * q``;
* Q4_0 (18 bytes / 32): d and 32 4-bit q in 0..15, two to a byte (byte j holds values
  j and j + 16): ``x = d * (q - 8)``;
* Q4_1 (20 bytes / 32): d, a minimum m and 32 4-bit q: ``x = d * q + m``;
* Q5_0, Q5_1: Q4_0 and Q4_1 with a fifth bit per value kept in a separate 32-bit mask.

K-quants work on super-blocks of 256 values split into sub-blocks, each with its own
scale; those scales are themselves small integers, multiplied by the super-block's one
fp16 scale d (two-level quantization):

* Q4_K (144 bytes / 256, 4.5 bits): d, dmin, then 8 sub-blocks of 32, each with a 6-bit
  scale s_j and a 6-bit minimum m_j (12 bytes for all 16), then 4-bit q:
  ``x = d * s_j * q - dmin * m_j``;
* Q6_K (210 bytes / 256, 6.5625 bits): 16 sub-blocks of 16, each with an int8 scale s_j;
  6-bit q in 0..63 stored as 4 low bits plus 2 high bits; d at the end:
  ``x = d * s_j * (q - 32)``;
* Q2_K, Q3_K, Q5_K follow the same pattern with 2, 3 and 5 bits per value.

`gguf.quants.dequantize` (the reference implementation, maintained with llama.cpp)
turns a block into floats exactly as llama.cpp does (Q8_0, Q4_0 and Q4_1, the types small
models ship in, are decoded by `glassformer.formats.gguf_blocks`: the same floats, bit for
bit, on every core); this module checks the storage
type against `SUPPORTED_STORAGE` and reads each tensor, dequantized a chunk of rows at a
time, into the parameter `glassformer.formats.gguf_architectures` maps it to. Other types
(the IQ "importance" quants, ternary TQ, MXFP4, ...) are refused before anything is
dequantized.

What each architecture (`SUPPORTED_ARCHITECTURES`: Llama / Mistral / Mixtral, Qwen2, Qwen3,
Qwen2-MoE, Gemma 1-3, OLMo 2, Phi-3, GPT-NeoX, GPT-2, Phi-2, BERT, T5) stores and how it becomes
a `ModelConfig` is `gguf_architectures`' business (the decoders' tensor names in
`gguf_tensor_names`, BERT's and T5's in `gguf_encoders`, Llama 3.1's ``rope_freqs`` read back as
its scaling's settings by `gguf_rope_freqs`): llama.cpp's converter permutes the rows of the
Llama Q and K projections (it pairs RoPE features as (2i, 2i+1), where Hugging Face pairs (i,
i + e/2)), and we undo that permutation so the weights fit our rotate-half RoPE, as Hugging Face
does when it reads a GGUF file; Q, K and V are read into the three row blocks of our
``qkv_proj`` = [W_Q; W_K; W_V], and each expert of a mixture out of the one tensor that stacks
them.

A ``bert`` or ``t5`` file loads without a tokenizer (None, with a warning): `gguf_vocab` builds
byte-level BPE (``tokenizer.ggml.model`` "gpt2") only, not yet WordPiece or Unigram.

The header (metadata and where each tensor lies) is read by our own parser,
`glassformer.tokenizers.gguf_header`, without touching the tensors' data. A damaged file
(truncated download, flipped bytes) raises ``ValueError`` naming the file; the metadata
is checked against the tensors the file really holds before any memory is allocated, so
a corrupted ``block_count`` cannot make us build a huge model.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from glassformer.config import ModelConfig
from glassformer.formats import gguf_blocks
from glassformer.formats.gguf_architectures import (
    IGNORED_TENSORS,
    SUPPORTED_ARCHITECTURES,
    architecture,
    config_from_gguf,
    key_map,
)
from glassformer.formats.gguf_rope_freqs import llama3_settings
from glassformer.formats.gguf_tensor_names import RopeRows, StoredRows, unpermute_rope_rows
from glassformer.formats.key_map import Mapped, check_coverage
from glassformer.models import build, build_meta
from glassformer.models.size import ModelTooLarge
from glassformer.tokenizers.gguf_header import GGUFHeader, TensorInfo, read_gguf_header

__all__ = ["SUPPORTED_ARCHITECTURES", "SUPPORTED_STORAGE", "load_gguf", "unpermute_rope_rows"]
# Storage types we load: the float types and the block quantizations above, each of which
# `gguf.quants.dequantize` implements and a test checks against Hugging Face's reader.
SUPPORTED_STORAGE = (
    "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"
)  # fmt: skip


# tokenizer.ggml.model kinds whose models load without a tokenizer (`gguf_vocab` builds "gpt2", "llama"
# and "t5"; BERT's WordPiece comes respelled SentencePiece-style, which is not undone yet)
VOCABULARIES_NOT_READ = {"bert": "WordPiece"}
# our stack's name (`ModelConfig.stacks`) -> the prefix of its blocks' tensor names
BLOCK_PREFIXES = {"": "blk.", "encoder": "enc.blk.", "decoder": "dec.blk."}


class UnsupportedStorageError(ValueError):
    """A tensor is stored in a type outside `SUPPORTED_STORAGE`."""


def _check_storage(path: Path, name: str, type_number: int) -> None:
    from gguf import GGMLQuantizationType

    try:
        storage = GGMLQuantizationType(type_number).name
    except ValueError:
        storage = f"type number {type_number} (unknown to the gguf package)"
    if storage not in SUPPORTED_STORAGE:
        raise UnsupportedStorageError(
            f"{path}: tensor {name} is stored as {storage}, which Glassformer does not load; "
            f"supported storage types: {', '.join(SUPPORTED_STORAGE)}"
        )


def _reader(path: str | Path) -> GGUFHeader:
    """The header of the GGUF file at ``path``, once every tensor's storage type is found to be one
    we load (a tensor of another type is named, and refused before anything is dequantized)."""
    header = read_gguf_header(path)  # ValueError naming the file where it is damaged
    for tensor in header.tensors.values():
        _check_storage(header.path, tensor.name, int(tensor.storage))
    return header


def _check_tensors(
    path: Path, config: ModelConfig, arch: str, tensors: dict[str, TensorInfo]
) -> list[Mapped]:
    """The key map, once the file's tensors are found to be exactly those it expects, with our
    shapes: checked on the meta device, so a damaged header cannot make us allocate (or loop
    over) a huge model."""
    for stack in config.stacks:  # blk.i (one stack), or T5's enc.blk.i and dec.blk.i
        prefix = BLOCK_PREFIXES[stack.name]
        blocks = {name[len(prefix) :].split(".")[0] for name in tensors if name.startswith(prefix)}
        if stack.layers != len(blocks):
            raise ValueError(
                f"{path}: the metadata says {stack.layers} blocks, the file holds tensors for {len(blocks)}"
                + (f" ({stack.name})" if stack.name else "")
            )
    mapping = key_map(config, arch, set(tensors))
    expected = {item.theirs for item in mapping}
    unknown = sorted(set(tensors) - expected - IGNORED_TENSORS)
    if unknown:
        raise ValueError(
            f"{path}: GGUF tensors this loader does not understand ({arch}): {', '.join(unknown[:8])}"
        )
    missing = sorted(expected - set(tensors))
    if missing:
        raise ValueError(f"{path}: the GGUF file lacks the tensors {', '.join(missing[:8])}")
    try:  # the metadata's sizes are checked against this machine before a module is made
        params = dict(build_meta(config).named_parameters())
    except ModelTooLarge as error:  # name the file (its metadata is damaged, or it is too big here)
        raise ModelTooLarge(f"{path}: {error}") from None
    check_coverage({name: tuple(p.shape) for name, p in params.items()}, mapping)
    for item in mapping:
        shape = tuple(reversed(tensors[item.theirs].shape))  # stored fastest dim first; ours last
        rest = tuple(params[item.ours].shape[1:])
        if isinstance(item.transform, StoredRows):  # one of the pieces cut from this tensor
            needed = (*item.transform.stored, *rest)
        else:
            rows = item.rows or (0, params[item.ours].shape[0])
            needed = (rows[1] - rows[0], *rest)
        if _squeezed(shape) != _squeezed(needed):  # a (1, d) matrix may be stored as (d,)
            raise ValueError(f"{path}: {item.theirs} has shape {shape}, our {item.place()} needs {needed}")
    return mapping


def _rope_freqs(path: Path, config: ModelConfig, stored: StoredTensor | None) -> ModelConfig:
    """``config`` with Llama 3.1's RoPE scaling where the file stores its divisors
    (``rope_freqs.weight``; all ones: no scaling), recovered by `gguf_rope_freqs.llama3_settings`."""
    if stored is None:
        return config
    with open(path, "rb") as handle:
        divisors = np.asarray(stored.read_rows(handle, 0, stored.rows), dtype=np.float32)
    settings = llama3_settings(divisors, config.rope_base, config.rotary_dim or config.d_head, str(path))
    if settings and config.rope_scaling != "none":
        raise ValueError(
            f"{path}: the file scales RoPE twice: {config.rope_scaling} scaling in its metadata and "
            "Llama 3.1's divisors in rope_freqs.weight"
        )
    return replace(config, **settings) if settings else config


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading 1s: (1, 32) and (32,) hold the same values in the same order."""
    while len(shape) > 1 and shape[0] == 1:
        shape = shape[1:]
    return shape


@dataclass(frozen=True)
class StoredTensor:
    """Where a tensor's blocks lie in the file: ``rows`` rows of ``row_items`` items of
    ``item`` (uint8 bytes for quantized types), from byte ``offset``."""

    storage: Any  # gguf.GGMLQuantizationType
    item: np.dtype
    rows: int
    row_items: int
    offset: int

    @classmethod
    def of(cls, tensor: TensorInfo) -> StoredTensor:
        item, rows, row_items = tensor.layout()  # (n, f, d) experts: n f rows of d values' items
        return cls(tensor.storage, item, rows, row_items, tensor.offset)

    def read_rows(self, handle, start: int, stop: int) -> np.ndarray:
        """Rows start..stop as stored (a plain read: no mapping stays resident)."""
        handle.seek(self.offset + start * self.row_items * self.item.itemsize)
        count = (stop - start) * self.row_items
        values = np.fromfile(handle, dtype=self.item, count=count)
        if values.size != count:
            raise ValueError(f"{handle.name} is truncated inside a tensor's data")
        return values.reshape(stop - start, self.row_items)


CHUNK_VALUES = 1 << 22  # dequantize about 4M values (16 MB of floats) at a time


def _dequantize_into(target: torch.Tensor, handle, stored: StoredTensor, transform: Any) -> None:
    """Fill ``target`` from the file, a chunk of rows at a time, so the float copy of a quantized
    matrix never exists next to the model's own; a `StoredRows` piece reads only its rows."""
    import gguf

    def floats(start: int, stop: int) -> torch.Tensor:  # rows start..stop, (rows, row_items)
        raw = stored.read_rows(handle, start, stop)
        decoded = gguf_blocks.dequantize(raw, stored.storage.name)  # the common types, on every core
        if decoded is not None:
            return decoded
        values = gguf.quants.dequantize(raw, stored.storage)
        return torch.from_numpy(np.asarray(values, dtype=np.float32).reshape(stop - start, -1))

    with torch.no_grad():
        if isinstance(transform, RopeRows):  # Q/K: the permutation spans each head's rows (small matrices)
            target.copy_(transform(floats(0, stored.rows).reshape(target.shape)))
            return
        first, last = transform.rows if isinstance(transform, StoredRows) else (0, stored.rows)
        target = target.view(last - first, -1)
        step = max(1, CHUNK_VALUES // target.shape[1])
        for start in range(first, last, step):
            stop = min(start + step, last)
            target[start - first : stop - first].copy_(floats(start, stop).view(stop - start, -1))


def load_gguf(path: str | Path, dtype: torch.dtype = torch.float32):
    """(model, tokenizer, chat template) from a GGUF file; weights dequantized to ``dtype``.
    The tokenizer is None, with a warning, for the vocabulary kinds in `VOCABULARIES_NOT_READ`.

    Memory: the parsed metadata (a 49k-token vocabulary is ~10 MB of Python strings) is
    dropped before the model is allocated, and each tensor is read and dequantized in
    chunks straight into its parameter, so loading peaks near one copy of the weights."""
    from glassformer.tokenizers.gguf_vocab import read_gguf_tokenizer

    header = _reader(path)
    try:
        meta = read_gguf_tokenizer(header)
        tokenizer = None if meta.model in VOCABULARIES_NOT_READ else meta.tokenizer()
    except (ValueError, TypeError) as error:  # bad UTF-8, a merge of unknown tokens, ...
        if str(header.path) in str(error):  # gguf_vocab's own errors name the file
            raise
        raise ValueError(f"{path}: the GGUF tokenizer metadata is damaged: {error}") from None
    if tokenizer is None:
        warnings.warn(
            f"{path}: loaded without its tokenizer: glassformer does not read GGUF's "
            f"tokenizer.ggml.model={meta.model!r} vocabularies ({VOCABULARIES_NOT_READ[meta.model]}) yet; "
            "give the model token ids",
            stacklevel=2,
        )
    tensors = header.tensors
    special = {
        "bos_token_id": meta.bos_token_id,
        "eos_token_id": meta.eos_token_id,
        "pad_token_id": meta.pad_token_id,
    }
    try:
        arch = architecture(header)
        config = config_from_gguf(header, len(meta.tokens), set(tensors), special)
    except ValueError as error:  # name the file
        raise ValueError(f"{path}: {error}") from None
    mapping = _check_tensors(Path(path), config, arch, tensors)
    stored = {name: StoredTensor.of(tensor) for name, tensor in tensors.items()}
    config = _rope_freqs(Path(path), config, stored.get("rope_freqs.weight"))
    chat_template = meta.chat_template
    del header, meta, tensors  # the metadata goes before the weights come
    net = build(config, initialize=False, dtype=dtype)  # every weight is overwritten below
    params = dict(net.named_parameters())
    with open(path, "rb") as handle:
        for item in mapping:  # q, k and v straight into their rows of qkv_proj
            _dequantize_into(item.target(params), handle, stored[item.theirs], item.transform)
    return net.eval(), tokenizer, chat_template
