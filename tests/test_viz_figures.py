"""Static figures (matplotlib) and Plotly views, built from plain data and tiny models.

Each figure is checked for its structure (axes, tick labels = tokens, colour bar,
annotations), written as PNG and SVG, and fed bad shapes. The Plotly views are checked for
frames, slider steps, buttons and an HTML file that loads nothing from the network.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

import glassformer as gf
from glassformer.train.metrics import attention_entropy
from glassformer.viz import figure_parts, figures, projection
from glassformer.viz.figure_parts import short_number
from tests.conftest import tiny_model

IDS = [3, 5, 7, 9, 11, 13]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def traced():
    lm = gf.LanguageModel(tiny_model())
    trace = lm.trace(IDS, "blocks.*.attn.pattern")
    return trace.tokens, trace.stack("blocks.*.attn.pattern")[:, 0]  # layers h t s


def ticks(ax, axis="x"):
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [label.get_text() for label in labels]


def texts(ax):
    return [text.get_text() for text in ax.texts]


def check_files(fig, tmp_path, name):
    png = figures.save(fig, tmp_path / f"{name}.png")
    svg = figures.save(fig, tmp_path / f"{name}.svg")
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([png.name, svg.name])  # no temp files left


# attention --------------------------------------------------------------------------------
def test_attention_heatmap_labels_colour_bar_and_causal_mask(traced, tmp_path):
    tokens, patterns = traced
    assert tokens == [str(i) for i in IDS]
    fig = figures.attention_heatmap(patterns[1, 2], tokens, title="layer 1 head 2")
    ax, bar = fig.axes  # the heatmap and its colour bar
    assert ticks(ax, "x") == tokens and ticks(ax, "y") == tokens
    image = ax.images[0]
    assert image.colorbar is not None and image.colorbar.ax is bar
    assert ax.get_title() == "layer 1 head 2"
    future = np.triu(np.ones((6, 6), dtype=bool), k=1)
    assert np.array_equal(np.ma.getmaskarray(image.get_array()), future)  # hidden cells: hatched
    assert ax.patch.get_hatch() == figure_parts.MASKED_HATCH
    assert "masked" in fig.legends[0].get_texts()[0].get_text()
    check_files(fig, tmp_path, "heatmap")


def test_attention_heatmap_of_an_encoder_marks_nothing():
    net = gf.build(gf.ModelConfig(family="encoder", vocab_size=61, d_model=32, n_layers=2, n_heads=4)).eval()
    trace = gf.LanguageModel(net).trace(IDS, "blocks.0.attn.pattern")
    fig = figures.attention_heatmap(trace["blocks.0.attn.pattern"][0, 0], trace.tokens)
    assert not np.ma.is_masked(fig.axes[0].images[0].get_array())
    assert not fig.legends


def test_attention_heatmap_keys_tokens_and_long_inputs(tmp_path):
    pattern = np.full((2, 5), 0.2)  # 2 queries over 5 keys (as under a KV cache)
    fig = figures.attention_heatmap(pattern, ["$x$", "<b>"], key_tokens=list("abcde"))
    assert ticks(fig.axes[0], "y") == ["$x$", "<b>"]  # shown as typed: no math text
    assert ticks(fig.axes[0], "x") == list("abcde")
    figures.save(fig, tmp_path / "keys.png")
    n = 200
    long = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    ax = figures.attention_heatmap(long, [f"w{i}" for i in range(n)]).axes[0]
    labels = ticks(ax, "x")
    assert 40 <= len(labels) <= figure_parts.MAX_LABELS and labels[:2] == ["0:w0", "4:w4"]
    assert "one label per 4 positions" in ax.get_xlabel()


def test_attention_grid_has_one_panel_per_head(traced, tmp_path):
    tokens, patterns = traced
    fig = figures.attention_grid(patterns[0], tokens, layer=0)
    panels = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert [ax.get_title() for ax in panels] == [f"head {h}" for h in range(4)]
    assert len(fig.axes) == 5  # 2 x 2 heads + one shared colour bar
    assert ticks(panels[2], "x") == tokens and ticks(panels[0], "y") == tokens  # outer panels
    assert ticks(panels[1], "x") == [] and ticks(panels[3], "y") == []
    assert "Layer 0" in fig.get_suptitle()
    check_files(fig, tmp_path, "grid")
    three = figures.attention_grid(np.asarray(patterns[0, :3]), tokens)  # 2 x 2 with one slot removed
    assert len(three.axes) == 4
    assert ticks(three.axes[1], "x") == tokens  # nothing below head 1: it carries the labels


def test_attention_between_follows_one_pair_through_layers_and_heads(traced, tmp_path):
    tokens, patterns = traced
    fig = figures.attention_between(patterns, tokens, query="11", key=1)
    ax = fig.axes[0]
    values = patterns[:, :, 4, 1].numpy()  # layers h
    assert np.allclose(ax.images[0].get_array(), values)
    assert ticks(ax, "x") == ["0", "1", "2", "3"] and ticks(ax, "y") == ["0", "1"]
    assert texts(ax) == [short_number(v) for v in values.flat]
    assert "'11' (4)" in ax.get_title() and "'5' (1)" in ax.get_title()
    assert fig.axes[1] is ax.images[0].colorbar.ax
    check_files(fig, tmp_path, "between")
    with pytest.raises(ValueError, match="cannot see later keys"):
        figures.attention_between(patterns, tokens, query=1, key=4)
    with pytest.raises(ValueError, match="occurs at positions"):
        figures.attention_between(patterns, ["a", "b", "a", "c", "d", "e"], query="a", key=0)
    with pytest.raises(ValueError, match="not among the tokens"):
        figures.attention_between(patterns, tokens, query="zebra", key=0)
    with pytest.raises(ValueError, match="outside the 6 positions"):
        figures.attention_between(patterns, tokens, query=6, key=0)


def test_entropy_per_head_notes_log_n(traced, tmp_path):
    tokens, patterns = traced
    entropy = torch.stack([attention_entropy(layer[None]) for layer in patterns])  # layers h
    fig = figures.entropy_per_head(entropy, n_keys=len(tokens), causal=True)
    ax = fig.axes[0]
    assert texts(ax) == [f"{v:.2f}" for v in entropy.flatten().tolist()]
    assert f"log 6 = {math.log(6):.2f}" in ax.get_title()
    uniform = np.mean(np.log(np.arange(1, 7)))
    assert f"uniform causal head averages {uniform:.2f}" in ax.get_title()
    bar = ax.images[0].colorbar
    assert bar.norm.vmax == pytest.approx(math.log(6))
    assert bar.ax.get_ylim()[1] == pytest.approx(math.log(6))  # no tick stretches the bar past log n
    assert f"log 6 = {math.log(6):.2f}" in [t.get_text() for t in bar.ax.get_yticklabels()]
    check_files(fig, tmp_path, "entropy")


# logit lens and attributions --------------------------------------------------------------
def test_logit_lens_table_writes_the_top_token_in_each_cell(tmp_path):
    tops = [["the", "cat", "sat"], ["a", "dog", "\n"], ["<b>", "$", "mat"]]  # layers positions
    probs = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.7, 0.8, 0.95]])
    fig = figures.logit_lens_table(tops, probs, ["The", " cat", " sat"], ["embed", "block 0", "block 1"])
    ax = fig.axes[0]
    assert texts(ax) == ["the", "cat", "sat", "a", "dog", "\\n", "<b>", "$", "mat"]
    assert ticks(ax, "x") == ["The", " cat", " sat"] and ticks(ax, "y") == ["embed", "block 0", "block 1"]
    assert ax.get_ylim()[0] < ax.get_ylim()[1]  # the first layer at the bottom
    assert ax.images[0].colorbar.norm.vmax == 1.0
    white = [t.get_text() for t in ax.texts if t.get_color() == "white"]
    assert "mat" in white and "the" not in white  # text stays readable on dark cells
    check_files(fig, tmp_path, "lens")
    with pytest.raises(ValueError, match="one token per cell"):
        figures.logit_lens_table(tops[:2], probs, ["The", " cat", " sat"])


def test_attribution_bars_for_a_hundred_tokens(tmp_path):
    n = 100
    scores = np.sin(np.arange(n) / 5.0)
    scores[7] = np.nan
    tokens = [f"tok{i}" for i in range(n)]
    fig = figures.attribution_bars(tokens, scores, title="IG for ' Paris'")
    ax = fig.axes[0]
    assert len(ax.patches) == n and ticks(ax, "x") == tokens
    red, blue = ax.patches[3].get_facecolor(), ax.patches[20].get_facecolor()  # sin > 0, sin < 0
    assert red[0] > red[2] and blue[2] > blue[0]
    assert texts(ax) == ["n/a"] and ax.patches[7].get_height() == 0
    assert ax.get_title() == "IG for ' Paris'"
    check_files(fig, tmp_path, "bars")


def test_long_titles_wrap_to_the_figure():
    title = "gradient x input for the logit of ' Berlin' (id 11452) at the last position of the text"
    fig = figures.attribution_bars(["a", "b"], [1.0, -1.0], title=title)  # a 5-inch figure
    shown = fig.axes[0].get_title()
    assert "\n" in shown and shown.replace("\n", " ") == title
    fig.canvas.draw()
    box = fig.axes[0].title.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width  # inside the image


# errors and files -------------------------------------------------------------------------
def test_bad_shapes_and_labels_raise_clear_errors(traced, tmp_path):
    tokens, patterns = traced
    with pytest.raises(ValueError, match=r"2 dimensions \(t s: one head\), got shape \(4, 6, 6\)"):
        figures.attention_heatmap(patterns[0], tokens)
    with pytest.raises(ValueError, match="5 query_tokens for 6 query positions"):
        figures.attention_heatmap(patterns[0, 0], tokens[:5])
    with pytest.raises(ValueError, match="not one string"):
        figures.attention_heatmap(patterns[0, 0], "3 5 7 9 11 13")
    with pytest.raises(ValueError, match="pass key_tokens"):
        figures.attention_heatmap(np.ones((2, 5)) / 5, ["a", "b"])
    with pytest.raises(ValueError, match=r"3 dimensions \(h t s"):
        figures.attention_grid(patterns[0, 0], tokens)
    with pytest.raises(ValueError, match=r"4 dimensions \(layers h t s\)"):
        figures.attention_between(patterns[0], tokens, 1, 0)
    with pytest.raises(ValueError, match=r"pass entropy\[None\]"):
        figures.entropy_per_head(np.ones(4))
    with pytest.raises(ValueError, match="3 tokens for 4 scores"):
        figures.attribution_bars(["a", "b", "c"], [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="must be numbers"):
        figures.attribution_bars(["a"], ["x"])
    fig = figures.attribution_bars(["a"], [1.0])
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        figures.save(fig, tmp_path / "bars.pdf")
    assert list(tmp_path.iterdir()) == []


def test_a_batch_of_one_is_accepted(traced):
    tokens, patterns = traced
    fig = figures.attention_heatmap(patterns[0, 0][None, None], tokens)  # b h t s with b = h = 1
    assert fig.axes[0].images[0].get_array().shape == (6, 6)


# plotly -----------------------------------------------------------------------------------
def test_embedding_projection_3d_labels_groups_and_hover():
    points = np.arange(18, dtype=float).reshape(6, 3)
    labels = ["Paris", "Berlin", "<b>", "one", "two", "three"]
    fig = projection.embedding_projection_3d(points, labels, title="embeddings")
    assert fig.layout.title.text == "embeddings"
    (scatter,) = fig.data
    assert isinstance(scatter, go.Scatter3d) and scatter.mode == "markers+text"
    assert list(scatter.text) == ["Paris", "Berlin", "&lt;b&gt;", "one", "two", "three"]  # escaped
    assert "%{text}" in scatter.hovertemplate
    grouped = projection.embedding_projection_3d(points, labels, groups=["city"] * 3 + ["number"] * 3)
    assert [t.name for t in grouped.data] == ["city", "number"] and grouped.data[1].text == (
        "one",
        "two",
        "three",
    )
    with pytest.raises(ValueError, match=r"3 coordinates each \(n x 3\)"):
        projection.embedding_projection_3d(points[:, :2], labels)
    with pytest.raises(ValueError, match="5 labels for 6 points"):
        projection.embedding_projection_3d(points, labels[:5])
    with pytest.raises(ValueError, match="one value per point"):
        projection.embedding_projection_3d(points, labels, groups=["a"])


@pytest.mark.parametrize("dims", [2, 3])
def test_layer_animation_frames_slider_and_buttons(dims):
    rng = np.random.default_rng(0)
    path = rng.normal(size=(4, 5, dims))  # layers t dims
    fig = projection.layer_animation(path, list("abcde"), layer_labels=["embed", "b0", "b1", "b2"])
    assert len(fig.frames) == 4 and [f.name for f in fig.frames] == ["embed", "b0", "b1", "b2"]
    assert isinstance(fig.data[0], go.Scatter3d if dims == 3 else go.Scatter)
    assert np.allclose(fig.frames[2].data[0].x, path[2, :, 0])
    (slider,) = fig.layout.sliders
    assert [s.label for s in slider.steps] == ["embed", "b0", "b1", "b2"]
    assert all(s.method == "animate" and list(s.args[0]) == [s.label] for s in slider.steps)
    (menu,) = fig.layout.updatemenus
    assert [b.label for b in menu.buttons] == ["Play", "Pause"]
    assert menu.buttons[0].args[0] is None and list(menu.buttons[1].args[0]) == [None]
    x_range = fig.layout.scene.xaxis.range if dims == 3 else fig.layout.xaxis.range
    assert x_range[0] < path[..., 0].min() and x_range[1] > path[..., 0].max()  # fixed over frames


def test_layer_animation_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"3 dimensions \(layers t 2\|3\)"):
        projection.layer_animation(np.zeros((5, 2)), list("abcde"))
    with pytest.raises(ValueError, match="2 or 3 coordinates"):
        projection.layer_animation(np.zeros((2, 5, 4)), list("abcde"))
    with pytest.raises(ValueError, match="4 tokens for 5 points"):
        projection.layer_animation(np.zeros((2, 5, 2)), list("abcd"))


@pytest.mark.parametrize(
    ("family", "method", "dims"), [("decoder", "pca", 3), ("encoder_decoder", "tsne", 2)]
)
def test_hidden_state_animation_from_a_model(family, method, dims):
    config = gf.ModelConfig(family=family, vocab_size=61, d_model=32, n_layers=2, n_heads=4, pad_token_id=0)
    torch.manual_seed(0)
    lm = gf.LanguageModel(gf.build(config).eval())
    fig = projection.hidden_state_animation(lm, IDS, method=method, dims=dims)
    assert [f.name for f in fig.frames] == ["embed", "block 0", "block 1"]
    assert isinstance(fig.data[0], go.Scatter3d if dims == 3 else go.Scatter)
    assert list(fig.frames[0].data[0].text) == [str(i) for i in IDS]
    if method == "pca":  # the frames are one PCA of every layer's RMS-normalized states
        from sklearn.decomposition import PCA

        trace = lm.trace(IDS, ["embed.out", "blocks.*.resid_post"])
        states = np.stack([trace[name][0].numpy() for name in trace])  # layers t d
        states /= np.sqrt((states**2).mean(-1, keepdims=True))
        layers, t, d = states.shape
        expected = PCA(n_components=3, random_state=0).fit_transform(states.reshape(layers * t, d))
        assert np.allclose(fig.frames[1].data[0].z, expected.reshape(layers, t, 3)[1, :, 2], atol=1e-4)


def test_save_html_is_self_contained(tmp_path):
    fig = projection.layer_animation(np.zeros((2, 3, 2)), ["a", "b", "c"])
    path = projection.save_html(fig, tmp_path / "layers.html")
    page = path.read_text()
    assert len(page) > 1_000_000  # plotly.js itself is inside
    assert not re.search(r"<script[^>]*\bsrc\s*=", page)  # no script loaded from anywhere
    # plotly.js names a CDN only as the default topojsonURL of geo maps, which these views never draw
    assert not re.search(r"""src\s*=\s*["'](https?:)?//""", page)
    with pytest.raises(ValueError, match=r"\.html"):
        projection.save_html(fig, tmp_path / "layers.png")
