"""What one forward pass of the page reads: the text (or an image), and what the request changes about it.

The walk, one stage's tensor and the logit lens all run the same pass for the same request
fields (`read_pass` reads a `request_types.PassRequest` into a `PassInput`)::

    text            the input (an encoder-decoder's encoder input); a vision model's image,
                    pixels 1 C H W (`images.image_tensor`: sent, or a held-out ``sample``)
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
from glassformer.workshop.door.http import RequestError
from glassformer.workshop.door.limits import check_length
from glassformer.workshop.walk.images import image_tensor
from glassformer.workshop.walk.interventions import HeadInterventions


@dataclass(frozen=True)
class PassInput:
    """One request's forward-pass input for ``lm`` (see the module docstring)."""

    lm: Any
    text: Any
    decoder_text: str | None = None
    generated: Sequence[int] = ()
    interventions: HeadInterventions | None = None
    sample: int | None = None  # the held-out image ``text`` is, if one (`images.py`)

    def ids(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The input ids (1 t) and the decoder's (1 t', or None), checked by the model's
        input pipeline (length, vocabulary); a vision model's pixels (1 C H W) and None."""
        inputs = self.lm.inputs
        if self.lm.config.vision:
            return inputs.pixels(self.text), None
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


def read_pass(lm, body, route: str) -> PassInput:
    """The pass a walk, stage or lens request (``body``, a `request_types.PassRequest`) asks of
    ``lm``, checked against the model and ``route``'s work limit: a 400 (413 past the limit)
    that says what to send otherwise."""
    if lm.config.vision:
        return _image_pass(lm, body)
    if body.pixels is not None or body.sample is not None:
        raise RequestError(
            f"{body.model} reads text, not images: send text (pixels and sample are a vision model's)"
        )
    if body.text is None:
        raise RequestError("the field 'text' is missing: the text this model reads")
    check_length(lm, body.model, route, body.text, body.decoder_text, extra=len(body.generated))
    if body.patch_text:  # a patched head's source: a pass of its own, within the same limit
        check_length(lm, body.model, route, body.patch_text)
    changes = _interventions(lm, body, body.patch_text)
    return PassInput(lm, body.text, body.decoder_text or None, body.generated, changes)


def _image_pass(lm, body) -> PassInput:
    """A vision model's pass: its image (sent, or a held-out sample; `images.py`), heads changed."""
    side = lm.config.image_size
    if body.text is not None:
        raise RequestError(
            f"{body.model} is a vision model (ViT): it reads an image, not text; send pixels (rows of "
            f"numbers in [0, 1], {lm.config.n_channels} x {side} x {side}) or a held-out sample"
        )
    if body.decoder_text or body.generated or body.patch_text:
        raise RequestError(
            "a vision model reads no decoder text, generates nothing and patches from no second text"
        )
    try:
        image = image_tensor(lm.config, body.pixels, body.sample)
    except ValueError as error:
        raise RequestError(str(error)) from None
    return PassInput(lm, image, interventions=_interventions(lm, body), sample=body.sample)


def _interventions(lm, body, patch_text: str | None = None) -> HeadInterventions:
    try:
        return HeadInterventions(lm, [item.model_dump() for item in body.interventions], patch_text)
    except ValueError as error:
        raise RequestError(str(error)) from None
