"""GGUF files (llama.cpp's format) -> Glassformer models, weights dequantized to floats.

What a GGUF file stores: a header of typed key/value metadata (``llama.block_count``,
``llama.attention.head_count``, ``tokenizer.ggml.tokens``, ``tokenizer.chat_template``,
...) and then the tensors, each with a name (``blk.0.attn_q.weight``), a shape and a
storage type. Small tensors (norm gains) are plain F32; matrices are usually quantized
in blocks of 32 numbers:

* Q8_0: one fp16 scale d per block and 32 int8 values q: ``x = d * q``;
* Q4_0: one fp16 scale and 32 4-bit values q in 0..15: ``x = d * (q - 8)``;
* Q4_1: an fp16 scale d and an fp16 minimum m, 32 4-bit values: ``x = d * q + m``;
* K-quants (Q4_K, Q6_K) group 8-16 such blocks into a 256-value super-block whose
  per-block scales are themselves quantized against one fp16 super-scale.

`gguf.quants.dequantize` (the reference implementation, maintained with llama.cpp)
turns any of these into floats; this module maps the tensor names to our modules.
llama.cpp's converter permutes the rows of the Llama Q and K projections (it pairs RoPE
features as (2i, 2i+1), where Hugging Face pairs (i, i + e/2)); we undo that permutation
so the weights fit our rotate-half RoPE, as Hugging Face does when it reads a GGUF file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from glassformer.config import ModelConfig
from glassformer.models import build

SUPPORTED_ARCHITECTURES = ("llama",)


def _reader(path: str | Path):
    import gguf

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {path}")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, IndexError, KeyError, OSError) as error:
        raise ValueError(f"{path} is a damaged or truncated GGUF file: {error}") from None


def _field(reader, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ValueError(f"the GGUF metadata lacks {key!r}")
        return default
    return field.contents()


def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation: per head, rows (0, 2, 4, ..., 1, 3, ...) back
    to the rotate-half order.  (heads*e, d) -> (heads*e, d)."""
    rows, cols = weight.shape
    return weight.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def config_from_gguf(reader, n_tokens: int, tied: bool, special: dict[str, int | None]) -> ModelConfig:
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ValueError(
            f"GGUF architecture {arch!r} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    n_heads = int(_field(reader, f"{arch}.attention.head_count"))
    d_model = int(_field(reader, f"{arch}.embedding_length"))
    return ModelConfig(
        family="decoder",
        vocab_size=int(_field(reader, f"{arch}.vocab_size", n_tokens)),
        d_model=d_model,
        n_layers=int(_field(reader, f"{arch}.block_count")),
        n_heads=n_heads,
        n_kv_heads=int(_field(reader, f"{arch}.attention.head_count_kv", n_heads)),
        d_head=int(_field(reader, f"{arch}.rope.dimension_count", d_model // n_heads)),
        d_ff=int(_field(reader, f"{arch}.feed_forward_length")),
        max_seq_len=int(_field(reader, f"{arch}.context_length", 2048)),
        positions="rope",
        rope_base=float(_field(reader, f"{arch}.rope.freq_base", 10000.0)),
        rope_style="rotate_half",
        norm="rmsnorm",
        norm_placement="pre",
        norm_eps=float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        activation="swiglu",
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        tie_embeddings=tied,
        **special,
    )


def _key_map(config: ModelConfig) -> dict[str, tuple[str, int | None]]:
    """GGUF tensor name -> (our parameter, heads to un-permute or None)."""
    names = {
        "token_embd.weight": ("embed.token.weight", None),
        "output_norm.weight": ("final_norm.weight", None),
    }
    if not config.tie_embeddings:
        names["output.weight"] = ("lm_head.weight", None)
    for i in range(config.n_layers):
        ours, theirs = f"blocks.{i}", f"blk.{i}"
        names.update(
            {
                f"{theirs}.attn_norm.weight": (f"{ours}.attn_norm.weight", None),
                f"{theirs}.attn_q.weight": (f"{ours}.attn.q_proj.weight", config.n_heads),
                f"{theirs}.attn_k.weight": (f"{ours}.attn.k_proj.weight", config.n_kv_heads),
                f"{theirs}.attn_v.weight": (f"{ours}.attn.v_proj.weight", None),
                f"{theirs}.attn_output.weight": (f"{ours}.attn.o_proj.weight", None),
                f"{theirs}.ffn_norm.weight": (f"{ours}.ffn_norm.weight", None),
                f"{theirs}.ffn_gate.weight": (f"{ours}.ffn.gate_proj.weight", None),
                f"{theirs}.ffn_up.weight": (f"{ours}.ffn.up_proj.weight", None),
                f"{theirs}.ffn_down.weight": (f"{ours}.ffn.down_proj.weight", None),
            }
        )
    return names


def load_gguf(path: str | Path, dtype: torch.dtype = torch.float32):
    """(model, tokenizer, chat template) from a GGUF file; weights dequantized to ``dtype``."""
    import gguf

    from glassformer.tokenizers.gguf_vocab import read_gguf_tokenizer

    reader = _reader(path)
    meta = read_gguf_tokenizer(reader)
    tensors = {t.name: t for t in reader.tensors}
    special = {
        "bos_token_id": meta.bos_token_id,
        "eos_token_id": meta.eos_token_id,
        "pad_token_id": meta.pad_token_id,
    }
    config = config_from_gguf(reader, len(meta.tokens), "output.weight" not in tensors, special)
    net = build(config, initialize=False, dtype=dtype)  # every weight is overwritten below
    params = dict(net.named_parameters())
    mapping = _key_map(config)
    unknown = sorted(set(tensors) - set(mapping) - {"rope_freqs.weight"})
    if unknown:
        raise ValueError(f"{path}: GGUF tensors this loader does not understand: {', '.join(unknown[:8])}")
    for name, (ours, heads) in mapping.items():
        if name not in tensors:
            raise ValueError(f"{path}: the GGUF file lacks the tensor {name!r}")
        tensor = tensors[name]
        try:
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        except NotImplementedError:
            raise ValueError(
                f"{path}: tensor {name} uses the quantization {tensor.tensor_type.name}, which the gguf "
                "package cannot dequantize"
            ) from None
        weight = torch.from_numpy(np.array(values, dtype=np.float32))  # a writable float32 copy
        if heads is not None:
            weight = unpermute_rope_rows(weight, heads)
        target = params[ours]
        if tuple(weight.shape) != tuple(target.shape):
            raise ValueError(
                f"{path}: {name} has shape {tuple(weight.shape)}, our {ours} needs {tuple(target.shape)}"
            )
        with torch.no_grad():
            target.copy_(weight)
    return net.eval(), meta.tokenizer(), meta.chat_template
