"""Views of what a model computes: figures, projections and interactive HTML views.

* interactive HTML views (`HeadView`, `ModelView`, `NeuronView`, `TokenView`;
  ``viz/*_view*.py`` + ``assets/``): self-contained -- our own JS and CSS, inlined,
  nothing loaded from the network; each shows inline in Jupyter and saves as one file;
* static figures (matplotlib, PNG / SVG; ``viz/figures.py``) and Plotly views
  (``viz/projection.py``): imported on first use, so the HTML views do not load
  matplotlib or Plotly.
"""

from __future__ import annotations

import importlib
from typing import Any

from glassformer.viz.attention_views import HeadView as HeadView
from glassformer.viz.attention_views import ModelView as ModelView
from glassformer.viz.neuron_view import NeuronView as NeuronView
from glassformer.viz.token_view import TokenView as TokenView

_LAZY = {  # name -> the module that defines it, imported when the name is first used
    **dict.fromkeys(
        (
            "attention_between",
            "attention_grid",
            "attention_heatmap",
            "attribution_bars",
            "entropy_per_head",
            "logit_lens_table",
            "save",
            "svg_text",
        ),
        "figures",
    ),
    "logit_lens_figure": "lens_figure",
    **dict.fromkeys(
        ("embedding_projection_3d", "figure_html", "hidden_state_animation", "layer_animation", "save_html"),
        "projection",
    ),
}

__all__ = ["HeadView", "ModelView", "NeuronView", "TokenView", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"glassformer.viz.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'glassformer.viz' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
