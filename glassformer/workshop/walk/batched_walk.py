"""Several walks of one model in one forward pass: a class's explorers, served together.

Thirty students walking their own prompts at once wait for thirty passes on the one model
thread. A pass of a short input is bound by reading the weights, not by the arithmetic:
SmolLM2 on 2 cores (AMD EPYC) takes 0.10 s for one 21-token prompt, 0.20 s for four in one
batch and 0.34 s for eight. So the turn of a walk takes the walks waiting behind it into its
pass (`FairQueue.take_along`), up to `BATCH_LIMIT`: four, since the teacher's next walk
waits for the pass running (`benchmarks/class_load.py`, 30 explorers while the teacher moves
on: four at a time, explorers' p95 3.9 s and followers' 0.7 s; eight, 3.9 s and 1.5 s).

The prompts are padded on the right to the longest and run as one b t batch. In a causal
decoder a position attends only to itself and the positions before it, so no real position
sees the padding: each prompt's stages, cut to its own length (`trimmed`), are its own pass's,
up to the rounding of a matmul with more rows (``tests/test_batched_walk.py`` holds them to
the single walk's numbers). Only what that argument covers is batched (`batch_key`): a
dense causal decoder that reads text (a mixture's routing stages are shaped otherwise),
without interventions or long inputs (whose walks capture less: `payload.SHORT_INPUT`);
everything else walks alone.

    walks([(given, settings, name), ...]) -> [payload | error]   # one per call, in order
"""

from __future__ import annotations

import time
from typing import Any

import torch

from glassformer.nn.trace import evaluating
from glassformer.sampling import GenerationSettings
from glassformer.workshop.walk.architecture import stages
from glassformer.workshop.walk.pass_input import PassInput
from glassformer.workshop.walk.payload import ATTENTION_MAPS, SHORT_INPUT, summary_of, walk, walk_payload

BATCH_LIMIT = 4  # walks in one pass (see the module docstring)


def batch_key(given: PassInput) -> int | None:
    """What walks must share to run in one pass (their model), or None if ``given``'s walk
    runs alone: a model that is not a causal decoder reading text, or a pass with heads changed."""
    config = given.lm.config
    plain = config.causal and not (config.seq2seq or config.vision or config.masked_lm or config.moe)
    changed = given.interventions is not None and (
        given.interventions.items or given.interventions.patch_text
    )
    if not plain or changed or given.lm.net.classifier is not None or given.lm.tokenizer is None:
        return None
    return id(given.lm)


def walks(calls: list[tuple[PassInput, GenerationSettings, str]]) -> list[dict[str, Any] | Exception]:
    """The walk payload of each of ``calls`` (each the arguments of `payload.walk`, all with one
    `batch_key`), as `payload.walk` gives it, or the ValueError / TypeError / KeyError its input
    raised; the short inputs in one forward pass, a long one alone."""
    start = time.perf_counter()
    answers: list[dict[str, Any] | Exception | None] = [None] * len(calls)
    batch: list[tuple[int, torch.Tensor]] = []  # (which call, its ids 1 t)
    for i, (given, settings, name) in enumerate(calls):
        try:
            ids, _ = given.ids()
            if ids.shape[1] > SHORT_INPUT or len(calls) == 1:
                answers[i] = walk(given, settings, name)
            else:
                batch.append((i, ids))
        except (ValueError, TypeError, KeyError) as error:  # this call's input: its own answer
            answers[i] = error
    if batch:
        lm = calls[batch[0][0]][0].lm
        plan = stages(lm.net)
        values, output = _batched_pass(lm, plan, [ids for _, ids in batch])
        for (i, ids), kept, out in zip(batch, values, output, strict=True):
            given, settings, name = calls[i]
            read = out[None, : ids.shape[1]]  # 1 t v: this prompt's positions
            answers[i] = walk_payload(given, (ids, None), plan, kept, read, settings, name, start)
    return answers  # type: ignore[return-value]


def trimmed(x: torch.Tensor, length: int, trace_name: str) -> torch.Tensor:
    """One prompt's stage (no batch dimension) without the padding after its ``length`` tokens:
    an attention map h t s cut on both token axes, each head's vectors h t e, the rest t d."""
    if trace_name.endswith(ATTENTION_MAPS):
        return x[:, :length, :length]
    return x[:, :length] if x.dim() == 3 else x[:length]


def _batched_pass(
    lm, plan: list[dict[str, Any]], prompts: list[torch.Tensor]
) -> tuple[list[dict[str, dict[str, Any]]], torch.Tensor]:
    """One forward pass of ``prompts`` (each 1 t), padded on the right: each prompt's stage
    summaries (by trace name) and the output b t v."""
    lengths = [ids.shape[1] for ids in prompts]
    ids = torch.zeros(len(prompts), max(lengths), dtype=torch.long)  # b t: padding after each prompt
    for row, prompt in enumerate(prompts):
        ids[row, : prompt.shape[1]] = prompt[0]
    values: list[dict[str, dict[str, Any]]] = [{} for _ in prompts]

    def keep(x: torch.Tensor, trace_name: str) -> None:
        for row, length in enumerate(lengths):
            values[row][trace_name] = summary_of(trimmed(x[row], length, trace_name), trace_name)

    names = [s["trace"] for s in plan if s["trace"]]
    with torch.no_grad(), evaluating(lm.net), lm.net.hooks(dict.fromkeys(names, keep)):
        output = lm.inputs.forward(ids.to(prompts[0].device))  # b t v
    return values, output
