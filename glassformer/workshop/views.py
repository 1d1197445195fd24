"""The notebook views of `glassformer.viz`, opened from the workshop for its current text.

    GET /views/head?model=...&text=...&layer=0        HeadView: one layer, every head
    GET /views/model?model=...&text=...               ModelView: every layer x head
    GET /views/neuron?model=...&text=...&layer=0&head=0   NeuronView: Q.K for one query
    GET /views/tokens?model=...&text=...              TokenView: surprisal / entropy per token

Each answer is the view's own self-contained HTML file, the same one ``view.save(path)``
writes (nothing from the network). An encoder-decoder shows its cross-attention, from the
decoder's start token.
"""

from __future__ import annotations

from typing import Any

VIEWS = ("head", "model", "neuron", "tokens")


def view_html(lm, kind: str, text: str, layer: int = 0, head: int = 0) -> str:
    """The HTML of view ``kind`` for ``text``; ValueError for an unknown kind or layer."""
    from glassformer.viz import HeadView, ModelView, NeuronView, TokenView

    seq2seq = lm.config.family == "encoder_decoder"
    options: dict[str, Any] = {"decoder_input": [lm.inputs.decoder_ids(None)[0, 0].item()]} if seq2seq else {}
    if kind == "head":
        return HeadView.from_lm(lm, text, layer=layer, **options).html()
    if kind == "model":
        return ModelView.from_lm(lm, text, **options).html()
    if kind == "neuron":
        return NeuronView.from_lm(lm, text, layer, head, **options).html()
    if kind == "tokens":
        return TokenView.from_lm(lm, text).html()
    raise ValueError(f"no view {kind!r}; the views are: {', '.join(VIEWS)}")
