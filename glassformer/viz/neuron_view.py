"""`NeuronView`: how one head turns a query and the keys into attention weights.

For one layer and head, and a query token t (chosen in the page), each key s gets::

    score[t, s]  = (q_t · k_s) * scale + bias[t, s]      scale = 1/sqrt(e) unless set
    weight[t, s] = softmax over the visible keys of score[t, s]

The view shows the query vector q_t, every key vector k_s, their elementwise product
q_t ⊙ k_s (whose sum is the dot product), the scaled dot product, the position bias when the
model adds one (ALiBi, T5), the score and the weight, in colour, with the values on hover.
This is BertViz's neuron view. Under grouped-query attention query head ``head`` reads key
head ``head // (n_heads / n_kv_heads)``.

>>> import torch
>>> q, k = torch.randn(3, 8), torch.randn(3, 8)                    # t e, s e
>>> scores = q @ k.T / 8**0.5                                      # t s
>>> view = NeuronView(q, k, scores, torch.softmax(scores, -1), ["a", "b", "c"])
>>> view
NeuronView(3 queries x 3 keys, d_head=8, query 2)
>>> view.payload()["bias"] is None                                 # scores are q.k * scale only
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from glassformer.viz.data import check_tokens
from glassformer.viz.html import View, as_float_tensor, check_weights, encode_float32
from glassformer.viz.sources import attention_source

if TYPE_CHECKING:  # annotations only: the facade sits above the views
    from glassformer.inputs import TokenInput
    from glassformer.lm import LanguageModel


class NeuronView(View):
    """q, k, q⊙k, scores and weights of one head.

    ``q``: t e queries; ``k``: s e keys (of the key head this query head reads);
    ``scores``: t s, the pre-mask scores (q·k * scale + position bias); ``pattern``: t s,
    the weights; ``tokens``: t query labels; ``key_tokens``: s key labels (default: the
    queries); ``scale``: the factor on q·k (default 1/sqrt(e)); ``query``: which query the
    page shows first; ``causal``: keys after the query are masked.
    """

    kind = "neuron"

    def __init__(
        self,
        q: Any,
        k: Any,
        scores: Any,
        pattern: Any,
        tokens: Sequence[str],
        key_tokens: Sequence[str] | None = None,
        *,
        scale: float | None = None,
        query: int = -1,
        causal: bool = False,
        title: str = "",
    ) -> None:
        q, k = as_float_tensor(q, "q"), as_float_tensor(k, "k")
        scores, pattern = as_float_tensor(scores, "scores"), as_float_tensor(pattern, "pattern")
        if q.dim() != 2 or k.dim() != 2 or q.shape[1] != k.shape[1]:
            raise ValueError(
                f"q must be (t, e) and k (s, e) for one head, got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        (t, e), s = q.shape, k.shape[0]
        for name, value in (("scores", scores), ("pattern", pattern)):
            if tuple(value.shape) != (t, s):
                raise ValueError(
                    f"{name} must be (t, s) = ({t}, {s}) for this q and k, got {tuple(value.shape)}"
                )
        check_weights(pattern, "pattern")
        self.query_tokens = check_tokens(tokens, t, "tokens", "query positions")
        if key_tokens is None and s != t:
            raise ValueError(f"q has {t} queries but k has {s} keys: cross-attention needs key_tokens")
        self.key_tokens = (
            None if key_tokens is None else check_tokens(key_tokens, s, "key_tokens", "key positions")
        )
        if not -t <= query < t:
            raise ValueError(f"query {query} is out of range: there are {t} query tokens (0..{t - 1})")
        self.scale = float(e**-0.5 if scale is None else scale)
        scaled = q @ k.T * self.scale  # t s: q·k * scale
        bias = scores - scaled  # t s: what the model added (position bias), ~0 without one
        finite = torch.isfinite(scores)
        has_bias = bool((bias[finite].abs() > 1e-4 * (1 + scores[finite].abs())).any())
        self.q, self.k, self.scores, self.pattern = q, k, scores, pattern
        self.scaled, self.bias = scaled, bias if has_bias else None
        self.query, self.causal, self.title = query % t, bool(causal), title

    @classmethod
    def from_lm(
        cls,
        lm: LanguageModel,
        text: TokenInput,
        layer: int,
        head: int,
        *,
        query: int = -1,
        attention: str | None = None,
        decoder_input: TokenInput | None = None,
        title: str | None = None,
    ) -> NeuronView:
        """Trace ``text`` and show head ``head`` of ``layer`` (``attention`` as in `HeadView.from_lm`)."""
        source = attention_source(lm, text, attention, decoder_input)
        layer = source.layer(layer)
        h, g = lm.config.n_heads, lm.config.n_kv_heads
        if not isinstance(head, int) or not -h <= head < h:
            raise ValueError(f"head {head!r} is out of range: layer {layer} has {h} heads (0..{h - 1})")
        head %= h
        kv_head = head // (h // g)  # grouped-query attention: h/g query heads share a key head
        names = {what: source.name(layer, what) for what in ("q", "k", "scores", "pattern")}
        trace = source.trace(list(names.values()))
        kv = f" (key head {kv_head} of {g})" if g != h else ""
        return cls(
            trace[names["q"]][0, head],  # t e
            trace[names["k"]][0, kv_head],  # s e
            trace[names["scores"]][0, head],  # t s
            trace[names["pattern"]][0, head],  # t s
            source.query_tokens,
            source.key_tokens if source.attention == "cross" else None,
            scale=lm.config.attn_scale,
            query=query,
            causal=source.causal,
            title=title or f"{source.description}: layer {layer}, head {head}{kv}",
        )

    def _content(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "query_tokens": self.query_tokens,
            "key_tokens": self.key_tokens,
            "query": self.query,
            "causal": self.causal,
            "scale": self.scale,
            "q": encode_float32(self.q),  # t e
            "k": encode_float32(self.k),  # s e
            "scaled": encode_float32(self.scaled),  # t s: q·k * scale
            "bias": None if self.bias is None else encode_float32(self.bias),  # t s
            "scores": encode_float32(self.scores),  # t s
            "pattern": encode_float32(self.pattern),  # t s
        }

    def __repr__(self) -> str:
        (t, e), s = self.q.shape, self.k.shape[0]
        return f"NeuronView({t} queries x {s} keys, d_head={e}, query {self.query})"
