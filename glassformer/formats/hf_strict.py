"""A ``config.json`` read strictly: every key read, known not to matter, or at its neutral value.

A family's ``config_from_hf`` reads the keys it understands from a `Recording` of the dict,
which notes each key asked for. `read_config` then refuses any other key, by name, unless

* it never changes the numbers a model computes (`IGNORED`: names and ids of the file,
  dropout and initialization, which are training's, switches of what a forward pass returns,
  generation defaults, which are the sampler's), or
* the family knows it does not matter there (its ``HARMLESS`` dict, each with the reason:
  Phi-3's ``attention_bias``, which its attention never reads), or
* it holds its neutral value: ``None`` (transformers writes null for a feature that is off),
  or the value the family declares in its ``NEUTRAL`` dict (GPT-2's
  ``scale_attn_by_inverse_layer_idx: false``), or one of `NEUTRAL`'s here.

So a key that a newer transformers adds, or a setting Glassformer does not compute, stops the
load with its name instead of being defaulted in silence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from glassformer.config import ModelConfig

IGNORED = {  # keys that never change the numbers, and why
    "file": "_name_or_path name_or_path _commit_hash architectures model_type transformers_version dtype "
    "torch_dtype tokenizer_class task_specific_params prefix finetuning_task is_encoder_decoder "
    "_attn_implementation_autoset",  # the dtype is the loader's; model_type picks the family
    "labels": "id2label label2id num_labels problem_type",  # a classification head we do not read
    "outputs": "output_attentions output_hidden_states return_dict use_return_dict use_cache torchscript "
    "output_router_logits chunk_size_feed_forward",  # what a pass returns, or chunking of the same sums
    "training": "initializer_range init_std initializer_factor router_aux_loss_coef router_jitter_noise "
    "router_z_loss_coef gradient_checkpointing pretraining_tp",  # tp: the same product, split in slices
    "generation": "max_length min_length do_sample early_stopping num_beams num_beam_groups "
    "diversity_penalty temperature top_k top_p typical_p repetition_penalty length_penalty "
    "no_repeat_ngram_size encoder_no_repeat_ngram_size bad_words_ids num_return_sequences output_scores "
    "return_dict_in_generate "
    "forced_bos_token_id forced_eos_token_id remove_invalid_values exponential_decay_length_penalty "
    "suppress_tokens begin_suppress_tokens sep_token_id cls_token_id mask_token_id unk_token_id "
    "decoder_start_token_id max_new_tokens bos_token_id eos_token_id pad_token_id",  # the sampler's
}
IGNORED_KEYS = frozenset(" ".join(IGNORED.values()).split())
DROPOUT = re.compile(r"(dropout|_pdrop|layerdrop|dropout_prob|dropout_rate)$")  # training only
NEUTRAL: dict[str, Any] = {  # keys any family reads as off at this value, and refuses otherwise
    "pruned_heads": {},
    "is_decoder": False,  # an encoder made causal
    "add_cross_attention": False,  # a decoder given an encoder's cross-attention
    "tie_encoder_decoder": False,
}


class Recording(dict):
    """A config dict that notes which keys were asked for (``[key]``, ``get``, ``in``).

    >>> hf = Recording({"hidden_size": 64, "dropout": 0.1})
    >>> hf["hidden_size"], hf.get("vocab_size", 7), sorted(hf.read)
    (64, 7, ['hidden_size', 'vocab_size'])
    """

    def __init__(self, data: Mapping[str, Any], read: set[str] | None = None) -> None:
        super().__init__(data)
        self.read: set[str] = set() if read is None else read

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def overlay(hf: dict[str, Any], drop: tuple[str, ...] = (), **changes: Any) -> dict[str, Any]:
    """``hf`` with ``changes`` and without ``drop``, for one family read through another's reader
    (Gemma through Llama's): a `Recording` stays one, noting reads in the same set.

    >>> hf = Recording({"a": 1, "b": 2})
    >>> inner = overlay(hf, drop=("b",), c=3)
    >>> inner["a"], "b" in inner, sorted(hf.read)
    (1, False, ['a', 'b'])
    """
    data = {key: value for key, value in dict.items(hf) if key not in drop} | changes
    return Recording(data, hf.read) if isinstance(hf, Recording) else data


def read_config(family: ModuleType, hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    """``family.config_from_hf`` on ``hf``, then every key it did not read refused unless ignored
    or neutral (`unread`); a missing required key is a ValueError naming it."""
    recording = Recording(hf)
    try:
        config = family.config_from_hf(recording, keys)
    except KeyError as error:
        raise ValueError(f"the Hugging Face config lacks {error.args[0]!r}") from None
    recording.read.update(getattr(family, "HARMLESS", {}))
    refused = unread(recording, getattr(family, "NEUTRAL", {}))
    if refused:
        key = refused[0]
        raise ValueError(
            f"{hf.get('model_type')} config.json sets {key} = {_short(hf[key])}, which Glassformer does not "
            f"read for this family; read without it, the model could compute other numbers than the "
            f"checkpoint's. Unread keys: {', '.join(refused)}"
        )
    return config


def unread(hf: Recording, neutral: Mapping[str, Any]) -> list[str]:
    """The keys of ``hf`` that were not read, are not `IGNORED` and not at a neutral value.

    >>> hf = Recording({"hidden_size": 8, "dropout": 0.1, "sliding_window": None, "is_decoder": True})
    >>> _ = hf["hidden_size"]
    >>> unread(hf, {})
    ['is_decoder']
    """
    neutral = {**NEUTRAL, **neutral}
    return [
        key
        for key, value in dict.items(hf)
        if key not in hf.read
        and key not in IGNORED_KEYS
        and not DROPOUT.search(key)
        and value is not None
        and not (key in neutral and value == neutral[key])
    ]


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 120 else shown[:120] + "..."
