"""Glassformer: a transformer workshop you can see through.

The public facade (the layers and the trace contract: docs/architecture.md):

>>> import glassformer as gf
>>> net = gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4))
>>> lm = gf.LanguageModel(net)
>>> lm.logits([1, 2, 3]).shape
torch.Size([1, 3, 50])
>>> lm.trace([1, 2, 3], names=["blocks.*.attn.pattern"])["blocks.1.attn.pattern"].shape
torch.Size([1, 4, 3, 3])
"""

from __future__ import annotations

from glassformer.config import ModelConfig
from glassformer.generate import GenerationSettings
from glassformer.lm import LanguageModel
from glassformer.loading import from_hf, load
from glassformer.lora import load_adapter, lora, merge_lora, save_adapter
from glassformer.models import build
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.trace import Trace
from glassformer.tokenizers import Tokenizer, load_tokenizer

__version__ = "0.1.0"

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
    "load_adapter",
    "load_tokenizer",
    "lora",
    "merge_lora",
    "save_adapter",
]
