"""The notebook views of `glassformer.viz`, opened from the workshop for its current text.

    GET /views/head?model=...&text=...&layer=0        HeadView: one layer, every head
    GET /views/model?model=...&text=...               ModelView: every layer x head
    GET /views/neuron?model=...&text=...&layer=0&head=0   NeuronView: Q.K for one query
    GET /views/tokens?model=...&text=...              TokenView: surprisal / entropy per token
    GET /views/lens?model=...&text=...                the logit-lens table: every layer x position
    GET /views/embeddings?model=...&text=...          the residual stream, layer by layer (PCA)

Each answer is a self-contained HTML page (nothing from the network): the view's own file,
the same one ``view.save(path)`` writes; the lens table as an SVG figure; the embeddings
as a Plotly page with plotly.js inlined. An encoder-decoder shows its cross-attention, and
its decoder's lens, from the decoder's start token.

Such a page's scripts are inline, so it is sent with a policy of its own (`policy`): only the
scripts it was built with run (each allowed by its SHA-256), and it runs ``sandbox``ed, in an
origin of its own, so even a script that got in could neither read the workshop's cookie nor
call its routes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from typing import Any

VIEWS = ("head", "model", "neuron", "tokens", "lens", "embeddings")


def view_html(lm, kind: str, text: str, layer: int = 0, head: int = 0) -> str:
    """The HTML of view ``kind`` for ``text``; ValueError for an unknown kind or layer."""
    from glassformer.viz import HeadView, ModelView, NeuronView, TokenView

    seq2seq = lm.config.seq2seq
    options: dict[str, Any] = {"decoder_input": [lm.inputs.decoder_ids(None)[0, 0].item()]} if seq2seq else {}
    if kind == "head":
        return HeadView.from_lm(lm, text, layer=layer, **options).html()
    if kind == "model":
        return ModelView.from_lm(lm, text, **options).html()
    if kind == "neuron":
        return NeuronView.from_lm(lm, text, layer, head, **options).html()
    if kind == "tokens":
        return TokenView.from_lm(lm, text).html()
    if kind == "lens":
        from glassformer.viz import logit_lens_figure, svg_text

        figure = logit_lens_figure(lm, text, decoder_input=options.get("decoder_input"))
        return _figure_page("Logit lens", svg_text(figure))
    if kind == "embeddings":
        from glassformer.viz import figure_html, hidden_state_animation

        return figure_html(hidden_state_animation(lm, text))
    raise ValueError(f"no view {kind!r}; the views are: {', '.join(VIEWS)}")


_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?P<attributes>[^>]*)>(?P<code>.*?)</script>", re.DOTALL)


def policy(page: str) -> str:
    """The Content-Security-Policy of ``page``: its own inline scripts (by hash), in a sandbox."""
    hashes = sorted(
        {
            "'sha256-" + base64.b64encode(hashlib.sha256(m["code"].encode()).digest()).decode() + "'"
            for m in _INLINE_SCRIPT.finditer(page)
            if "application/json" not in m["attributes"]  # data, never run
        }
    )
    scripts = " ".join(hashes) or "'none'"
    return "; ".join(
        (
            "sandbox allow-scripts",
            "default-src 'none'",
            f"script-src {scripts}",
            "style-src 'unsafe-inline'",
            "img-src data: blob:",
            "font-src data:",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


def _figure_page(title: str, svg: str) -> str:
    """A page holding one SVG figure (matplotlib escapes the text it draws)."""
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<link rel='icon' href='data:,'></head>"
        f"<body style='margin:16px;font-family:sans-serif'>{svg}</body></html>"
    )
