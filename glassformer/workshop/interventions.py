"""The workshop's interventions: attention heads switched off for a walk.

A request names heads as ``[{"layer": 1, "head": 2, "mode": "zero" | "mean"}]`` (layers of
the input stack: an encoder-decoder's encoder); `ablation_hooks` checks them against the
model and turns them into hooks on ``blocks.{layer}.attn.z`` made by the library's
`glassformer.inspect.interventions.head_ablation_hook`, so the workshop ablates exactly as
a notebook does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from glassformer.inputs import input_prefix
from glassformer.inspect.interventions import MODES, head_ablation_hook


def ablation_hooks(lm, ablate: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """{``blocks.{layer}.attn.z``: hook} for the heads to ablate, checked against the model."""
    by_layer: dict[tuple[int, str], list[int]] = {}
    n_layers, n_heads = lm.config.stack_depths[0], lm.config.n_heads
    for item in ablate:
        layer, head, mode = item.get("layer"), item.get("head"), item.get("mode", "zero")
        for key, value, limit in (("layer", layer, n_layers), ("head", head, n_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
                raise ValueError(f"ablate: {key} {value!r} is out of range (0..{limit - 1})")
        if mode not in MODES:
            raise ValueError(f"ablate: mode {mode!r}; allowed values: {', '.join(MODES)}")
        by_layer.setdefault((layer, mode), []).append(head)
    prefix = input_prefix(lm.net)
    hooks: dict[str, Any] = {}
    for (layer, mode), heads in by_layer.items():
        name = f"{prefix}blocks.{layer}.attn.z"
        hook = head_ablation_hook(heads, mode)
        previous = hooks.get(name)
        hooks[name] = hook if previous is None else _chain(previous, hook)
    return hooks


def _chain(first, second):
    def both(x, name):
        return second(first(x, name), name)

    return both
