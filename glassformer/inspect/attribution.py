"""Per-token attributions: how much each input token matters to one score F(x).

Four methods, from the most local to the most model-agnostic:

* gradient x input      a_i = sum_d dF/dx_id * x_id                        (Shrikumar et al., 2016)
* integrated gradients  a_i = sum_d (x_id - x'_id) * int_0^1 dF/dx_id(x' + alpha (x - x')) d alpha
                        (Sundararajan et al., 2017); completeness: sum_i a_i = F(x) - F(x')
* attention x gradient  R[l, h, t, s] = A[l, h, t, s] * |dF/dA[l, h, t, s]|     (Hao et al., 2021)
* occlusion             a_i = F(x) - F(x with token i replaced or removed)     (Zeiler & Fergus, 2014)

x is the stream entering block 0, ``embed.out`` (b t d; ``encoder.embed.out`` for an
encoder-decoder), not the raw token embedding ``embed.tokens``: it is the one input every
block reads, the same for every position scheme (it equals ``embed.tokens`` for RoPE,
ALiBi and T5 models, and includes the learned positions and BERT's embedding LayerNorm
where those exist), so ``F`` is a plain function of it and completeness can be checked.

The score F (a `Target`) is one number per input:

* decoder, encoder-decoder: the **logit** (not the log-probability) of a target token at
  the last position (of the decoder input, for an encoder-decoder). A logit is what the
  residual stream writes linearly through the unembedding, so the methods and the
  patching in `glassformer.inspect.interventions` measure one quantity; a log-probability
  also moves with every other token's logit. For log-probs pass a function (below).
* encoder with a masked-LM head: the target token's logit at the text's ``[MASK]``.
* a pair ``(good, bad)``: logit(good) - logit(bad), the logit difference of patching work.
* a function ``score(output) -> scalar``: anything, e.g. ``lambda logits:
  logits[0, -1].log_softmax(-1)[id]``, or a sentence encoder's pooled hidden state against
  a direction. ``output`` is what the model returns for one input: logits 1 t v (hidden
  states 1 t d for an encoder without an MLM head).

>>> import glassformer as gf
>>> from glassformer.tokenizers.char import CharTokenizer
>>> tok = CharTokenizer.from_text("abcdefgh ")
>>> _ = torch.manual_seed(0)
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=9, d_model=16, n_layers=1, n_heads=2)), tok)
>>> result = integrated_gradients(lm, "abc d", "e", steps=16)
>>> result.tokens, tuple(result.scores.shape)
(['a', 'b', 'c', ' ', 'd'], (5,))
>>> result.extra["relative_error"] < 0.01
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import torch

from glassformer.inputs import TokenInput, input_prefix
from glassformer.inspect.targets import Target, TargetSpec, make_target, special_id
from glassformer.nn.hooks import hook_name, select
from glassformer.nn.trace import evaluating

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

BASELINES = ("zeros", "pad")
REPLACEMENTS = ("pad", "unk", "mask", "remove")


# --- results --------------------------------------------------------------------------------


@dataclass
class Attribution:
    """One score per input token, from one method, for one target."""

    tokens: list[str]
    scores: torch.Tensor  # t
    method: str
    target: str
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{self.method} for {self.target}"]
        finite = self.scores[torch.isfinite(self.scores)]
        top = float(finite.abs().max()) if finite.numel() else 0.0
        for i, (token, score) in enumerate(zip(self.tokens, self.scores.tolist(), strict=True)):
            if math.isnan(score):  # not defined for this token (occluding the scored [MASK])
                lines.append(f"  {i:>3} {token!r:<18}         n/a")
                continue
            bar = ("+" if score >= 0 else "-") * round(20 * abs(score) / top) if top else ""
            lines.append(f"  {i:>3} {token!r:<18} {score:+11.4g} {bar}")
        lines += [f"  {note}" for note in self.extra.get("notes", [])]
        return "\n".join(lines)


def _embedding(lm, ids: torch.Tensor, decoder_ids) -> torch.Tensor:
    """x = the stream entering block 0 for ``ids``: 1 t d."""
    name = hook_name("embed.out", stack=input_prefix(lm.net))
    store: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, _: str) -> None:
        store[name] = x.detach()

    with torch.no_grad(), evaluating(lm.net), lm.net.hooks({name: keep}):
        lm.inputs.forward(ids, decoder_ids)
    return store[name]


def _scores_and_gradients(lm, ids, decoder_ids, target: Target, stream: torch.Tensor):
    """F and dF/dx at each of n points x (n t d) put in place of ``embed.out``: (n, n t d)."""
    leaf = stream.detach().clone().requires_grad_(True)  # a leaf: autograd stops here
    with torch.enable_grad(), evaluating(lm.net):
        scores = stream_function(lm, ids, decoder_ids, target)(leaf)  # n
        # Rows are independent, so the gradient of the sum holds each row's own gradient.
        (grad,) = torch.autograd.grad(scores.sum(), leaf)
    return scores.detach(), grad


def _chunk(t: int) -> int:
    return max(1, 512 // t)  # inputs per forward pass: about 512 tokens at a time (memory of backward)


# --- the methods ----------------------------------------------------------------------------


def gradient_x_input(
    lm: LanguageModel, text: TokenInput, target: TargetSpec, *, decoder_input: TokenInput | None = None
) -> Attribution:
    """a_i = sum_d dF/dx_id * x_id with x = ``embed.out``: the first-order Taylor term of
    F(x) - F(0) that token i contributes. Fast (one backward pass); exact for linear F.

    Computed by Captum's ``InputXGradient`` on F as a function of x (`stream_function`):
    the product needs nothing of ours beyond that function."""
    from captum.attr import InputXGradient  # slow to import: on first use

    inputs = lm.inputs
    ids, dec = inputs.single(text), inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, ids, dec)
    x = _embedding(lm, ids, dec)  # 1 t d
    forward = stream_function(lm, ids, dec, tgt)
    with torch.enable_grad(), evaluating(lm.net):
        products = InputXGradient(forward).attribute(x.clone().requires_grad_(True))  # 1 t d
    with torch.no_grad(), evaluating(lm.net):
        score = float(forward(x)[0])
    attributions = products.detach().sum(-1)[0]  # t
    return Attribution(inputs.labels(ids), attributions, "gradient x input", tgt.label, {"score": score})


def stream_function(lm: LanguageModel, ids: torch.Tensor, decoder_ids, target: Target):
    """F as a function of the stream entering block 0: n t d points -> n scores, each point
    put in place of ``embed.out`` for the same ids (the form Captum's methods take)."""
    name = hook_name("embed.out", stack=input_prefix(lm.net))

    def forward(stream: torch.Tensor) -> torch.Tensor:
        rows = ids.expand(len(stream), -1)
        with lm.net.hooks({name: lambda x, _: stream}):
            return target(lm.inputs.forward(rows, decoder_ids), rows)  # n

    return forward


def integrated_gradients(
    lm: LanguageModel,
    text: TokenInput,
    target: TargetSpec,
    steps: int = 32,
    baseline: str = "zeros",
    *,
    tolerance: float = 0.01,
    max_steps: int = 1000,
    strict: bool = False,
    keep: Sequence[int] = (),
    decoder_input: TokenInput | None = None,
) -> Attribution:
    """Integrated gradients along the straight line from a baseline x' to x = ``embed.out``.

    The integral over alpha is the midpoint rule on ``steps`` evenly spaced points,
    alpha_k = (k + 1/2) / steps. Completeness, sum_i a_i = F(x) - F(x'), is then checked:
    while the relative error exceeds ``tolerance`` the steps triple (the midpoint rule's
    points nest when tripled, so every point already computed is reused), while they stay
    within ``max_steps``; an error that remains is a warning (a ValueError with
    ``strict=True``). ``extra`` holds the error, the steps used, F(x) and F(x').

    Why this rule: along the path a real model's score can turn sharply (SmolLM2's logit
    moves by ~20 within 1% of the path), where a Gauss-Legendre rule (Captum's default)
    gains nothing over evenly spaced points; and the midpoint rule never evaluates the
    gradient at the baseline itself, where it can be singular: at x' = 0 every RMSNorm of
    a bias-free pre-norm model sees a zero vector and multiplies the gradient by
    1/sqrt(eps), layer after layer, until it overflows.

    Baselines: ``zeros`` (x' = 0: no input at all, positions included) or ``pad`` (the
    ``embed.out`` of the same text with every non-special token replaced by the pad token).
    ``zeros`` suits models whose first block does not normalize its input: where it does
    (post-norm, BERT), F(alpha x) is flat except within ~sqrt(norm_eps) of alpha = 0, where
    LayerNorm of a vanishing vector turns sharply, so no quadrature converges (the check
    warns); use ``pad`` there.

    ``keep``: positions whose baseline is their own embedding (their attribution is then
    0). A decoder's first token is its attention sink: moving it along the path makes the
    score jump (SmolLM2 on "The capital of France is", pad baseline: 176% completeness
    error with 288 steps; with ``keep=[0]``, 0.25% with 32; zero baseline: 106%, and 0.15%
    with ``keep=[0]``, both at 288; see benchmarks/explanation_agreement.py).
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline={baseline!r}; allowed values: {', '.join(BASELINES)}")
    if not 1 <= steps <= max_steps:
        raise ValueError(f"steps={steps} must be between 1 and max_steps={max_steps}")
    inputs = lm.inputs
    ids, dec = inputs.single(text), inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, ids, dec)
    x = _embedding(lm, ids, dec)  # 1 t d
    x0 = torch.zeros_like(x) if baseline == "zeros" else _embedding(lm, _pad_baseline_ids(lm, ids), dec)
    kept = list(keep)
    if any(not isinstance(i, int) or not 0 <= i < ids.shape[1] for i in kept):
        raise ValueError(f"keep={kept} must hold positions 0..{ids.shape[1] - 1} of the text")
    x0[:, kept] = x[:, kept]
    ends, _ = _scores_and_gradients(lm, ids, dec, tgt, torch.cat([x, x0]))
    expected = float(ends[0] - ends[1])  # F(x) - F(x')
    path = _Path(lm, ids, dec, tgt, x0, x)
    attributions, steps, error = _integrate_until_complete(path, expected, steps, tolerance, max_steps)
    if not error <= tolerance:  # NaN included
        _not_converged(error, tolerance, steps, max_steps, strict)
    notes = [
        f"completeness: sum = {float(attributions.sum()):.4f}, F(x) - F(x') = {expected:.4f}, "
        f"relative error {error:.2%} with {steps} steps ({baseline} baseline"
        + (f", positions {kept} kept)" if kept else ")")
    ]
    extra = {
        "relative_error": error,
        "steps": steps,
        "baseline": baseline,
        "score": float(ends[0]),
        "baseline_score": float(ends[1]),
        "notes": notes,
    }
    return Attribution(inputs.labels(ids), attributions, "integrated gradients", tgt.label, extra)


def _integrate_until_complete(
    path: _Path, expected: float, steps: int, tolerance: float, max_steps: int
) -> tuple[torch.Tensor, int, float]:
    """Attributions (t), the steps used and the relative completeness error: the steps
    triple while the error exceeds ``tolerance`` and they stay within ``max_steps``."""
    while True:
        attributions = path.integrate(steps)  # t
        error = abs(float(attributions.sum()) - expected) / max(abs(expected), 1e-12)
        if error <= tolerance or 3 * steps > max_steps or not math.isfinite(error):
            return attributions, steps, error
        steps *= 3


def _not_converged(error: float, tolerance: float, steps: int, max_steps: int, strict: bool) -> None:
    """Warn (or, with ``strict``, raise) that completeness still fails after ``steps``."""
    message = (
        f"integrated gradients did not converge: relative completeness error {error:.2%} > "
        f"{tolerance:.0%} with {steps} steps (max_steps={max_steps}); raise max_steps or try "
        "the other baseline, or keep=[0] (a decoder's attention sink)"
    )
    if not math.isfinite(error):
        message = "integrated gradients: the gradient is not finite along the path; try the other baseline"
    if strict:
        raise ValueError(message)
    warnings.warn(message, stacklevel=3)


class _Path:
    """The straight path x' + alpha (x - x'), with each token's derivative along it,
    g_i(alpha) = sum_d (x - x')_id dF/dx_id, at the alphas computed so far."""

    def __init__(self, lm, ids, dec, target: Target, x0: torch.Tensor, x: torch.Tensor) -> None:
        self.run = lambda points: _scores_and_gradients(lm, ids, dec, target, points)
        self.x0, self.delta = x0, x - x0  # 1 t d
        self.derivatives: dict[Fraction, torch.Tensor] = {}  # alpha -> t

    def integrate(self, steps: int) -> torch.Tensor:
        """a_i = int_0^1 g_i(alpha) d alpha by the midpoint rule on ``steps`` points: t."""
        alphas = [Fraction(2 * k + 1, 2 * steps) for k in range(steps)]
        missing = [a for a in alphas if a not in self.derivatives]
        size = _chunk(self.x0.shape[1])
        for start in range(0, len(missing), size):
            chunk = missing[start : start + size]
            a = torch.tensor([float(v) for v in chunk], dtype=self.x0.dtype, device=self.x0.device)
            _, grad = self.run(self.x0 + a[:, None, None] * self.delta)  # n t d
            for alpha, g in zip(chunk, (grad * self.delta).sum(-1), strict=True):
                self.derivatives[alpha] = g  # t
        return torch.stack([self.derivatives[a] for a in alphas]).mean(0)  # t


def _pad_baseline_ids(lm, ids: torch.Tensor) -> torch.Tensor:
    special = set(lm.tokenizer.special_tokens.values()) if lm.tokenizer is not None else set()
    keep = torch.tensor([i in special for i in ids[0].tolist()], device=ids.device)
    return torch.where(keep, ids, torch.full_like(ids, special_id(lm, "pad")))


def attention_x_gradient(
    lm: LanguageModel, text: TokenInput, target: TargetSpec, *, decoder_input: TokenInput | None = None
) -> Attribution:
    """R = A * |dF/dA| for every self-attention pattern A of the input's stack (l h t s).

    ``scores`` holds the per-token reduction sum over l, h, t of R[:, :, :, s]: how much
    attention that mattered flowed into token s. ``extra["map"]`` is R itself (layers x
    heads x t x s) and ``extra["per_head"]`` its sum per head (layers x heads).
    """
    inputs = lm.inputs
    ids, dec = inputs.single(text), inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, ids, dec)
    net = lm.net
    prefix = input_prefix(lm.net)
    names = select(net.hook_points, hook_name("attn.pattern", "*", prefix))
    patterns: dict[str, torch.Tensor] = {}

    def keep(pattern: torch.Tensor, name: str) -> None:
        patterns[name] = pattern  # not detached: autograd.grad takes it as an input

    hooks = {
        # A leaf input puts the patterns in the graph even when the weights are frozen.
        hook_name("embed.out", stack=prefix): lambda x, _: x.detach().requires_grad_(True),
        hook_name("attn.pattern", "*", prefix): keep,
    }
    # Explicit attention: the fused kernel never forms A, so F would not depend on it.
    with torch.enable_grad(), evaluating(net), net.attention_impl("explicit"), net.hooks(hooks):
        score = tgt(inputs.forward(ids, dec), ids)
        grads = torch.autograd.grad(score.sum(), [patterns[n] for n in names])
    pattern = torch.stack([patterns[n][0].detach() for n in names])  # l h t s
    relevance = pattern * torch.stack([g[0] for g in grads]).abs()  # l h t s
    per_head = relevance.sum(dim=(2, 3))  # l h
    layer, head = divmod(int(per_head.argmax()), per_head.shape[1])
    notes = [f"most relevant head: layer {layer}, head {head} ({float(per_head.max()):.4f})"]
    extra = {"map": relevance, "per_head": per_head, "score": float(score[0].detach()), "notes": notes}
    return Attribution(
        inputs.labels(ids), relevance.sum(dim=(0, 1, 2)), "attention x gradient", tgt.label, extra
    )


def occlusion(
    lm: LanguageModel,
    text: TokenInput,
    target: TargetSpec,
    replacement: str | int = "pad",
    *,
    decoder_input: TokenInput | None = None,
) -> Attribution:
    """a_i = F(x) - F(x with token i occluded): model-agnostic, as in LIME, no gradients.

    ``replacement``: ``pad``, ``unk``, ``mask`` (the tokenizer's token), a token id, or
    ``remove`` (drop the token; later tokens shift one position left). For an encoder the
    scored ``[MASK]`` itself is not occluded: its entry is NaN.
    """
    inputs = lm.inputs
    ids, dec = inputs.single(text), inputs.decoder_ids(decoder_input)
    tgt = make_target(lm, target, ids, dec)
    t = ids.shape[1]
    if replacement == "remove":
        if t < 2:
            raise ValueError("replacement='remove' needs at least two tokens")
        variants = torch.stack([torch.cat([ids[0, :i], ids[0, i + 1 :]]) for i in range(t)])  # t t-1
    else:
        if isinstance(replacement, str) and replacement not in REPLACEMENTS:
            raise ValueError(f"replacement={replacement!r}; allowed: {', '.join(REPLACEMENTS)} or a token id")
        new = special_id(lm, replacement) if isinstance(replacement, str) else inputs.token_id(replacement)
        variants = ids.repeat(t, 1)  # t t
        variants.fill_diagonal_(new)
    positions, scored = None, None
    if lm.config.masked_lm:
        # Read every variant at the original [MASK]: an occluding [MASK] must not move it.
        scored = int((ids[0] == special_id(lm, "mask")).int().argmax())
        positions = torch.full((t,), scored, device=ids.device)
        if replacement == "remove":
            positions[:scored] -= 1  # removing an earlier token shifts the [MASK] left
    with torch.no_grad(), evaluating(lm.net):
        clean = tgt(inputs.forward(ids, dec), ids)  # 1
        size = _chunk(t)
        occluded = torch.cat(
            [
                tgt(inputs.forward(v, dec), v, None if positions is None else positions[i : i + size])
                for i, v in zip(range(0, t, size), variants.split(size), strict=True)
            ]
        )  # t
    drops = clean - occluded  # t
    if scored is not None:
        drops[scored] = float("nan")  # the scored [MASK] itself is not occluded
    label = "removed" if replacement == "remove" else f"replaced by {replacement!r}"
    extra = {"score": float(clean[0]), "replacement": replacement, "notes": [f"each token {label}"]}
    return Attribution(inputs.labels(ids), drops, "occlusion", tgt.label, extra)
