"""Key map for Hugging Face RoBERTa (``RobertaForMaskedLM``, ``RobertaModel``; Liu et al. 2019):
BERT's architecture under other names (``roberta.``, ``lm_head.``), one segment, and a position
table offset by the padding index: position p reads row p + pad + 1 (HF numbers positions from
pad + 1 so that padding keeps row pad), so our table is its rows from pad + 1 on (`TheirRows`).
Its MLM head applies GELU whatever ``hidden_act`` says: with the head, another is refused.

Written too (`config_to_hf`; the table's rows up to pad as zeros, `key_map.join_rows`), and only
when asked (``model_type="roberta"``): everything RoBERTa holds, BERT holds, and export tries
BERT first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_bert
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped, TheirRows

NEUTRAL = hf_bert.NEUTRAL
IGNORED = {
    r"(roberta\.)?embeddings\.(position_ids|token_type_ids)": "arange / zero buffers",
    r"lm_head\.decoder\.weight": "tied to the token embedding",
    r"lm_head\.decoder\.bias": "the same tensor as lm_head.bias",
}
RENAMES = (  # BERT's names -> RoBERTa's
    ("bert.", "roberta."),
    ("cls.predictions.transform.dense.", "lm_head.dense."),
    ("cls.predictions.transform.LayerNorm.", "lm_head.layer_norm."),
    ("cls.predictions.bias", "lm_head.bias"),
)


def _offset(pad_token_id: int | None) -> int:
    """Where position 0 sits in the table: pad + 1 (RobertaConfig's pad defaults to 1)."""
    return (1 if pad_token_id is None else pad_token_id) + 1


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    bert_keys = {_bert_name(key) for key in keys}
    config = hf_bert.config_from_hf(overlay(hf, type_vocab_size=hf.get("type_vocab_size", 1)), bert_keys)
    if config.mlm_head and config.activation != "gelu":
        raise ValueError(
            f"RoBERTa with hidden_act={hf.get('hidden_act')!r} and an MLM head is not supported: its head "
            "applies GELU whatever hidden_act says"
        )
    return dataclasses.replace(
        config, max_seq_len=hf["max_position_embeddings"] - _offset(hf.get("pad_token_id"))
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``RobertaForMaskedLM`` / ``RobertaModel`` config.json: BERT's, with the table longer by
    the offset. RoBERTa numbers positions from its pad token: a model without one is written with
    RoBERTa's default (1), reads back with it, and is refused."""
    pad = 1 if config.pad_token_id is None else config.pad_token_id
    return {
        **hf_bert.config_to_hf(config),
        "model_type": "roberta",
        "architectures": ["RobertaForMaskedLM" if config.mlm_head else "RobertaModel"],
        "max_position_embeddings": config.max_seq_len + _offset(pad),
        "pad_token_id": pad,
    }


def layout_keys(config: ModelConfig) -> set[str]:
    """``RobertaForMaskedLM`` prefixes the encoder with ``roberta.``; a bare ``RobertaModel`` does not."""
    return {_roberta_name(key) for key in hf_bert.layout_keys(config)}


def _bert_name(theirs: str) -> str:
    for bert, roberta in RENAMES:
        if theirs.startswith(roberta):
            return bert + theirs[len(roberta) :]
    return theirs


def _roberta_name(theirs: str) -> str:
    for bert, roberta in RENAMES:
        if theirs.startswith(bert):
            return roberta + theirs[len(bert) :]
    return theirs


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    offset = _offset(config.pad_token_id)
    out = []
    for item in hf_bert.key_map(config, {_bert_name(key) for key in keys}):
        theirs = _roberta_name(item.theirs)
        if item.ours == "stack.embed.position.weight":
            out.append(Mapped(item.ours, theirs, TheirRows(offset, offset + config.max_seq_len)))
        else:
            out.append(dataclasses.replace(item, theirs=theirs))
    return out
