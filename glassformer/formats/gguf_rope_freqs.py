"""Llama 3.1's RoPE scaling read back from the divisors llama.cpp stores (``rope_freqs.weight``).

Hugging Face's config keeps the scaling's settings (``rope_scaling``: ``factor``,
``low_freq_factor``, ``high_freq_factor``, ``original_max_position_embeddings``); llama.cpp's
converter turns them into one divisor per frequency, theta_i / f_i (`llama3_frequencies`: with
s_i = (L / lambda_i - low) / (high - low), lambda_i = 2 pi / theta_i):

    f_i = 1                                  fast frequencies (s_i >= 1: lambda_i < L / high)
    f_i = factor                             slow frequencies (s_i <= 0: lambda_i > L / low)
    f_i = 1 / ((1 - s_i) / factor + s_i)     between

so 1 / f_i is affine in 1 / lambda_i between the two ends. The divisors fix the factor and the
two wavelengths where blending starts and ends, L / low and L / high, but not L itself: (L, low,
high) and (c L, c low, c high) give the same frequencies. `llama3_settings` tries Llama 3's
settings (L 8192, low 1, high 4; Llama 3.1 has factor 8, 3.2 factor 32), then solves for low
and high with L = 8192; whatever it returns is checked against every stored divisor, and a file
that no setting fits is refused, naming the divisor that did not fit.

    >>> import torch
    >>> inv_freq = 1.0 / 500000.0 ** (torch.arange(0, 64, 2).float() / 64)
    >>> stored = inv_freq / llama3_frequencies(inv_freq, 8.0, 1.0, 4.0, 8192)
    >>> llama3_settings(stored.numpy(), 500000.0, 64, "x.gguf")["rope_scaling_factor"]
    8.0
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from glassformer.nn.positions import llama3_frequencies

ORIGINAL = 8192  # Llama 3's original context, the converter's default (only L / low and L / high count)
COMMON = ((1.0, 4.0),)  # (low, high) of Llama 3.1, 3.2 and 3.3
COMMON_FACTORS = (8.0, 16.0, 32.0)  # Llama 3.1 and 3.3: 8; Llama 3.2: 32
TOLERANCE = 1e-4  # relative: the converter computes the divisors in float32


def llama3_settings(stored: np.ndarray, base: float, dims: int, source: str) -> dict[str, Any]:
    """The `ModelConfig` fields of Llama 3.1's scaling whose divisors are ``stored`` (one per
    frequency of RoPE over ``dims`` features, base ``base``); {} when all are 1. ValueError,
    naming ``source``, when no setting gives them."""
    stored = np.asarray(stored, dtype=np.float64).reshape(-1)
    if stored.size != dims // 2:
        raise ValueError(
            f"{source}: rope_freqs.weight holds {stored.size} divisors; RoPE over {dims} features "
            f"turns {dims // 2} frequencies"
        )
    if not np.all(np.isfinite(stored)):
        raise ValueError(f"{source}: rope_freqs.weight holds values that are not finite numbers")
    if np.all(stored == 1.0):
        return {}
    inv_freq = 1.0 / base ** (torch.arange(0, dims, 2, dtype=torch.float32) / dims)  # as our RoPE has it
    # the slowest frequencies are divided by the factor itself, unless none is that slow
    factors = dict.fromkeys([float(stored.max()), *COMMON_FACTORS])
    candidates = [(factor, ORIGINAL, low, high) for factor in factors for low, high in COMMON]
    for factor in factors:
        candidates += _solved(stored, factor, inv_freq.double().numpy())
    worst = None
    for settings in candidates:
        factor, original, low, high = settings
        expected = (inv_freq / llama3_frequencies(inv_freq, factor, low, high, original)).double().numpy()
        error = np.abs(expected - stored) / stored
        if error.max() <= TOLERANCE:
            return {
                "rope_scaling": "llama3",
                "rope_scaling_factor": factor,
                "rope_low_freq_factor": low,
                "rope_high_freq_factor": high,
                "rope_original_max_len": original,
            }
        i = int(error.argmax())
        if worst is None or error[i] < worst[0]:
            worst = (error[i], i, expected[i], settings)
    _, i, expected, (factor, original, low, high) = worst
    raise ValueError(
        f"{source}: rope_freqs.weight fits no Llama 3 RoPE scaling: it divides frequency {i} of "
        f"{dims // 2} by {stored[i]:.6g}, where the closest setting (factor {factor:g}, low_freq_factor "
        f"{low:.6g}, high_freq_factor {high:.6g}, original_max_position_embeddings {original}) divides "
        f"it by {expected:.6g}"
    )


def _solved(stored: np.ndarray, factor: float, inv_freq: np.ndarray) -> list[tuple[float, int, float, float]]:
    """(factor, L, low, high) with L = `ORIGINAL`, low and high from the blended divisors: s_i
    from 1 / f_i, then the line s = a x + b through them over x = L / lambda_i; low and high are
    where it crosses 0 and 1. Kept and slowed frequencies bound the line where fewer than two are
    blended. [] where no line can be drawn."""
    if factor <= 1.0:
        return []
    blend = (1.0 / stored - 1.0 / factor) / (1.0 - 1.0 / factor)  # s_i, clamped to [0, 1] by the ends
    x = ORIGINAL * inv_freq / (2 * np.pi)  # L / lambda_i
    slowed, kept = blend <= TOLERANCE, blend >= 1 - TOLERANCE
    between = ~(slowed | kept)
    if between.sum() >= 2:
        slope, intercept = np.polyfit(x[between], blend[between], 1)
        if slope <= 0:
            return []
        low, high = -intercept / slope, (1 - intercept) / slope
    else:  # the blending region lies in the gap between the last slowed and the first kept x
        start = x[slowed].max() if slowed.any() else 0.0
        stop = x[kept].min() if kept.any() else 2 * x.max()
        if between.any():  # one blended point: any line through it that ends inside the gap
            x1, s1 = x[between][0], blend[between][0]
            width = 0.5 * min((x1 - start) / max(s1, 1e-12), (stop - x1) / max(1 - s1, 1e-12))
            low, high = x1 - s1 * width, x1 + (1 - s1) * width
        else:
            low, high = start + (stop - start) / 3, start + 2 * (stop - start) / 3
    if not 0 < low < high:
        return []
    rounded = (factor, ORIGINAL, float(f"{low:.6g}"), float(f"{high:.6g}"))
    return [rounded, (factor, ORIGINAL, float(low), float(high))]
