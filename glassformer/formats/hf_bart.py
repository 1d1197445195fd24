"""Key map for Hugging Face BART (``BartForConditionalGeneration``; Lewis et al. 2019): Marian's
encoder-decoder layout (post-norm LayerNorm, biases everywhere, shared and tied embeddings, a
fixed ``final_logits_bias``) with GELU, a LayerNorm on each stack's embeddings
(``layernorm_embedding``), and learned position tables offset by 2 (position p reads row
p + 2, a relic of fairseq's padding; our tables are their rows from 2 on, `TheirRows`).
Written too (`config_to_hf`; the tables' two first rows as zeros, `key_map.join_rows`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_marian
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped, TheirRows

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding.offset
IGNORED = {
    r"model\.(encoder|decoder)\.embed_tokens\.weight": "the same tensor as model.shared.weight",
    r"lm_head\.weight": "tied to model.shared.weight",
}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    marian = hf_marian.config_from_hf(
        overlay(hf, activation_function=hf.get("activation_function", "gelu")), keys
    )
    return dataclasses.replace(marian, positions="learned", sinusoidal_style="interleaved", embed_norm=True)


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``BartForConditionalGeneration`` config.json: Marian's (`hf_marian.config_to_hf`) as BART
    names it; what BART cannot hold (sinusoids, no embedding norm) reads back otherwise, and is
    refused."""
    marian = hf_marian.config_to_hf(config)
    for key in ("decoder_vocab_size", "share_encoder_decoder_embeddings"):
        marian.pop(key)  # BART always shares its one vocabulary
    return {
        **marian,
        "model_type": "bart",
        "architectures": ["BartForConditionalGeneration"],
        "forced_bos_token_id": None,
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    rows = TheirRows(POSITION_OFFSET, POSITION_OFFSET + config.max_seq_len)
    out = hf_marian.key_map(config, keys)
    for stack in ("encoder", "decoder"):
        out.append(Mapped(f"{stack}.embed.position.weight", f"model.{stack}.embed_positions.weight", rows))
        out += [
            Mapped(f"{stack}.embed.norm.{kind}", f"model.{stack}.layernorm_embedding.{kind}")
            for kind in ("weight", "bias")
        ]
    return out
