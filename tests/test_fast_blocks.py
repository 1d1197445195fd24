"""glassformer.fast_blocks: Q8_0, Q4_0 and Q4_1 blocks through torch's packed 4-bit kernel, every
output within the stated bound of the blocks' own product."""

import copy

import pytest
import torch

import glassformer as gf
from glassformer import fast, fast_decode
from glassformer.block_quant import quantize
from glassformer.fast_blocks import BlockProduct
from glassformer.nn.kv_cache import KVCache
from tests.test_fast_decode import tiny_net

KINDS = ("q8_0", "q4_0", "q4_1")


def weights(out: int, inner: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    w = torch.randn(out, inner, generator=generator) * 0.05
    w[0, 0] = 3.0  # an outlier: its block's step is large
    w[1, 32:64] = 0  # a block of zeros
    return w


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("out_features", "in_features", "rows"), [(96, 64, 1), (67, 64, 2), (1536, 576, 1), (576, 1536, 3)]
)
def test_every_output_is_within_the_stated_bound(kind, out_features, in_features, rows):
    blocks = quantize(weights(out_features, in_features, seed=rows), kind)
    product = BlockProduct(blocks)
    x = torch.randn(rows, in_features, generator=torch.Generator().manual_seed(7)) * 2
    bias = torch.randn(out_features)
    y = product(x, bias)
    exact = x.double() @ blocks.dequantized().double().t() + bias.double()  # the blocks' own product
    error = (y.double() - exact).abs()
    bound = product.error_bound(x, y - bias).double()
    assert (error <= bound).all(), float((error - bound).max())
    magnitude = x.abs().double() @ blocks.dequantized().abs().double().t()
    assert float((bound / magnitude).max()) < 0.04  # not vacuous: a bfloat16-sized bound
    assert float((error / bound).max()) > 0.05  # and not loose by orders of magnitude


@pytest.mark.parametrize("kind", KINDS)
def test_the_kernel_s_weights_are_the_blocks_up_to_bfloat16_scales(kind):
    blocks = quantize(weights(64, 128), kind)
    kernel, exact = BlockProduct(blocks).kernel_weights(), blocks.dequantized()
    assert kernel.shape == exact.shape
    # each block's s and z are rounded to bfloat16: within 2^-8 of the block's largest weight
    scale = exact.abs().view(64, -1, 32).amax(-1).repeat_interleave(32, 1)
    assert bool(((kernel - exact).abs() <= 2.0**-7 * scale + 1e-12).all())


def test_rows_of_a_batch_are_computed_alike():
    product = BlockProduct(quantize(weights(256, 128), "q8_0"))
    x = torch.randn(4, 128)
    together = product(x)
    alone = torch.cat([product(row[None]) for row in x])
    torch.testing.assert_close(together, alone, rtol=2**-7, atol=1e-6)
    assert product(x.view(2, 2, 128)).shape == (2, 2, 256)


@pytest.mark.parametrize("kind", KINDS)
def test_a_block_step_decodes_as_the_modules_do_with_the_blocks_weights(kind, monkeypatch):
    """The step's products are the blocks' (the head at Q8_0 beside 4-bit kinds): the modules,
    given the blocks' weights, compute the same logits up to the kernel's bfloat16 rounding."""
    monkeypatch.setattr(fast_decode, "faster_than_float32", lambda *shape: (True, "chosen by the test"))
    net = tiny_net(n_kv_heads=2)
    fast_decode.use_weights(net, kind)
    step = fast_decode.step_for(net)
    assert (step.weights, step.reason) == (kind, "faster: chosen by the test")
    assert step.head.blocks.kind == fast_decode.HEAD[kind] == ("q8_0" if kind != "q8_0" else kind)
    reference = copy.deepcopy(net)
    fast.disable(reference)
    with torch.no_grad():  # the modules with what the blocks stand for
        for block in reference.output_stack.blocks:
            for linear in (block.attn.qkv_proj, block.attn.o_proj, block.ffn.gate_proj, block.ffn.up_proj,
                           block.ffn.down_proj):  # fmt: skip
                linear.weight.copy_(quantize(linear.weight, kind).dequantized())
        head = reference.lm_head.weight
        head.copy_(quantize(head, fast_decode.HEAD[kind]).dequantized())
    prompt = torch.randint(0, 67, (1, 6), generator=torch.Generator().manual_seed(1))
    ours, theirs = KVCache.for_model(net.config, 1, 20), KVCache.for_model(net.config, 1, 20)
    with torch.no_grad():
        ids = reference(prompt, cache=theirs)[:, -1:].argmax(-1)
        reference(prompt, cache=ours)  # both caches hold the blocks' prefill
        for _ in range(8):
            logits, expected = step(ids, ours), reference(ids, cache=theirs)
            assert (logits - expected).abs().max() < 0.02 * expected.abs().max()
            ids = expected[:, -1:].argmax(-1)


def test_smollm2_q4_1_decodes_with_the_file_s_own_blocks():
    """The registry's SmolLM2 is a Q4_1 file: its 4-bit step multiplies by the file's blocks (the
    head by its Q8_0 ones), so against float32 only the kernel's bfloat16 rounding is left."""
    lm = gf.load("smollm2-135m-instruct")
    texts = [f"{start} {i}" for i, start in enumerate(["Once upon a time", "The capital of", "def f(x):",
             "In 1969", "Water boils at"] * 2)]  # fmt: skip
    prompts = [lm.tokenizer.encode(t) for t in texts]
    up = lm.net.output_stack.blocks[0].ffn.up_proj.weight
    assert torch.equal(quantize(up, "q4_1").dequantized(), up)  # the file's blocks, found again
    agree, kl = fast_decode.compare_weights(lm.net, prompts, "q4_1", new_tokens=8)
    assert agree >= 0.9 and kl <= 0.01, (agree, kl)


def test_the_command_line_offers_every_kind():
    from glassformer.commands.arguments import DECODE_WEIGHTS

    assert DECODE_WEIGHTS == fast_decode.WEIGHTS
