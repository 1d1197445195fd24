"""What we wrote by hand against Captum, on the same tiny models, inputs and scores.

Captum is handed F as a function of what each method perturbs: the stream entering
block 0 (`attribution.stream_function`) for the gradient methods, the token ids for
occlusion. The tolerances, and why:

* integrated gradients, both on the midpoint rule with the same steps: the same gradients
  at the same points, summed in another order: float32 rounding only, 1e-6 absolute and
  1e-5 relative (scores here are ~1e-1; measured: 3e-8). Against Captum's default rule
  (Gauss-Legendre, 50 points) with ours refined until completeness holds to 1e-4: two
  quadratures of one integral, each within ~1e-4 of it on these smooth tiny models: 1e-4
  of the largest score (measured: 1.2e-5).
* gradient x input is Captum's ``InputXGradient`` now; it is checked against the product
  grad * x from plain autograd: 1e-6 (measured: equal).
* occlusion against Captum's ``FeatureAblation`` and ``Occlusion`` (one token, the same
  replacement id): the same forward passes in other batch sizes: 1e-6 (measured: 1e-8).
"""

from __future__ import annotations

import pytest
import torch
from captum.attr import FeatureAblation, IntegratedGradients, Occlusion

import glassformer as gf
from glassformer.inspect import gradient_x_input, integrated_gradients, next_token_probability, occlusion
from glassformer.inspect.attribution import _embedding, stream_function
from glassformer.inspect.targets import make_target
from glassformer.tokenizers.char import CharTokenizer
from glassformer.tokenizers.wordpiece import WordPiece
from tests.conftest import tiny_model

CHARS = "abcdefghij "
TEXT = "abc dea"
PAD = len(CHARS) - 1  # 'j' doubles as the pad token
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "a"]


@pytest.fixture(scope="module")
def lm() -> gf.LanguageModel:
    # Llama-style (RoPE, RMSNorm, SwiGLU, grouped-query attention), as SmolLM2
    net = tiny_model(
        vocab_size=len(CHARS),
        pad_token_id=PAD,
        positions="rope",
        norm="rmsnorm",
        activation="swiglu",
        n_kv_heads=2,
    )
    return gf.LanguageModel(net, CharTokenizer.from_text(CHARS))


def captum_parts(lm, text, target):
    """(ids 1 t, the Target, x = embed.out 1 t d, F as a function of x)."""
    ids = lm.ids(text)
    tgt = make_target(lm, target, ids)
    return ids, tgt, _embedding(lm, ids, None), stream_function(lm, ids, None, tgt)


@pytest.mark.parametrize("target", ["e", "probability"])
@pytest.mark.parametrize(("baseline", "keep"), [("zeros", []), ("pad", []), ("zeros", [0])])
def test_integrated_gradients_equals_captum_on_the_same_rule(lm, target, baseline, keep):
    target = next_token_probability(lm, "e") if target == "probability" else target
    ids, _, x, forward = captum_parts(lm, TEXT, target)
    ours = integrated_gradients(
        lm, TEXT, target, steps=16, max_steps=16, baseline=baseline, keep=keep, tolerance=1
    )
    x0 = torch.zeros_like(x) if baseline == "zeros" else _embedding(lm, torch.full_like(ids, PAD), None)
    x0[:, keep] = x[:, keep]
    theirs = IntegratedGradients(forward).attribute(x, baselines=x0, n_steps=16, method="riemann_middle")
    torch.testing.assert_close(ours.scores, theirs.sum(-1)[0], atol=1e-6, rtol=1e-5)


def test_integrated_gradients_agrees_with_captums_default_rule(lm):
    _, _, x, forward = captum_parts(lm, TEXT, "e")
    ours = integrated_gradients(lm, TEXT, "e", tolerance=1e-4)  # midpoint steps triple until complete
    theirs, delta = IntegratedGradients(forward).attribute(
        x, baselines=torch.zeros_like(x), return_convergence_delta=True
    )  # Gauss-Legendre, 50 points
    assert abs(float(delta)) < 1e-4 * abs(ours.extra["score"] - ours.extra["baseline_score"]) + 1e-6
    top = float(ours.scores.abs().max())
    torch.testing.assert_close(ours.scores, theirs.sum(-1)[0], atol=1e-4 * top, rtol=0)


def test_gradient_x_input_is_the_autograd_product(lm):
    ids, tgt, x, forward = captum_parts(lm, TEXT, "e")
    leaf = x.clone().requires_grad_(True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(forward(leaf).sum(), leaf)
    ours = gradient_x_input(lm, TEXT, "e")
    torch.testing.assert_close(ours.scores, (grad * x).sum(-1)[0], atol=1e-6, rtol=1e-6)
    with torch.no_grad():
        assert ours.extra["score"] == pytest.approx(float(tgt(lm.net(ids), ids)[0]), abs=1e-6)


@pytest.mark.parametrize("target", ["e", "probability"])
def test_occlusion_equals_captum(lm, target):
    target = next_token_probability(lm, "e") if target == "probability" else target
    ids, tgt, _, _ = captum_parts(lm, TEXT, target)
    by_ids = lambda rows: tgt(lm.net(rows), rows)  # noqa: E731
    ours = occlusion(lm, TEXT, target, replacement=PAD)
    with torch.no_grad():
        ablation = FeatureAblation(by_ids).attribute(
            ids, baselines=PAD, feature_mask=torch.arange(ids.shape[1])[None]
        )
        window = Occlusion(by_ids).attribute(ids, sliding_window_shapes=(1,), baselines=PAD)
    torch.testing.assert_close(ours.scores, ablation[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(ours.scores, window[0], atol=1e-6, rtol=0)


def test_occlusion_of_a_masked_lm_equals_captum():
    lm = gf.LanguageModel(tiny_model(family="encoder", vocab_size=len(WORDS)), WordPiece(WORDS))
    text = "the cat [MASK] on the mat"
    ids = lm.ids(text)
    tgt = make_target(lm, "sat", ids)
    masked = int((ids[0] == WORDS.index("[MASK]")).int().argmax())
    ours = occlusion(lm, text, "sat", replacement="unk")
    with torch.no_grad():
        theirs = FeatureAblation(lambda rows: tgt(lm.net(rows), rows)).attribute(
            ids, baselines=WORDS.index("[UNK]"), feature_mask=torch.arange(ids.shape[1])[None]
        )[0]
    others = [i for i in range(ids.shape[1]) if i != masked]  # ours leaves the scored [MASK] alone
    torch.testing.assert_close(ours.scores[others], theirs[others], atol=1e-6, rtol=0)
    assert torch.isnan(ours.scores[masked])
