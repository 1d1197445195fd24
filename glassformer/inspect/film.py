"""Checkpoints as a film: what a fixed probe input shows at each evaluation of a training run.

At every evaluation the trainer calls a `FilmRecorder`, which runs the model on one probe
(the first row of the first validation batch, so the same tokens every time) and appends a
frame to ``film.jsonl`` in the run directory::

    {"step": 60,
     "tokens": ["<bos>", "x", ...],                          the probe (t <= 48 tokens)
     "text": "x ..." | null,                                its text, special tokens left out
     "patterns": {"dtype": "uint8", "shape": [L, H, t, t], "scale": 1/255, "data": base64},
     "previous_token": [[...H] x L],                        mean A[i, i-1]        (head_roles)
     "induction": [[...H] x L] | null,                      on repeated random tokens (decoders)
     "lens": {"layers": [...], "top": [[token x t] x layers], "p": [[...] x layers]} | null,
     "classes": {"names": [...], "p": [...]} | null,        a classifier's label probabilities
     "projection": [[x, y] x t],                            the last stream, PCA to 2-D
     "experts": {"chosen": [L t k], "load": [L n]} | null}  a mixture's routing of the probe

A scrubber over the frames shows attention patterns sharpen and head roles appear: on the
`induction` preset, one head's induction score jumps from ~1/t to near 1 (around step 60)
as the loss drops. Frames are appended (a resumed run adds its own); readers take the last
frame of each step and skip a line cut short by a crash.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from glassformer.formats.run_directory import FILM
from glassformer.inspect.head_roles import induction_scores, previous_token_scores
from glassformer.inspect.logit_lens import logit_lens
from glassformer.nn.hooks import hook_name
from glassformer.nn.trace import capture, evaluating

PROBE_TOKENS = 48  # the longest probe kept: patterns grow as t^2
DECIMALS = 4


class FilmRecorder:
    """``recorder(net, step)`` appends the frame of ``net`` at ``step`` to ``run_dir/film.jsonl``.

    ``probe``: the token ids every frame reads (1-D, padding already removed); the run's
    ``tokenizer`` spells its tokens (ids are shown as numbers without one)."""

    def __init__(self, run_dir: str | Path, probe: torch.Tensor, tokenizer=None) -> None:
        probe = torch.as_tensor(probe, dtype=torch.long).flatten()[:PROBE_TOKENS]
        if probe.numel() < 2:
            raise ValueError("a film probe needs at least 2 tokens")
        self.path = Path(run_dir) / FILM
        self.probe = probe[None]  # 1 t
        self.tokenizer = tokenizer

    def __call__(self, net, step: int) -> None:
        frame = record_frame(net, self.probe.to(next(net.parameters()).device), self.tokenizer)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as film:  # one line per frame
            film.write(json.dumps({"step": step, **frame}) + "\n")
            film.flush()
            os.fsync(film.fileno())


def record_frame(net, ids: torch.Tensor, tokenizer=None) -> dict[str, Any]:
    """One frame (see the module docstring) of ``net`` on ``ids`` (1 t)."""
    from glassformer.lm import LanguageModel

    lm = LanguageModel(net, tokenizer)
    labels = _labeller(lm)
    prefix = "encoder." if net.config.seq2seq else ""
    decoder_only = net.config.causal and not net.config.seq2seq  # where induction heads are read
    with torch.no_grad(), evaluating(net):
        names = [hook_name("attn.pattern", "*", prefix), hook_name("resid_post", "*", prefix)]
        if net.config.n_classes:
            names.append("classifier.logits")
        if net.config.moe:
            names.append(hook_name("ffn.experts", "*", prefix))
        decoder = lm.inputs.decoder_ids(None)  # an encoder-decoder's start token; else None
        trace = capture(net, names, lambda: lm.inputs.forward(ids, decoder), input_ids=ids)
        patterns = torch.stack([trace[n][0] for n in trace if n.endswith("attn.pattern")]).float()  # L H t t
        last = [n for n in trace if n.endswith("resid_post")][-1]
        frame = {
            "tokens": [labels(int(i)) for i in ids[0]],
            "text": _text(tokenizer, ids[0].tolist()),
            "patterns": _bytes(patterns),
            "previous_token": _rounded(previous_token_scores(trace, prefix)),
            "induction": _rounded(induction_scores(lm)) if decoder_only else None,
            "lens": _lens(lm, ids, labels),
            "classes": _classes(net.config, trace["classifier.logits"][0]) if net.config.n_classes else None,
            "projection": _rounded(_pca_2d(trace[last][0].float())),
            "experts": _experts(trace, net.config.n_experts) if net.config.moe else None,
        }
    return frame


def read_film(run_dir: str | Path) -> list[dict[str, Any]]:
    """The frames of a run, one per step (the last written wins), in step order."""
    path = Path(run_dir) / FILM
    if not path.exists():
        return []
    frames: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            frame = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        if isinstance(frame, dict) and isinstance(frame.get("step"), int):
            frames[frame["step"]] = frame
    return [frames[step] for step in sorted(frames)]


def _lens(lm, ids: torch.Tensor, labels) -> dict[str, Any] | None:
    """The logit lens's top-1 token and its probability, every layer x position."""
    if not lm.config.has_lm_head:  # a sentence encoder, a classifier: no vocabulary to read
        return None
    decoder = lm.inputs.decoder_ids(None)
    lens = logit_lens(lm, ids, k=1, decoder_input=decoder)
    top = [[labels(int(i)) for i in layer[:, 0]] for layer in lens.top_ids]  # layers t
    return {"layers": lens.layers, "top": top, "p": _rounded(lens.top_probs[..., 0])}


def _experts(trace, n_experts: int) -> dict[str, Any]:
    """A mixture's routing of the probe: the experts each token chose in each layer
    (L t k) and each expert's load, its share of the t k routed slots (L n)."""
    chosen = torch.stack([trace[n][0] for n in trace if n.endswith("ffn.experts")])  # L t k
    counts = torch.nn.functional.one_hot(chosen, n_experts).sum((1, 2)).float()  # L n
    return {"chosen": chosen.tolist(), "load": _rounded(counts / counts.sum(-1, keepdim=True))}


def _classes(config, logits: torch.Tensor) -> dict[str, Any]:
    """A classifier's label probabilities on the probe (c logits), with the labels' names."""
    return {"names": list(config.labels), "p": _rounded(torch.softmax(logits.float(), dim=-1))}


def _text(tokenizer, ids: list[int]) -> str | None:
    """The probe as text a model reads again (its special tokens left out: the model adds its
    own); None without a tokenizer."""
    if tokenizer is None:
        return None
    special = set(getattr(tokenizer, "special_tokens", {}).values())
    return tokenizer.decode([i for i in ids if i not in special])


def _labeller(lm):
    """id -> the token's spelling (its number without a tokenizer)."""
    if lm.tokenizer is None:
        return str
    return lambda i: lm.inputs.labels([i])[0]


def _pca_2d(x: torch.Tensor) -> torch.Tensor:
    """t d -> t 2: the centred rows on their first two principal axes, each axis signed so
    its largest loading is positive (frames then flip less from one step to the next)."""
    centred = x - x.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)  # v: components x d
    axes = v[:2]
    signs = torch.sign(axes.gather(1, axes.abs().argmax(1, keepdim=True)))
    points = centred @ (axes * signs).T
    return points if points.shape[1] == 2 else torch.nn.functional.pad(points, (0, 2 - points.shape[1]))


def _bytes(weights: torch.Tensor) -> dict[str, Any]:
    """Values in [0, 1] as base64 bytes, round(255 w): the workshop's packed-array format."""
    q = (weights.clamp(0, 1) * 255 + 0.5).to(torch.uint8).cpu().numpy()
    data = base64.b64encode(np.ascontiguousarray(q).tobytes()).decode("ascii")
    return {"dtype": "uint8", "shape": list(q.shape), "scale": 1 / 255, "data": data}


def _rounded(values: torch.Tensor) -> list:
    return np.round(values.detach().cpu().double().numpy(), DECIMALS).tolist()
