"""A whole model quantized in place (`quantized_model.py`): the weights are the blocks' values,
each block's error is kept and within its bound, a tied head is one matrix, and the forward
pass is the plain one over the new weights."""

import pytest
import torch

import glassformer as gf
from glassformer.block_quant import BLOCK, HEAD_KIND, quantize
from glassformer.quantized_model import check_kind, quantize_model
from tests.conftest import tiny_model

KINDS = ("q8_0", "q4_0", "q4_1")


def decoder(**fields):
    """A tiny decoder whose every matrix has rows of a multiple of 32, with outliers."""
    net = tiny_model(d_model=64, d_ff=96, **fields)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for weight in (p for n, p in net.named_parameters() if n.endswith("weight") and p.dim() == 2):
            weight[torch.rand(weight.shape, generator=generator) < 0.01] *= 30
    return net


@pytest.mark.parametrize("kind", KINDS)
def test_each_weight_becomes_its_block_s_value_and_the_error_is_kept(kind):
    net = decoder(activation="swiglu", norm="rmsnorm", positions="rope")
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    facts = quantize_model(net, kind)
    names = [m.name for m in facts.matrices]
    assert names[:5] == [
        "blocks.0.attn.qkv_proj",
        "blocks.0.attn.o_proj",
        "blocks.0.ffn.up_proj",
        "blocks.0.ffn.gate_proj",
        "blocks.0.ffn.down_proj",
    ]
    assert names[-1] == "lm_head" and facts.matrix("lm_head").tied_to == "embed.token"
    for matrix in facts.matrices:
        key = "stack.embed.token.weight" if matrix.name == "lm_head" else f"stack.{matrix.name}.weight"
        original, now = before[key], dict(net.named_parameters())[key].detach()
        assert torch.equal(now, quantize(original, matrix.kind).dequantized())
        out, inner = matrix.shape
        error = (original - now).view(out, inner // BLOCK, BLOCK)
        assert torch.equal(matrix.max_error, error.abs().amax(-1))
        assert torch.allclose(matrix.rms_error, error.square().mean(-1).sqrt())
        assert matrix.max_error.shape == matrix.bound.shape == (out, inner // BLOCK)
        assert (matrix.max_error <= matrix.bound).all()
        assert matrix.max_error.max() > 0  # random weights are on no grid
    untouched = [n for n in before if "norm" in n or n.endswith("bias")]
    assert all(torch.equal(before[n], dict(net.named_parameters())[n]) for n in untouched)


def test_the_tied_head_is_quantized_once_and_the_lookup_reads_it():
    net = decoder()
    facts = quantize_model(net, "q4_0")
    assert sum(m.name == "lm_head" for m in facts.matrices) == 1
    assert net.lm_head.weight is net.stack.embed.token.weight  # the tie kept
    head = facts.matrix("lm_head")
    assert head.shape == tuple(net.lm_head.weight.shape)


def test_q4_1_of_weights_on_a_q4_1_grid_changes_nothing():
    """The registry's SmolLM2 is read from a Q4_1 file: its weights already lie on Q4_1 grids, its
    tied head on a Q8_0 one (the head's kind beside Q4_1, HEAD_KIND)."""
    net = decoder()
    with torch.no_grad():
        for weight in (p for p in net.parameters() if p.dim() == 2 and p.shape[1] % BLOCK == 0):
            kind = HEAD_KIND["q4_1"] if weight is net.lm_head.weight else "q4_1"
            weight.copy_(quantize(weight, kind).dequantized())
    before = [p.detach().clone() for p in net.parameters()]
    facts = quantize_model(net, "q4_1")
    assert all(float(m.max_error.max()) == 0.0 for m in facts.matrices)
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    assert quantize_model(net, "q8_0").summary()["matrices"][0]["max_error"] > 0  # another grid moves them


@pytest.mark.parametrize(("kind", "block_bytes"), [("q8_0", 34), ("q4_0", 18), ("q4_1", 20)])
def test_the_totals_count_float32_and_llama_cpp_s_bytes(kind, block_bytes):
    """Each block matrix in ``kind``, the head at Q8_0 (34 bytes a block) beside the 4-bit kinds."""
    net = decoder()
    facts = quantize_model(net, kind)
    assert [m.kind for m in facts.matrices] == [kind] * (len(facts.matrices) - 1) + [HEAD_KIND[kind]]
    weights = sum(m.shape[0] * m.shape[1] for m in facts.matrices)
    head = facts.matrix("lm_head").weights
    assert facts.bytes_before == 4 * weights and facts.label == kind.upper()
    assert facts.bytes_after == (weights - head) // BLOCK * block_bytes + head // BLOCK * 34
    assert facts.bits_per_weight == facts.bytes_after * 8 / weights
    summary = facts.summary()
    assert summary["bytes_after"] == facts.bytes_after and len(summary["matrices"]) == len(facts.matrices)


def test_the_forward_pass_is_the_plain_one_over_the_new_weights():
    net = decoder().eval()
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    copy = decoder().eval()
    quantize_model(net, "q8_0")
    with torch.no_grad():
        for (_, mine), (_, theirs) in zip(net.named_parameters(), copy.named_parameters(), strict=True):
            theirs.copy_(mine)
        assert torch.equal(net(ids), copy(ids))
        assert not torch.equal(net(ids), decoder().eval()(ids))


def test_rows_not_of_32_and_routers_stay_float_with_the_reason():
    net = tiny_model(d_model=64, d_ff=48)  # down_proj reads 48 values a row
    facts = quantize_model(net, "q8_0")
    assert "not a multiple of 32" in facts.skipped["blocks.0.ffn.down_proj"]
    moe = tiny_model(d_model=64, d_ff=64, n_experts=4, experts_per_token=2)
    facts = quantize_model(moe, "q8_0")
    assert "router" in facts.skipped["blocks.0.ffn.router"]
    assert "blocks.0.ffn.experts.3.up_proj" in [m.name for m in facts.matrices]
    with pytest.raises(KeyError, match="a router"):
        facts.matrix("blocks.0.ffn.router")


def test_an_encoder_decoder_names_its_stacks():
    net = tiny_model(
        family="encoder_decoder", d_model=64, d_ff=64, positions="t5_relative", decoder_start_token_id=0
    )
    names = [m.name for m in quantize_model(net, "q4_1").matrices]
    assert "encoder.blocks.0.attn.qkv_proj" in names and "decoder.blocks.1.cross_attn.kv_proj" in names


def test_a_kind_is_checked_by_name():
    with pytest.raises(ValueError, match=r"no quantization 'q5_0': the kinds are q8_0, q4_0, q4_1"):
        check_kind("q5_0")
    with pytest.raises(ValueError, match="the kinds are"):
        quantize_model(decoder(), "Q8")
    with pytest.raises(ValueError, match="nothing to quantize"):
        quantize_model(
            gf.build(gf.ModelConfig(vocab_size=61, d_model=24, n_layers=1, n_heads=2, d_ff=48)), "q8_0"
        )
