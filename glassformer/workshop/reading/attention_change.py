"""What fine-tuning changed, for the page: each head's attention before and after, side by side.

`change(before, after, text, layer, head)` runs the passage through the pretrained model
(``before``) and its fine-tuned copy (``after``) with the library's `attention_shift`
(`glassformer.inspect.fine_tuning`: the Jensen-Shannon distance of each head's attention
rows, 0 = the same, 1 = disjoint) and returns::

    {"tokens": [str] t, "measure": "js", "shift": [[float] x heads] x layers,
     "ranked": [{"layer", "head", "shift"}] (the most moved first, at most 8),
     "layer": l, "head": h (the head shown: the one asked for, else the most moved),
     "before": t s weights, "after": t s weights (bytes, `arrays.pack_unit`)}

`origin(run_dir)` names the model a run was fine-tuned from (its ``train.init_from``), so
the page can offer that model as the "before" of a run loaded as a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from glassformer.formats.run_directory import TRAIN_CONFIG, read_json
from glassformer.inspect.fine_tuning import attention_shift
from glassformer.workshop.walk.arrays import pack_unit

RANKED = 8  # heads listed, the most moved first


def change(before, after, text: str, layer: int | None = None, head: int | None = None) -> dict[str, Any]:
    """The payload above; ``layer`` and ``head`` pick the head drawn side by side (both None:
    the head fine-tuning moved most)."""
    shift = attention_shift(before, after, text)
    ranked = shift.ranked()
    if layer is None and head is None:
        layer, head, _ = ranked[0]
    elif layer is None or head is None:
        raise ValueError("give both layer and head, or neither (then the most moved head is shown)")
    p, q = shift.patterns(layer, head)  # t s each
    return {
        "tokens": shift.tokens,
        "measure": shift.measure,
        "shift": shift.shift.tolist(),
        "ranked": [{"layer": i, "head": h, "shift": s} for i, h, s in ranked[:RANKED]],
        "layer": layer,
        "head": head,
        "before": pack_unit(p),
        "after": pack_unit(q),
    }


def origin(run_dir: str | Path) -> str | None:
    """The model name a run directory was fine-tuned from (``train.init_from``), or None."""
    path = Path(run_dir) / TRAIN_CONFIG
    try:  # bounded and never blocking: a run folder may come from anywhere
        settings = read_json(path).get("train", {})
        return settings.get("init_from") if isinstance(settings, dict) else None
    except (OSError, ValueError, RecursionError):  # absent or damaged: no origin
        return None
