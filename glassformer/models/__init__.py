"""The three model families and `build`, which picks one from a config."""

from __future__ import annotations

from glassformer.config import ModelConfig
from glassformer.models.base import TransformerModel
from glassformer.models.decoder import DecoderLM
from glassformer.models.encoder import EncoderModel
from glassformer.models.encoder_decoder import EncoderDecoderLM

FAMILY_CLASSES = {"decoder": DecoderLM, "encoder": EncoderModel, "encoder_decoder": EncoderDecoderLM}


def build(config: ModelConfig) -> TransformerModel:
    """A freshly initialized model for ``config``: DecoderLM, EncoderModel or EncoderDecoderLM."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"build() needs a ModelConfig, got {type(config).__name__}")
    return FAMILY_CLASSES[config.family](config)


__all__ = ["DecoderLM", "EncoderDecoderLM", "EncoderModel", "TransformerModel", "build"]
