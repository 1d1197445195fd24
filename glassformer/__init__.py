"""Glassformer: a transformer workshop you can see through.

The public facade (see DESIGN.md):

>>> import glassformer as gf
>>> net = gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4))
>>> lm = gf.LanguageModel(net)
>>> lm.logits([1, 2, 3]).shape
torch.Size([1, 3, 50])
>>> lm.trace([1, 2, 3], names=["blocks.*.attn.pattern"])["blocks.1.attn.pattern"].shape
torch.Size([1, 4, 3, 3])
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.generate import GenerationSettings
from glassformer.inspect.trace import Trace
from glassformer.lm import LanguageModel
from glassformer.models import build
from glassformer.nn.kv_cache import KVCache
from glassformer.tokenizers import Tokenizer, load_tokenizer

__version__ = "0.1.0"


def load(name_or_path: Any, dtype: Any = "float32") -> LanguageModel:
    """A model by registry name (``smollm2-135m-instruct``, ``minilm-l6``) or path: a .gguf
    file, a Hugging Face checkpoint directory or a training run directory; ``dtype``
    float32 (default) or bfloat16 (a torch dtype or its name)."""
    from glassformer.formats.registry import load as load_model

    return load_model(name_or_path, dtype)


def from_hf(model_or_dir: Any, tokenizer: Any | None = None) -> LanguageModel:
    """Convert a Hugging Face model object, or load an HF checkpoint directory.

    Supported families: GPT-2, Llama (Mistral, Qwen2), BERT, T5, Marian. Weights go
    through an explicit key map that checks every shape (`glassformer.formats.hf`).
    """
    from glassformer.formats.hf import convert_hf, read_hf_checkpoint

    return LanguageModel(convert_hf(*read_hf_checkpoint(model_or_dir)), tokenizer)


__all__ = [
    "GenerationSettings",
    "KVCache",
    "LanguageModel",
    "ModelConfig",
    "Tokenizer",
    "Trace",
    "__version__",
    "build",
    "from_hf",
    "load",
    "load_tokenizer",
]
