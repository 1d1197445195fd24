"""A key/value cache in 8 bits: a quarter of float32's memory per cached token, plus a scale.

A long generation's cache can outgrow the model: SmolLM2-135M keeps 2 x 30 layers x 3 kv
heads x 64 numbers per token, 46 KB in float32, so 8,192 tokens of one sequence take 377 MB
(the weights: 538 MB).
Each head's key (and value) of each token is stored as 127 levels of its largest magnitude::

    s = max_e |k_e| / 127,   q_e = round(k_e / s) in -127..127,   k_e ~ s q_e   (|error| <= s / 2)

one float32 scale per head and token, so a token costs 2 x layers x kv_heads x (d_head + 4)
bytes: 12 KB for SmolLM2, 27% of float32's. Attention reads the keys and values back as
float32 (`append` returns them dequantized), so only the cache's memory shrinks, not the
time of a step. What it does to generations is measured (``benchmarks/quant_quality.py``).

    settings = GenerationSettings(kv_cache="int8")   # glassformer.generate picks this class
"""

from __future__ import annotations

import torch

from glassformer.nn.kv_cache import KVCache


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (... e) as int8 levels of each row's largest magnitude: (q ... e int8, s ... 1 float32)."""
    largest = x.detach().float().abs().amax(dim=-1, keepdim=True)  # ... 1
    scales = (largest / 127).clamp(min=torch.finfo(torch.float32).tiny)
    return (x.float() / scales).round().clamp(-127, 127).to(torch.int8), scales


class Int8KVCache(KVCache):
    """`KVCache` with int8 keys and values and a float32 scale per layer, row, head and token."""

    def _allocate(self, shape: tuple[int, ...], dtype: torch.dtype, device) -> None:
        """Levels (L b g n e, int8) and scales (L b g n 1, float32); ``dtype``: what `append` gives back."""
        self.keys = torch.zeros(shape, dtype=torch.int8, device=device)
        self.values = torch.zeros(shape, dtype=torch.int8, device=device)
        self.key_scales = torch.zeros((*shape[:-1], 1), device=device)
        self.value_scales = torch.zeros((*shape[:-1], 1), device=device)
        self.dtype = dtype

    @staticmethod
    def bytes_per_token(config, dtype: torch.dtype = torch.int8) -> int:
        """Memory one token takes: its key and value in every layer, each head's d_head levels
        and its float32 scale, 2 * layers * kv_heads * (d_head + 4)."""
        return 2 * config.decoder_depth * config.n_kv_heads * (config.d_head + 4)

    def _write(self, layer: int, slots: slice, k: torch.Tensor, v: torch.Tensor) -> None:
        """New keys and values stored as levels and scales."""
        self.keys[layer, :, :, slots], self.key_scales[layer, :, :, slots] = quantize_rows(k)
        self.values[layer, :, :, slots], self.value_scales[layer, :, :, slots] = quantize_rows(v)

    def _read(self, layer: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The first ``end`` slots dequantized (the new ones too: every step attends to what the
        cache holds).  b g s e each."""
        keys = self.keys[layer, :, :, :end].float() * self.key_scales[layer, :, :, :end]
        values = self.values[layer, :, :, :end].float() * self.value_scales[layer, :, :, :end]
        return keys.to(self.dtype), values.to(self.dtype)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search), scales with their levels."""
        super().reorder(index)
        filled = slice(0, self.length)
        self.key_scales[:, :, :, filled] = self.key_scales[:, :, :, filled].index_select(1, index)
        self.value_scales[:, :, :, filled] = self.value_scales[:, :, :, filled].index_select(1, index)
