"""The logit lens in the workshop: what each layer's residual stream would predict.

`lens(lm, text)` reads every layer's stream at the last position through the model's own
final norm and head (`glassformer.inspect.logit_lens`), and follows the model's final top
token down the layers: its rank and probability at each one. Same inputs as the walk (the
decoder text of an encoder-decoder, heads ablated).

    {"layers": ["embed.out", "blocks.0.resid_post", ...], "token": {"id", "text"},
     "rows": [{"layer", "top": [{"id", "text", "p"}], "rank", "p"}]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from glassformer.inspect.logit_lens import logit_lens
from glassformer.workshop.interventions import ablation_hooks

TOP = 3  # tokens shown per layer


def lens(
    lm, text: str, decoder_text: str | None = None, ablate: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The lens payload (see the module docstring)."""
    with lm.net.hooks(ablation_hooks(lm, ablate)):
        final = lm.inputs.forward(lm.inputs.single(text), lm.inputs.decoder_ids(decoder_text or None))
        token = int(final[0, -1].argmax())
        seen = logit_lens(lm, text, k=TOP, target=token, decoder_input=decoder_text or None)
    rows = []
    for layer, name in enumerate(seen.layers):
        top = [
            {"id": int(i), "text": t, "p": float(p)}
            for (t, p), i in zip(seen.top(layer), seen.top_ids[layer, -1], strict=True)
        ]
        rows.append(
            {
                "layer": name,
                "top": top,
                "rank": int(seen.target_ranks[layer, -1]),
                "p": float(seen.target_probs[layer, -1]),
            }
        )
    return {"layers": seen.layers, "token": {"id": token, "text": seen.target_token}, "rows": rows}
