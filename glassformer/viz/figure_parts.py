"""Matplotlib pieces the figures share: figure and font sizes, token-labelled axes, wrapped
titles, masked (future-key) cells, cell annotations, colour maps."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from glassformer.viz.data import token_label

MAX_LABELS = 80  # beyond this many positions an axis labels every k-th token
MAX_ANNOTATED_CELLS = 400  # write each cell's value only when the grid is this small
MASKED_COLOR, MASKED_HATCH = "#d9d9d9", "///"


def new_figure(width: float, height: float) -> Figure:
    """A Figure on its own Agg canvas, laid out by constrained layout (no overlaps)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def font_size(n: int) -> float:
    return 9 if n <= 16 else 8 if n <= 32 else 7 if n <= 50 else 6


def label_axis(
    ax,
    axis: str,
    labels: Sequence[str],
    fontsize: float | None = None,
    most: int = MAX_LABELS,
    limit: int = 14,
) -> int:
    """Tick every label, or beyond ``most`` labels every k-th one with its position in
    front ("12:cat"); returns k. Math text stays off: a token ``$x$`` shows as typed."""
    n = len(labels)
    step = 1 if n <= most else math.ceil(n / 60)
    ticks = list(range(0, n, step))
    shown = [token_label(labels[i], limit) for i in ticks]
    if step > 1:
        shown = [f"{i}:{label}" for i, label in zip(ticks, shown, strict=True)]
    size = fontsize or font_size(len(ticks))
    if axis == "x":
        vertical = max(len(s) for s in shown) > 2 or n > 12
        ax.set_xticks(ticks, shown, rotation=90 if vertical else 0, fontsize=size, parse_math=False)
    else:
        ax.set_yticks(ticks, shown, fontsize=size, parse_math=False)
    return step


def wrap(text: str, fig: Figure, fontsize: float = 12.0) -> str:
    """Break a title into lines that fit the figure: constrained layout moves axes to make
    room, but it never wraps a title, so a long one runs off the edge of the image."""
    chars = max(20, int(0.85 * fig.get_figwidth() * 72 / (0.6 * fontsize)))  # ~0.6 em per character
    return "\n".join(textwrap.fill(line, chars) for line in text.split("\n"))


def set_title(ax, text: str) -> None:
    ax.set_title(wrap(text, ax.figure), parse_math=False)  # a token such as "$x$" stays as typed


def every(step: int) -> str:
    return "" if step == 1 else f" (one label per {step} positions)"


def causal_cells(pattern: np.ndarray, causal: bool | None) -> np.ndarray | None:
    """Boolean t s mask of the keys hidden from each query by a causal mask, or None.

    Queries are the last t of s positions (as under a KV cache), so query i sees keys up to
    i + s - t. ``causal=None`` detects it: every such future cell exactly 0 (the trace
    contract writes masked weights as 0; a softmax of finite scores is never exactly 0)."""
    t, s = pattern.shape
    future = np.triu(np.ones((t, s), dtype=bool), k=s - t + 1)
    if causal is False or not future.any():
        return None
    if causal is None and not np.all(pattern[future] == 0):
        return None
    return future


def annotate(ax, values: np.ndarray, norm: Normalize, cmap, fmt, fontsize: float) -> None:
    """Write each cell's value, white on dark cells and black on light ones."""
    for (row, col), value in np.ndenumerate(values):
        if np.isnan(value):
            continue
        r, g, b, _ = cmap(norm(value))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
        colour = "white" if dark else "black"
        ax.text(
            col, row, fmt(value), ha="center", va="center", fontsize=fontsize, color=colour, parse_math=False
        )


def short_number(value: float) -> str:
    """0.53 -> '.53', 1.0 -> '1': two digits that fit a small cell."""
    text = f"{value:.2f}"
    return "1" if text == "1.00" else text.replace("0.", ".", 1) if value >= 0 else text


def draw_pattern(ax, pattern: np.ndarray, hidden: np.ndarray | None, vmax: float, cmap):
    if hidden is not None:
        pattern = np.ma.masked_array(pattern, hidden)
        ax.set_facecolor(MASKED_COLOR)
        ax.patch.set_hatch(MASKED_HATCH)
        ax.patch.set_edgecolor("#a6a6a6")
    return ax.imshow(pattern, cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest", aspect="auto")


def masked_legend(fig: Figure) -> None:
    patch = Patch(
        facecolor=MASKED_COLOR, edgecolor="#a6a6a6", hatch=MASKED_HATCH, label="masked (future key)"
    )
    fig.legend(handles=[patch], loc="outside lower right", fontsize=8, frameon=False)


def colour_map(name: str):
    from matplotlib import colormaps

    return colormaps[name].with_extremes(bad=(0, 0, 0, 0))  # masked cells show the hatching
