"""What one forward pass of the page reads: the text, and what the request changes about it.

The walk, one stage's tensor and the logit lens all run the same pass for the same request
fields (`server.py` reads them into a `PassInput`)::

    text            the input (an encoder-decoder's encoder input)
    decoder_text    an encoder-decoder's decoder text, after its start token (teacher forcing)
    generated       token ids a generation appended: the pass of that generation's next step
                    (appended to the decoder's input for an encoder-decoder)
    interventions   heads changed in place (`interventions.HeadInterventions`)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from glassformer.nn.hooks import HookFn
from glassformer.workshop.interventions import HeadInterventions


@dataclass(frozen=True)
class PassInput:
    """One request's forward-pass input for ``lm`` (see the module docstring)."""

    lm: Any
    text: Any
    decoder_text: str | None = None
    generated: Sequence[int] = ()
    interventions: HeadInterventions | None = None

    def ids(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The input ids (1 t) and the decoder's (1 t', or None), checked by the model's
        input pipeline (length, vocabulary)."""
        inputs = self.lm.inputs
        ids = inputs.single(self.text)
        decoder_ids = inputs.decoder_ids(self.decoder_text or None)
        if self.generated:
            more = torch.tensor([list(self.generated)], dtype=torch.long, device=ids.device)
            if decoder_ids is None:
                ids = inputs.single(torch.cat([ids, more], dim=1))
            else:
                decoder_ids = inputs.single(torch.cat([decoder_ids, more], dim=1), "decoder input")
        return ids, decoder_ids

    def hooks(self, decoder_ids: torch.Tensor | None) -> dict[str, HookFn]:
        """The interventions' hooks (none when there are none)."""
        return {} if self.interventions is None else self.interventions.hooks(decoder_ids)

    def changes(self) -> list[dict[str, Any]]:
        """The interventions as the payloads answer them."""
        return [] if self.interventions is None else self.interventions.payload()
