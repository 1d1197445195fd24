"""Static figures (matplotlib) of attention, entropy, the logit lens and attributions.

Every function takes plain data -- token strings and a tensor or array -- so it works
for every model family and every analysis, and returns a `matplotlib.figure.Figure`
drawn on an Agg canvas (pyplot is never touched: no global figure state, no GUI).
`save` writes it as PNG or SVG, atomically.

    trace = lm.trace("The cat sat", "blocks.*.attn.pattern")
    patterns = trace.stack("blocks.*.attn.pattern")[:, 0]     # layers h t s (batch 0)
    save(attention_heatmap(patterns[0, 3], trace.tokens), "head-0.3.png")
    save(attention_grid(patterns[0], trace.tokens, layer=0), "layer-0.svg")

Shapes use the trace letters: t=query positions, s=key positions, h=heads. A leading
dimension of size 1 (a batch of one) is dropped; any other shape that does not fit is a
ValueError that names the expected shape.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from glassformer.atomic import write_bytes_atomic
from glassformer.viz.data import check_tokens, to_array, token_label
from glassformer.viz.figure_parts import (
    MAX_ANNOTATED_CELLS,
    annotate,
    causal_cells,
    colour_map,
    draw_pattern,
    every,
    label_axis,
    masked_legend,
    new_figure,
    set_title,
    short_number,
    wrap,
)


# attention ----------------------------------------------------------------------------
def attention_heatmap(
    pattern: Any,
    query_tokens: Sequence[str],
    key_tokens: Sequence[str] | None = None,
    title: str = "Attention pattern",
    causal: bool | None = None,
    vmax: float | None = None,
) -> Figure:
    """One head's attention weights: rows are queries (t), columns keys (s), rows sum to 1.

    ``pattern`` is t s (e.g. ``trace["blocks.2.attn.pattern"][0, head]``). Keys default to
    the query tokens. Cells a causal mask hides are hatched grey (``causal=None`` detects
    them); the colour scale runs from 0 to the largest weight (or ``vmax``).
    """
    p = to_array(pattern, 2, "pattern", "t s: one head", "pick one head, e.g. pattern[0, head]")
    t, s = p.shape
    queries = check_tokens(query_tokens, t, "query_tokens", "query positions")
    if key_tokens is None and s != t:
        raise ValueError(f"the pattern has {t} queries but {s} keys; pass key_tokens (one per key)")
    keys = check_tokens(key_tokens if key_tokens is not None else queries, s, "key_tokens", "key positions")
    hidden = causal_cells(p, causal)
    cell = min(0.4, max(0.12, 9 / max(t, s)))
    fig = new_figure(min(14.0, 2.8 + s * cell), min(13.0, 2.2 + t * cell))
    ax = fig.add_subplot()
    image = draw_pattern(ax, p, hidden, vmax or max(float(p.max()), 1e-9), colour_map("Blues"))
    kx, ky = label_axis(ax, "x", keys), label_axis(ax, "y", queries)
    ax.set_xlabel("key (attended to)" + every(kx))
    ax.set_ylabel("query (attending)" + every(ky))
    set_title(ax, title)
    fig.colorbar(image, ax=ax, label="attention weight", shrink=0.8)
    if hidden is not None:
        masked_legend(fig)
    return fig


def attention_grid(
    patterns: Any,
    tokens: Sequence[str],
    layer: int | str | None = None,
    key_tokens: Sequence[str] | None = None,
    causal: bool | None = None,
) -> Figure:
    """Every head of one layer as a grid of small heatmaps sharing one colour scale.

    ``patterns`` is h t s, e.g. ``trace["blocks.3.attn.pattern"][0]``; ``layer`` only
    names the figure. Outer panels carry the token labels.
    """
    p = to_array(
        patterns, 3, "patterns", "h t s: the heads of one layer", "for one head use attention_heatmap"
    )
    h, t, s = p.shape
    queries = check_tokens(tokens, t, "tokens", "query positions")
    if key_tokens is None and s != t:
        raise ValueError(f"the patterns have {t} queries but {s} keys; pass key_tokens (one per key)")
    keys = check_tokens(key_tokens if key_tokens is not None else queries, s, "key_tokens", "key positions")
    ncols = math.ceil(math.sqrt(h))
    nrows = math.ceil(h / ncols)
    panel = 2.4 if max(t, s) <= 24 else 3.2
    fig = new_figure(1.6 + ncols * panel, 1.0 + nrows * panel)
    grid = fig.subplots(nrows, ncols, squeeze=False)
    vmax = max(float(p.max()), 1e-9)
    cmap, any_hidden, panels = colour_map("Blues"), False, []
    fontsize = 7 if max(t, s) <= 16 else 5.5
    for index, ax in enumerate(grid.flat):
        if index >= h:
            ax.remove()  # an empty slot in the last row
            continue
        col = index % ncols
        panels.append(ax)
        hidden = causal_cells(p[index], causal)
        any_hidden |= hidden is not None
        image = draw_pattern(ax, p[index], hidden, vmax, cmap)
        ax.set_title(f"head {index}", fontsize=9)
        if index + ncols >= h:  # nothing below this panel
            label_axis(ax, "x", keys, fontsize)
        else:
            ax.set_xticks([])
        if col == 0:
            label_axis(ax, "y", queries, fontsize)
        else:
            ax.set_yticks([])
    name = "" if layer is None else f"Layer {layer}: "
    fig.suptitle(
        wrap(f"{name}attention of each of {h} heads (rows: queries, columns: keys)", fig), parse_math=False
    )
    fig.colorbar(image, ax=panels, label="attention weight", shrink=0.6)
    if any_hidden:
        masked_legend(fig)
    return fig


def _position(spec: int | str, tokens: list[str], name: str) -> int:
    """A position from an index (negative counts from the end) or a token that occurs once."""
    n = len(tokens)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if not -n <= spec < n:
            raise ValueError(f"{name}={spec} is outside the {n} positions 0..{n - 1}")
        return int(spec) % n
    if not isinstance(spec, str):
        raise ValueError(f"{name} must be a position (int) or a token (str), got {spec!r}")
    found = [i for i, token in enumerate(tokens) if token == spec]
    found = found or [i for i, token in enumerate(tokens) if token.strip() == spec.strip()]
    if len(found) != 1:
        where = f"occurs at positions {found}" if found else "is not among the tokens"
        raise ValueError(f"{name}={spec!r} {where}; pass its position as an int")
    return found[0]


def attention_between(
    patterns: Any, tokens: Sequence[str], query: int | str, key: int | str, title: str | None = None
) -> Figure:
    """How much ``query`` attends to ``key`` in every layer and head: a layers x heads heatmap.

    ``patterns`` is layers h t s (``trace.stack("blocks.*.attn.pattern")[:, 0]``); query and
    key are positions or tokens that occur once. Values are written in the cells when the
    grid is small enough to read them.
    """
    p = to_array(
        patterns, 4, "patterns", "layers h t s", "stack the layers: trace.stack('blocks.*.attn.pattern')"
    )
    layers, h, t, s = p.shape
    words = check_tokens(tokens, t, "tokens", "query positions")
    q = _position(query, words, "query")
    k = _position(key, words if s == t else [str(i) for i in range(s)], "key")
    values = p[:, :, q, k]  # layers h
    if k > q + s - t and not values.any():
        raise ValueError(
            f"query {q} ({words[q]!r}) gives key {k} ({words[k]!r}) zero weight in every head: a causal "
            "model's query cannot see later keys; pick a key at or before the query"
        )
    fig = new_figure(min(12.0, 2.4 + 0.55 * h), min(14.0, 1.6 + 0.3 * layers))
    ax = fig.add_subplot()
    norm, cmap = Normalize(0.0, max(float(values.max()), 1e-9)), colour_map("Blues")
    image = ax.imshow(values, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    if values.size <= MAX_ANNOTATED_CELLS:
        annotate(ax, values, norm, cmap, short_number, 7 if h <= 16 else 5.5)
    label_axis(ax, "x", [str(i) for i in range(h)])
    label_axis(ax, "y", [str(i) for i in range(layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    default = f"Attention from {token_label(words[q])!r} ({q}) to {token_label(words[k])!r} ({k})"
    set_title(ax, title or default)
    fig.colorbar(image, ax=ax, label="attention weight", shrink=0.8)
    return fig


def entropy_per_head(
    entropy: Any, n_keys: int | None = None, causal: bool = False, title: str | None = None
) -> Figure:
    """Mean attention entropy (nats) of each head, a layers x heads heatmap.

    Low entropy: a head that looks at one key; ``log n`` (noted when ``n_keys`` is given):
    a head spread evenly over all n keys. Under a causal mask query i sees only i + 1 keys,
    so a uniform head averages ``mean_i log(i + 1)`` instead (noted when ``causal``).
    Compute the values with `glassformer.train.metrics.attention_entropy`, one layer at a time.
    """
    e = to_array(entropy, 2, "entropy", "layers h", "one layer's h values: pass entropy[None]")
    layers, h = e.shape
    top = math.log(n_keys) if n_keys else float(np.nanmax(e))
    fig = new_figure(min(12.0, 2.6 + 0.55 * h), min(14.0, 1.8 + 0.3 * layers))
    ax = fig.add_subplot()
    norm, cmap = Normalize(0.0, max(top, 1e-9)), colour_map("viridis")
    image = ax.imshow(e, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    if e.size <= MAX_ANNOTATED_CELLS:
        annotate(ax, e, norm, cmap, lambda v: f"{v:.2f}", 7 if h <= 16 else 5.5)
    label_axis(ax, "x", [str(i) for i in range(h)])
    label_axis(ax, "y", [str(i) for i in range(layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    bar = fig.colorbar(image, ax=ax, label="mean entropy (nats): low = focused", shrink=0.8)
    notes = []
    if n_keys:
        notes.append(f"max log {n_keys} = {top:.2f} nats: uniform over all {n_keys} keys")
        marks = {top: f"log {n_keys} = {top:.2f}"}
        if causal:
            uniform = float(np.mean(np.log(np.arange(1, n_keys + 1))))  # mean_i log(i + 1)
            notes.append(f"a uniform causal head averages {uniform:.2f}")
            marks[uniform] = f"uniform causal {uniform:.2f}"
            bar.ax.axhline(uniform, color="white", linewidth=1.5)
        inside = [t for t in bar.get_ticks() if 0 <= t <= top]  # the locator adds ticks past the end
        ticks = {t: f"{t:.1f}" for t in inside if all(abs(t - m) > 0.08 * top for m in marks)}
        ticks |= marks
        bar.set_ticks(sorted(ticks), labels=[ticks[t] for t in sorted(ticks)])
    set_title(ax, "\n".join([title or "Mean attention entropy per head", *notes]))
    return fig


# logit lens and attributions ----------------------------------------------------------
def logit_lens_table(
    top_tokens: Any,
    probabilities: Any,
    position_tokens: Sequence[str],
    layer_labels: Sequence[str] | None = None,
    title: str = "Logit lens: the top next-token guess read from each layer",
) -> Figure:
    """The logit-lens table: rows are layers (the first at the bottom), columns positions,
    each cell the top predicted next token coloured by its probability.

    ``top_tokens`` is layers x positions strings, ``probabilities`` the same shape in 0..1.
    From `glassformer.inspect.logit_lens.logit_lens` (top-1 of its top-k)::

        lens = logit_lens(lm, text)
        tops = [[cell[0] for cell in row] for row in lens.top_tokens]   # layers t
        logit_lens_table(tops, lens.top_probs[..., 0], lens.tokens, lens.layers)
    """
    probs = to_array(probabilities, 2, "probabilities", "layers positions")
    layers, n = probs.shape
    words = np.asarray(top_tokens, dtype=object)
    if words.shape != probs.shape:
        raise ValueError(
            f"top_tokens has shape {words.shape} but probabilities {probs.shape}: one token per cell"
        )
    inputs = check_tokens(position_tokens, n, "position_tokens", "columns (positions)")
    default_rows = [str(i) for i in range(layers)]
    rows = check_tokens(layer_labels or default_rows, layers, "layer_labels", "rows (layers)")
    fig = new_figure(min(24.0, 2.2 + 0.8 * n), min(16.0, 2.2 + 0.3 * layers))
    ax = fig.add_subplot()
    norm, cmap = Normalize(0.0, 1.0), colour_map("YlGnBu")
    image = ax.imshow(probs, cmap=cmap, norm=norm, aspect="auto", origin="lower", interpolation="nearest")
    if probs.size <= 2000:
        size = 8 if n <= 20 else 7 if n <= 32 else 6
        labels = np.vectorize(lambda w: token_label(str(w), 8), otypes=[object])(words)
        for (row, col), label in np.ndenumerate(labels):
            r, g, b, _ = cmap(norm(probs[row, col]))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
            colour = "white" if dark else "black"
            ax.text(col, row, label, ha="center", va="center", fontsize=size, color=colour, parse_math=False)
    label_axis(ax, "x", inputs)
    label_axis(ax, "y", rows, limit=24)  # layer names such as "blocks.11.resid_post"
    ax.set_xlabel("input position")
    ax.set_ylabel("layer")
    set_title(ax, title)
    fig.colorbar(image, ax=ax, label="probability of the top token", shrink=0.8)
    return fig


def attribution_bars(
    tokens: Sequence[str], scores: Any, title: str = "Attribution per token", ylabel: str = "attribution"
) -> Figure:
    """Signed scores over tokens as bars: positive red, negative blue, darker when larger.

    ``scores`` has one value per token (e.g. ``gradient_x_input(lm, text, target).scores``);
    a NaN (a score not defined for that token) is drawn as "n/a". Every token is labelled
    up to 120 of them.
    """
    values = to_array(scores, 1, "scores", "one score per token")
    n = values.shape[0]
    words = check_tokens(tokens, n, "tokens", "scores")
    missing = np.isnan(values)
    if missing.all():
        raise ValueError("every score is NaN: nothing to draw")
    heights = np.where(missing, 0.0, values)
    limit = max(float(np.abs(heights).max()), 1e-12)
    # 0.5 is the white middle of RdBu_r: even a small bar keeps a visible tint of its sign
    shade = 0.5 + 0.45 * np.sign(heights) * (0.3 + 0.7 * np.abs(heights) / limit)
    colours = colour_map("RdBu_r")(shade)
    fig = new_figure(min(22.0, max(5.0, 1.6 + 0.2 * n)), 4.8)
    ax = fig.add_subplot()
    ax.bar(np.arange(n), heights, color=colours, edgecolor="#555555", linewidth=0.3, width=0.8)
    for i in np.flatnonzero(missing):
        ax.text(i, 0.0, "n/a", ha="center", va="bottom", rotation=90, fontsize=6, color="#777777")
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlim(-0.6, n - 0.4)
    step = label_axis(ax, "x", words, 9 if n <= 30 else 7 if n <= 60 else 6, most=120)
    ax.set_xlabel("token" + every(step))
    ax.set_ylabel(ylabel)
    set_title(ax, title)
    ax.grid(axis="y", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    return fig


# files --------------------------------------------------------------------------------
def save(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Write ``fig`` as PNG or SVG (chosen by the suffix), atomically: a temporary file
    beside the target, then a rename, so a crash never leaves half an image."""
    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in ("png", "svg"):
        raise ValueError(f"save() writes .png or .svg files, got {path.name!r}; use one of those suffixes")
    write_bytes_atomic(path, _drawn(fig, kind, dpi))
    return path


def svg_text(fig: Figure) -> str:
    """``fig`` as SVG markup, to put in a page (the workshop's figure views)."""
    return _drawn(fig, "svg", 150).decode()


def _drawn(fig: Figure, kind: str, dpi: int) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=kind, dpi=dpi, metadata={"Date": None} if kind == "svg" else None)
    return buffer.getvalue()
