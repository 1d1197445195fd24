"""One entry point for every token explanation, and what each method assumes.

`explain_tokens(model, text, method, target)` runs one method on one prediction and returns
an `Attribution` (one score per token of the model, the method's name, what it explains).
Every method explains the same score F (`glassformer.inspect.explanations`): for a
language model the probability of the next token ``target`` (None: its top prediction),
for a sentence encoder the cosine similarity to the sentence ``target``, for a
`TextClassifier` the probability of the label ``target``. So two methods on the same
input can be shown side by side, and where they differ it is the methods that differ.

The perturbation methods (``lime``, ``shap``, ``occlusion``) all read one f(z), the score
with some tokens removed (`MaskedScore`); the gradient methods (``ig``, ``gxi``) need a
model we can differentiate, so not a `TextClassifier`.

>>> sorted(ASSUMPTIONS) == sorted(METHODS)
True
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from glassformer.inspect.attribution import Attribution, gradient_x_input, integrated_gradients
from glassformer.inspect.explain_lime import lime_of
from glassformer.inspect.explain_shap import shap_of
from glassformer.inspect.explanations import TextClassifier, lm_target
from glassformer.inspect.masked_score import MaskedScore, describe, masked_score
from glassformer.inspect.targets import TargetSpec, special_id

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

METHODS = ("lime", "shap", "ig", "gxi", "occlusion")
NAMES = {
    "lime": "LIME",
    "shap": "SHAP",
    "ig": "integrated gradients",
    "gxi": "gradient x input",
    "occlusion": "occlusion",
}

ASSUMPTIONS = {
    "lime": (
        "LIME removes random subsets of tokens and fits a weighted linear model g(z) = b + w.z to the "
        "scores, weighting each sample by its closeness to the whole text. It assumes the model is "
        "close to linear in which tokens are present, near this text, and that a removed token is "
        "an absent one. The weights change with the samples and the seed, and need not add up to "
        "the score."
    ),
    "shap": (
        "SHAP averages each token's effect over coalitions of the other tokens (Owen values on a "
        "tree of words for the partition explainer). It assumes a removed token is an absent one. "
        "The values add up: base value f(no tokens) + sum = f(x); an effect two tokens have only "
        "together is split between them."
    ),
    "ig": (
        "Integrated gradients integrates the gradient along the straight line from a baseline x' "
        "(all zeros, or pad tokens) to the token vectors x entering block 0. It assumes x' means "
        "'no information' and that the path in between stays where the model is sensible; the "
        "scores sum to F(x) - F(x') (completeness, checked). A decoder's first token is its "
        "attention sink: scaling it towards zero changes where every later position looks, the "
        "score jumps along the path and completeness fails unless the first token is held fixed."
    ),
    "gxi": (
        "Gradient x input is the first-order Taylor term of F around x = 0, from one backward "
        "pass. It is exact only when F is linear in x; a saturated score (a probability near 1) "
        "has small gradients however much its tokens matter."
    ),
    "occlusion": (
        "Occlusion removes one token at a time: f(x) - f(x without token i). It assumes tokens act "
        "alone: two tokens that back each other up each look unimportant, and a token that "
        "matters only together with another is missed."
    ),
}

DISAGREEMENT = (
    "The gradient methods move the vectors entering the first block continuously, from x' to x; "
    "LIME, SHAP and occlusion delete whole tokens, which shifts the positions after them and makes "
    "inputs the model never saw. They agree on tokens whose effect is large and adds up; they part "
    "where tokens interact (one backs up another, or two matter only together) and on a decoder's "
    "first token, the attention sink, which the gradient methods can only hold fixed."
)


def explain_tokens(
    model: LanguageModel | TextClassifier,
    text: str,
    method: str,
    target: TargetSpec = None,
    *,
    keep_first: bool = False,
    samples: int | None = None,
    seed: int = 0,
    replacement: str | int = "remove",
) -> Attribution:
    """Scores of ``method`` (one of `METHODS`) for each token of ``text``.

    ``keep_first``: hold the first token fixed (a decoder's attention sink): integrated
    gradients' baseline keeps its vector, and the perturbation methods never remove it;
    its score is 0. ``samples``: LIME's samples / SHAP's evaluations (default 500).
    ``replacement``: how the perturbation methods make a token absent (see `masked_score`).
    ``extra["notes"]`` ends with what the method assumes.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r}; allowed values: {', '.join(METHODS)}")
    keep = [0] if keep_first else []
    budget = 500 if samples is None else samples
    if method in ("lime", "shap", "occlusion"):
        f = masked_score(model, text, target, replacement=replacement, keep=keep)
        if method == "lime":
            result = lime_of(f, samples=budget, seed=seed)
        elif method == "shap":
            result = shap_of(f, max_evals=budget, seed=seed)
        else:
            result = occlusion_of(f)
    else:
        if isinstance(model, TextClassifier):
            raise ValueError(
                f"{NAMES[method]} needs the model's gradients, and a TextClassifier is only its "
                "predict_proba; use lime, shap or occlusion (or label_probability on the model itself)"
            )
        result = _gradient_method(model, text, method, target, keep)
    result.extra.setdefault("notes", []).append(ASSUMPTIONS[method])
    return result


def occlusion_of(f: MaskedScore) -> Attribution:
    """a_i = f(1) - f(1 - e_i): the score's drop when token i alone is absent (0 for the
    tokens held fixed). For a language model with ``replacement="remove"`` this is
    `glassformer.inspect.attribution.occlusion` with the tokenizer's special tokens kept."""
    m = len(f.free)
    z = np.vstack([np.ones((1, m)), 1 - np.eye(m)])  # the whole input, then each token absent
    scores = f(z)
    extra = {"score": float(scores[0]), "notes": [f"each token alone absent; {describe(f)}"]}
    return Attribution(f.tokens, f.spread(scores[0] - scores[1:]), "occlusion", f.what, extra)


def _gradient_method(lm: LanguageModel, text: str, method: str, target: TargetSpec, keep: list[int]):
    ids = lm.inputs.single(text)
    tgt = lm_target(lm, target, ids)
    if method == "gxi":
        result = gradient_x_input(lm, text, tgt)
        if keep:  # a token held fixed contributes nothing, as in every other method
            result.scores[keep] = 0.0
            result.extra["notes"] = [f"positions {keep} held fixed (score 0)"]
        return result
    # From pad tokens where the model has one: the perturbation methods' "absent token" is
    # a token too, and near x' = 0 a norm of a vanishing vector turns sharply (SmolLM2 on
    # "Water freezes at zero degrees", sink held fixed, 288 steps: 38% completeness error
    # from zeros, 0.00% from pad tokens; benchmarks/explanation_agreement.py).
    try:
        special_id(lm, "pad")
        baseline = "pad"
    except ValueError:
        baseline = "zeros"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = integrated_gradients(lm, text, tgt, baseline=baseline, keep=keep, max_steps=300)
    # Non-convergence is part of the answer: it goes into the notes the page and CLI show.
    result.extra["notes"] += [str(w.message) for w in caught if "integrated gradients" in str(w.message)]
    return result
