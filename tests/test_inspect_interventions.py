"""Head ablation and activation patching on tiny models: constructed cases, known answers."""

from __future__ import annotations

import pytest
import torch

import glassformer as gf
from glassformer.inspect.interventions import (
    ablate_head,
    head_ablation_hook,
    patch_activation,
    patching_sweep,
)
from tests.conftest import tiny_model

CLEAN = [3, 4, 5, 6, 7]
CORRUPT = [3, 4, 9, 6, 7]  # differs at position 2 only
TARGET = 11


def decoder(**overrides) -> gf.LanguageModel:
    return gf.LanguageModel(tiny_model(**overrides))


def last_logit(lm, ids, hooks=None) -> float:
    with torch.no_grad(), lm.net.hooks(hooks or {}):
        return float(lm.net(torch.tensor([ids]))[0, -1, TARGET])


def test_zero_ablating_a_head_with_zero_output_weights_changes_nothing():
    lm = decoder()
    e = lm.config.d_head
    with torch.no_grad():
        lm.net.stack.blocks[1].attn.o_proj.weight[:, 2 * e : 3 * e] = 0.0  # head 2 writes nothing
    silent = ablate_head(lm, CLEAN, layer=1, head=2, target=TARGET)
    assert silent.after == pytest.approx(silent.before, abs=1e-6)
    assert silent.before == pytest.approx(last_logit(lm, CLEAN), abs=1e-6)
    loud = ablate_head(lm, CLEAN, layer=1, head=1, target=TARGET)
    assert abs(loud.difference) > 1e-4
    assert "zero-ablated layer 1 head 1" in str(loud)


def test_ablating_every_head_removes_the_attention_output():
    lm = decoder(out_bias=False)  # W_O z with z = 0 is then exactly 0
    effect = ablate_head(lm, CLEAN, layer=0, head=range(4), target=TARGET)
    removed = last_logit(lm, CLEAN, {"blocks.0.attn.out": lambda x, _: torch.zeros_like(x)})
    assert effect.after == pytest.approx(removed, abs=1e-6)


def test_the_ablation_hook_touches_only_its_head():
    lm = decoder()
    name = "blocks.1.attn.z"
    clean = lm.trace(CLEAN, name)[name]
    seen = {}
    with lm.net.hooks({name: head_ablation_hook([1], "mean")}):  # runs first
        with lm.net.hooks({name: lambda z, _: seen.setdefault("z", z.clone())}):
            lm.logits(CLEAN)
    z = seen["z"]  # b h t e
    others = [0, 2, 3]
    assert torch.equal(z[:, others], clean[:, others])
    expected = clean[:, 1].mean(dim=1, keepdim=True).expand_as(clean[:, 1])  # the head's mean over positions
    torch.testing.assert_close(z[:, 1], expected)


def test_mean_ablation_over_a_reference_batch():
    lm = decoder()
    own = ablate_head(lm, CLEAN, 1, 3, mode="mean", target=TARGET)
    same = ablate_head(lm, CLEAN, 1, 3, mode="mean", target=TARGET, reference=[CLEAN])
    assert same.after == pytest.approx(own.after, abs=1e-6)  # the reference is the text itself
    other = ablate_head(lm, CLEAN, 1, 3, mode="mean", target=TARGET, reference=[[1, 2], [8, 9, 10]])
    assert other.after != pytest.approx(own.after, abs=1e-6)
    assert "reference mean" in other.intervention


def test_patching_the_whole_last_residual_stream_recovers_the_clean_output():
    lm = decoder()
    last = f"blocks.{lm.config.n_layers - 1}.resid_post"
    effect = patch_activation(lm, CLEAN, CORRUPT, last, target=TARGET)
    assert effect.patched == effect.clean and effect.recovered == 1.0
    assert effect.corrupt != effect.clean
    # logits depend on the last position alone after the last block
    only_last = patch_activation(lm, CLEAN, CORRUPT, last, positions=[4], target=TARGET)
    assert only_last.patched == pytest.approx(effect.clean, abs=1e-6)
    unchanged = patch_activation(lm, CLEAN, CORRUPT, last, positions=[0, 1, 2, 3], target=TARGET)
    assert unchanged.patched == pytest.approx(effect.corrupt, abs=1e-6)


def test_patching_heads_and_positions_of_a_per_head_activation():
    lm = decoder()
    name = "blocks.0.attn.z"
    everything = patch_activation(lm, CLEAN, CORRUPT, name, heads=[0, 1, 2, 3], target=TARGET)
    whole = patch_activation(lm, CLEAN, CORRUPT, name, target=TARGET)
    assert everything.patched == pytest.approx(whole.patched, abs=1e-6)
    # before position 2 the corrupt token is not yet visible (causal): patching there changes nothing
    early = patch_activation(lm, CLEAN, CORRUPT, name, positions=[0, 1], heads=[1], target=TARGET)
    assert early.patched == pytest.approx(early.corrupt, abs=1e-6)


def test_patching_sweep_known_answers():
    lm = decoder()
    sweep = patching_sweep(lm, CLEAN, CORRUPT, TARGET, "resid_pre")
    assert sweep.values.shape == (2, 5) and sweep.rows == ["embed.out", "blocks.0.resid_post"]
    # layer 0, position 2: the whole input becomes the clean one; elsewhere clean = corrupt
    assert float(sweep.values[0, 2]) == pytest.approx(1.0, abs=1e-4)
    assert torch.allclose(sweep.values[0, [0, 1, 3, 4]], torch.zeros(4), atol=1e-4)
    post = patching_sweep(lm, CLEAN, CORRUPT, TARGET, "resid_post")
    assert float(post.values[-1, -1]) == pytest.approx(1.0, abs=1e-4)  # the last stream at the last position
    assert "'5'|'9'" in str(sweep)
    heads = patching_sweep(lm, CLEAN, CORRUPT, TARGET, "attn.z")
    assert heads.values.shape == (2, 4) and heads.columns[0] == "head 0"
    single = patch_activation(lm, CLEAN, CORRUPT, "blocks.1.attn.z", heads=[3], target=TARGET)
    assert float(heads.patched[1, 3]) == pytest.approx(single.patched, abs=1e-5)


def test_other_families():
    seq2seq = gf.LanguageModel(tiny_model(family="encoder_decoder", decoder_start_token_id=0))
    effect = ablate_head(seq2seq, CLEAN, 1, 0, target=TARGET)
    assert effect.before != effect.after
    sweep = patching_sweep(seq2seq, CLEAN, CORRUPT, TARGET)
    assert sweep.rows[0] == "encoder.embed.out" and float(sweep.values[0, 2]) == pytest.approx(1.0, abs=1e-4)
    sentence = gf.LanguageModel(tiny_model(family="encoder", mlm_head=False))
    direction = torch.randn(32)
    score = lambda hidden: hidden[0].mean(0) @ direction  # noqa: E731
    assert ablate_head(sentence, CLEAN, 0, 1, target=score).difference != 0
    with pytest.raises(ValueError, match="no masked-LM head"):
        ablate_head(sentence, CLEAN, 0, 1, target=TARGET)


def test_top_prediction_is_the_default_target():
    lm = decoder()
    top = int(lm.logits(CLEAN)[0, -1].argmax())
    assert ablate_head(lm, CLEAN, 0, 0).target == f"logit of id {top} at the last position"


def test_bad_input_is_a_clear_error():
    lm = decoder()
    with pytest.raises(ValueError, match="layer=2 is out of range: this model has 2 layers"):
        ablate_head(lm, CLEAN, 2, 0)
    with pytest.raises(ValueError, match="head 4 is out of range: attention has 4 heads"):
        ablate_head(lm, CLEAN, 0, 4)
    with pytest.raises(ValueError, match="mode="):
        ablate_head(lm, CLEAN, 0, 0, mode="random")
    with pytest.raises(ValueError, match="same token count"):
        patch_activation(lm, CLEAN, CLEAN[:-1], "blocks.0.resid_post")
    with pytest.raises(ValueError, match="no activation named"):
        patch_activation(lm, CLEAN, CORRUPT, "blocks.7.resid_post")
    with pytest.raises(ValueError, match="no head dimension"):
        patch_activation(lm, CLEAN, CORRUPT, "blocks.0.resid_post", heads=[0])
    with pytest.raises(ValueError, match="out of range"):
        patch_activation(lm, CLEAN, CORRUPT, "blocks.0.resid_post", positions=[5])
    with pytest.raises(ValueError, match="activation="):
        patching_sweep(lm, CLEAN, CORRUPT, activation="logits")
    with pytest.raises(ValueError, match="max_seq_len"):
        patching_sweep(lm, [1] * 65, [2] * 65)
