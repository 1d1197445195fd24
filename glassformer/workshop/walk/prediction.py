"""The prediction, step by step: logits -> penalties -> temperature -> top-k -> top-p -> token.

`next_token` iterates `glassformer.sampling.pipeline`, the one home of the order generation
runs the processors in, over the whole vocabulary, and keeps each stage's distribution and
its words, so the page can show what every setting does and the token drawn is the one
`lm.generate` would draw for the same settings and seed, at any step of a generation
(``tests/test_workshop_api.py`` and ``tests/test_sampling_pipeline.py`` check it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from glassformer.sampling import (
    GenerationSettings,
    apply_repetition_penalty,
    apply_temperature,
    choose,
    pipeline,
    suppress_tokens,
    top_k_filter,
    top_p_filter,
)
from glassformer.workshop.walk.stage_catalogue import code_location

SHOWN = 12  # tokens listed per step (the probabilities are computed over every token)
CODE = {  # the function each stage of the pipeline runs (its location: stage_catalogue.code_location)
    "repetition": apply_repetition_penalty,
    "suppress": suppress_tokens,
    "temperature": apply_temperature,
    "top_k": top_k_filter,
    "top_p": top_p_filter,
}
TEXT = {  # each stage in words, formatted with the settings' fields
    "logits": "softmax of the logits: the model's own distribution",
    "repetition": "repetition penalty {repetition_penalty:g}",
    "suppress": "stop tokens suppressed until {min_new_tokens} new tokens",
    "temperature": "divided by temperature {temperature:g}",
    "top_k": "top-k: the {top_k} likeliest kept",
    "top_p": "top-p: the smallest set with probability >= {top_p:g}",
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
    """The stages of `glassformer.sampling.pipeline` from next-token logits (v) to the chosen
    token, for tokens ``seen`` (1 s); ``step``: which step of a generation this is (0: the
    first new token), whose random stream draws it (`glassformer.sampling.choose`), as in
    generation. Greedy settings (temperature 0) take the argmax after the penalty.
    """
    scores = logits.float().reshape(1, -1)  # 1 v
    steps = [
        Step(name, TEXT[name].format_map(vars(settings)), stage_scores)
        for name, stage_scores in pipeline(scores, seen, settings, step)
    ]
    return steps, int(choose(steps[-1].scores, settings, step)[0])
