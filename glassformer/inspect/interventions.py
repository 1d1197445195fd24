"""Interventions: change activations inside a forward pass and measure what the output does.

* head ablation       z[:, head] <- 0, or its mean                  (Michel et al., 2019)
* activation patching run the corrupt input with clean activations put in
                      (Meng et al., 2022; Wang et al., 2022; Heimersheim & Nanda, 2024)
* patching sweep      one patch per (layer, position) or (layer, head): the data of the
                      standard activation-patching plot

Each works through the hook points of the trace contract, so on every model family. The
score is a `glassformer.inspect.attribution.Target`: a token's logit at the last position
(at the ``[MASK]`` for an encoder), a logit difference ``(good, bad)``, or any function
``score(output) -> scalar``; ``target=None`` takes the model's own top prediction on the
(clean) text. Patching reports how much of the clean-minus-corrupt gap a patch restores::

    recovered = (F(patched) - F(corrupt)) / (F(clean) - F(corrupt))    0: nothing, 1: all

For an encoder-decoder, layers and heads are the encoder's (the text is its input).

>>> import glassformer as gf
>>> _ = torch.manual_seed(0)
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=2)))
>>> effect = patch_activation(lm, [1, 2, 3], [1, 5, 3], "blocks.1.resid_post", target=7)
>>> effect.patched == effect.clean       # the whole last residual stream: the clean output
True
>>> sweep = patching_sweep(lm, [1, 2, 3], [1, 5, 3], target=7)
>>> tuple(sweep.values.shape)            # layers x positions
(2, 3)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from glassformer.inputs import TokenInput, input_prefix
from glassformer.inspect.targets import Target, TargetSpec, make_target
from glassformer.nn.hooks import HookFn, hook_name
from glassformer.nn.trace import evaluating

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

MODES = ("zero", "mean")
SWEEPS = ("resid_pre", "resid_mid", "resid_post", "attn.out", "ffn.out", "attn.z")
PER_HEAD = ("q", "k", "v", "scores", "pattern", "z")  # attention activations b h t ...


# --- results --------------------------------------------------------------------------------


@dataclass
class AblationEffect:
    """The target score before and after an ablation."""

    target: str
    intervention: str
    before: float
    after: float

    @property
    def difference(self) -> float:
        return self.after - self.before

    def __str__(self) -> str:
        return (
            f"{self.intervention}: {self.target} {self.before:.4f} -> {self.after:.4f} "
            f"(difference {self.difference:+.4f})"
        )


@dataclass
class PatchEffect:
    """The target score on the clean text, the corrupt text, and the corrupt text patched."""

    target: str
    intervention: str
    clean: float
    corrupt: float
    patched: float

    @property
    def recovered(self) -> float:
        """(patched - corrupt) / (clean - corrupt); NaN when clean and corrupt score alike."""
        gap = self.clean - self.corrupt
        return (self.patched - self.corrupt) / gap if gap != 0 else float("nan")

    def __str__(self) -> str:
        return (
            f"{self.intervention}: {self.target}: clean {self.clean:.4f}, corrupt {self.corrupt:.4f}, "
            f"patched {self.patched:.4f} (recovered {self.recovered:.1%})"
        )


@dataclass
class PatchingSweep:
    """Recovered fraction for each (layer, column); columns are positions or heads."""

    values: torch.Tensor  # layers x columns: recovered fraction
    patched: torch.Tensor  # layers x columns: F(patched)
    rows: list[str]  # the activation patched in each layer
    columns: list[str]  # token (clean|corrupt where they differ) or head
    activation: str
    target: str
    clean: float
    corrupt: float

    def __str__(self) -> str:
        width = max(6, *(len(c) for c in self.columns))
        lines = [
            f"patching {self.activation} for {self.target} (clean {self.clean:.4f}, corrupt "
            f"{self.corrupt:.4f}): fraction recovered",
            " " * 8 + " ".join(f"{c:>{width}}" for c in self.columns),
        ]
        for layer, row in enumerate(self.values.tolist()):
            lines.append(f"layer {layer:<2}" + " ".join(f"{v:>{width}.2f}" for v in row))
        return "\n".join(lines)


# --- checks ---------------------------------------------------------------------------------


def _check_layer(lm, layer: int) -> None:
    n = lm.config.n_layers  # the encoder's layers for an encoder-decoder
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
        raise ValueError(f"layer={layer!r} is out of range: this model has {n} layers (0..{n - 1})")


def _check_heads(heads: Sequence[int], n: int, what: str = "heads") -> list[int]:
    heads = list(heads)
    bad = [h for h in heads if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < n]
    if bad or not heads:
        raise ValueError(
            f"head {bad[0] if bad else '(none)'} is out of range: attention has {n} {what} (0..{n - 1})"
        )
    return heads


def _pair(lm, clean_text, corrupt_text) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = lm.inputs
    clean, corrupt = inputs.single(clean_text, "clean_text"), inputs.single(corrupt_text, "corrupt_text")
    if clean.shape[1] != corrupt.shape[1]:
        raise ValueError(
            f"clean text has {clean.shape[1]} tokens {inputs.labels(clean)} and corrupt text "
            f"{corrupt.shape[1]} {inputs.labels(corrupt)}; patching swaps activations position "
            "by position, so both need the same token count"
        )
    return clean, corrupt


def _run(lm, ids, dec, target: Target, hooks: dict[str, HookFn] | None = None) -> torch.Tensor:
    """F for each row of ids (b), with ``hooks`` attached."""
    with torch.no_grad(), evaluating(lm.net), lm.net.hooks(hooks or {}):
        return target(lm.inputs.forward(ids, dec), ids)


def _capture(lm, ids, dec, target: Target, names: Sequence[str]) -> tuple[dict[str, torch.Tensor], float]:
    """The named activations of one run, and its score."""
    store: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, name: str) -> None:
        store[name] = x.detach().clone()

    score = _run(lm, ids, dec, target, dict.fromkeys(names, keep))
    return store, float(score[0])


# --- head ablation --------------------------------------------------------------------------


def head_ablation_hook(heads: Sequence[int], mode: str = "zero", mean: torch.Tensor | None = None) -> HookFn:
    """A hook for ``blocks.{i}.attn.z`` (b h t e) that replaces the chosen heads' outputs by 0
    (``zero``) or by a mean (``mean``): ``mean`` (h e) when given, else the head's own mean
    over the positions of this input. Every other head is left as it is."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; allowed values: {', '.join(MODES)}")
    heads = list(heads)

    def ablate(z: torch.Tensor, name: str) -> torch.Tensor:
        z = z.clone()
        if mode == "zero":
            z[:, heads] = 0.0
        elif mean is not None:
            z[:, heads] = mean[heads][None, :, None, :].to(z.dtype)  # h e -> 1 h 1 e, broadcast
        else:
            z[:, heads] = z[:, heads].mean(dim=2, keepdim=True).expand_as(z[:, heads])
        return z

    return ablate


def head_scale_hook(heads: Sequence[int], factor: float) -> HookFn:
    """A hook for ``blocks.{i}.attn.z`` (b h t e) that multiplies the chosen heads' outputs
    by ``factor``: 0 is zero-ablation, 1 changes nothing, 2 doubles what the head writes
    into the residual stream (through W_O, which is linear)."""
    heads = list(heads)

    def scale(z: torch.Tensor, name: str) -> torch.Tensor:
        z = z.clone()
        z[:, heads] = z[:, heads] * factor
        return z

    return scale


def head_patch_hook(heads: Sequence[int], source: torch.Tensor) -> HookFn:
    """A hook for ``blocks.{i}.attn.z`` (b h t e) that puts the chosen heads' outputs from
    another run in: ``source`` (1 h t e, the same positions) replaces them at every position,
    the other heads are this run's (head-level activation patching)."""
    heads = list(heads)

    def patch(z: torch.Tensor, name: str) -> torch.Tensor:
        if source.shape[2] != z.shape[2]:
            raise ValueError(
                f"the patch source has {source.shape[2]} positions and this input {z.shape[2]}; "
                "patching swaps head outputs position by position, so both need the same token count"
            )
        z = z.clone()
        z[:, heads] = source[:, heads].to(z.dtype)
        return z

    return patch


def ablate_head(
    lm: LanguageModel,
    text: TokenInput,
    layer: int,
    head: int | Sequence[int],
    mode: str = "zero",
    target: TargetSpec = None,
    *,
    reference: Sequence[TokenInput] | None = None,
    decoder_input: TokenInput | None = None,
) -> AblationEffect:
    """Remove one head (or several) of one layer and measure the target's change.

    The hook sits on ``blocks.{layer}.attn.z``, the per-head outputs before W_O, so W_O
    and the other heads are untouched. ``mode="zero"`` sets the head's output to 0;
    ``mode="mean"`` replaces it at every position by its mean: over the positions of
    ``text`` itself by default (in a causal model that mean includes later positions),
    or over all positions of the ``reference`` texts (a batch of typical inputs: the
    usual "mean ablation", which keeps the head's average contribution and removes only
    what depends on this input).
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; allowed values: {', '.join(MODES)}")
    _check_layer(lm, layer)
    heads = _check_heads([head] if isinstance(head, int) else head, lm.config.n_heads)
    inputs = lm.inputs
    ids, dec = inputs.single(text), inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, ids, dec)
    name = hook_name("attn.z", layer, input_prefix(lm.net))
    mean = None
    if mode == "mean" and reference is not None:
        rows = [_capture(lm, inputs.single(r, "reference"), dec, tgt, [name])[0][name][0] for r in reference]
        if not rows:
            raise ValueError("reference is empty: give at least one text, or reference=None")
        mean = torch.cat(rows, dim=1).mean(dim=1)  # h t e over every text -> h e
    before = float(_run(lm, ids, dec, tgt)[0])
    after = float(_run(lm, ids, dec, tgt, {name: head_ablation_hook(heads, mode, mean)})[0])
    which = f"head {heads[0]}" if len(heads) == 1 else f"heads {heads}"
    source = " (reference mean)" if mean is not None else ""
    return AblationEffect(tgt.label, f"{mode}-ablated layer {layer} {which}{source}", before, after)


# --- activation patching --------------------------------------------------------------------


def _layout(name: str) -> tuple[int | None, int]:
    """(head dimension or None, position dimension) of the activation ``name``."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[-2] in ("attn", "cross_attn") and parts[-1] in PER_HEAD:
        return 1, 2  # b h t ... (k, v: b g s e)
    return None, 1  # b t ...


def patch_activation(
    lm: LanguageModel,
    clean_text: TokenInput,
    corrupt_text: TokenInput,
    name: str,
    positions: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
    target: TargetSpec = None,
    *,
    decoder_input: TokenInput | None = None,
) -> PatchEffect:
    """Run ``corrupt_text`` with the activation ``name`` taken from a run on ``clean_text``.

    The whole tensor is patched, or only ``positions`` (token positions; key positions for
    ``attn.k`` / ``.v``) and / or ``heads`` (for the per-head activations ``attn.q``, ``.k``,
    ``.v``, ``.scores``, ``.pattern``, ``.z``; kv heads for k and v). Both texts must have
    the same number of tokens.
    """
    net = lm.net
    if name not in net.hook_points:
        sample = ", ".join(list(net.hook_points)[:8])
        raise ValueError(f"no activation named {name!r} (one exact name; names look like: {sample}, ...)")
    clean_ids, corrupt_ids = _pair(lm, clean_text, corrupt_text)
    dec = lm.inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, clean_ids, dec)
    store, clean = _capture(lm, clean_ids, dec, tgt, [name])
    value = store[name]
    keep = _patched_part(name, value, positions, heads)
    corrupt = float(_run(lm, corrupt_ids, dec, tgt)[0])
    patched = float(_run(lm, corrupt_ids, dec, tgt, {name: lambda x, _: torch.where(keep, value, x)})[0])
    where = "".join(
        f" {label} {list(v)}" for label, v in (("positions", positions), ("heads", heads)) if v is not None
    )
    return PatchEffect(tgt.label, f"patched {name}{where}", clean, corrupt, patched)


def _patched_part(
    name: str, value: torch.Tensor, positions: Sequence[int] | None, heads: Sequence[int] | None
) -> torch.Tensor:
    """Which entries of one row of ``value`` (1 ...) a patch replaces: a bool mask over its
    shape without the batch dimension, all True unless ``positions`` or ``heads`` narrow it."""
    head_dim, position_dim = _layout(name)
    keep = torch.ones(value.shape[1:], dtype=torch.bool, device=value.device)
    if heads is not None:
        if head_dim is None:
            raise ValueError(
                f"heads= applies to per-head activations (attn.q, .k, .v, .scores, .pattern, .z); "
                f"{name!r} has shape {tuple(value.shape)} with no head dimension"
            )
        chosen = torch.zeros(value.shape[head_dim], dtype=torch.bool, device=value.device)
        chosen[_check_heads(heads, value.shape[head_dim])] = True
        keep &= chosen.view(-1, *([1] * (value.dim() - 2)))
    if positions is not None:
        n = value.shape[position_dim]
        bad = [p for p in positions if not isinstance(p, int) or not 0 <= p < n]
        if bad or not list(positions):
            raise ValueError(
                f"positions {bad or '(none)'} out of range: {name!r} has {n} positions (0..{n - 1})"
            )
        chosen = torch.zeros(n, dtype=torch.bool, device=value.device)
        chosen[list(positions)] = True
        keep &= chosen.view(n, *([1] * (value.dim() - position_dim - 1)))
    return keep


def patching_sweep(
    lm: LanguageModel,
    clean_text: TokenInput,
    corrupt_text: TokenInput,
    target: TargetSpec = None,
    activation: str = "resid_pre",
    *,
    decoder_input: TokenInput | None = None,
) -> PatchingSweep:
    """Patch one (layer, position) at a time (``resid_pre``, ``resid_mid``, ``resid_post``,
    ``attn.out``, ``ffn.out``) or one (layer, head) at a time, at every position
    (``attn.z``); return the fraction recovered for each: layers x positions or layers x
    heads. ``resid_pre`` of layer i is the stream entering it: ``embed.out`` for layer 0,
    ``blocks.{i-1}.resid_post`` after. Each layer is one batched forward pass."""
    if activation not in SWEEPS:
        raise ValueError(f"activation={activation!r}; allowed values: {', '.join(SWEEPS)}")
    clean_ids, corrupt_ids = _pair(lm, clean_text, corrupt_text)
    dec = lm.inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, clean_ids, dec)
    prefix = input_prefix(lm.net)
    if activation == "resid_pre":
        names = [hook_name("embed.out", stack=prefix)]
        names += [hook_name("resid_post", i, prefix) for i in range(lm.config.n_layers - 1)]
    else:
        names = [hook_name(activation, i, prefix) for i in range(lm.config.n_layers)]
    store, clean = _capture(lm, clean_ids, dec, tgt, names)
    corrupt = float(_run(lm, corrupt_ids, dec, tgt)[0])
    n = lm.config.n_heads if activation == "attn.z" else clean_ids.shape[1]  # columns
    rows = corrupt_ids.expand(n, -1)
    patched = torch.empty(len(names), n)
    for layer, name in enumerate(names):
        value = store[name]  # 1 t d or 1 h t e

        def patch(x: torch.Tensor, _: str, value=value) -> torch.Tensor:
            x = x.clone()
            column = torch.arange(n, device=x.device)
            x[column, column] = value[0]  # row j gets the clean position j (or head j)
            return x

        patched[layer] = _run(lm, rows, dec, tgt, {name: patch}).float().cpu()
    gap = clean - corrupt
    if gap == 0:
        warnings.warn("clean and corrupt texts give the same score: nothing to recover (NaN)", stacklevel=2)
    recovered = (patched - corrupt) / gap if gap != 0 else torch.full_like(patched, float("nan"))
    if activation == "attn.z":
        columns = [f"head {h}" for h in range(n)]
    else:
        pairs = zip(lm.inputs.labels(clean_ids), lm.inputs.labels(corrupt_ids), strict=True)
        columns = [repr(a) if a == b else f"{a!r}|{b!r}" for a, b in pairs]
    return PatchingSweep(recovered, patched, names, columns, activation, tgt.label, clean, corrupt)
