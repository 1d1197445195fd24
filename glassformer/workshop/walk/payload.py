"""One forward pass as the page draws it: the walk payload, and one stage in full.

`walk(lm, text, settings)` runs the model once on ``text`` with a hook on every stage the
architecture has (`architecture.stages`). A hook keeps a summary of its tensor, not the
tensor (a full trace of SmolLM2 at 512 tokens would be ~1 GB): its shape, the norm of
each token's vector, its range, a few leading features per token, and, for attention
weights, the pattern averaged over heads while the input is short. `stage(lm, text, name)`
gives one stage's whole tensor when the page expands it. Then the prediction
(`prediction.next_token`) from the last position's logits.

Payload (version 1)::

    {"version": 1, "model": str, "tokens": [{"id", "text"}], "decoder_tokens": [...] | null,
     "characters": [{"first", "last", "text"}]: runs of tokens whose bytes together make the
     characters "text" (a byte-level token holding part of one), "decoder_characters": [...],
     "read": the text the generating stack reads, decoded (real characters, not token labels),
     "architecture": architecture.summary(config), "stages": [stage + "value"] (each stage
     with its stack, layer, kind and cross: `architecture.stages`),
     "tour": the beginner tour's sentences (`model_words.tour_words`),
     "prediction": {"steps": [...], "token": {"id", "text"}} | null,
     "classification": {"classes": [{"label", "logit", "p"}], "label": int} | null,
     "masked": an MLM encoder's words at each mask token (`masked.masked_prediction`) | null,
     "image": a vision model's image (`images.image_payload`: pixels C H W, patch size and
     grid, the held-out sample it is) | null; its "tokens" are [CLS] and the patches, no ids,
     "interventions": [{"layer", "head", "mode", "factor"?}],
     "generated": int (how many of the last tokens a generation appended), "seconds": float}

Every number is read from the forward pass; ``tests/test_workshop_api.py`` compares the
payload with ``lm.trace`` on the same input.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from glassformer.inputs import ModelInputs
from glassformer.nn.trace import evaluating
from glassformer.sampling import GenerationSettings
from glassformer.workshop.door.limits import check_response
from glassformer.workshop.walk.architecture import stages, summary
from glassformer.workshop.walk.arrays import PACKED_BYTES, pack, pack_unit
from glassformer.workshop.walk.images import image_payload
from glassformer.workshop.walk.masked import masked_prediction
from glassformer.workshop.walk.model_words import tour_words
from glassformer.workshop.walk.pass_input import PassInput
from glassformer.workshop.walk.prediction import next_token

VERSION = 1
PREVIEW_FEATURES = 16  # leading features per token sent with the walk
SHORT_INPUT = 64  # up to this many tokens, previews and head-averaged patterns travel with
# the walk; a longer input's come with /api/stage when the page expands a stage. Nor does a
# longer walk capture the attention scores and weights: a hook there takes attention off its
# fused path (t² floats per head made), 2.2x the whole pass of 1,000 tokens; the walk gives
# their shapes and /api/stage their values.
ATTENTION_MAPS = (".scores", ".capped", ".pattern")  # h t s: soft-capped scores too (Gemma 2)


def walk(given: PassInput, settings: GenerationSettings, name: str = "") -> dict[str, Any]:
    """The walk payload of the pass ``given`` describes (see the module docstring): with its
    heads changed (interventions), every stage after them, the logits and the drawn token
    show the model so changed; with tokens a generation appended, it is the forward pass of
    that generation's next step."""
    start = time.perf_counter()
    lm = given.lm
    ids, decoder_ids = given.ids()
    plan = stages(lm.net)
    values: dict[str, dict[str, Any]] = {}

    def keep(x: torch.Tensor, trace_name: str) -> None:
        values[trace_name] = summary_of(x[0], trace_name)

    length = lm.config.n_patches + 1 if lm.config.vision else ids.shape[1]  # an image: [CLS] + patches
    long = max(length, 0 if decoder_ids is None else decoder_ids.shape[1]) > SHORT_INPUT
    weights = [s["trace"] for s in plan if s["trace"] and s["trace"].endswith(ATTENTION_MAPS)]
    names = [s["trace"] for s in plan if s["trace"] and not (long and s["trace"] in weights)]
    changed = given.hooks(decoder_ids)  # attached first: the captured values are the changed ones
    with (
        torch.no_grad(),
        evaluating(lm.net),
        lm.net.hooks(changed),
        lm.net.hooks(dict.fromkeys(names, keep)),
    ):
        output = lm.inputs.forward(ids, decoder_ids)  # 1 t v, 1 t d (sentence encoder) or 1 c (classifier)
    if long:  # the maps were not captured: their shapes, from the queries' and keys'
        values.update({trace: _map_shape(values, trace) for trace in weights})
    return walk_payload(given, (ids, decoder_ids), plan, values, output, settings, name, start)


def walk_payload(
    given: PassInput,
    read: tuple[torch.Tensor, torch.Tensor | None],
    plan: list[dict[str, Any]],
    values: dict[str, dict[str, Any]],
    output: torch.Tensor,
    settings: GenerationSettings,
    name: str,
    start: float,
) -> dict[str, Any]:
    """The walk payload of ``given``'s pass, from what its forward pass gave: the ids it read
    (``read``: ids, decoder ids), the model's stages (``plan``: `architecture.stages`) with
    each one's summary (``values``, by trace name), and its output (1 t v ...); ``start``, when
    the work began (`time.perf_counter`)."""
    lm = given.lm
    inputs = lm.inputs
    ids, decoder_ids = read
    classifier = summary(lm.config)["classifier"]
    return {
        "version": VERSION,
        "model": name,
        "tokens": _tokens(inputs, ids),
        "decoder_tokens": None if decoder_ids is None else _tokens(inputs, decoder_ids),
        "characters": inputs.character_groups(ids),
        "read": _read_text(lm, ids if decoder_ids is None else decoder_ids),
        "decoder_characters": [] if decoder_ids is None else inputs.character_groups(decoder_ids),
        "architecture": summary(lm.config),
        "stages": [{**s, "value": values.get(s["trace"])} for s in plan],
        "tour": tour_words(lm.config),
        "prediction": None
        if classifier
        else _prediction(lm, ids, decoder_ids, output, settings, step=len(given.generated)),
        "classification": _classification(classifier["classes"], output[0]) if classifier else None,
        "masked": masked_prediction(lm, ids, output[0]) if lm.config.masked_lm else None,
        "image": image_payload(lm.config, ids, given.sample) if lm.config.vision else None,
        "interventions": given.changes(),
        "generated": len(given.generated),
        "seconds": time.perf_counter() - start,
    }


class _Captured(Exception):
    """Raised by `stage`'s hook once it holds its tensor: the rest of the pass need not run."""


def stage(given: PassInput, trace_name: str, exact: bool = False) -> dict[str, Any]:
    """One stage's whole tensor (batch dimension dropped; the same pass as `walk`): attention
    weights as bytes (what a map draws) unless ``exact`` (what a table prints: float32, as
    every other stage), the rest as float32. The pass stops at the stage: block 0's weights of
    a 30-block model cost one block, not thirty."""
    as_bytes = trace_name.endswith(".pattern") and not exact
    lm = given.lm
    if trace_name not in lm.net.hook_points:
        raise ValueError(
            f"{trace_name!r} is not a stage of this model; stages look like blocks.0.attn.pattern"
        )
    ids, decoder_ids = given.ids()
    kept: list[torch.Tensor] = []

    def keep(x: torch.Tensor, name: str) -> None:
        check_response(name, x[0].numel(), PACKED_BYTES["uint8" if as_bytes else "float32"])
        kept.append(x[0].detach())
        raise _Captured

    with (
        torch.no_grad(),
        evaluating(lm.net),
        lm.net.hooks(given.hooks(decoder_ids)),  # attached first: the captured value is the changed one
        lm.net.hooks({trace_name: keep}),
    ):
        try:
            lm.inputs.forward(ids, decoder_ids)
        except _Captured:
            pass
    if not kept:
        raise ValueError(f"this model's forward pass does not reach {trace_name!r}")
    tensor = kept[0]
    return {
        "name": trace_name,
        "value": pack_unit(tensor) if as_bytes else pack(tensor),
    }


def _map_shape(values: dict[str, dict[str, Any]], trace: str) -> dict[str, Any]:
    """A scores or weights step a long walk did not capture: its shape h t s, from the
    queries (h t e) and keys (g s e) of the same attention."""
    base = trace.rsplit(".", 1)[0]
    heads, queries, _ = values[f"{base}.q"]["shape"]
    return {"shape": [heads, queries, values[f"{base}.k"]["shape"][1]]}


def _read_text(lm, ids: torch.Tensor) -> str:
    """The text of ``ids`` as characters (a character cut at the end shows as U+FFFD)."""
    return "" if lm.tokenizer is None else lm.tokenizer.decode(ids[0].tolist())


def _tokens(inputs: ModelInputs, ids: torch.Tensor) -> list[dict[str, Any]]:
    if inputs.config.vision:  # [CLS] and the patches: tokens with no vocabulary id
        return [{"id": None, "text": label} for label in inputs.labels(ids)]
    return [
        {"id": int(i), "text": label} for i, label in zip(ids[0].tolist(), inputs.labels(ids), strict=True)
    ]


def summary_of(x: torch.Tensor, trace_name: str) -> dict[str, Any]:
    """What the walk shows of one activation (no batch dimension): shape, per-token norms,
    range, a preview, and the head-averaged pattern of a short input."""
    low, high = torch.aminmax(x)  # one pass over the values
    out: dict[str, Any] = {"shape": list(x.shape), "min": float(low), "max": float(high)}
    x = x.float() if x.dim() > 1 else x.float()[None]  # a classifier's d or c: one row
    short = x.shape[-2] <= SHORT_INPUT
    if trace_name.endswith(ATTENTION_MAPS):  # h t s
        if trace_name.endswith(".pattern") and short:
            out["mean_pattern"] = pack_unit(x.mean(dim=0))  # t s: which tokens look at which
    elif x.dim() == 3:  # h t e, g s e: each head's vector per token
        out["norms"] = pack(torch.linalg.vector_norm(x, dim=-1))  # h t
    else:  # t d (or t f, t v)
        out["norms"] = pack(torch.linalg.vector_norm(x, dim=-1))  # t
        if short:
            out["preview"] = pack(x[:, :PREVIEW_FEATURES])  # t min(d, 16)
    return out


def _classification(names: list[str], logits: torch.Tensor) -> dict[str, Any]:
    """A classifier's answer: each class's logit and softmax probability, and the argmax."""
    probs = torch.softmax(logits.float(), dim=-1)  # c
    return {
        "classes": [
            {"label": name, "logit": float(z), "p": float(p)}
            for name, z, p in zip(names, logits.tolist(), probs.tolist(), strict=True)
        ],
        "label": int(probs.argmax()),
    }


def _prediction(
    lm, ids, decoder_ids, output: torch.Tensor, settings: GenerationSettings, step: int = 0
) -> dict[str, Any] | None:
    """The next-token pipeline at the last position (a decoder's, or the encoder-decoder's
    decoder), drawn as generation step ``step`` draws; None for encoders, which do not generate."""
    if not lm.config.generates:
        return None
    seen = ids if decoder_ids is None else decoder_ids
    steps, token = next_token(output[0, -1], seen, settings, step)
    label = lm.inputs.labels
    return {
        "steps": [step.payload(lambda i: label([i])[0]) for step in steps],
        "token": {"id": token, "text": label([token])[0]},
        "settings": {
            "temperature": settings.temperature,
            "top_k": settings.top_k,
            "top_p": settings.top_p,
            "repetition_penalty": settings.repetition_penalty,
            "seed": settings.seed,
            "greedy": not settings.do_sample,
        },
    }
