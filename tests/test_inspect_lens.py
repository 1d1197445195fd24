"""The logit lens: the last layer reads exactly the model's own logits, in every family;
targets, errors; SmolLM2 finds " Paris" in its late layers."""

from __future__ import annotations

import pytest
import torch

import glassformer as gf
from glassformer import inspect as gi
from glassformer.tokenizers.char import CharTokenizer
from tests.conftest import tiny_model

FAMILIES = {
    "gpt2-style decoder": dict(positions="learned", norm="layernorm", activation="gelu_tanh"),
    "llama-style decoder": dict(positions="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2),
    "bert-style encoder": dict(family="encoder", norm_placement="post", embed_norm=True, activation="gelu"),
    "t5-style encoder-decoder": dict(
        family="encoder_decoder",
        positions="t5_relative",
        norm="rmsnorm",
        activation="relu",
        lm_head_input_scale=32**-0.5,
        decoder_start_token_id=0,
    ),
    "original encoder-decoder (post-norm)": dict(
        family="encoder_decoder", positions="sinusoidal", norm_placement="post", decoder_start_token_id=0
    ),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Small models run no faster on more threads, and on a busy machine extra threads
    wait on each other (SmolLM2's lens here: ~4 s on one thread, ~14 s on two)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("overrides", FAMILIES.values(), ids=FAMILIES.keys())
def test_the_last_layer_of_the_lens_is_the_models_own_prediction(overrides):
    lm = gf.LanguageModel(tiny_model(**overrides))
    ids = [5, 9, 2, 40, 17, 3]
    decoder_input = [0, 7, 8] if lm.config.family == "encoder_decoder" else None
    lens = gi.logit_lens(lm, ids, k=4, target=11, decoder_input=decoder_input)
    n_blocks = lm.config.n_layers
    assert len(lens.layers) == n_blocks + 1 and lens.layers[-1].endswith(f"blocks.{n_blocks - 1}.resid_post")
    args = (ids, decoder_input) if decoder_input is not None else (ids,)
    probs = lm.logits(*args)[0].softmax(-1)  # t v
    top = probs.topk(4, dim=-1)
    assert torch.equal(lens.top_ids[-1], top.indices)
    torch.testing.assert_close(lens.top_probs[-1], top.values, atol=1e-5, rtol=0)
    torch.testing.assert_close(lens.target_probs[-1], probs[:, 11], atol=1e-5, rtol=0)
    expected_rank = 1 + (probs > probs[:, 11:12]).sum(-1)
    assert torch.equal(lens.target_ranks[-1], expected_rank)
    # every layer: probabilities are sorted, and a top-1 target would have rank 1
    assert bool((lens.top_probs[..., :-1] >= lens.top_probs[..., 1:]).all())
    assert bool(((lens.top_ids[..., 0] == 11) == (lens.target_ranks == 1)).all())
    entropy = -(probs * probs.log()).sum(-1)  # t, nats
    torch.testing.assert_close(lens.entropy[-1], entropy, atol=1e-5, rtol=1e-5)
    # reading only some positions gives those rows of the whole lens
    last = gi.logit_lens(lm, ids, k=4, target=11, decoder_input=decoder_input, positions=[-1, 0])
    for field in ("top_ids", "top_probs", "target_ranks", "target_probs", "entropy"):
        whole, part = getattr(lens, field), getattr(last, field)
        torch.testing.assert_close(part, whole[:, [-1, 0]], atol=1e-6, rtol=0)


def test_the_lens_reads_earlier_layers_through_the_same_head():
    lm = gf.LanguageModel(tiny_model(positions="rope", norm="rmsnorm"))
    ids = [5, 9, 2, 40]
    trace = lm.trace(ids, names=["embed.out", "blocks.0.resid_post"])
    lens = gi.logit_lens(lm, ids, k=3)
    for layer, name in enumerate(["embed.out", "blocks.0.resid_post"]):
        with torch.no_grad():  # the head by hand: final RMSNorm, then the tied unembedding
            x = trace[name][0]
            normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + lm.config.norm_eps)
            logits = (normed * lm.net.output_stack.final_norm.weight) @ lm.net.token_embedding.weight.T
        top = logits.softmax(-1).topk(3, dim=-1)
        assert torch.equal(lens.top_ids[layer], top.indices)
        torch.testing.assert_close(lens.top_probs[layer], top.values, atol=1e-5, rtol=0)


def test_targets_as_text_and_the_errors():
    tokenizer = CharTokenizer.from_text("abcdefghij ")
    lm = gf.LanguageModel(tiny_model(vocab_size=tokenizer.vocab_size, max_seq_len=16), tokenizer)
    lens = gi.logit_lens(lm, "abc", k=2, target="d")
    assert lens.target_id == tokenizer.encode("d")[0] and lens.target_token == "d"
    assert lens.tokens == ["a", "b", "c"] and len(lens.top(1)) == 2
    assert "'d' rank" in str(lens)
    with pytest.raises(ValueError, match=r"target 'de' is 2 tokens \['d', 'e'\], not one"):
        gi.logit_lens(lm, "abc", target="de")
    with pytest.raises(ValueError, match="target id 99 is out of range for vocab_size=11"):
        gi.logit_lens(lm, "abc", target=99)
    with pytest.raises(ValueError, match="has 21 tokens, more than max_seq_len=16"):
        gi.logit_lens(lm, "abcdefghij abcdefghij")
    with pytest.raises(ValueError, match=r"layer=3 is out of range: the lens has 3 layers"):
        lens.top(3)
    with pytest.raises(ValueError, match="position=5 is out of range for 3 tokens"):
        lens.top(0, position=5)
    with pytest.raises(ValueError, match="k must be"):
        gi.logit_lens(lm, "abc", k=0)
    with pytest.raises(ValueError, match="decoder_input is only for encoder-decoder"):
        gi.logit_lens(lm, "abc", decoder_input=[1])


def test_a_sentence_encoder_without_an_lm_head_is_refused():
    lm = gf.LanguageModel(tiny_model(family="encoder", mlm_head=False))
    with pytest.raises(ValueError, match="needs an LM head"):
        gi.logit_lens(lm, [1, 2, 3])


def test_smollm2_finds_paris_in_its_late_layers():
    """The real model (135M parameters, loaded from its PyPI package in ~5 s)."""
    try:
        smol = gf.load("smollm2-135m-instruct")
    except (FileNotFoundError, ModuleNotFoundError, ImportError) as error:
        pytest.skip(f"SmolLM2 is not installed: {error}")
    lens = gi.logit_lens(smol, "The capital of France is", k=3, target=" Paris")
    ranks = lens.target_ranks[:, -1].tolist()
    print("rank of ' Paris' per layer:", ranks)
    print(lens)
    assert len(ranks) == 31
    assert ranks[-1] == 1 and lens.target_probs[-1, -1] > 0.5  # the model's own answer
    assert min(ranks[:20]) > 100  # early layers have no idea
    probs = smol.logits("The capital of France is")[0, -1].softmax(-1)
    assert abs(lens.target_probs[-1, -1].item() - probs[lens.target_id].item()) < 1e-5
