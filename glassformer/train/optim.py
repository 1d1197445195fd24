"""Optimizers with the usual weight-decay split: decay the matrices, spare everything else.

Decoupled weight decay (AdamW, Loshchilov & Hutter 2019) shrinks every decayed weight
toward zero at each step, independently of the gradient::

    w <- w - lr * (adam_update(g) + weight_decay * w)

That pull is a prior that weights should be small. It makes sense for the matrices of
``nn.Linear`` layers (the stacked q/k/v projection ``qkv_proj``, ``o_proj``, the FFN, a
pooler, an untied LM head; a ViT's patch projection W_patch, kept as a convolution), whose
scale the following normalization absorbs anyway. It
does not make sense for:

- biases and normalization gains (``LayerNorm.weight`` starts at 1: decaying it fights
  the initialization and the scale the network needs);
- position tables and T5's relative-position bias (a handful of values per position);
- token embeddings: a row is only updated when its token occurs, but decay pulls every
  row at every step, so rare tokens would shrink toward zero. Pass
  ``decay_embeddings=True`` to decay them anyway (nanoGPT and GPT-2 do).

A tied matrix (GPT-2's LM head *is* the token embedding; BERT's MLM decoder too; T5
shares one table three ways) is one parameter and appears once, as an embedding.

>>> from glassformer.config import ModelConfig
>>> from glassformer.models import build
>>> net = build(ModelConfig(d_model=16, n_layers=1, n_heads=2, vocab_size=20))
>>> decay, no_decay = parameter_groups(net, weight_decay=0.1)
>>> decay["param_names"]
['stack.blocks.0.attn.qkv_proj.weight', 'stack.blocks.0.attn.o_proj.weight', \
'stack.blocks.0.ffn.up_proj.weight', 'stack.blocks.0.ffn.down_proj.weight']
>>> no_decay["param_names"][:3]
['stack.embed.token.weight', 'stack.embed.position.weight', 'stack.blocks.0.attn_norm.weight']
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

OPTIMIZERS = ("adamw", "sgd")


def parameter_groups(
    model: nn.Module, weight_decay: float, decay_embeddings: bool = False
) -> list[dict[str, Any]]:
    """Two optimizer param groups: ``[decayed, not decayed]``, each with ``param_names``.

    Decayed: the ``weight`` of every ``nn.Linear`` and ``nn.Conv2d`` (and, with
    ``decay_embeddings=True``, of every ``nn.Embedding``). Everything else gets
    ``weight_decay=0.0``. Parameters with ``requires_grad=False`` are left out; tied
    parameters appear once, under the name ``model.named_parameters()`` gives them.
    """
    _check_non_negative("weight_decay", weight_decay)
    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))}
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay: dict[str, Any] = {"params": [], "param_names": [], "weight_decay": float(weight_decay)}
    no_decay: dict[str, Any] = {"params": [], "param_names": [], "weight_decay": 0.0}
    for name, param in model.named_parameters():  # yields each tied parameter once
        if not param.requires_grad:
            continue
        if id(param) in embeddings:  # checked first: a tied LM head is an embedding
            decayed = decay_embeddings
        else:
            decayed = id(param) in linear_weights
        group = decay if decayed else no_decay
        group["params"].append(param)
        group["param_names"].append(name)
    return [decay, no_decay]


def make_optimizer(
    model: nn.Module,
    name: str = "adamw",
    *,
    lr: float,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    momentum: float = 0.9,
    decay_embeddings: bool = False,
    fused: bool = False,
) -> torch.optim.Optimizer:
    """AdamW or SGD over `parameter_groups` of ``model``.

    ``adamw``: Adam's per-parameter step ``m_hat / (sqrt(v_hat) + eps)`` with
    ``m = beta1 m + (1 - beta1) g`` and ``v = beta2 v + (1 - beta2) g^2``, plus decoupled
    weight decay. ``betas=(0.9, 0.95)`` is the GPT-3 / Llama choice (beta2 lower than
    Adam's 0.999 so v forgets old spikes sooner). ``fused=True`` (AdamW on CUDA: the trainer asks
    for it there) updates every parameter in one kernel instead of a loop of small ones.
    ``sgd``: heavy-ball momentum ``buf = momentum * buf + g; w <- w - lr * buf`` with L2 weight
    decay on the same groups.

    >>> from glassformer.config import ModelConfig
    >>> from glassformer.models import build
    >>> opt = make_optimizer(build(ModelConfig(n_layers=1)), "adamw", lr=3e-4)
    >>> [(g["weight_decay"], len(g["params"])) for g in opt.param_groups]
    [(0.1, 4), (0.0, 12)]
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS)}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr={lr!r} must be a positive number (typical: 3e-4 for AdamW, 0.1 for SGD)")
    _check_non_negative("weight_decay", weight_decay)
    groups = [g for g in parameter_groups(model, weight_decay, decay_embeddings) if g["params"]]
    if not groups:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    if name == "adamw":
        if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas={betas!r} must be two numbers in [0, 1), e.g. (0.9, 0.95)")
        if not eps > 0:
            raise ValueError(f"eps={eps!r} must be positive (typical: 1e-8)")
        return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas), eps=eps, fused=fused or None)
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum={momentum!r} must lie in [0, 1) (0 = plain SGD)")
    return torch.optim.SGD(groups, lr=lr, momentum=momentum)


def _check_non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name}={value!r} must be a number >= 0 (0 turns it off)")
