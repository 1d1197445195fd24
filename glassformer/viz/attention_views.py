"""`HeadView` and `ModelView`: attention weights of several layers and heads, interactive.

Both show the same data: weights ``w[layer, head, t, s]`` of queries t over keys s.

* `HeadView` (BertViz's head view): one layer at a time, a line from each query token
  (left) to each key token (right), opacity = weight, one colour per head. Hover a token
  to follow only its lines; click a head's colour to hide it (double-click: only it).
* `ModelView` (BertViz's model view): a grid of every layer x head pattern as small
  heatmaps; click one to enlarge it with token labels.

Build them from plain data, or from a model and a text::

    view = HeadView(weights, tokens)                  # weights: layers h t s (or h t s)
    view = HeadView.from_lm(lm, "The cat sat on the mat")
    view = ModelView.from_lm(t5, "Hello", attention="cross", decoder_input="Hallo")
    view.save("heads.html")                           # or show it: the last line of a cell

Weights travel as 8-bit integers on the absolute scale (``w ≈ q / 255``), deflated: see
`glassformer.viz.html`. A causal model (or ``causal=True``) has nothing above the
diagonal; the model view greys those masked cells.

>>> import torch
>>> weights = torch.softmax(torch.randn(2, 4, 3, 3), dim=-1)   # layers h t s
>>> view = HeadView(weights, ["The", " cat", " sat"])
>>> view
HeadView(2 layers x 4 heads, 3 query tokens x 3 key tokens)
>>> view.payload()["layers"][1]["label"]
'layer 1'
>>> HeadView(weights, ["The", " cat"])
Traceback (most recent call last):
...
ValueError: 2 tokens for 3 query positions: pass one label per position (trace.tokens)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self

import torch

from glassformer.viz.data import check_tokens
from glassformer.viz.html import View, as_float_tensor, check_weights, encode_weights
from glassformer.viz.sources import attention_source

if TYPE_CHECKING:  # annotations only: the facade sits above the views
    from glassformer.inputs import TokenInput
    from glassformer.lm import LanguageModel

# The head view draws every line on one canvas, max(t, s) rows tall: browsers cap a canvas
# at 32,767 pixels a side, and the page would no longer be readable anyway.
HEAD_VIEW_MAX_TOKENS = 2048
# The model view decodes every layer x head at once (one byte per weight in the page):
# past ~64 M weights (30 layers x 9 heads at ~500 tokens) it stops being interactive.
MODEL_VIEW_MAX_WEIGHTS = 64 * 2**20


class _AttentionView(View):
    """Weights ``layers h t s`` plus their labels; shared by the head and model views."""

    def __init__(
        self,
        attention: Any,
        tokens: Sequence[str],
        key_tokens: Sequence[str] | None = None,
        *,
        layer_labels: Sequence[str] | None = None,
        head_labels: Sequence[str] | None = None,
        causal: bool = False,
        title: str = "",
    ) -> None:
        weights = as_float_tensor(attention, "attention")
        if weights.dim() == 5 and weights.shape[1] == 1:
            weights = weights[:, 0]  # layers b h t s from trace.stack, one sequence
        elif weights.dim() == 3:
            weights = weights.unsqueeze(0)  # one layer
        if weights.dim() != 4:
            raise ValueError(
                "attention must have shape (layers, heads, t, s) or (heads, t, s) (or trace.stack of "
                f"'blocks.*.attn.pattern' for one sequence), got {tuple(weights.shape)}"
            )
        n_layers, n_heads, t, s = weights.shape
        self._check_size(n_layers, n_heads, t, s)
        check_weights(weights, "attention")
        self.query_tokens = check_tokens(tokens, t, "tokens", "query positions")
        self.key_tokens = (
            None if key_tokens is None else check_tokens(key_tokens, s, "key_tokens", "key positions")
        )
        if self.key_tokens is None and s != t:
            raise ValueError(
                f"attention has {t} queries but {s} keys: cross-attention needs key_tokens (one per key)"
            )
        labels = [f"layer {i}" for i in range(n_layers)] if layer_labels is None else list(layer_labels)
        if len(labels) != n_layers:
            raise ValueError(f"layer_labels has {len(labels)} labels for {n_layers} layers")
        heads = [f"head {h}" for h in range(n_heads)] if head_labels is None else list(head_labels)
        if len(heads) != n_heads:
            raise ValueError(f"head_labels has {len(heads)} labels for {n_heads} heads")
        self.layer_labels, self.head_labels = [str(x) for x in labels], [str(x) for x in heads]
        self.shape = (n_layers, n_heads, t, s)
        self.causal, self.title = bool(causal), title
        # Quantize and deflate once, per layer: the view keeps ~1 byte per weight or less.
        self._blocks = [encode_weights(weights[i]) for i in range(n_layers)]  # h t s each

    @classmethod
    def from_lm(
        cls,
        lm: LanguageModel,
        text: TokenInput,
        *,
        attention: str | None = None,
        decoder_input: TokenInput | None = None,
        layers: Sequence[int] | None = None,
        **options: Any,
    ) -> Self:
        """Trace ``text`` through ``lm`` and show the attention of ``layers`` (default: all).

        ``attention``: ``"self"`` (decoder and encoder models), or for encoder-decoder
        models ``"encoder"``, ``"decoder"`` or ``"cross"`` (the default there); the decoder
        side needs ``decoder_input`` (text: the start token is put in front; or ids).
        Other options go to the constructor (``title``; for `HeadView` ``layer``, here a
        layer of the model).
        """
        source = attention_source(lm, text, attention, decoder_input)
        chosen = source.layers(layers)
        cls._check_size(len(chosen), lm.config.n_heads, len(source.query_tokens), len(source.key_tokens))
        if "layer" in options:  # a layer of the model: which of the chosen ones shows first
            first = source.layer(options["layer"])
            if first not in chosen:
                raise ValueError(f"layer {first} is not among the chosen layers {chosen}")
            options["layer"] = chosen.index(first)
        names = [source.name(i, "pattern") for i in chosen]
        trace = source.trace(names)
        weights = torch.stack([trace[name][0] for name in names])  # layers h t s
        title = options.pop("title", f"{source.description}, {lm.config.n_heads} heads")
        return cls(
            weights,
            source.query_tokens,
            source.key_tokens if source.attention == "cross" else None,
            layer_labels=[f"layer {i}" for i in chosen],
            causal=source.causal,
            title=title,
            **options,
        )

    @staticmethod
    def _check_size(n_layers: int, n_heads: int, t: int, s: int) -> None:
        """Subclasses refuse inputs too large to stay interactive (before tracing or encoding)."""

    def _common_payload(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "query_tokens": self.query_tokens,
            "key_tokens": self.key_tokens,  # null: the same as the queries (self-attention)
            "heads": self.head_labels,
            "causal": self.causal,
            "layers": [
                {"label": label, "attention": block}
                for label, block in zip(self.layer_labels, self._blocks, strict=True)
            ],
        }

    def __repr__(self) -> str:
        n_layers, n_heads, t, s = self.shape
        return (
            f"{type(self).__name__}({n_layers} layers x {n_heads} heads, {t} query tokens x {s} key tokens)"
        )


class HeadView(_AttentionView):
    """Lines from query tokens to key tokens, one colour per head, one layer at a time.

    ``attention``: weights ``layers h t s`` (or ``h t s``); ``tokens``: t query labels;
    ``key_tokens``: s key labels for cross-attention (default: the queries);
    ``layer``: which of the layers shows first (an index into ``attention``).
    """

    kind = "head"

    def __init__(self, attention: Any, tokens: Sequence[str], key_tokens=None, *, layer: int = 0, **options):
        super().__init__(attention, tokens, key_tokens, **options)
        n_layers = self.shape[0]
        if not -n_layers <= layer < n_layers:
            raise ValueError(
                f"layer {layer} is out of range: this view holds {n_layers} layers (0..{n_layers - 1})"
            )
        self.layer = layer % n_layers

    @staticmethod
    def _check_size(n_layers: int, n_heads: int, t: int, s: int) -> None:
        if max(t, s) > HEAD_VIEW_MAX_TOKENS:
            raise ValueError(
                f"a head view draws one row per token: {max(t, s):,} tokens is more than "
                f"{HEAD_VIEW_MAX_TOKENS:,}; pass a shorter text"
            )

    def _content(self) -> dict[str, Any]:
        return {**self._common_payload(), "layer": self.layer}


class ModelView(_AttentionView):
    """Every layer x head attention pattern as a thumbnail; click one to enlarge it.

    Same arguments as `HeadView` (without ``layer``).
    """

    kind = "model"

    def __init__(self, attention: Any, tokens: Sequence[str], key_tokens=None, **options):
        super().__init__(attention, tokens, key_tokens, **options)

    @staticmethod
    def _check_size(n_layers: int, n_heads: int, t: int, s: int) -> None:
        weights = n_layers * n_heads * t * s
        if weights > MODEL_VIEW_MAX_WEIGHTS:
            raise ValueError(
                f"a model view of {n_layers} layers x {n_heads} heads x {t} x {s} tokens holds "
                f"{weights / 2**20:.0f} M weights, more than the {MODEL_VIEW_MAX_WEIGHTS // 2**20} M that "
                "stay interactive in a browser; pass layers=[...] or a shorter text"
            )

    def _content(self) -> dict[str, Any]:
        return self._common_payload()
