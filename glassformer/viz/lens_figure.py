"""The logit-lens figure of a model on a text: `glassformer.inspect.logit_lens` drawn by
`figures.logit_lens_table` (the top next-token guess of every layer at every position),
titled with where a target token stands. Used by ``glassformer inspect --view lens`` and
the workshop's lens view."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from glassformer.inspect.logit_lens import logit_lens
from glassformer.viz.figures import logit_lens_table


def logit_lens_figure(
    lm: Any, text: Any, target: str | int | None = None, decoder_input: Any = None
) -> Figure:
    """The lens table of ``text``; with ``target``, the title gives its rank at the last
    position in the first and last layers, and the first layer where it enters the top 10."""
    lens = logit_lens(lm, text, k=1, target=target, decoder_input=decoder_input)
    top = [[row[0] for row in layer] for layer in lens.top_tokens]  # layers t
    title = "Logit lens: the top next-token guess read from each layer"
    if lens.target_ranks is not None:
        ranks = [int(r) for r in lens.target_ranks[:, -1]]  # one per layer, at the last position
        top10 = next((lens.layers[i] for i, r in enumerate(ranks) if r <= 10), None)
        title += (
            f"\nrank of {lens.target_token!r} at the last position: {ranks[0]} at {lens.layers[0]}, "
            f"{ranks[-1]} at {lens.layers[-1]}" + (f"; in the top 10 from {top10}" if top10 else "")
        )
    return logit_lens_table(top, lens.top_probs[..., 0], lens.tokens, lens.layers, title=title)
