"""The 8-bit KV cache (`nn.kv_cache_int8`): each cached number within half its row's step, a
quarter of float32's memory, and generation through it as through the float cache."""

import pytest
import torch

from glassformer import ModelConfig, build
from glassformer.generate import GenerationSettings, generate_ids
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.kv_cache_int8 import Int8KVCache, quantize_rows


def test_each_cached_number_is_within_half_its_head_and_token_s_step():
    torch.manual_seed(0)
    cache = Int8KVCache(n_layers=2, batch=2, n_kv_heads=3, max_len=10, d_head=16)
    k, v = torch.randn(2, 3, 4, 16) * 3, torch.randn(2, 3, 4, 16)
    k[0, 1, 2] = 0  # a head's key of zeros: scale tiny, levels 0
    keys, values = cache.append(1, k, v)
    cache.advance(4)
    more_keys, _ = cache.append(1, k[:, :, :1] * 100, v[:, :, :1])  # a far larger token keeps its own step
    for got, want in ((keys, k), (values, v), (more_keys[:, :, 4:], k[:, :, :1] * 100)):
        step = want.abs().amax(dim=-1, keepdim=True) / 127
        assert bool(((got - want).abs() <= step / 2 * (1 + 1e-6) + 1e-30).all())
    assert torch.equal(more_keys[:, :, :4], keys)  # what was cached is not requantized
    assert bool((keys[0, 1, 2] == 0).all())


def test_a_quarter_of_float32_s_memory_and_a_scale():
    config = ModelConfig(vocab_size=64, d_model=96, n_layers=3, n_heads=6, n_kv_heads=2, d_ff=128)
    float_bytes, int8_bytes = KVCache.bytes_per_token(config), Int8KVCache.bytes_per_token(config)
    assert float_bytes == 2 * 3 * 2 * 16 * 4 and int8_bytes == 2 * 3 * 2 * (16 + 4)
    cache = Int8KVCache.for_model(config, batch=1, max_len=5)
    held = sum(
        t.numel() * t.element_size() for t in (cache.keys, cache.values, cache.key_scales, cache.value_scales)
    )
    assert held == 5 * int8_bytes


@pytest.mark.parametrize("positions", ["rope", "learned"])
def test_generation_through_the_int8_cache_follows_the_float_cache(positions):
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=64, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=96, positions=positions
    )
    net = build(config).eval()
    prompts = [[3, 14, 15, 9, 2], [26, 5, 7]]
    exact = generate_ids(net, prompts, GenerationSettings(max_new_tokens=12, greedy=True, stop_token_ids=()))
    int8 = GenerationSettings(max_new_tokens=12, greedy=True, stop_token_ids=(), kv_cache="int8")
    assert generate_ids(net, prompts, int8) == exact  # a small model's clear argmaxes survive 8 bits
    beams = GenerationSettings(max_new_tokens=6, num_beams=3, stop_token_ids=(), kv_cache="int8")
    assert len(generate_ids(net, prompts, beams)) == 2  # beams reorder levels and scales together


def test_levels_and_the_setting_are_checked():
    q, s = quantize_rows(torch.tensor([[1.0, -2.0, 0.5]]))
    assert (
        q.dtype == torch.int8
        and q.tolist() == [[64, -127, 32]]
        and torch.allclose(s, torch.tensor([[2 / 127]]))
    )
    with pytest.raises(ValueError, match="allowed values: model, int8"):
        GenerationSettings(kv_cache="int4")
