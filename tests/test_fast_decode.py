"""glassformer.fast_decode computes what the modules compute, token for token."""

import pytest
import torch
from torch.nn import functional as F

import glassformer as gf
from glassformer import fast, fast_decode
from glassformer.generate import generate_ids
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.norms import LayerNorm, RMSNorm

SHAPES = {  # the decoders the step serves, by what they exercise
    "llama (GQA, RoPE, SwiGLU, RMSNorm, tied)": dict(n_kv_heads=2),
    "gpt2 (learned positions, LayerNorm, GELU, biases)": dict(
        positions="learned", norm="layernorm", activation="gelu", qkv_bias=True, out_bias=True, ffn_bias=True
    ),
    "qwen3 (q/k-norm per head, q/k/v biases, untied)": dict(
        qk_norm=True, qkv_bias=True, tie_embeddings=False, n_kv_heads=2
    ),
    "neox (parallel residual, partial rotary)": dict(
        parallel_residual=True, rotary_dim=4, norm="layernorm", activation="gelu", ffn_bias=True
    ),
    "phi (one shared norm, parallel)": dict(parallel_residual=True, shared_norm=True, norm="layernorm"),
    "mistral (a 6-key window)": dict(attn_window=6, n_kv_heads=1),
}


def tiny_net(**overrides) -> torch.nn.Module:
    fields = dict(
        vocab_size=67,
        d_model=32,
        n_layers=3,
        n_heads=4,
        positions="rope",
        norm="rmsnorm",
        activation="swiglu",
        max_seq_len=64,
    )
    torch.manual_seed(0)
    return fast.enable(gf.build(gf.ModelConfig(**{**fields, **overrides})).eval())


@pytest.mark.parametrize("d", [8, 64, 576])
def test_fused_norms_are_bit_identical_to_the_modules(d):
    torch.manual_seed(d)
    x = torch.randn(3, 1, d) * 4
    rms, layer = RMSNorm(d, 1e-5), LayerNorm(d, 1e-5)
    for norm in (rms, layer):
        torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(layer.bias)
    with torch.no_grad():
        assert torch.equal(F.rms_norm(x, (d,), rms.weight, rms.eps), rms(x))
        assert torch.equal(fast_decode._norm(rms, x), rms(x))
        assert torch.equal(fast_decode._norm(layer, x), layer(x))


@pytest.mark.parametrize("shape", SHAPES)
def test_each_step_gives_the_modules_logits(shape):
    net = tiny_net(**SHAPES[shape])
    step = fast_decode.step_for(net)
    assert step is not None, fast_decode.unsupported(net)
    prompt = torch.randint(0, 67, (2, 5))
    ours, theirs = KVCache.for_model(net.config, 2, 30), KVCache.for_model(net.config, 2, 30)
    with torch.no_grad():
        ids = net(prompt, cache=ours)[:, -1:].argmax(-1)  # b 1: the prompt through the modules
        net(prompt, cache=theirs)
        for _ in range(20):
            if not step.covers(2, ours.length):  # past a window the modules take over
                assert ours.length >= net.config.attn_window
                break
            logits, reference = step(ids, ours), net(ids, cache=theirs)
            assert torch.allclose(logits, reference, atol=1e-5), (logits - reference).abs().max()
            assert torch.allclose(ours.keys[:, :, :, : ours.length], theirs.keys[:, :, :, : theirs.length])
            ids = reference[:, -1:].argmax(-1)


@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_generations_equal_the_plain_path_on_20_prompts(shape):
    net = tiny_net(**SHAPES[shape])
    torch.manual_seed(1)
    prompts = [torch.randint(0, 67, (int(n),)).tolist() for n in torch.randint(1, 9, (20,))]
    settings = gf.GenerationSettings(max_new_tokens=16, greedy=True)
    fast_ids = [generate_ids(net, [p], settings)[0] for p in prompts]
    fast.disable(net)
    assert fast_decode.step_for(net) is None  # the reference: plain modules
    assert [generate_ids(net, [p], settings)[0] for p in prompts] == fast_ids


def test_batches_and_beams_take_the_step_too():
    net = tiny_net(n_kv_heads=2)
    prompts = [[1, 2, 3], [4, 5, 6]]  # equal lengths: no padding, so the step serves them
    greedy = gf.GenerationSettings(max_new_tokens=10, greedy=True)
    beams = gf.GenerationSettings(max_new_tokens=10, num_beams=3, greedy=True)
    ours = generate_ids(net, prompts, greedy), generate_ids(net, prompts, beams)
    fast.disable(net)
    assert (generate_ids(net, prompts, greedy), generate_ids(net, prompts, beams)) == ours


def test_a_hook_sends_decoding_back_to_the_modules():
    net = tiny_net()
    assert fast_decode.step_for(net) is not None
    seen = []
    with net.hooks({"blocks.0.attn.q": lambda x, name: seen.append(x.shape[2])}):
        assert fast_decode.step_for(net) is None
        generate_ids(net, [[1, 2, 3]], gf.GenerationSettings(max_new_tokens=4, greedy=True))
    assert seen == [3, 1, 1, 1]  # the prompt, then every new token, seen by the hook
    handle = net.output_stack.blocks[0].register_forward_hook(lambda *args: None)
    assert fast_decode.step_for(net) is None
    handle.remove()


@pytest.mark.parametrize("weights", ["float32", "int8"])
def test_a_changed_weight_is_read_anew(weights, monkeypatch):
    """float32: each product reads its DecodeLinear's copy, which that remakes; int8: the step's
    own copies are remade by a new step."""
    monkeypatch.setattr(fast_decode, "faster_than_float32", lambda *shape: (True, "chosen by the test"))
    net = tiny_net()
    fast_decode.use_weights(net, weights)
    step = fast_decode.step_for(net)
    assert fast_decode.step_for(net) is step  # unchanged weights: the same layout
    linear = net.output_stack.blocks[1].ffn.up_proj
    with torch.no_grad():
        net(torch.tensor([[1, 2]]))  # the decode copies exist
        before = linear.prepared()
        linear.weight.mul_(2.0)
    assert step.current() == (weights == "float32")
    assert linear.prepared() is not before  # the DecodeLinear's copy follows W
    fresh = fast_decode.step_for(net)
    assert (fresh is step) == (weights == "float32") and fresh.current()
    if weights == "int8":
        return
    settings = gf.GenerationSettings(max_new_tokens=8, greedy=True)
    ours = generate_ids(net, [[3, 1, 4]], settings)
    fast.disable(net)
    assert generate_ids(net, [[3, 1, 4]], settings) == ours


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        (dict(n_experts=4, experts_per_token=2), "mixture of experts"),
        (dict(attn_softcap=20.0), "soft-capped"),
        (dict(norm_placement="post"), "norm placement"),
        (dict(positions="alibi"), "alibi"),
        (dict(family="encoder"), "decoder-only"),
    ],
)
def test_what_the_step_does_not_serve_is_named_and_left_to_the_modules(overrides, reason):
    net = tiny_net(**overrides)
    assert reason in fast_decode.unsupported(net)
    assert fast_decode.step_for(net) is None
    with pytest.raises(ValueError, match="cannot run this model"):
        fast_decode.DecodeStep(net)


def test_training_mode_and_switched_off_fast_paths_are_not_served():
    net = tiny_net()
    assert "training" in fast_decode.unsupported(net.train())
    net.eval()
    fast.disable(net)
    assert "switched off" in fast_decode.unsupported(net)


@pytest.mark.slow
def test_smollm2_greedy_on_20_prompts_equals_the_plain_path():
    lm = gf.load("smollm2-135m-instruct")
    starts = (
        "Once upon a time", "The capital of France is", "def fibonacci(n):", "In 1969, the first",
        "The best way to learn", "Water boils at", "My favourite book is", "The transformer architecture",
        "Photosynthesis is", "To make bread, you", "The moon orbits", "import numpy as np\n",
        "Dear Sir or Madam,", "The three laws of", "Rain in Spain falls", "Once there was a cat who",
        "北京是", "Le chat est", "1, 2, 3, 4,", "Question: what is 7 times 8? Answer:",
    )  # fmt: skip
    settings = gf.GenerationSettings(max_new_tokens=12, min_new_tokens=12, greedy=True)
    prompts = [lm.tokenizer.encode(text) for text in starts]
    assert fast_decode.step_for(lm.net) is not None
    ours = [generate_ids(lm.net, [p], settings)[0] for p in prompts]
    fast.disable(lm.net)
    assert [generate_ids(lm.net, [p], settings)[0] for p in prompts] == ours
