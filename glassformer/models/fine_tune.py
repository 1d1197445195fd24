"""A pretrained body under a new classification head: the start of fine-tuning.

    body = pretrained stacks (and MLM / LM head, pooler)      every weight copied
    head = W_c, b_c                                            fresh: W_c ~ N(0, init_std), b_c = 0

The new model's config is the pretrained one with ``n_classes`` (and the pooling, the
class names and any other field given) changed. Only fields that leave every pretrained
weight's shape as it is make sense here (dropout, pooling, names); a change of shape is
refused, naming the weights it would break.

>>> from glassformer.config import ModelConfig
>>> from glassformer.models import build
>>> body = build(ModelConfig(family="encoder", vocab_size=50, d_model=32, n_layers=1, n_heads=4))
>>> net = with_classifier(body, 3, pooling="mean", class_names=("a", "b", "c"))
>>> net.config.n_classes, torch.equal(net.stack.embed.token.weight, body.stack.embed.token.weight)
(3, True)
"""

from __future__ import annotations

from typing import Any

import torch

from glassformer.models.base import TransformerModel
from glassformer.models.decoder import DecoderLM
from glassformer.models.encoder import EncoderModel

HEAD_PREFIX = "classifier."
FAMILIES_WITH_HEADS = {"decoder": DecoderLM, "encoder": EncoderModel}


def with_classifier(
    pretrained: TransformerModel,
    n_classes: int,
    *,
    pooling: str | None = None,
    class_names: tuple[str, ...] | list[str] = (),
    **changes: Any,
) -> TransformerModel:
    """A copy of ``pretrained`` with a freshly initialized head of ``n_classes`` classes.

    ``pooling`` is ``config.classifier_pooling`` (None: "cls" for an encoder, "last" for a
    decoder); ``changes`` are further `ModelConfig` fields (e.g. ``resid_dropout=0.1``).
    A head the pretrained model already had is replaced, not kept. The result is in
    training mode, float32, on the CPU; ``pretrained`` is left as it was.
    """
    if not isinstance(pretrained, TransformerModel):
        raise TypeError(
            f"pretrained must be a Glassformer model (gf.load(...).net), got {type(pretrained).__name__}"
        )
    config = pretrained.config.replace(
        n_classes=n_classes, classifier_pooling=pooling, class_names=tuple(class_names), **changes
    )
    net = FAMILIES_WITH_HEADS[config.family](config)  # initialized: the head keeps its fresh weights
    source = {k: v for k, v in pretrained.state_dict().items() if not k.startswith(HEAD_PREFIX)}
    target = net.state_dict()
    wrong = [
        f"{name} {tuple(tensor.shape)} -> {tuple(target[name].shape)}"
        for name, tensor in source.items()
        if name in target and target[name].shape != tensor.shape
    ]
    if wrong:
        raise ValueError(
            f"these changes alter pretrained weights' shapes ({'; '.join(wrong[:3])}): a new head can "
            "only change fields that keep the body as it is (dropout, pooling, class names)"
        )
    with torch.no_grad():
        missing, unexpected = net.load_state_dict(
            {k: v.detach().float().cpu() for k, v in source.items()}, strict=False
        )
    body_missing = [k for k in missing if not k.startswith(HEAD_PREFIX)]
    if body_missing or unexpected:
        raise ValueError(
            f"the new model and the pretrained one differ beyond the head: missing {body_missing[:3]}, "
            f"unexpected {unexpected[:3]}"
        )
    return net.train()
