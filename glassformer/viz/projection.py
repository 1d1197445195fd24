"""Interactive Plotly views: 3D embedding projections and hidden states moving layer by layer.

    fig = hidden_state_animation(lm, "The cat sat on the mat", method="pca", dims=2)
    save_html(fig, "layers.html")          # one self-contained file: plotly.js is inside

The functions take plain data (points, token strings) and return a
`plotly.graph_objects.Figure`; `hidden_state_animation` is the one convenience that runs a
model. Saved HTML embeds plotly.js, so the view works offline and never calls a CDN.
Token text is HTML-escaped: Plotly reads ``<b>`` in a label as markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from glassformer.atomic import write_text_atomic
from glassformer.viz.data import check_tokens, to_array, token_label


def _text(tokens: Sequence[str]) -> list[str]:
    return [html.escape(token_label(token, 24)) for token in tokens]


def embedding_projection_3d(
    points: Any,
    labels: Sequence[str],
    groups: Sequence[Any] | None = None,
    title: str = "Embedding projection",
    show_text: bool | None = None,
) -> go.Figure:
    """A 3D scatter of n points (n x 3, e.g. a PCA of token embeddings), each labelled.

    Hovering shows the label; ``groups`` (one value per point) colours the points and adds a
    legend. Labels are drawn beside the points when there are at most 150 of them (or as
    ``show_text`` says).
    """
    xyz = to_array(points, 2, "points", "n x 3")
    if xyz.shape[1] != 3:
        raise ValueError(
            f"points must have 3 coordinates each (n x 3), got shape {xyz.shape}; project to 3 dims"
        )
    n = xyz.shape[0]
    text = _text(check_tokens(labels, n, "labels", "points"))
    if groups is not None:
        if isinstance(groups, str) or len(groups) != n:
            raise ValueError(f"groups must hold one value per point ({n}), got {groups!r:.60}")
        keys = [str(g) for g in groups]
    else:
        keys = [""] * n
    written = n <= 150 if show_text is None else show_text
    fig = go.Figure()
    for group in dict.fromkeys(keys):  # groups in order of first appearance
        chosen = [i for i, key in enumerate(keys) if key == group]
        fig.add_trace(
            go.Scatter3d(
                x=xyz[chosen, 0],
                y=xyz[chosen, 1],
                z=xyz[chosen, 2],
                mode="markers+text" if written else "markers",
                text=[text[i] for i in chosen],
                hovertemplate="%{text}<extra>" + html.escape(group) + "</extra>",
                marker={"size": 4},
                textfont={"size": 10},
                name=html.escape(group) or "points",
                showlegend=groups is not None,
            )
        )
    fig.update_layout(title=title, scene={"xaxis_title": "1", "yaxis_title": "2", "zaxis_title": "3"})
    fig.update_layout(margin={"l": 0, "r": 0, "t": 40, "b": 0})
    return fig


def _range(values: np.ndarray) -> list[float]:
    low, high = float(values.min()), float(values.max())
    pad = 0.08 * (high - low) or 1.0
    return [low - pad, high + pad]


def _frame_trace(points: np.ndarray, text: list[str]) -> go.Scatter | go.Scatter3d:
    """One layer's t points, coloured by position (dark: first token, yellow: last)."""
    common = {
        "mode": "markers+text",
        "text": text,
        "textposition": "top center",
        "hovertemplate": "%{text}<extra></extra>",
        "marker": {"color": np.arange(len(text)), "colorscale": "Viridis", "size": 8},
    }
    if points.shape[1] == 3:
        return go.Scatter3d(x=points[:, 0], y=points[:, 1], z=points[:, 2], **common)
    return go.Scatter(x=points[:, 0], y=points[:, 1], **common)


def layer_animation(
    trajectory: Any,
    tokens: Sequence[str],
    title: str = "Hidden states, layer by layer",
    layer_labels: Sequence[str] | None = None,
    frame_ms: int = 700,
) -> go.Figure:
    """The t tokens of one text as points that move layer by layer: a frame per layer,
    play/pause buttons and a layer slider.

    ``trajectory`` is layers x t x 2 (or 3), already projected -- one projection for all
    layers, so positions are comparable across frames (as
    `glassformer.inspect.hidden_state_trajectory` does). The axes stay fixed over all frames.
    """
    path = to_array(
        trajectory,
        3,
        "trajectory",
        "layers t 2|3",
        "project the states first (glassformer.inspect.hidden_state_trajectory)",
    )
    layers, t, dims = path.shape
    if dims not in (2, 3):
        raise ValueError(f"trajectory must have 2 or 3 coordinates per point, got {dims}")
    text = _text(check_tokens(tokens, t, "tokens", "points per layer"))
    names = check_tokens(
        layer_labels or [str(i) for i in range(layers)], layers, "layer_labels", "layers (frames)"
    )
    frames = [go.Frame(data=[_frame_trace(path[i], text)], name=names[i]) for i in range(layers)]
    fig = go.Figure(data=frames[0].data, frames=frames)
    fig.update_layout(title=title, showlegend=False, margin={"b": 90}, **_player(names, frame_ms, dims == 3))
    _fix_axes(fig, path)
    return fig


def _player(names: list[str], frame_ms: int, redraw: bool) -> dict[str, Any]:
    """Play / pause buttons and a slider with one step per frame (layout settings).
    3D scenes redraw each frame; 2D ones can tween."""
    play = {
        "frame": {"duration": frame_ms, "redraw": redraw},
        "fromcurrent": True,
        "transition": {"duration": 300},
    }
    pause = {"frame": {"duration": 0, "redraw": redraw}, "mode": "immediate", "transition": {"duration": 0}}
    buttons = [
        {"label": "Play", "method": "animate", "args": [None, play]},
        {"label": "Pause", "method": "animate", "args": [[None], pause]},
    ]
    steps = [
        {
            "label": name,
            "method": "animate",
            "args": [[name], {**pause, "frame": {"duration": 0, "redraw": True}}],
        }
        for name in names
    ]
    return {
        "updatemenus": [
            {
                "type": "buttons",
                "direction": "left",
                "buttons": buttons,
                "x": 0.0,
                "y": -0.08,
                "xanchor": "left",
                "yanchor": "top",
                "showactive": False,
            }
        ],
        "sliders": [
            {
                "steps": steps,
                "active": 0,
                "x": 0.17,
                "len": 0.83,
                "y": -0.05,
                "currentvalue": {"prefix": "layer: "},
            }
        ],
    }


def _fix_axes(fig: go.Figure, path: np.ndarray) -> None:
    """Axes that span every frame (layers t dims) and do not rescale as the frames play."""
    dims = path.shape[-1]
    axes = {name: {"range": _range(path[:, :, i]), "autorange": False} for i, name in enumerate("xyz"[:dims])}
    if dims == 3:
        camera = {"eye": {"x": 1.6, "y": 1.6, "z": 1.1}}  # a step back: the cube's corners stay in view
        fig.update_layout(
            scene={f"{k}axis": v for k, v in axes.items()} | {"aspectmode": "cube", "camera": camera}
        )
    else:
        fig.update_layout(xaxis=axes["x"], yaxis=axes["y"])


def hidden_state_animation(
    lm: Any, text: Any, method: str = "pca", dims: int = 2, normalize: bool = True, seed: int = 0
) -> go.Figure:
    """The residual stream of ``text`` (``embed.out`` and every ``blocks.*.resid_post``; the
    encoder's for an encoder-decoder), projected with one fit on all layers
    (`glassformer.inspect.hidden_state_trajectory`, RMS-normalized by default), animated."""
    from glassformer.inspect import hidden_state_trajectory

    trajectory = hidden_state_trajectory(lm, text, method, dims, seed, normalize=normalize)
    about = f"{method.upper() if method == 'pca' else 't-SNE'} of all layers together"
    if trajectory.explained_variance_ratio is not None:
        about += f": {trajectory.explained_variance_ratio.sum():.0%} of the variance"
    labels = ["embed"] + [f"block {name.split('.')[-2]}" for name in trajectory.layers[1:]]
    what = "RMS-normalized residual stream" if normalize else "Residual stream"
    return layer_animation(
        trajectory.points, trajectory.tokens, title=f"{what}, layer by layer ({about})", layer_labels=labels
    )


def save_html(fig: go.Figure, path: str | Path) -> Path:
    """Write ``fig`` as one self-contained HTML file (plotly.js embedded, no CDN), atomically."""
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"save_html() writes .html files, got {path.name!r}")
    write_text_atomic(path, figure_html(fig))
    return path


def figure_html(fig: go.Figure) -> str:
    """``fig`` as one self-contained HTML page (plotly.js embedded, no CDN)."""
    return fig.to_html(include_plotlyjs=True, full_html=True, auto_play=False, config={"displaylogo": False})
