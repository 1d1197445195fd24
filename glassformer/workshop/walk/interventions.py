"""The workshop's interventions: attention heads changed in place for a walk.

A request names heads as ``[{"layer": 1, "head": 2, "mode": ..., "factor": 0.5}]`` (layers
of the input stack: an encoder-decoder's encoder), with ``mode``:

    zero    the head writes nothing                 z_h <- 0
    mean    its mean over this input's positions    z_h <- mean_t z_h
    scale   its output times ``factor``             z_h <- factor * z_h
    patch   its output on ``patch_text`` instead    z_h <- z_h(patch_text), position by position

`HeadInterventions` checks them against the model and turns them into hooks on
``blocks.{layer}.attn.z`` (the per-head outputs before W_O) made by the library's
`glassformer.inspect.interventions` (``head_ablation_hook``, ``head_scale_hook``,
``head_patch_hook``), so the workshop intervenes exactly as a notebook does. A patch first
runs the model on ``patch_text`` (same token count) to record the heads' outputs there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from glassformer.inputs import input_prefix
from glassformer.inspect.interventions import head_ablation_hook, head_patch_hook, head_scale_hook
from glassformer.nn.hooks import HookFn, hook_name
from glassformer.nn.trace import capture

MODES = ("zero", "mean", "scale", "patch")
MAX_FACTOR = 100.0


class HeadInterventions:
    """Checked head interventions of one request; ``hooks(decoder_ids)`` makes their hooks."""

    def __init__(self, lm, items: Sequence[dict[str, Any]] = (), patch_text: str | None = None) -> None:
        self.lm = lm
        self.items = [_checked(item, lm.config.stack_depths[0], lm.config.n_heads) for item in items]
        self.patch_text = patch_text or None
        if self.patch_text is None and any(item["mode"] == "patch" for item in self.items):
            raise ValueError("a patch needs patch_text: the second prompt whose head outputs are put in")

    def payload(self) -> list[dict[str, Any]]:
        """The interventions as the walk answers them."""
        return [dict(item) for item in self.items]

    def hooks(self, decoder_ids: torch.Tensor | None = None) -> dict[str, HookFn]:
        """{``blocks.{layer}.attn.z``: hook}, several interventions on one layer chained."""
        prefix = input_prefix(self.lm.net)
        sources = self._patch_sources(decoder_ids)
        hooks: dict[str, HookFn] = {}
        for item in self.items:
            name = hook_name("attn.z", item["layer"], prefix)
            heads, mode = [item["head"]], item["mode"]
            if mode == "scale":
                hook = head_scale_hook(heads, item["factor"])
            elif mode == "patch":
                hook = head_patch_hook(heads, sources[name])
            else:
                hook = head_ablation_hook(heads, mode)
            previous = hooks.get(name)
            hooks[name] = hook if previous is None else _chain(previous, hook)
        return hooks

    def _patch_sources(self, decoder_ids: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """The patched layers' head outputs (1 h t e) on ``patch_text``: one forward pass."""
        prefix = input_prefix(self.lm.net)
        names = sorted({hook_name("attn.z", i["layer"], prefix) for i in self.items if i["mode"] == "patch"})
        if not names:
            return {}
        inputs = self.lm.inputs
        ids = inputs.single(self.patch_text, "patch_text")
        trace = capture(self.lm.net, names, lambda: inputs.forward(ids, decoder_ids))
        return {name: trace[name] for name in names}


def _checked(item: dict[str, Any], n_layers: int, n_heads: int) -> dict[str, Any]:
    layer, head, mode = item.get("layer"), item.get("head"), item.get("mode", "zero")
    for key, value, limit in (("layer", layer, n_layers), ("head", head, n_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
            raise ValueError(f"interventions: {key} {value!r} is out of range (0..{limit - 1})")
    if mode not in MODES:
        raise ValueError(f"interventions: mode {mode!r}; allowed values: {', '.join(MODES)}")
    checked = {"layer": layer, "head": head, "mode": mode}
    if mode == "scale":
        factor = item.get("factor")
        if (
            isinstance(factor, bool)
            or not isinstance(factor, (int, float))
            or not math.isfinite(factor)
            or abs(factor) > MAX_FACTOR
        ):
            raise ValueError(
                f"interventions: scale needs a factor from -{MAX_FACTOR:g} to {MAX_FACTOR:g}, got {factor!r}"
            )
        checked["factor"] = float(factor)
    return checked


def _chain(first: HookFn, second: HookFn) -> HookFn:
    def both(x, name):
        return second(first(x, name), name)

    return both
