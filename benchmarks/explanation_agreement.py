"""Token explanations of SmolLM2-135M and MiniLM: how far the methods agree, and the sink.

Three parts, each printed as a table:

1. **Integrated gradients' completeness on SmolLM2** (sum_i a_i against F(x) - F(x'), F = the
   logit of the next token), with and without the first token, the attention sink, held
   fixed; from the zero baseline and from pad tokens; at 32 and 288 midpoint steps.
2. **Ours against Captum on SmolLM2**: integrated gradients (both on the midpoint rule at 32
   steps), gradient x input and occlusion (a token replaced by the pad token), as the
   largest difference relative to the largest score.
3. **Agreement between methods**: on a few prompts, F = p(the model's top next token), first
   token held fixed; Spearman's rank correlation of every pair of methods over the other
   tokens, and whether they pick the same most important token. The same for MiniLM's cosine
   similarity between two sentences.

    python -m benchmarks.explanation_agreement [--samples 500] [--prompts 3]
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import numpy as np
import torch
from scipy.stats import spearmanr

import glassformer as gf
from glassformer.inspect import gradient_x_input, integrated_gradients, occlusion
from glassformer.inspect.attribution import _embedding, stream_function
from glassformer.inspect.explain_methods import METHODS, explain_tokens
from glassformer.inspect.targets import make_target

PROMPTS = [
    ("The capital of France is", " Paris"),
    ("The Eiffel Tower is in the city of", None),
    ("Water freezes at zero degrees", None),
    ("She opened the door and said", None),
]
PAIRS = [("A man is eating food.", "A man is eating a piece of bread.")]


def completeness(lm, prompts) -> None:
    print("1. integrated gradients on SmolLM2: relative completeness error, F = logit of the target")
    columns = f"{'baseline':<9} {'first token':<12} {'32 steps':>9} {'288 steps':>9}"
    print(f"   {'prompt':<38} {'target':<10} {columns}")
    for text, target in prompts:
        target = target or _top(lm, text)
        for baseline in ("zeros", "pad"):
            for keep, label in (((), "moves"), ((0,), "held fixed")):
                errors = []
                for steps in (32, 288):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the error is the figure
                        result = integrated_gradients(
                            lm, text, target, steps=steps, max_steps=steps, baseline=baseline, keep=keep
                        )
                    errors.append(result.extra["relative_error"])
                figures = f"{baseline:<9} {label:<12} {errors[0]:>9.2%} {errors[1]:>9.2%}"
                print(f"   {text!r:<38} {target!r:<10} {figures}")


def captum_agreement(lm, text: str, target: str) -> None:
    from captum.attr import FeatureAblation, IntegratedGradients

    print(f"\n2. ours against Captum on SmolLM2, {text!r} -> {target!r} (logit)")
    ids = lm.ids(text)
    tgt = make_target(lm, target, ids)
    x = _embedding(lm, ids, None)  # 1 t d
    forward = stream_function(lm, ids, None, tgt)
    ours = integrated_gradients(lm, text, target, steps=32, max_steps=32, keep=[0], tolerance=1.0)
    baseline = torch.zeros_like(x)
    baseline[:, 0] = x[:, 0]
    theirs = IntegratedGradients(forward).attribute(
        x, baselines=baseline, n_steps=32, method="riemann_middle", internal_batch_size=16
    )
    _row("integrated gradients (32 midpoint steps)", ours.scores, theirs.sum(-1)[0])
    gxi = gradient_x_input(lm, text, target)
    with torch.enable_grad():
        reference = (torch.func.grad(lambda v: forward(v).sum())(x) * x).sum(-1)[0]
    _row("gradient x input (Captum) vs autograd", gxi.scores, reference)
    pad = lm.config.pad_token_id
    occluded = occlusion(lm, text, target, replacement=pad)
    with torch.no_grad():
        ablation = FeatureAblation(lambda rows: tgt(lm.inputs.forward(rows), rows)).attribute(
            ids, baselines=pad, feature_mask=torch.arange(ids.shape[1])[None]
        )
    _row("occlusion (pad) vs FeatureAblation", occluded.scores, ablation[0])


def _row(name: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
    gap = float((ours - theirs).abs().max())
    relative = gap / float(theirs.abs().max())
    print(f"   {name:<42} max |ours - Captum| = {gap:.2e} ({relative:.1e} of the largest)")


def agreement(lm, items, samples: int, label: str) -> None:
    """items: (text, target) pairs; every method on each, first token held fixed for a decoder."""
    print(f"\n3. agreement between methods, {label} (Spearman's rho over the tokens; top = same top token)")
    keep_first = lm.config.family == "decoder"
    rhos: dict[tuple[str, str], list[float]] = {}
    tops: dict[tuple[str, str], list[bool]] = {}
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    for text, target in items:
        results = {}
        for method in METHODS:
            start = time.perf_counter()
            results[method] = explain_tokens(lm, text, method, target, keep_first=keep_first, samples=samples)
            times[method].append(time.perf_counter() - start)
        first = results[METHODS[0]]
        free = [i for i in range(len(first.tokens)) if not (keep_first and i == 0)]
        free = [i for i in free if not first.tokens[i].startswith("[")]  # [CLS], [SEP]: held fixed
        print(f"   {text!r} -> {first.target}")
        for method in METHODS:
            scores = results[method].scores[free].tolist()
            print(f"     {method:<10} " + " ".join(f"{v:+.3g}" for v in scores))
        ig, shap, lime = results["ig"].extra, results["shap"].extra, results["lime"].extra
        print(
            f"     F(x) = {shap['score']:.4g}; ig: completeness error {ig['relative_error']:.2%} "
            f"({ig['baseline']} baseline, {ig['steps']} steps); shap: base value {shap['base_value']:.4g}, "
            f"additivity error {shap['additivity_error']:.1e}; lime: R^2 {lime['r2']:.2f}"
        )
        for a, b in itertools.combinations(METHODS, 2):
            sa, sb = (results[m].scores[free].numpy() for m in (a, b))
            rhos.setdefault((a, b), []).append(float(spearmanr(sa, sb).statistic))
            tops.setdefault((a, b), []).append(int(np.argmax(sa)) == int(np.argmax(sb)))
    print(f"   {'pair':<22} {'mean rho':>9} {'rho per input':<28} {'same top':>8}")
    for pair, values in rhos.items():
        each = " ".join(f"{v:+.2f}" for v in values)
        same = f"{sum(tops[pair])}/{len(tops[pair])}"
        print(f"   {' vs '.join(pair):<22} {np.nanmean(values):>+9.2f} {each:<28} {same:>8}")
    print("   seconds per input: " + ", ".join(f"{m} {np.mean(t):.1f}" for m, t in times.items()))


def _top(lm, text: str) -> str:
    return lm.tokenizer.id_to_token(int(lm.logits(text)[0, -1].argmax()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=500, help="LIME samples / SHAP evaluations")
    parser.add_argument("--prompts", type=int, default=3, help="how many SmolLM2 prompts (at most 4)")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    smol = gf.load("smollm2-135m-instruct")
    prompts = PROMPTS[: args.prompts]
    completeness(smol, prompts)
    captum_agreement(smol, *PROMPTS[0])
    agreement(smol, prompts, args.samples, "SmolLM2, p(next token)")
    minilm = gf.load("minilm-l6")
    agreement(minilm, PAIRS, args.samples, "MiniLM, cosine similarity")


if __name__ == "__main__":
    main()
