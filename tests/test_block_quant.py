"""Block-wise quantized weights (`block_quant.py`): llama.cpp's bytes, its floats back, and
every weight within its stated bound."""

import gguf.quants
import numpy as np
import pytest
import torch

from glassformer.block_quant import BLOCK, from_gguf, quantize

TYPES = {kind: getattr(gguf.quants.GGMLQuantizationType, kind.upper()) for kind in ("q8_0", "q4_0", "q4_1")}


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
    assert torch.equal(read.minimums, blocks.minimums)
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
    low, high = {"q8_0": (-127, 127), "q4_0": (-8, 7), "q4_1": (0, 15)}[kind]
    assert low <= int(levels.min()) and int(levels.max()) <= high


def test_a_block_holds_an_outlier_s_cost_to_itself():
    w = weights(out=1, inner=4 * BLOCK)
    w[0, 0] = 5.0  # one outlier in the first block
    per_block = quantize(w, "q8_0")
    error = (w - per_block.dequantized()).abs()[0]
    row_step = 5.0 / 127  # what one scale per row would allow every weight
    assert float(error[BLOCK:].max()) < row_step / 20  # the other blocks keep their own small steps


def test_bad_kinds_and_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="kinds are: q8_0, q4_0, q4_1"):
        quantize(torch.zeros(2, 32), "q3_k")
    with pytest.raises(ValueError, match="multiple of 32"):
        quantize(torch.zeros(2, 40), "q8_0")


def test_weights_on_a_q4_1_grid_come_back_as_their_blocks():
    """A model read from a Q4_1 file (the registry's SmolLM2) holds its blocks' values as floats:
    quantizing them again gives the file's bytes, so a 4-bit decode of it adds no error."""
    stored = gguf.quants.quantize(weights().numpy(), TYPES["q4_1"])
    floats = torch.from_numpy(gguf.quants.dequantize(stored, TYPES["q4_1"]))
    again = quantize(floats, "q4_1")
    assert torch.equal(again.dequantized(), floats)
