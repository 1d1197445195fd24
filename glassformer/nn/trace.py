"""`Trace`: the named activations of one real forward pass.

    trace = lm.trace("The cat sat", names=["blocks.*.attn.pattern", "logits"])
    trace["blocks.0.attn.pattern"]          # b h t s tensor, rows sum to 1
    trace.stack("blocks.*.attn.pattern")    # layers b h t s

Only the requested names are captured (glob patterns allowed); every other hook point
stays empty and costs nothing, and attention keeps its fused path unless scores or
patterns are asked for.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch

from glassformer.nn.hooks import HookFn, HookPoint, select


class HookedModel(Protocol):
    """What `capture` needs of a model (a `TransformerModel`): its hook points, a way to
    attach hooks, and nn.Module's train / eval switch."""

    hook_points: Mapping[str, HookPoint]
    training: bool

    def hooks(self, mapping: Mapping[str, HookFn]) -> AbstractContextManager[None]: ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...


class Trace(Mapping[str, torch.Tensor]):
    """Mapping name -> activation tensor (detached copies), plus the tokens that made them."""

    def __init__(
        self,
        activations: dict[str, torch.Tensor],
        input_ids: torch.Tensor,
        tokens: Sequence[str] | None = None,
        output: torch.Tensor | None = None,
    ) -> None:
        self._activations = activations
        self.input_ids = input_ids
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in input_ids[0].tolist()]
        self.output = output  # the model's return value (logits)

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self._activations:
            captured = ", ".join(self._activations) or "nothing"
            raise KeyError(f"{name!r} was not captured in this trace; captured: {captured}")
        return self._activations[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._activations)

    def __len__(self) -> int:
        return len(self._activations)

    def stack(self, pattern: str) -> torch.Tensor:
        """Stack every captured activation matching ``pattern`` along a new first dimension.

        ``trace.stack("blocks.*.attn.pattern")`` -> layers b h t s.
        """
        names = [n for n in self._activations if fnmatch.fnmatchcase(n, pattern)]
        if not names:
            raise KeyError(f"no captured activation matches {pattern!r}")
        return torch.stack([self._activations[n] for n in names])

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(t.shape) for name, t in self._activations.items()}

    def __repr__(self) -> str:
        lines = [f"Trace of {len(self.tokens)} tokens, {len(self)} activations:"]
        lines += [f"  {name:<40} {tuple(shape)}" for name, shape in self.shapes().items()]
        return "\n".join(lines)


@contextlib.contextmanager
def evaluating(net: torch.nn.Module | HookedModel) -> Iterator[None]:
    """Eval mode (no dropout) for an analysis, then the mode the model had."""
    was_training = net.training
    net.eval()
    try:
        yield
    finally:
        net.train(was_training)


def capture(
    net: HookedModel,
    names: str | Sequence[str],
    run: Callable[[], torch.Tensor],
    tokens: Sequence[str] | None = None,
    input_ids: torch.Tensor | None = None,
) -> Trace:
    """Run ``run()`` with capture hooks on the ``names`` (globs) of ``net``, in eval mode (no
    dropout: a trace shows what the model computes, not one draw of its noise); return the
    Trace."""
    chosen = select(net.hook_points, list(names) if not isinstance(names, str) else names)
    store: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, name: str) -> None:
        store[name] = x.detach().clone()

    with net.hooks(dict.fromkeys(chosen, keep)), torch.no_grad(), evaluating(net):
        output = run()
    ordered = {name: store[name] for name in chosen if name in store}
    ids = input_ids if input_ids is not None else torch.empty(1, 0, dtype=torch.long)
    return Trace(ordered, ids, tokens, output)
