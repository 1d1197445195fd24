"""The prediction, step by step: logits -> penalties -> temperature -> top-k -> top-p -> token.

`next_token` runs the processors of `glassformer.sampling` in the order generation runs
them, over the whole vocabulary, and keeps each step's distribution, so the page can show
what every setting does and the token drawn is the one `lm.generate` would draw for the
same settings and seed, at any step of a generation (``tests/test_workshop_api.py`` checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from glassformer.sampling import (
    GenerationSettings,
    apply_repetition_penalty,
    apply_temperature,
    sample,
    step_generator,
    top_k_filter,
    top_p_filter,
)
from glassformer.workshop.stage_catalogue import code_location

SHOWN = 12  # tokens listed per step (the probabilities are computed over every token)
CODE = {  # the function each step of the pipeline runs (its location: stage_catalogue.code_location)
    "repetition": apply_repetition_penalty,
    "temperature": apply_temperature,
    "top_k": top_k_filter,
    "top_p": top_p_filter,
}


@dataclass(frozen=True)
class Step:
    """One step of the pipeline: its scores over the vocabulary (1 v)."""

    name: str
    text: str
    scores: torch.Tensor

    def payload(self, label) -> dict[str, Any]:
        probs = torch.softmax(self.scores.float(), dim=-1)[0]  # v
        kept = int(torch.isfinite(self.scores).sum())
        top = torch.topk(probs, min(SHOWN, kept))  # filtered tokens (probability 0) are not listed
        return {
            "name": self.name,
            "text": self.text,
            "kept": kept,
            "entropy": float(-(probs[probs > 0] * probs[probs > 0].log()).sum()),
            "code": code_location(CODE.get(self.name, next_token)),
            "top": [
                {"id": int(i), "token": label(int(i)), "p": float(p)}
                for p, i in zip(top.values, top.indices, strict=True)
            ],
        }


def next_token(
    logits: torch.Tensor, seen: torch.Tensor, settings: GenerationSettings, step: int = 0
) -> tuple[list[Step], int]:
    """The steps from next-token logits (v) to the chosen token, for tokens ``seen`` (1 s);
    ``step``: which step of a generation this is (0: the first new token), whose random
    stream draws it (`glassformer.sampling.step_generator`), as in generation.

    Greedy settings (temperature 0) take the argmax after the penalty, as generation does.
    """
    scores = logits.float().reshape(1, -1)  # 1 v
    steps = [Step("logits", "softmax of the logits: the model's own distribution", scores)]
    if settings.repetition_penalty != 1.0:
        scores = apply_repetition_penalty(scores, seen, settings.repetition_penalty)
        steps.append(Step("repetition", f"repetition penalty {settings.repetition_penalty:g}", scores))
    if not settings.do_sample:
        return steps, int(scores.argmax(dim=-1))
    scores = apply_temperature(scores, settings.temperature)
    steps.append(Step("temperature", f"divided by temperature {settings.temperature:g}", scores))
    if settings.top_k is not None:
        scores = top_k_filter(scores, settings.top_k)
        steps.append(Step("top_k", f"top-k: the {settings.top_k} likeliest kept", scores))
    if settings.top_p is not None and settings.top_p < 1:  # top_p = 1 keeps every token: off
        scores = top_p_filter(scores, settings.top_p)
        steps.append(Step("top_p", f"top-p: the smallest set with probability >= {settings.top_p:g}", scores))
    return steps, int(sample(scores, step_generator(settings.seed, step))[0])
