"""The Hugging Face families Glassformer reads and writes: one table for import and export.

Each family module (``hf_gpt2``, ``hf_llama``, ``hf_moe``, ``hf_gemma``, ``hf_gemma2``, ``hf_olmo2``,
``hf_phi``, ``hf_phi3``, ``hf_opt``, ``hf_neox``, ``hf_bert``, ``hf_roberta``, ``hf_distilbert``,
``hf_t5``, ``hf_marian``, ``hf_bart``, ``hf_vit``) gives

* ``config_from_hf(hf_config: dict, keys: set[str]) -> ModelConfig``;
* ``key_map(config, keys) -> list[Mapped]`` (`glassformer.formats.key_map`): for each of
  our parameters, the checkpoint tensor it comes from and how it is reshaped;
* ``IGNORED``: checkpoint tensors we deliberately do not use (each with its reason);
* optionally ``check(state, config)``, for ignored tensors that must still hold what we
  recompute (Marian's sinusoids);
* for the families export writes, ``config_to_hf(config) -> dict`` (the inverse of
  ``config_from_hf``; a module that holds several model_types names one writer per row) and
  optionally ``layout_keys(config)``, the checkpoint names that choose between the layouts
  ``key_map`` knows (a ``bert.`` prefix, say) or that the HF class always has (Phi's
  ``lm_head.bias``).

`convert_hf` (import) finds a module here by the checkpoint's ``model_type``; `save_hf`
(export) tries, in table order, the written families that hold the model's family, and
writes the first that reads back as exactly the model's config. The order puts a model_type
before those that hold what it holds and more: a Llama-style model is Llama, with a sliding
window Mistral, with q/k/v biases alone Qwen2, with partial rotary Phi-3. Some model_types
hold nothing an earlier one does not (RoBERTa is BERT with its positions offset; OPT with a
tied head and biases is GPT-2 with ReLU; Phi-3 with full rotary is Llama): their models are
written as the earlier one, the same function, unless ``save_hf(..., model_type=...)`` asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from glassformer.formats import (
    hf_bart,
    hf_bert,
    hf_distilbert,
    hf_gemma,
    hf_gemma2,
    hf_gpt2,
    hf_llama,
    hf_marian,
    hf_moe,
    hf_neox,
    hf_olmo2,
    hf_opt,
    hf_phi,
    hf_phi3,
    hf_roberta,
    hf_t5,
    hf_vit,
)


@dataclass(frozen=True)
class HFFamily:
    """A ``model_type``: its key-map module, which of our families it holds, and whether
    export writes it (a model_type read through another's module is read only)."""

    module: ModuleType
    holds: str  # our ModelConfig.family
    written: bool
    writer: str = "config_to_hf"  # the module's function that writes this model_type's config.json

    def config_to_hf(self, config) -> dict:
        """This model_type's config.json for ``config``."""
        return getattr(self.module, self.writer)(config)


FAMILIES = {  # model_type -> family; export tries the written ones in this order
    "gpt2": HFFamily(hf_gpt2, "decoder", written=True),
    "llama": HFFamily(hf_llama, "decoder", written=True),
    "mistral": HFFamily(hf_llama, "decoder", written=True, writer="config_to_mistral"),  # + sliding window
    "qwen2": HFFamily(hf_llama, "decoder", written=True, writer="config_to_qwen2"),  # q/k/v biases, no o's
    "qwen3": HFFamily(hf_llama, "decoder", written=True, writer="config_to_qwen3"),  # + q/k-norm
    "mixtral": HFFamily(hf_moe, "decoder", written=True, writer="config_to_mixtral"),  # top-k experts
    "qwen2_moe": HFFamily(hf_moe, "decoder", written=True, writer="config_to_qwen2_moe"),  # + shared expert
    "gemma": HFFamily(hf_gemma, "decoder", written=True),  # + sqrt(d) embedding scale, (1 + w) norms
    "gemma2": HFFamily(  # Gemma's, sandwich norms, soft-caps, windows
        hf_gemma2, "decoder", written=True, writer="config_to_gemma2"
    ),
    "gemma3_text": HFFamily(  # Gemma 2's, q/k-norm, local RoPE base
        hf_gemma2, "decoder", written=True, writer="config_to_gemma3"
    ),
    "olmo2": HFFamily(hf_olmo2, "decoder", written=True),  # Llama's, norms on outputs, q/k-norm over all
    "phi3": HFFamily(hf_phi3, "decoder", written=True),  # Llama's, fused qkv and gate_up, partial rotary
    "phi": HFFamily(hf_phi, "decoder", written=True),  # Phi-2: parallel block, one norm, partial rotary
    "opt": HFFamily(hf_opt, "decoder", written=True),  # GPT-2's, ReLU, positions offset by 2
    "gpt_neox": HFFamily(hf_neox, "decoder", written=True),  # parallel residual, partial rotary
    "bert": HFFamily(hf_bert, "encoder", written=True),
    "roberta": HFFamily(hf_roberta, "encoder", written=True),  # BERT's, renamed, positions offset
    "distilbert": HFFamily(hf_distilbert, "encoder", written=True),  # BERT's, renamed, no segments
    "vit": HFFamily(hf_vit, "encoder", written=True),  # pre-norm encoder over image patches + [CLS]
    "t5": HFFamily(hf_t5, "encoder_decoder", written=True),
    "marian": HFFamily(hf_marian, "encoder_decoder", written=True),  # post-norm, sinusoids (halved)
    "bart": HFFamily(hf_bart, "encoder_decoder", written=True),  # Marian's, learned positions + 2
}


def reader(model_type: str) -> ModuleType:
    """The key-map module for a checkpoint's ``model_type``; ValueError listing the supported."""
    if model_type not in FAMILIES:
        supported = ", ".join(sorted(FAMILIES))
        raise ValueError(f"Hugging Face model_type {model_type!r} is not supported; supported: {supported}")
    return FAMILIES[model_type].module


def writers(family: str) -> list[str]:
    """The model_types export may write a model of our ``family`` as, in the order tried.

    >>> writers("decoder")[:5], len(writers("decoder"))
    (['gpt2', 'llama', 'mistral', 'qwen2', 'qwen3'], 15)
    >>> writers("encoder_decoder")
    ['t5', 'marian', 'bart']
    """
    return [name for name, row in FAMILIES.items() if row.written and row.holds == family]


def read_only() -> list[str]:
    """The model_types that are read, not written."""
    return [name for name, row in FAMILIES.items() if not row.written]
