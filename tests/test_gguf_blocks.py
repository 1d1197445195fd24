"""glassformer.formats.gguf_blocks dequantizes exactly as gguf.quants does."""

import gguf
import numpy as np
import pytest
import torch

from glassformer.formats import gguf_blocks


@pytest.mark.parametrize("name", sorted(gguf_blocks.DECODERS))
def test_blocks_decode_bit_identical_to_the_reference(name):
    storage = gguf.GGMLQuantizationType[name]
    rng = np.random.default_rng(0)
    values = rng.normal(0, 0.05, size=(7, 256)).astype(np.float32)
    values[0, :32] = 0.0  # an all-zero block (d = 0)
    values[1, :32] = rng.uniform(-1e4, 1e4, 32)  # a wide one
    raw = gguf.quants.quantize(values, storage)  # 7 rows x row bytes, uint8
    reference = gguf.quants.dequantize(raw, storage)
    ours = gguf_blocks.dequantize(raw, name)
    assert ours.dtype == torch.float32 and ours.shape == (7, 256)
    assert np.array_equal(ours.numpy(), reference)


def test_random_bytes_too_including_odd_half_floats():
    rng = np.random.default_rng(1)
    for name, (block_bytes, _) in gguf_blocks.DECODERS.items():
        raw = rng.integers(0, 256, size=(5, 4 * block_bytes), dtype=np.uint8)
        raw[:, 0:2] = np.array([0x3C00], dtype=np.uint16).view(np.uint8)  # d = 1.0 in every first block
        with np.errstate(invalid="ignore", over="ignore"):  # random bytes hold NaN and inf halves
            reference = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[name])
        ours = gguf_blocks.dequantize(raw, name).numpy()
        assert np.array_equal(ours, reference, equal_nan=True), name


def test_other_types_are_left_to_the_reference():
    assert gguf_blocks.dequantize(np.zeros((1, 210), dtype=np.uint8), "Q6_K") is None
