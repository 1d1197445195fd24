"""Hook points: every named activation of the trace contract passes through one.

A `HookPoint` is a plain callable (not an ``nn.Module``) so that an unused one costs a
single attribute check: ``x = self.hook_q(x)`` returns ``x`` untouched when nothing is
attached. A hook function receives ``(tensor, name)`` and may return a replacement
tensor (ablation, patching) or ``None`` to leave the value as it is.

Modules declare their points with `HookPoint("q")`; `name_hook_points(model)` gives
each point its full dotted name from the module tree (``blocks.0.attn.q``), so the
names follow the model's structure and never drift from it. `hook_name` spells a name
(``hook_name("attn.q", 0)``) and is the one place that does: the stack names its points
with it, and every analysis asks it for the names it reads.

>>> import torch
>>> point = HookPoint("q")
>>> point(torch.ones(2)).tolist()
[1.0, 1.0]
>>> point.add(lambda x, name: x * 0)
>>> point(torch.ones(2)).tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Callable, Iterator, Mapping

import torch
from torch import nn

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]
_attached = 0  # hook functions attached to any point of any model: the fast paths step aside


def any_attached() -> bool:
    """Whether a hook function is attached anywhere (a trace or an intervention is running):
    `glassformer.fast` then computes with the plain modules, so a trace shows the reference path."""
    return _attached > 0


class HookPoint:
    """One named activation. Calling it runs the attached hooks, in order."""

    __slots__ = ("local", "name", "fns")

    def __init__(self, local: str) -> None:
        self.local = local  # name inside its module, e.g. "q"
        self.name = local  # full dotted name once the model names its points
        self.fns: list[HookFn] = []

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.fns:
            return x
        for fn in self.fns:
            out = fn(x, self.name)
            if out is not None:
                if out.shape != x.shape:
                    raise ValueError(
                        f"hook on {self.name!r} returned shape {tuple(out.shape)}, expected {tuple(x.shape)}"
                    )
                x = out
        return x

    @property
    def active(self) -> bool:
        return bool(self.fns)

    def add(self, fn: HookFn) -> None:
        global _attached
        self.fns.append(fn)
        _attached += 1

    def remove(self, fn: HookFn) -> None:
        global _attached
        self.fns.remove(fn)
        _attached -= 1

    def __repr__(self) -> str:
        return f"HookPoint({self.name!r}, hooks={len(self.fns)})"


BLOCKS = "blocks"  # the stack's attribute that holds its blocks, and their names' first part


def hook_name(kind: str, layer: int | str | None = None, stack: str = "") -> str:
    """The trace contract's name of activation ``kind`` of block ``layer`` of ``stack``.

    ``kind`` is the name inside its block (``"attn.pattern"``, ``"resid_post"``,
    ``"cross_attn.q"``) or, with no ``layer``, outside the blocks (``"embed.out"``,
    ``"final_norm"``). ``layer`` may be ``"*"``: a glob pattern over every block, as
    `lm.trace` and `select` read it. ``stack`` is ``"encoder"`` or ``"decoder"`` in an
    encoder-decoder and empty for a decoder's or an encoder's single stack; a trailing dot
    (the analyses' ``prefix="encoder."``) is the same stack.

    A decoder (or an encoder):

    >>> hook_name("attn.pattern", 3)
    'blocks.3.attn.pattern'
    >>> hook_name("resid_post", "*")
    'blocks.*.resid_post'

    An encoder-decoder:

    >>> hook_name("cross_attn.q", 0, stack="decoder")
    'decoder.blocks.0.cross_attn.q'
    >>> hook_name("resid_mid", 1, stack="encoder.")
    'encoder.blocks.1.resid_mid'

    Names outside the blocks:

    >>> hook_name("embed.out"), hook_name("final_norm", stack="encoder")
    ('embed.out', 'encoder.final_norm')
    """
    block = None if layer is None else f"{BLOCKS}.{layer}"
    return ".".join(part for part in (stack.removesuffix("."), block, kind) if part)


def _local_points(module: nn.Module) -> Iterator[HookPoint]:
    for value in vars(module).values():
        if isinstance(value, HookPoint):
            yield value


# Forward-pass order of the name segments, so that names list as the data flows.
_FORWARD_ORDER = {
    segment: rank
    for rank, segment in enumerate(
        "encoder decoder embed patches tokens positions blocks attn resid_mid cross_attn resid_cross "
        "ffn resid_post in q k v scores capped pattern z hidden act router_logits router_probs experts "
        "expert_weights expert_out shared_out out post_norm final_norm pooled logits_raw logits "
        "classifier sentence vector".split()
    )
}


def _forward_rank(name: str) -> tuple[int, ...]:
    return tuple(int(seg) if seg.isdigit() else _FORWARD_ORDER.get(seg, 99) for seg in name.split("."))


def name_hook_points(module: nn.Module, prefix: str = "") -> dict[str, HookPoint]:
    """Give every hook point under ``module`` its dotted name, `hook_name` of its module
    path (``blocks.{i}`` read as the layer, after ``prefix``); return them by name, in
    forward order."""
    points: dict[str, HookPoint] = {}
    for path, child in module.named_modules():
        parts = path.split(".") if path else []
        layer = None
        if parts[:1] == [BLOCKS] and len(parts) > 1 and parts[1].isdigit():
            layer, parts = int(parts[1]), parts[2:]
        for point in _local_points(child):
            point.name = hook_name(".".join([*parts, point.local]), layer, prefix)
            points[point.name] = point
    return sort_forward(points)


def sort_forward(points: Mapping[str, HookPoint]) -> dict[str, HookPoint]:
    """``points`` ordered as the data flows through the model."""
    return {name: points[name] for name in sorted(points, key=_forward_rank)}


def select(points: Mapping[str, HookPoint], patterns: str | list[str]) -> list[str]:
    """Names matching any glob pattern (``blocks.*.attn.pattern``); unknown ones fail."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if len(patterns) == 1 and patterns[0] in points:  # one plain name: the common case, kept O(1)
        return [patterns[0]]
    chosen: list[str] = []
    for pattern in patterns:
        if pattern in points:  # a plain name: no need to match it against every name
            matched = [pattern]
        else:
            matched = [n for n in points if fnmatch.fnmatchcase(n, pattern)]
        if not matched:
            sample = ", ".join(list(points)[:12])
            raise KeyError(
                f"no activation named {pattern!r} in this model; names look like: {sample}, "
                "... (list them all with lm.activation_names())"
            )
        chosen.extend(n for n in matched if n not in chosen)
    order = {name: i for i, name in enumerate(points)}
    return sorted(chosen, key=order.__getitem__)


@contextlib.contextmanager
def attached(points: Mapping[str, HookPoint], hooks: Mapping[str, HookFn]) -> Iterator[None]:
    """Attach ``{pattern: fn}`` for the duration of a ``with`` block, then detach."""
    added: list[tuple[HookPoint, HookFn]] = []
    try:
        for pattern, fn in hooks.items():
            for name in select(points, pattern):
                points[name].add(fn)
                added.append((points[name], fn))
        yield
    finally:
        for point, fn in added:
            point.remove(fn)
