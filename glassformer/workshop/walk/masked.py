"""What a masked-language model (BERT's head) fills in: at each mask token of the text, the
words its head scores highest,

    p(w | text) = softmax(logits_i)_w        logits_i: the head's scores at position i (v)

and, when the text has no mask token (or the tokenizer none), the same at every position: what
the model reads there, given the whole text (it sees the token itself, so it mostly agrees).
"""

from __future__ import annotations

from typing import Any

import torch

from glassformer.inspect.targets import special_id

SHOWN = 5  # words per position
MAX_POSITIONS = 64  # positions listed when there is no mask token


def masked_prediction(lm, ids: torch.Tensor, logits: torch.Tensor) -> dict[str, Any]:
    """{"mask_token": spelling or None, "masked": bool, "positions": [{"position", "token",
    "top": [{"id", "token", "p"}]}]} for ``ids`` (1 t) and the head's ``logits`` (t v)."""
    try:
        masked_id = special_id(lm, "mask")
    except ValueError:  # a tokenizer without a mask token: every position is listed
        masked_id = None
    row = ids[0].tolist()
    positions = [i for i, token in enumerate(row) if token == masked_id]
    masked = bool(positions)
    if not masked:
        positions = list(range(min(len(row), MAX_POSITIONS)))
    label = lm.inputs.labels
    probs = torch.softmax(logits[positions].float(), dim=-1)  # n v
    top = torch.topk(probs, min(SHOWN, probs.shape[-1]))
    return {
        "mask_token": None if masked_id is None else label([masked_id])[0],
        "masked": masked,
        "positions": [
            {
                "position": i,
                "token": label([row[i]])[0],
                "top": [
                    {"id": int(w), "token": label([int(w)])[0], "p": float(p)}
                    for p, w in zip(values.tolist(), indices.tolist(), strict=True)
                ],
            }
            for i, values, indices in zip(positions, top.values, top.indices, strict=True)
        ],
    }
