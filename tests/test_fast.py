"""The fast paths of glassformer.fast compute what the plain modules compute."""

import pytest
import torch
from torch import nn

import glassformer as gf
from glassformer import fast
from glassformer.nn.attention import AttentionBackend


def tiny_net(**overrides) -> torch.nn.Module:
    fields = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, positions="rope")
    torch.manual_seed(0)
    return gf.build(gf.ModelConfig(**{**fields, **overrides})).eval()


@pytest.mark.parametrize("rows", [1, 3, 8, 9])
@pytest.mark.parametrize("bias", [True, False])
def test_decode_linear_equals_linear(rows, bias):
    torch.manual_seed(0)
    plain = nn.Linear(64, 48, bias=bias)
    decode = fast.DecodeLinear.sharing(plain)
    x = torch.randn(rows, 64)
    with torch.no_grad():
        assert torch.allclose(decode(x), plain(x), atol=1e-6)
    assert decode.weight is plain.weight and decode.bias is plain.bias


def test_decode_copy_follows_weight_changes():
    plain = nn.Linear(16, 8)
    decode = fast.DecodeLinear.sharing(plain)
    x = torch.randn(1, 16)
    with torch.no_grad():
        before = decode(x)
        plain.weight.mul_(2.0)
        after, reference = decode(x), plain(x)
        plain.weight.div_(2.0)
        again = decode(x)
    assert not torch.allclose(before, after)
    assert torch.allclose(after, reference, atol=1e-6)
    assert torch.equal(before, again)


@pytest.mark.parametrize("family", ["decoder", "encoder", "encoder_decoder"])
def test_enable_keeps_parameters_ties_and_outputs(family):
    net = tiny_net(family=family, decoder_start_token_id=0)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    ids = torch.randint(0, 61, (2, 5))
    run = (lambda: net(ids, ids[:, :3])) if family == "encoder_decoder" else (lambda: net(ids))
    with torch.no_grad():
        plain = run()
        fast.enable(net)
        assert fast.enabled(net) and isinstance(net.attention, fast.Float32Attention)
        assert net.state_dict().keys() == state.keys()
        assert all(torch.equal(net.state_dict()[k], v) for k, v in state.items())
        head = net.mlm_head.decoder if family == "encoder" else net.lm_head
        assert head.weight is net.token_embedding.weight
        assert torch.allclose(run(), plain, atol=1e-5)
        fast.disable(net)
    assert not fast.enabled(net) and type(net.attention) is AttentionBackend


def test_generation_is_the_same_with_fast_paths():
    net = tiny_net()
    prompts = [[1, 2, 3, 4], [5, 6]]
    settings = gf.GenerationSettings(max_new_tokens=12, greedy=True)
    from glassformer.generate import generate_ids

    plain = generate_ids(net, prompts, settings)
    fast.enable(net)
    assert generate_ids(net, prompts, settings) == plain
    fast.disable(net)


def test_attention_stays_float32_under_cpu_autocast():
    net = fast.enable(tiny_net())
    seen = {}
    ids = torch.randint(0, 61, (1, 6))
    with (
        torch.autocast("cpu", dtype=torch.bfloat16),
        net.hooks({"blocks.0.attn.z": lambda x, n: seen.update(z=x)}),
    ):
        net(ids)
    assert seen["z"].dtype == torch.float32
    fast.disable(net)
    with (
        torch.autocast("cpu", dtype=torch.bfloat16),
        net.hooks({"blocks.0.attn.z": lambda x, n: seen.update(z=x)}),
    ):
        net(ids)
    assert seen["z"].dtype == torch.bfloat16


def test_printed_tree_names_the_fast_modules():
    net = fast.enable(tiny_net())
    assert "decode fast path" in repr(net.stack.blocks[0].attn.qkv_proj)


def test_load_switches_fast_paths_on_and_they_change_nothing():
    sentences = ["A man is eating food.", "The girl is carrying a baby."]
    fast_lm, plain_lm = gf.load("minilm-l6"), gf.load("minilm-l6", fast_paths=False)
    assert fast.enabled(fast_lm.net) and not fast.enabled(plain_lm.net)
    assert torch.allclose(fast_lm.embed(sentences), plain_lm.embed(sentences), atol=1e-6)


@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize("rows", [1, 8, 9, 300])
def test_both_inference_layouts_equal_linear(monkeypatch, onednn, rows):
    """oneDNN's packed copy (any rows) or the split one (decoding rows; F.linear beyond)."""
    monkeypatch.setattr(fast, "onednn_layout", lambda threads: (onednn, "chosen by the test"))
    torch.manual_seed(rows)
    plain = nn.Linear(96, 40)
    decode = fast.DecodeLinear.sharing(plain)
    x = torch.randn(rows, 96)
    with torch.no_grad():
        torch.testing.assert_close(decode(x), plain(x), atol=1e-5, rtol=1e-5)
    copy = decode._prepared_weight
    assert copy is None if (rows > fast.DECODE_ROWS and not onednn) else copy.is_mkldnn == onednn


def test_the_layout_is_measured_and_explained():
    chosen, timings = fast.onednn_layout(torch.get_num_threads())
    assert isinstance(chosen, bool) and "oneDNN" in timings and "F.linear" in timings


def test_a_trace_sees_the_plain_products(monkeypatch):
    """While a hook is attached (a trace), the fast products step aside: values are bit-identical
    to the plain modules'; once it is gone, the fast copy serves again."""
    from glassformer.nn import hooks
    from glassformer.nn.trace import capture

    monkeypatch.setattr(fast, "onednn_layout", lambda threads: (True, "chosen by the test"))
    net = tiny_net(d_model=384, n_heads=6)  # wide enough that oneDNN's sums differ from F.linear's
    ids = torch.randint(0, 61, (1, 12))
    names = ["blocks.*.attn.q", "blocks.*.ffn.out", "logits"]
    plain = capture(net, names, lambda: net(ids))
    fast.enable(net)
    traced = capture(net, names, lambda: net(ids))
    assert not hooks.any_attached()
    assert list(traced) == list(plain) and all(torch.equal(traced[name], plain[name]) for name in plain)
    assert torch.equal(traced.output, plain.output)
    with torch.no_grad():  # no hook: the packed copy is made and used
        untraced = net(ids)
    assert net.lm_head._prepared_weight is not None and net.lm_head._prepared_weight.is_mkldnn
    assert not torch.equal(untraced, plain.output)  # so the trace's equality above says something
