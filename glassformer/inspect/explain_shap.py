"""SHAP over the model's own tokens, with the `shap` package's Partition and Kernel explainers.

The Shapley value of token i (Lundberg & Lee, 2017, after Shapley, 1953) shares f(1) - f(0)
among the tokens by averaging i's marginal effect over coalitions S of the other tokens:

    phi_i = sum_{S not containing i} |S|! (m - |S| - 1)! / m!  [f(S + i) - f(S)]

Its defining property, **additivity** (efficiency): the values and the base value add up
to the model's output,

    f(0) + sum_i phi_i = f(1)          (base value f(0): every free token absent)

which ``extra["additivity_error"]`` checks. Exact values need 2^m evaluations; two
approximations (``algorithm``):

* ``"partition"`` (`shap.PartitionExplainer`, the one SHAP uses for text): Owen values on
  a hierarchy of the tokens, here word pieces joined into words and neighbouring words
  into balanced groups, as the `shap.maskers.Text` masker's tree joins a text's pieces.
  Deterministic; additive at any ``max_evals`` (a group not split further shares its
  effect among its tokens).
* ``"kernel"`` (`shap.KernelExplainer`): Kernel SHAP, the weighted linear regression
  g(z) = phi_0 + sum_i phi_i z_i with the Shapley kernel weight
  pi(z) = (m - 1) / (C(m, |z|) |z| (m - |z|)) and additivity imposed as a constraint;
  samples masks at random (``seed``).

Masking (`glassformer.inspect.explanations.MaskedScore`): a token is absent when it is
removed (or replaced) from the model's own ids; shap sees an input row of ids and a
background row of -1s, and a -1 means "absent". Nothing is re-tokenized.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from glassformer.inspect.attribution import Attribution
from glassformer.inspect.explanations import TextClassifier
from glassformer.inspect.masked_score import MaskedScore, describe, masked_score
from glassformer.inspect.targets import TargetSpec

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

ALGORITHMS = ("partition", "kernel")
ABSENT = -1  # the background value: this token is absent


def shap_values(
    model: LanguageModel | TextClassifier,
    text: str,
    target: TargetSpec = None,
    *,
    algorithm: str = "partition",
    max_evals: int = 500,
    seed: int = 0,
    replacement: str | int = "remove",
    keep: Sequence[int] = (),
) -> Attribution:
    """The SHAP value phi_i of each token of ``text`` (0 for the tokens held fixed).

    ``model`` and ``target`` as in `glassformer.inspect.explain_lime.lime_weights`.
    ``max_evals``: model evaluations allowed (the Kernel explainer's ``nsamples``; at most
    2^m are ever useful). ``extra``: ``base_value`` f(0), ``score`` f(1) and the
    ``additivity_error`` |f(0) + sum phi - f(1)|.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}; allowed values: {', '.join(ALGORITHMS)}")
    if max_evals < 2:
        raise ValueError(f"max_evals={max_evals}: SHAP needs at least the input and the base value")
    f = masked_score(model, text, target, replacement=replacement, keep=keep)
    return shap_of(f, algorithm=algorithm, max_evals=max_evals, seed=seed)


def shap_of(
    f: MaskedScore, *, algorithm: str = "partition", max_evals: int = 500, seed: int = 0
) -> Attribution:
    """`shap_values` for a `MaskedScore` already built."""
    with warnings.catch_warnings():  # shap's colour maps use a deprecated matplotlib call
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        import shap  # slow to import: on first use

    m = len(f.free)
    x = np.arange(m)[None]  # 1 m: each feature names its free position, so a -1 marks it absent
    background = np.full((1, m), ABSENT)

    def model(rows: np.ndarray) -> np.ndarray:
        return f(rows != ABSENT)  # n

    if algorithm == "partition":
        masker = shap.maskers.Partition(background, clustering=word_tree([f.tokens[i] for i in f.free]))
        found = shap.PartitionExplainer(model, masker)(x, max_evals=max_evals, silent=True)
        values, base = found.values[0], float(np.asarray(found.base_values).reshape(-1)[0])
    else:
        explainer = shap.KernelExplainer(model, background)
        with _numpy_seed(seed):  # the Kernel explainer draws from numpy's global generator
            values = explainer.shap_values(x, nsamples=max_evals, l1_reg=False, silent=True)[0]
        base = float(np.asarray(explainer.expected_value).reshape(-1)[0])
    full = f.full()
    total = base + float(np.sum(values))
    error = abs(total - full)
    notes = [
        f"{algorithm} explainer: base value f(0) = {base:.4g}, f(0) + sum = {total:.4g}, "
        f"f(x) = {full:.4g} (additivity error {error:.1e}); {describe(f)}"
    ]
    extra = {
        "score": full,
        "base_value": base,
        "additivity_error": error,
        "algorithm": algorithm,
        "max_evals": max_evals,
        "notes": notes,
    }
    return Attribution(f.tokens, f.spread(values), f"SHAP ({algorithm})", f.what, extra)


def word_tree(tokens: Sequence[str]) -> np.ndarray:
    """A hierarchy of contiguous tokens as a linkage matrix (m - 1 x 4: left, right, height,
    size; SciPy's format): a token that continues a word (WordPiece's ``##`` pieces; for
    tokenizers that spell a word's space, a piece that starts with a letter or digit) joins
    the word before it first, then neighbouring groups join pairwise, smallest first, until
    one group holds the text.

    >>> word_tree(["The", " cat", "s", " sat"])[:, :2].tolist()  # 's' joins ' cat' first
    [[1.0, 2.0], [0.0, 4.0], [5.0, 3.0]]
    >>> word_tree(["the", "cat", "##s", "sat"])[:, :2].tolist()  # WordPiece
    [[1.0, 2.0], [0.0, 4.0], [5.0, 3.0]]
    """
    m = len(tokens)
    groups = [(i, 1) for i in range(m)]  # (node index, size), left to right
    rows: list[list[float]] = []

    def join(k: int) -> None:
        (left, a), (right, b) = groups[k], groups[k + 1]
        rows.append([left, right, 0.0, a + b])
        groups[k : k + 2] = [(m + len(rows) - 1, a + b)]

    spaced = any(token[:1].isspace() for token in tokens[1:])  # byte-level BPE, characters
    continues = [t.startswith("##") or (spaced and t[:1].isalnum()) for t in tokens]
    for i in range(m - 1, 0, -1):  # right to left, so the indices before i stay put
        if continues[i]:
            join(i - 1)
    while len(groups) > 1:
        sizes = [groups[k][1] + groups[k + 1][1] for k in range(len(groups) - 1)]
        join(int(np.argmin(sizes)))
    tree = np.array(rows, dtype=float).reshape(-1, 4)
    tree[:, 2] = tree[:, 3] / max(m, 1)  # height grows with size, as shap's Text masker sets it
    return tree


@contextmanager
def _numpy_seed(seed: int):
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)
