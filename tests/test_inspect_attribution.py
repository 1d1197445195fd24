"""Attributions on tiny models, against constructed cases with known answers."""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.inspect.attribution import (
    attention_x_gradient,
    gradient_x_input,
    integrated_gradients,
    occlusion,
)
from glassformer.tokenizers.char import CharTokenizer
from glassformer.tokenizers.wordpiece import WordPiece
from tests.conftest import tiny_model

CHARS = "abcdefghij "
TEXT = "abc dea"
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "a"]


def decoder(**overrides) -> gf.LanguageModel:
    return gf.LanguageModel(tiny_model(vocab_size=len(CHARS), **overrides), CharTokenizer.from_text(CHARS))


def mlm_encoder() -> gf.LanguageModel:
    net = tiny_model(family="encoder", vocab_size=len(WORDS), norm_placement="post", embed_norm=True)
    return gf.LanguageModel(net, WordPiece(WORDS))


def score_at(lm, ids, target_id, stream=None):
    """F computed directly: the target's logit at the last position (embed.out replaced)."""
    hooks = {"embed.out": lambda x, _: stream} if stream is not None else {}
    with torch.no_grad(), lm.net.hooks(hooks):
        return float(lm.net(ids)[0, -1, target_id])


@pytest.mark.parametrize("baseline", ["zeros", "pad"])
def test_integrated_gradients_completeness(baseline):
    lm = decoder(pad_token_id=len(CHARS) - 1)
    result = integrated_gradients(lm, TEXT, "e", baseline=baseline)
    ids = lm.ids(TEXT)
    target = lm.tokenizer.encode("e")[0]
    x0 = (
        torch.zeros(1, ids.shape[1], 32)
        if baseline == "zeros"
        else lm.trace([10] * 7, "embed.out")["embed.out"]
    )
    expected = score_at(lm, ids, target) - score_at(lm, ids, target, x0)  # F(x) - F(x'), independently
    assert result.extra["relative_error"] < 0.01
    assert abs(float(result.scores.sum()) - expected) <= 0.01 * abs(expected)
    assert result.tokens == list(TEXT)
    assert "completeness" in str(result)
    kept = integrated_gradients(lm, TEXT, "e", baseline=baseline, keep=[0])
    assert float(kept.scores[0]) == 0.0 and kept.extra["relative_error"] < 0.01
    assert "positions [0] kept" in str(kept)


def linear_hooks(lm, mix: torch.Tensor) -> dict:
    """Hooks that make the score linear in embed.out: every sublayer adds 0, so the last
    resid_post is embed.out; it is mixed across positions by a fixed matrix, and the final
    norm is skipped. logits = W_U (mix @ embed.out)."""
    last = f"blocks.{lm.config.n_layers - 1}.resid_post"
    saved = {}

    def mix_positions(x, _):
        saved["y"] = mix @ x
        return saved["y"]

    return {
        "blocks.*.attn.out": lambda x, _: torch.zeros_like(x),
        "blocks.*.ffn.out": lambda x, _: torch.zeros_like(x),
        last: mix_positions,
        "final_norm": lambda x, _: saved["y"],
    }


def test_gradient_x_input_equals_integrated_gradients_for_a_linear_score():
    lm = decoder(lm_head_bias=False)
    mix = torch.randn(len(TEXT), len(TEXT))
    with lm.net.hooks(linear_hooks(lm, mix)):
        gxi = gradient_x_input(lm, TEXT, "e")
        ig = integrated_gradients(lm, TEXT, "e", steps=2)
    assert ig.extra["relative_error"] < 1e-5  # a linear F needs no more than the end points
    torch.testing.assert_close(gxi.scores, ig.scores, rtol=1e-5, atol=1e-5)
    assert bool((gxi.scores != 0).all())  # every position matters through the mix
    # and both sum to F(x), since F(0) = 0
    assert abs(float(gxi.scores.sum()) - gxi.extra["score"]) < 1e-4


def test_occlusion_of_an_ignored_token_is_zero():
    lm = decoder()
    ignored = 2

    def look_away(scores, _):  # no query reads the ignored key, in any layer (-inf: weight exactly 0)
        scores = scores.clone()
        scores[..., ignored] = float("-inf")
        return scores

    with lm.net.hooks({"blocks.*.attn.scores": look_away}):
        result = occlusion(lm, TEXT, "e", replacement=lm.tokenizer.encode("j")[0])
    assert abs(float(result.scores[ignored])) < 1e-6
    others = torch.cat([result.scores[:ignored], result.scores[ignored + 1 :]])
    assert bool((others.abs() > 1e-5).all())


def test_occlusion_matches_direct_runs_and_remove():
    lm = decoder(pad_token_id=len(CHARS) - 1)
    target = lm.tokenizer.encode("e")[0]
    ids = lm.ids(TEXT)
    clean = score_at(lm, ids, target)
    result = occlusion(lm, TEXT, "e")  # pad
    replaced = ids.clone()
    replaced[0, 1] = len(CHARS) - 1
    assert abs(float(result.scores[1]) - (clean - score_at(lm, replaced, target))) < 1e-5
    removed = occlusion(lm, TEXT, "e", replacement="remove")
    shorter = torch.cat([ids[:, :3], ids[:, 4:]], dim=1)
    assert abs(float(removed.scores[3]) - (clean - score_at(lm, shorter, target))) < 1e-5


def test_attention_x_gradient_shapes_and_causal_zeros():
    lm = decoder(n_kv_heads=2)  # grouped-query: one map per query head
    result = attention_x_gradient(lm, TEXT, "e")
    relevance = result.extra["map"]
    t = len(TEXT)
    assert relevance.shape == (2, 4, t, t)
    assert bool((relevance >= 0).all())
    assert bool((relevance.triu(1) == 0).all())  # causal: no attention to later keys
    torch.testing.assert_close(result.scores, relevance.sum(dim=(0, 1, 2)))
    assert result.extra["per_head"].shape == (2, 4)
    assert "most relevant head" in str(result)


def test_attention_gradient_is_the_true_gradient():
    """dF/dA by autograd, checked by nudging one attention weight through a hook."""
    lm = decoder()
    result = attention_x_gradient(lm, TEXT, "e")
    ids, target = lm.ids(TEXT), lm.tokenizer.encode("e")[0]
    layer, head, row, col, eps = 1, 2, 5, 3, 1e-3

    def nudge(sign):
        def hook(pattern, _):
            pattern = pattern.clone()
            pattern[0, head, row, col] += sign * eps
            return pattern

        with torch.no_grad(), lm.net.hooks({f"blocks.{layer}.attn.pattern": hook}):
            return float(lm.net(ids)[0, -1, target])

    gradient = (nudge(1) - nudge(-1)) / (2 * eps)
    pattern = lm.trace(TEXT, f"blocks.{layer}.attn.pattern")[f"blocks.{layer}.attn.pattern"][
        0, head, row, col
    ]
    assert float(result.extra["map"][layer, head, row, col]) == pytest.approx(
        float(pattern) * abs(gradient), rel=1e-2, abs=1e-5
    )


def test_callable_and_pair_targets():
    lm = decoder()
    e, j = lm.tokenizer.encode("e")[0], lm.tokenizer.encode("j")[0]
    by_token = gradient_x_input(lm, TEXT, "e")
    by_function = gradient_x_input(lm, TEXT, lambda logits: logits[0, -1, e])
    torch.testing.assert_close(by_token.scores, by_function.scores)
    difference = gradient_x_input(lm, TEXT, ("e", "j"))
    other = gradient_x_input(lm, TEXT, j)
    torch.testing.assert_close(difference.scores, by_token.scores - other.scores, rtol=1e-4, atol=1e-5)
    assert f"logit('e' (id {e})) - logit('j' (id {j}))" in difference.target


def test_masked_lm_encoder_target_and_occlusion():
    lm = mlm_encoder()
    text = "the cat [MASK] on the mat"
    result = integrated_gradients(lm, text, "sat", baseline="pad")
    assert result.extra["relative_error"] < 0.01
    # Zero baseline, post-norm: F(alpha x) is flat except within ~sqrt(eps) of alpha = 0, where
    # LayerNorm of a vanishing input turns; no quadrature catches that, and the check says so.
    with pytest.warns(UserWarning, match="did not converge"):
        integrated_gradients(lm, text, "sat", baseline="zeros", max_steps=64)
    assert result.tokens[0] == "[CLS]" and "masked position" in result.target
    occluded = occlusion(lm, text, "sat", replacement="mask")
    masked = result.tokens.index("[MASK]")
    assert torch.isnan(occluded.scores[masked])  # the scored token itself is not occluded
    assert bool(torch.isfinite(torch.cat([occluded.scores[:masked], occluded.scores[masked + 1 :]])).all())
    removed = occlusion(lm, text, "sat", replacement="remove")
    assert torch.isnan(removed.scores[masked]) and "n/a" in str(removed)
    with pytest.raises(ValueError, match="no mask token"):
        gradient_x_input(lm, "the cat sat", "mat")


def test_encoder_decoder_and_sentence_encoder():
    seq2seq = gf.LanguageModel(tiny_model(family="encoder_decoder", decoder_start_token_id=0))
    result = integrated_gradients(seq2seq, [3, 4, 5, 6], 7, decoder_input=[0, 9])
    assert result.extra["relative_error"] < 0.01 and len(result.scores) == 4
    assert attention_x_gradient(seq2seq, [3, 4, 5, 6], 7).extra["map"].shape == (2, 4, 4, 4)
    sentence = gf.LanguageModel(tiny_model(family="encoder", mlm_head=False))
    direction = torch.randn(32)
    score = lambda hidden: hidden[0].mean(0) @ direction  # noqa: E731
    assert occlusion(sentence, [3, 4, 5], score, replacement=1).scores.shape == (3,)
    with pytest.raises(ValueError, match="no masked-LM head"):
        gradient_x_input(sentence, [3, 4, 5], 7)


def test_bad_input_is_a_clear_error():
    lm = decoder()
    with pytest.raises(ValueError, match="is 2 tokens"):
        gradient_x_input(lm, TEXT, "ab")
    with pytest.raises(ValueError, match="max_seq_len=64"):
        occlusion(lm, "a" * 65, "e")
    with pytest.raises(ValueError, match="keep="):
        integrated_gradients(lm, TEXT, "e", keep=[7])
    with pytest.raises(ValueError, match="baseline="):
        integrated_gradients(lm, TEXT, "e", baseline="noise")
    with pytest.raises(ValueError, match="no pad token"):
        occlusion(lm, TEXT, "e")  # this config and tokenizer have no pad token
    with pytest.raises(ValueError, match="out of range"):
        gradient_x_input(lm, TEXT, 99)
    with pytest.raises(ValueError, match="decoder_input is only"):
        gradient_x_input(lm, TEXT, "e", decoder_input=[1])


def test_integrated_gradients_reports_nonconvergence():
    lm = decoder()
    with pytest.warns(UserWarning, match="did not converge"):
        result = integrated_gradients(lm, TEXT, "e", steps=1, max_steps=1, tolerance=1e-9)
    assert result.extra["steps"] == 1 and result.extra["relative_error"] > 1e-9
    with pytest.raises(ValueError, match="did not converge"):
        integrated_gradients(lm, TEXT, "e", steps=1, max_steps=1, tolerance=1e-9, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        refined = integrated_gradients(lm, TEXT, "e", steps=1, max_steps=300)  # steps triple until it holds
    assert refined.extra["steps"] in (3, 9, 27, 81, 243) and refined.extra["relative_error"] <= 0.01


def test_model_mode_is_restored():
    lm = decoder()
    lm.net.train()
    gradient_x_input(lm, TEXT, "e")
    assert lm.net.training
    assert all(p.grad is None for p in lm.net.parameters())  # no gradients left on the weights
