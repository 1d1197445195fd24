"""`TokenView`: the text, each token coloured by a per-token score, the value on hover.

Any score with one number per token works: an attribution, the entropy of the prediction
at each position, a logit-lens probability. Several named scores get a selector, or with
``layout="rows"`` one row each, one above the other: two explanations of the same
prediction side by side (`TokenView.from_attributions`).

Colour scales: ``"diverging"`` (blue below ``center``, white at it, red above; symmetric,
for signed scores such as attributions), ``"sequential"`` (white to dark blue, from
``vmin`` to ``vmax``: entropies, probabilities) or ``"auto"`` (diverging when the scores
have both signs). NaN means "no value" (the first token has no surprisal): left white.

>>> view = TokenView(["The", " cat", " sat"], {"attribution": [0.5, -1.0, 0.25]})
>>> view
TokenView(3 tokens, scores: attribution)
>>> score = view.payload()["scores"][0]
>>> score["scale"], score["vmin"], score["vmax"]
('diverging', -1.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from glassformer.viz.data import check_tokens
from glassformer.viz.html import View, as_float_tensor, encode_float32

if TYPE_CHECKING:  # annotations only: the facade sits above the views
    from glassformer.inputs import TokenInput
    from glassformer.lm import LanguageModel

SCALES = ("auto", "diverging", "sequential")
LAYOUTS = ("select", "rows")  # several scores: a selector, or one row of the text each
# Scores `from_lm` computes from the model's own predictions (log base 2: bits).
LM_SCORES = ("surprisal", "entropy")


class TokenView(View):
    """Tokens coloured by one or several per-token scores.

    ``scores``: t values, or a mapping name -> t values; ``label`` names a lone score;
    ``scale``: one of ``SCALES``; ``vmin``, ``vmax``, ``center``: the colour range
    (default: each score's own range; ``center`` 0 for diverging scales); ``layout``: one of
    ``LAYOUTS``.
    """

    kind = "token"

    def __init__(
        self,
        tokens: Sequence[str],
        scores: Any,
        *,
        label: str = "score",
        scale: str = "auto",
        vmin: float | None = None,
        vmax: float | None = None,
        center: float = 0.0,
        title: str = "",
        layout: str = "select",
    ) -> None:
        if scale not in SCALES:
            raise ValueError(f"scale={scale!r} is not one of {SCALES}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r} is not one of {LAYOUTS}")
        named = dict(scores) if isinstance(scores, Mapping) else {label: scores}
        if not named:
            raise ValueError("scores is empty: pass t values, or a mapping name -> t values")
        self.scores = {str(k): as_float_tensor(v, f"scores[{k!r}]").flatten() for k, v in named.items()}
        n = len(next(iter(self.scores.values())))
        self.tokens = check_tokens(tokens, n, "tokens", "scores")
        for name, values in self.scores.items():
            if len(values) != n:
                raise ValueError(f"score {name!r} has {len(values)} values for {n} tokens")
        self.scale, self.vmin, self.vmax, self.center = scale, vmin, vmax, float(center)
        self.title, self.layout = title, layout

    @classmethod
    def from_attributions(cls, attributions: Sequence[Any], **options: Any) -> TokenView:
        """One row per explanation of the same prediction (`glassformer.inspect.Attribution`s:
        ``tokens``, ``scores``, ``method``, ``target``), each on its own colour scale, since
        the methods' units differ (LIME's weights, SHAP's values, gradients)."""
        results = list(attributions)
        if not results:
            raise ValueError("from_attributions needs at least one attribution")
        first = results[0]
        for other in results[1:]:
            if list(other.tokens) != list(first.tokens) or other.target != first.target:
                raise ValueError(
                    f"{other.method} explains {other.target!r} on {len(other.tokens)} tokens, "
                    f"{first.method} explains {first.target!r} on {len(first.tokens)}: rows side by "
                    "side must explain the same prediction of the same tokens"
                )
        names = [r.method for r in results]
        if len(set(names)) != len(names):
            raise ValueError(f"two rows would have the same name: {names}")
        options.setdefault("layout", "rows")
        options.setdefault("scale", "diverging")
        options.setdefault("title", f"Explanations of the {first.target}")
        return cls(first.tokens, {r.method: r.scores for r in results}, **options)

    @classmethod
    def from_lm(
        cls, lm: LanguageModel, text: TokenInput, score: str | Sequence[str] = LM_SCORES, **options: Any
    ) -> TokenView:
        """Colour ``text`` by the model's own predictions, in bits:

        * ``"surprisal"``: -log2 p(token | the tokens before it) (decoders only; the first
          token has none);
        * ``"entropy"``: entropy of the prediction at each position (the next token for a
          decoder, the token itself for a masked-LM encoder).
        """
        names = [score] if isinstance(score, str) else list(score)
        for name in names:
            if name not in LM_SCORES:
                raise ValueError(
                    f"score {name!r} is not one of {LM_SCORES}; for other scores, pass your own: "
                    "TokenView(tokens, scores)"
                )
        config = lm.config
        if config.seq2seq or not config.has_lm_head:
            kind = f"an {config.family!r} model" + (" without a masked-LM head" if not config.causal else "")
            raise ValueError(
                "TokenView.from_lm needs a model that predicts the tokens of its input (a decoder or a "
                f"masked-LM encoder), this one is {kind}; compute your scores and pass them to "
                "TokenView(tokens, scores)"
            )
        if "surprisal" in names and not config.causal:
            raise ValueError(
                "surprisal needs a decoder (it predicts each token from the ones before); use 'entropy'"
            )
        inputs = lm.inputs
        ids = inputs.single(text)  # 1 t, no longer than max_seq_len
        log_p = torch.log_softmax(lm.logits(ids)[0].float(), dim=-1)  # t v, natural log
        computed = {}
        if "surprisal" in names:
            row = ids[0]  # t
            surprisal = torch.full((len(row),), float("nan"))
            surprisal[1:] = -log_p[:-1].gather(1, row[1:, None])[:, 0].cpu() / math.log(2)
            computed["surprisal (bits)"] = surprisal
        if "entropy" in names:
            entropy = torch.special.entr(log_p.exp()).sum(-1)  # -sum p ln p, with 0 ln 0 = 0
            computed["entropy (bits)"] = entropy.cpu() / math.log(2)
        options.setdefault("scale", "sequential")
        options.setdefault(
            "title", f"Each token coloured by the model's own predictions: {', '.join(computed)}"
        )
        return cls(inputs.labels(ids), computed, **options)

    def _colour_range(self, values: torch.Tensor) -> dict[str, Any]:
        finite = values[torch.isfinite(values)]
        low = float(finite.min()) if finite.numel() else 0.0
        high = float(finite.max()) if finite.numel() else 1.0
        scale = self.scale
        if scale == "auto":
            scale = "diverging" if low < self.center < high else "sequential"
        if scale == "diverging":
            reach = max(abs(low - self.center), abs(high - self.center)) or 1.0
            vmin = self.center - reach if self.vmin is None else self.vmin
            vmax = self.center + reach if self.vmax is None else self.vmax
        else:
            vmin = low if self.vmin is None else self.vmin
            vmax = high if self.vmax is None else self.vmax
        if vmax <= vmin:
            vmax = vmin + 1.0
        return {"scale": scale, "vmin": vmin, "vmax": vmax, "center": self.center}

    def _content(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "layout": self.layout,
            "tokens": self.tokens,
            "scores": [
                {"name": name, "values": encode_float32(values), **self._colour_range(values)}
                for name, values in self.scores.items()
            ],
        }

    def __repr__(self) -> str:
        return f"TokenView({len(self.tokens)} tokens, scores: {', '.join(self.scores)})"
