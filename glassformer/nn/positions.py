"""Positional information: absolute vectors, rotations, and additive attention biases.

Absolute (added to the token embeddings before block 0):

* learned — a trainable table P[pos] (GPT-2, BERT); cannot go past ``max_seq_len``;
* sinusoidal (Vaswani et al., 2017)::

      PE(pos, 2i)   = sin(pos / 10000^(2i/d))
      PE(pos, 2i+1) = cos(pos / 10000^(2i/d))

  ``style="interleaved"`` follows the paper (sin, cos, sin, cos, ...); ``"halved"`` puts
  every sine first and every cosine second (Marian, fairseq), same frequencies.

Relative, inside attention:

* RoPE (Su et al., 2021) rotates each pair of q/k features by ``pos * theta_i`` with
  ``theta_i = base^(-2i/e)``, so that q_m . k_n depends only on m - n. ``rotate_half``
  pairs feature i with i + e/2 (GPT-NeoX, Llama); ``interleaved`` pairs 2i with 2i+1
  (GPT-J, the paper). Scaling for longer contexts: ``linear`` divides positions by the
  factor (position interpolation); ``ntk`` raises the base to
  ``base * factor^(e/(e-2))`` (NTK-aware scaling). Gemma 3 turns its sliding-window
  layers by a base of their own (``rope_local_base``), unscaled: the scaling stretches
  only the global layers, the ones that read the long context.
* ALiBi (Press et al., 2021) adds ``-m_h * |i - j|`` to head h's scores, with slopes
  m_h a geometric sequence starting at 2^(-8/h).
* T5 relative bias (Raffel et al., 2020) adds a learned scalar per head and per bucket of
  the distance j - i: exact buckets for short distances, logarithmic ones up to
  ``max_distance``; bidirectional in encoders, causal (past only) in decoders.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from glassformer.config import ModelConfig


def sinusoidal_table(positions: torch.Tensor, d_model: int, style: str = "interleaved") -> torch.Tensor:
    """PE for arbitrary (possibly fractional or batched) positions.  Shape: (...) -> (..., d)."""
    i = torch.arange(0, d_model, 2, dtype=torch.float32, device=positions.device)
    inv_freq = 1.0 / (10000.0 ** (i / d_model))  # d/2
    angles = positions.double().unsqueeze(-1) * inv_freq.double()  # ... d/2, float64 as Marian
    sin, cos = torch.sin(angles).float(), torch.cos(angles).float()
    if style == "halved":
        return torch.cat([sin, cos], dim=-1)
    return torch.stack([sin, cos], dim=-1).flatten(-2)


class LearnedPositions(nn.Module):
    """A trainable vector per position: P[pos].  Shape: b t -> b t d."""

    def __init__(self, max_seq_len: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_seq_len, d_model))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(positions, self.weight)


class SinusoidalPositions(nn.Module):
    """Fixed sinusoids (no parameters); works for any position.  Shape: b t -> b t d."""

    def __init__(self, d_model: int, style: str) -> None:
        super().__init__()
        self.d_model, self.style = d_model, style

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return sinusoidal_table(positions, self.d_model, self.style)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, style={self.style!r}"


@dataclass(frozen=True)
class Rotation:
    """RoPE angles for a batch of positions (cos, sin: b 1 t e), ready to apply to q or k."""

    cos: torch.Tensor
    sin: torch.Tensor
    style: str
    signed_sin: torch.Tensor | None = None  # rotate_half: [-sin, sin] over the two halves
    dims: int | None = None  # partial rotary: only the first ``dims`` features turn (GPT-NeoX)

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """x * cos + rotate(x) * sin, where rotate maps each pair (a, b) to (-b, a).  b h t e.

        rotate_half pairs feature i with i + e/2: rotate(x) = [-x2, x1], computed as
        roll(x, e/2) = [x2, x1] times a sine whose first half is negated (three kernels
        instead of five: this runs twice per layer in every training step).
        """
        if self.dims is not None and self.dims < x.shape[-1]:
            turned, kept = x[..., : self.dims], x[..., self.dims :]
            return torch.cat([dataclasses.replace(self, dims=None).apply(turned), kept], dim=-1)
        if self.style == "rotate_half":
            return torch.addcmul(x * self.cos, x.roll(x.shape[-1] // 2, dims=-1), self.signed_sin)
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack([-odd, even], dim=-1).flatten(-2)
        return x * self.cos + rotated * self.sin


def llama3_frequencies(
    inv_freq: torch.Tensor, factor: float, low: float, high: float, original: int
) -> torch.Tensor:
    """Llama 3.1's RoPE scaling: each frequency theta_i by its wavelength lambda_i = 2 pi / theta_i,
    against the context L the model was first trained for:

        lambda_i > L / low:    theta_i / factor          (slow features: stretched like linear scaling)
        lambda_i < L / high:   theta_i                   (fast features: kept)
        otherwise:             (1 - s) theta_i / factor + s theta_i,   s = (L / lambda_i - low) / (high - low)
    """
    wavelength = 2 * math.pi / inv_freq
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    scaled = torch.where(wavelength > original / low, inv_freq / factor, blended)
    return torch.where(wavelength < original / high, inv_freq, scaled)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding: cos/sin tables and their application to q and k."""

    def __init__(self, config: ModelConfig, local: bool = False) -> None:
        """``local``: the sliding-window layers' rotation (``rope_local_base``, no scaling)."""
        super().__init__()
        e = config.rotary_dim or config.d_head  # the features that turn
        self.base, factor = config.rope_base, config.rope_scaling_factor
        scaling = config.rope_scaling
        if local:
            self.base, factor, scaling = config.rope_local_base, 1.0, "none"
        if scaling == "ntk":
            self.base = self.base * factor ** (e / (e - 2))
        self.position_scale = 1.0 / factor if scaling == "linear" else 1.0
        self.llama3 = None  # (factor, low, high, original length) for Llama 3.1's scaling
        if scaling == "llama3":
            self.llama3 = (factor, config.rope_low_freq_factor, config.rope_high_freq_factor,
                           config.rope_original_max_len)  # fmt: skip
        self.style, self.d_head = config.rope_style, e
        self.partial = e < config.d_head
        self.register_buffer("inv_freq", torch.empty(e // 2), persistent=False)
        self.reset_buffers()

    def reset_buffers(self) -> None:
        """theta_i = base^(-2i/e), i = 0 .. e/2 - 1 (also after building on the meta device;
        computed on the CPU: a meta arange would run torch's reference decompositions, whose
        first use imports torch._dynamo, 0.5 s)."""
        e = self.d_head
        exponents = torch.arange(0, e, 2, dtype=torch.float32, device="cpu") / e
        inv_freq = 1.0 / self.base**exponents
        if self.llama3 is not None:
            inv_freq = llama3_frequencies(inv_freq, *self.llama3)
        self.inv_freq = inv_freq.to(self.inv_freq.device)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> Rotation:
        """The rotation for each position, laid out to match the pairing.  b t -> b 1 t e."""
        angles = (positions.float() * self.position_scale).unsqueeze(-1) * self.inv_freq  # b t e/2
        if self.style == "rotate_half":
            angles = torch.cat([angles, angles], dim=-1)  # b t e
        else:
            angles = angles.repeat_interleave(2, dim=-1)  # b t e
        cos, sin = angles.cos().unsqueeze(1).to(dtype), angles.sin().unsqueeze(1).to(dtype)
        dims = self.d_head if self.partial else None
        if self.style != "rotate_half":
            return Rotation(cos, sin, self.style, dims=dims)
        half = sin.shape[-1] // 2
        return Rotation(cos, sin, self.style, torch.cat([-sin[..., :half], sin[..., half:]], dim=-1), dims)

    def extra_repr(self) -> str:
        return f"style={self.style!r}, position_scale={self.position_scale}"


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head slopes m_h: 2^(-8/n), 2^(-16/n), ... ; non-powers of two interleave (paper, §3)."""

    def powers_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = powers_of_two(closest)
    if closest < n_heads:
        slopes += powers_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes)


class AlibiBias(nn.Module):
    """bias[b, h, i, j] = -m_h * |pos_i - pos_j|.  Shapes: b t, b s -> b h t s."""

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def reset_buffers(self) -> None:
        self.slopes = alibi_slopes(self.n_heads).to(self.slopes.device)

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        distance = (q_positions[:, :, None] - k_positions[:, None, :]).abs().float()  # b t s
        return -self.slopes[None, :, None, None] * distance[:, None]  # b h t s


def t5_relative_bucket(
    relative_position: torch.Tensor, bidirectional: bool, n_buckets: int, max_distance: int
) -> torch.Tensor:
    """Bucket of each distance j - i: exact below n/2 (or n/4 each way), then logarithmic."""
    bucket = torch.zeros_like(relative_position)
    if bidirectional:
        n_buckets //= 2
        bucket = bucket + (relative_position > 0).long() * n_buckets
        distance = relative_position.abs()
    else:
        distance = -torch.clamp(relative_position, max=0)  # only the past counts
    max_exact = n_buckets // 2
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (n_buckets - max_exact)).long()
    large = torch.clamp(large, max=n_buckets - 1)
    return bucket + torch.where(is_small, distance, large)


class T5RelativeBias(nn.Module):
    """bias[b, h, i, j] = B[bucket(pos_j - pos_i), h], learned.  Shapes: b t, b s -> b h t s."""

    def __init__(self, config: ModelConfig, bidirectional: bool) -> None:
        super().__init__()
        self.bidirectional = bidirectional
        self.n_buckets, self.max_distance = config.relative_buckets, config.relative_max_distance
        self.weight = nn.Parameter(torch.zeros(config.relative_buckets, config.n_heads))

    def forward(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        relative = k_positions[:, None, :] - q_positions[:, :, None]  # b t s
        buckets = t5_relative_bucket(relative, self.bidirectional, self.n_buckets, self.max_distance)
        return nn.functional.embedding(buckets, self.weight).permute(0, 3, 1, 2)  # b h t s

    def extra_repr(self) -> str:
        return (
            f"buckets={self.n_buckets}, max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )
