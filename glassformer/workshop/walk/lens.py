"""The logit lens in the workshop: what each layer's residual stream would predict.

`lens(lm, text)` reads every layer's stream at the last position through the model's own
final norm and head (`glassformer.inspect.logit_lens`), and follows the model's final top
token down the layers: its rank and probability at each one, and the entropy of each
layer's distribution (nats, as the prediction panel's). Same inputs as the walk (the decoder text of an
encoder-decoder, generated tokens, the heads' interventions). The compare view asks it of
two models.

    {"layers": ["embed.out", "blocks.0.resid_post", ...], "token": {"id", "text"},
     "rows": [{"layer", "block", "top": [{"id", "text", "p"}], "rank", "p", "entropy"}]}

``block`` is the layer's block number (None for the embeddings), read from its name by the
one parser of a stage's name (`architecture.name_parts`), so the page takes no name apart.
"""

from __future__ import annotations

from typing import Any

import torch

from glassformer.inspect.logit_lens import logit_lens
from glassformer.workshop.walk.architecture import name_parts
from glassformer.workshop.walk.pass_input import PassInput

TOP = 3  # tokens shown per layer


def lens(given: PassInput) -> dict[str, Any]:
    """The lens payload of the pass ``given`` describes (see the module docstring)."""
    lm = given.lm
    ids, decoder_ids = given.ids()
    # no graph: with autograd on, the two passes kept ~2.9 GB for SmolLM2 at 1,249 tokens
    with torch.no_grad(), lm.net.hooks(given.hooks(decoder_ids)):
        final = lm.inputs.forward(ids, decoder_ids)
        token = int(final[0, -1].argmax())
        seen = logit_lens(lm, ids, k=TOP, target=token, decoder_input=decoder_ids, positions=[-1])
    rows = []
    for layer, name in enumerate(seen.layers):
        top = [
            {"id": int(i), "text": t, "p": float(p)}
            for (t, p), i in zip(seen.top(layer), seen.top_ids[layer, -1], strict=True)
        ]
        rows.append(
            {
                "layer": name,
                "block": name_parts(name)[1],
                "top": top,
                "rank": int(seen.target_ranks[layer, -1]),
                "p": float(seen.target_probs[layer, -1]),
                "entropy": float(seen.entropy[layer, -1]),
            }
        )
    return {"layers": seen.layers, "token": {"id": token, "text": seen.target_token}, "rows": rows}
