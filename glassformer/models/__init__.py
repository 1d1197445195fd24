"""The three model families and `build`, which picks one from a config; `with_classifier`
puts a new classification head on a (pretrained) encoder or decoder."""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from glassformer.config import ModelConfig
from glassformer.models.base import TransformerModel
from glassformer.models.decoder import DecoderLM
from glassformer.models.encoder import EncoderModel
from glassformer.models.encoder_decoder import EncoderDecoderLM
from glassformer.models.fine_tune import with_classifier
from glassformer.models.size import ModelTooLarge, check_size

FAMILY_CLASSES = {"decoder": DecoderLM, "encoder": EncoderModel, "encoder_decoder": EncoderDecoderLM}


def build(
    config: ModelConfig,
    initialize: bool = True,
    dtype: torch.dtype = torch.float32,
    max_parameters: int | None = None,
) -> TransformerModel:
    """A freshly initialized model for ``config``: DecoderLM, EncoderModel or EncoderDecoderLM.

    ``initialize=False`` skips the random initialization (the model is built on the meta
    device, then given uninitialized CPU memory of ``dtype``): for loaders that overwrite
    every weight, so a loaded model never exists twice in memory.

    The config's size is checked first, from its sizes alone (`size.check_size`): weights
    over half of this machine's memory raise `ModelTooLarge` before anything is built;
    ``max_parameters`` (or ``GLASSFORMER_MAX_PARAMETERS``) sets the limit instead.
    """
    if not isinstance(config, ModelConfig):
        raise TypeError(f"build() needs a ModelConfig, got {type(config).__name__}")
    check_size(config, dtype, max_parameters)
    if initialize:
        return FAMILY_CLASSES[config.family](config).to(dtype)
    net = build_meta(config, dtype, max_parameters).to_empty(device="cpu")
    net.tie_weights()  # to_empty gives tied parameters separate memory: tie them again
    for module in net.modules():  # computed buffers (RoPE frequencies, ALiBi slopes)
        if hasattr(module, "reset_buffers"):
            module.reset_buffers()
    return net


def build_meta(
    config: ModelConfig, dtype: torch.dtype = torch.float32, max_parameters: int | None = None
) -> TransformerModel:
    """``config``'s model on the meta device: its modules and parameter shapes, without memory
    or initialization (its size checked first, as `build` does)."""
    check_size(config, dtype, max_parameters)
    with torch.device("meta"), _NoRandomFill():
        return FAMILY_CLASSES[config.family](config).to(dtype)


class _NoRandomFill(TorchFunctionMode):
    """Skips torch's random fills (``nn.init.normal_``, as nn.Embedding's constructor calls it)
    while a model is built on the meta device: there is nothing to fill, and torch's meta
    ``normal_`` goes through its reference implementations, whose first use imports
    torch._dynamo (0.7 s of every first load)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.init.normal_:
            return args[0] if args else kwargs["tensor"]
        if func is torch.Tensor.normal_:
            return args[0] if args else kwargs["self"]
        return func(*args, **kwargs)


__all__ = [
    "DecoderLM",
    "EncoderDecoderLM",
    "EncoderModel",
    "ModelTooLarge",
    "TransformerModel",
    "build",
    "build_meta",
    "with_classifier",
]
