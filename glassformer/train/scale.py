"""The trainer's tools of scale, switched on by a run's settings: activation checkpointing and
``torch.compile``. Each computes what the plain model computes (tests/test_scale_tools.py):

- ``train.checkpoint_activations``: each block of every stack runs under
  ``torch.utils.checkpoint`` while training (`glassformer.models.stack.TransformerStack.run_block`),
  so autograd keeps one b t d tensor per block instead of every activation inside it, and
  recomputes them in backward. ``benchmarks/activation_checkpointing.py`` measures both.
- ``train.compile = true``: ``torch.compile`` of the model's forward (``nn.Module.compile``, in
  place: the parameters, their names and the state dict stay as they are); autograd traces the
  compiled forward's backward too. The first steps are slow while it compiles. ``"auto"`` (the
  default) leaves it to `glassformer.train.compile_trial`, which times the run's steps.
"""

from __future__ import annotations

from torch import nn

from glassformer.models.stack import TransformerStack


def set_activation_checkpointing(net: nn.Module, on: bool = True) -> int:
    """Switch activation checkpointing on (or off) in every stack of ``net``; returns how many
    stacks there are (an encoder-decoder has two)."""
    stacks = [m for m in net.modules() if isinstance(m, TransformerStack)]
    for stack in stacks:
        stack.checkpoint_activations = on
    return len(stacks)


def apply(net: nn.Module, checkpoint_activations: bool, compile: bool | str) -> list[str]:
    """Apply a run's settings to ``net`` (in place); returns a line per tool switched on, for the log."""
    lines = []
    if checkpoint_activations:
        n = set_activation_checkpointing(net, True)
        lines.append(f"activation checkpointing: every block of {n} stack(s) recomputed in backward")
    if compile is True:  # "auto": the trainer's CompileTrial decides
        net.compile()
        lines.append("torch.compile: the model's forward is compiled at its first steps")
    return lines
