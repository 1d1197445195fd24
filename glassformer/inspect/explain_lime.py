"""LIME over the model's own tokens, with the `lime` package's `LimeTextExplainer`.

LIME (Ribeiro, Singh & Guestrin, 2016, "Why should I trust you?") explains f near the
input x by a linear model of which tokens are present. It draws n masks z in {0, 1}^m
(z = 1 first; then for each sample a size k uniform in 1..m and k tokens removed at random),
scores them, f(z) (`glassformer.inspect.explanations.MaskedScore`), and fits

    g(z) = b + sum_i w_i z_i,   (w, b) = argmin  sum_z pi(z) (f(z) - g(z))^2 + alpha |w|^2

with the proximity weight pi(z) = sqrt(exp(-D(1, z)^2 / sigma^2)), D the cosine distance
between z and the all-ones mask times 100, sigma = ``kernel_width`` (25) and alpha = 1
(scikit-learn's Ridge). The score of token i is w_i: how much f moves, in this local linear
fit, when token i is there. The weights need not add up to anything (unlike SHAP), and a
fit of few samples to many tokens is noisy: ``extra["r2"]`` is the fit's weighted R^2.

`LimeTextExplainer` perturbs strings. It is handed one word per free token, its position
(``"0 1 2 ..."``), and each perturbed string names the tokens it kept: the ids are masked
by us, never re-tokenized, so every score belongs to a token the model saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from glassformer.inspect.attribution import Attribution
from glassformer.inspect.explanations import TextClassifier
from glassformer.inspect.masked_score import MaskedScore, describe, masked_score
from glassformer.inspect.targets import TargetSpec

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

ABSENT = "_"  # the word LIME writes where a token is removed


def lime_weights(
    model: LanguageModel | TextClassifier,
    text: str,
    target: TargetSpec = None,
    *,
    samples: int = 500,
    seed: int = 0,
    kernel_width: float = 25.0,
    replacement: str | int = "remove",
    keep: Sequence[int] = (),
) -> Attribution:
    """LIME's weight w_i for each token of ``text`` (0 for the tokens held fixed).

    ``model`` and ``target``: a language model and a token (the probability of that next
    token; None: the top prediction), a sentence encoder and a second sentence (their cosine
    similarity), or a `TextClassifier` and a label (see `masked_score`). ``samples``: masks
    scored (the model runs on each); ``seed`` makes the draw repeatable.
    """
    if samples < 2:
        raise ValueError(f"samples={samples}: LIME needs at least 2 (the input and one perturbation)")
    f = masked_score(model, text, target, replacement=replacement, keep=keep)
    return lime_of(f, samples=samples, seed=seed, kernel_width=kernel_width)


def lime_of(f: MaskedScore, *, samples: int = 500, seed: int = 0, kernel_width: float = 25.0) -> Attribution:
    """`lime_weights` for a `MaskedScore` already built."""
    from lime.lime_text import LimeTextExplainer  # the package is slow to import: on first use

    m = len(f.free)

    def predict(strings: list[str]) -> np.ndarray:
        z = np.array([[word != ABSENT for word in s.split(" ")] for s in strings], dtype=float)  # n m
        return f(z)[:, None]  # n x 1: one "class", the score

    explainer = LimeTextExplainer(
        class_names=[f.what],
        kernel_width=kernel_width,
        bow=False,  # a feature per position, not per distinct word
        split_expression=" ",
        mask_string=ABSENT,
        feature_selection="none",  # every token gets a weight
        random_state=seed,
    )
    words = " ".join(str(i) for i in range(m))
    explanation = explainer.explain_instance(words, predict, labels=(0,), num_features=m, num_samples=samples)
    weights = np.zeros(m)
    for feature, weight in explanation.as_map()[0]:
        weights[int(explanation.domain_mapper.indexed_string.word(feature))] = weight
    full = float(explanation.predict_proba[0])
    notes = [
        f"weighted linear fit of {samples} perturbations: R^2 = {explanation.score:.3f}, "
        f"g(1) = {float(explanation.local_pred[0]):.4g} for f(x) = {full:.4g}; {describe(f)}; seed {seed}"
    ]
    extra = {
        "score": full,
        "intercept": float(explanation.intercept[0]),
        "r2": float(explanation.score),
        "samples": samples,
        "seed": seed,
        "notes": notes,
    }
    return Attribution(f.tokens, f.spread(weights), "LIME", f.what, extra)
