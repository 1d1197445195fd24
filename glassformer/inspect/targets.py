"""The score F an attribution or an intervention measures: one number per input.

A `Target` reads F from the model's output (see `glassformer.inspect.attribution` for
the choices: a token's logit at the last position, an encoder's [MASK] position, a logit
difference, or any function of the output); `make_target` builds one from what the user
passes and checks it against the model and the input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from glassformer.nn.trace import evaluating

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

TargetSpec = str | int | tuple[Any, Any] | Callable[[torch.Tensor], torch.Tensor] | None


class Target:
    """F: one score per row of a batch, read from the model's output."""

    def __init__(self, label: str, fn: Callable[..., torch.Tensor]) -> None:
        self.label = label
        self._fn = fn

    def __call__(
        self, output: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """output: b t v logits (b t d hidden states); ids: b t the inputs -> b scores.
        ``positions`` (b) overrides where a token target is read (default: the last
        position, or an encoder's first mask)."""
        return self._fn(output, ids, positions)

    def __str__(self) -> str:
        return self.label


def make_target(
    lm: LanguageModel,
    target: TargetSpec,
    ids: torch.Tensor | None = None,
    decoder_ids: torch.Tensor | None = None,
) -> Target:
    """The `Target` for ``target`` (see the module docstring). ``None`` means the model's
    own top prediction for ``ids`` (a clean run picks it)."""
    if isinstance(target, Target):
        return target
    if callable(target):
        return _function_target(target)
    net = lm.net
    if lm.config.sentence_encoder:
        raise ValueError(
            "this encoder has no masked-LM head (a sentence encoder), so a target token does not "
            "apply; pass a function of its hidden states instead, e.g. "
            "target=lambda hidden: hidden[0].mean(0) @ direction"
        )
    positions = _scored_positions(lm, ids)
    where = "the last position" if lm.config.causal else "the masked position"
    if target is None:
        if ids is None:
            raise ValueError("target=None (the top prediction) needs the input ids")
        with torch.no_grad(), evaluating(net):
            output = lm.inputs.forward(ids, decoder_ids)
        target = int(output[0, positions(output, ids)[0]].argmax())
    if isinstance(target, tuple):
        if len(target) != 2:
            raise ValueError(f"a target pair is (good, bad), got {len(target)} items")
        good, bad = (lm.inputs.token_id(t, "target") for t in target)
        label = f"logit({show_token(lm, good)}) - logit({show_token(lm, bad)}) at {where}"
    else:
        good, bad = lm.inputs.token_id(target, "target"), None
        label = f"logit of {show_token(lm, good)} at {where}"

    def score(output: torch.Tensor, ids: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        at = positions(output, ids) if at is None else at
        logits = output[torch.arange(len(output), device=output.device), at]  # b v
        return logits[:, good] - logits[:, bad] if bad is not None else logits[:, good]

    return Target(label, score)


def _function_target(fn: Callable[[torch.Tensor], Any]) -> Target:
    """A Target from the user's ``score(output) -> scalar``, called on one input at a time."""
    name = getattr(fn, "__name__", "score")

    def each_row(output: torch.Tensor, ids: torch.Tensor, positions=None) -> torch.Tensor:
        # The user's function sees one input at a time, as a batch of one.
        rows = [torch.as_tensor(fn(output[i : i + 1])).reshape(()) for i in range(len(output))]
        return torch.stack(rows)

    return Target(f"{'score' if name == '<lambda>' else name}(output)", each_row)


def _scored_positions(lm, ids: torch.Tensor | None) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Where a token target is read, per row: an encoder's first [MASK], else the last
    position. Checks that ``ids`` holds a mask token for an encoder."""
    if lm.config.causal:
        return lambda output, ids: torch.full((len(output),), output.shape[1] - 1, device=output.device)
    mask_id = special_id(lm, "mask")
    if ids is not None and not bool((ids == mask_id).any()):
        raise ValueError(
            f"an encoder's target is read at the masked position, and this text has no mask token "
            f"({show_token(lm, mask_id)}); write it where the target token goes"
        )
    return lambda output, ids: (ids == mask_id).int().argmax(dim=1)  # b: the first mask of each row


def show_token(lm, token: int) -> str:
    return f"{lm.tokenizer.id_to_token(token)!r} (id {token})" if lm.tokenizer is not None else f"id {token}"


def special_id(lm, role: str) -> int:
    """The pad, unk or mask token id, with an error naming the alternatives when there is none."""
    tokenizer = lm.tokenizer
    found = None
    if role == "pad":
        found = lm.config.pad_token_id
        if found is None and tokenizer is not None:
            found = tokenizer.pad_token_id
    elif tokenizer is not None:
        text = getattr(tokenizer, f"{role}_token", None)
        found = tokenizer.special_tokens.get(text) if text else None
    if found is None:
        raise ValueError(f"this model's tokenizer has no {role} token; pass a token id instead")
    return found
