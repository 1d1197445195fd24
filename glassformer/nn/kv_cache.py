"""Key/value cache for incremental decoding, preallocated once.

Generating token n+1 only needs the new token's query; the keys and values of tokens
1..n do not change, so each layer keeps them. The cache holds one tensor per kind for
all layers, sized for the whole generation up front, and writes each step into the next
free slots — no re-allocation or concatenation per token::

    keys, values: n_layers x b x g x max_len x e   (g kv heads: GQA/MQA store fewer)

Keys are stored after RoPE, so a cached key never needs rotating again. Cross-attention
keys and values (encoder-decoder models) depend only on the encoder output: they are
computed on the first step and kept in ``cross``.
"""

from __future__ import annotations

import torch

from glassformer.config import ModelConfig


class KVCache:
    """Preallocated self-attention keys/values for every layer, plus cross-attention K/V."""

    def __init__(
        self,
        n_layers: int,
        batch: int,
        n_kv_heads: int,
        max_len: int,
        d_head: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        self._allocate((n_layers, batch, n_kv_heads, max_len, d_head), dtype, device)
        self.cross: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layers
        self.length = 0  # slots filled in every layer

    def _allocate(self, shape: tuple[int, ...], dtype: torch.dtype, device) -> None:
        """The storage: keys and values, L b g n e."""
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)

    @classmethod
    def for_model(
        cls,
        config: ModelConfig,
        batch: int,
        max_len: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> KVCache:
        """A cache for the model's (decoder) stack, for ``max_len`` tokens in total."""
        return cls(config.decoder_depth, batch, config.n_kv_heads, max_len, config.d_head, dtype, device)

    @staticmethod
    def bytes_per_token(config: ModelConfig, dtype: torch.dtype = torch.float32) -> int:
        """Memory one token takes in the cache of one sequence: its key and value in every
        layer, 2 * layers * kv_heads * d_head * bytes per number (GQA / MQA: fewer kv heads)."""
        size = torch.empty((), dtype=dtype).element_size()
        return 2 * config.decoder_depth * config.n_kv_heads * config.d_head * size

    @property
    def max_len(self) -> int:
        return self.keys.shape[3]

    @property
    def batch(self) -> int:
        return self.keys.shape[1]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write new b g t e keys/values after the filled slots; return all b g s e so far."""
        t = k.shape[2]
        end = self.length + t
        if end > self.max_len:
            raise ValueError(
                f"KV cache holds {self.max_len} tokens and {self.length} are used; "
                f"{t} more do not fit. Allocate a larger cache (max_len) or generate fewer tokens."
            )
        self._write(layer, slice(self.length, end), k, v)
        return self._read(layer, end)

    def _write(self, layer: int, slots: slice, k: torch.Tensor, v: torch.Tensor) -> None:
        self.keys[layer, :, :, slots] = k
        self.values[layer, :, :, slots] = v

    def _read(self, layer: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer ``layer``'s keys and values of the first ``end`` slots.  b g s e each."""
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, t: int) -> None:
        """Mark t more slots filled; called once per forward pass, after every layer."""
        self.length += t

    def reset(self) -> None:
        """Forget everything (also the cross-attention K/V) to reuse the memory for a new input."""
        self.length = 0
        self.cross = [None] * len(self.cross)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search: each beam continues a parent beam)."""
        filled = slice(0, self.length)  # the free slots hold nothing worth copying
        self.keys[:, :, :, filled] = self.keys[:, :, :, filled].index_select(1, index)
        self.values[:, :, :, filled] = self.values[:, :, :, filled].index_select(1, index)
        self.cross = [
            None if kv is None else (kv[0].index_select(0, index), kv[1].index_select(0, index))
            for kv in self.cross
        ]
