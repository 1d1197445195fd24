"""Block-wise quantized weights (`block_quant.py`): llama.cpp's bytes, its floats back, and
every weight within its stated bound."""

import gguf.quants
import numpy as np
import pytest
import torch

from glassformer.block_quant import BLOCK, from_gguf, quantize

TYPES = {"q8_0": gguf.quants.GGMLQuantizationType.Q8_0, "q4_0": gguf.quants.GGMLQuantizationType.Q4_0}


def weights(out: int = 48, inner: int = 256) -> torch.Tensor:
    """Random weights with the outliers real models have: a few large ones, some blocks of zeros."""
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(out, inner, generator=generator) * 0.02
    w[torch.rand(out, inner, generator=generator) < 0.01] *= 40  # outliers
    w[-1, :BLOCK] = 0  # a block of zeros: step 0
    w[0, BLOCK : 2 * BLOCK] = 1e-6  # tiny values: the float16 step underflows to a subnormal
    return w


@pytest.mark.parametrize("kind", TYPES)
def test_the_bytes_are_llama_cpp_s_and_read_back_as_they_are(kind):
    w = weights()
    blocks = quantize(w, kind)
    reference = gguf.quants.quantize(w.numpy(), TYPES[kind])  # out x row bytes
    assert np.array_equal(blocks.to_gguf(), reference)
    read = from_gguf(reference, kind)
    assert torch.equal(read.levels, blocks.levels) and torch.equal(read.steps, blocks.steps)
    expected = torch.from_numpy(gguf.quants.dequantize(reference, TYPES[kind]))
    assert torch.equal(read.dequantized(), expected)


@pytest.mark.parametrize("kind", TYPES)
def test_every_weight_is_within_its_bound_and_the_bound_is_tight(kind):
    w = weights()
    blocks = quantize(w, kind)
    error, bound = (w - blocks.dequantized()).abs(), blocks.error_bound()
    assert bool((error <= bound * (1 + 1e-6) + 1e-12).all())
    assert float((error / bound.clamp(min=1e-30)).max()) > 0.45  # some weight comes near its bound
    levels = blocks.levels
    assert int(levels.min()) >= (-127 if kind == "q8_0" else -8)
    assert int(levels.max()) <= (127 if kind == "q8_0" else 7)


def test_a_block_holds_an_outlier_s_cost_to_itself():
    w = weights(out=1, inner=4 * BLOCK)
    w[0, 0] = 5.0  # one outlier in the first block
    per_block = quantize(w, "q8_0")
    error = (w - per_block.dequantized()).abs()[0]
    row_step = 5.0 / 127  # what one scale per row would allow every weight
    assert float(error[BLOCK:].max()) < row_step / 20  # the other blocks keep their own small steps


def test_bad_kinds_and_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="kinds are: q8_0, q4_0"):
        quantize(torch.zeros(2, 32), "q3_k")
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize(torch.zeros(2, 40), "q8_0")
