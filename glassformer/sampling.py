"""Logits processors: how next-token scores are reshaped before a token is chosen.

Each is a small pure function on a batch of next-token scores (b v) and follows the
HF transformers processor of the same name, so that generation can match it token for
token. Applied in this order by `glassformer.generate`::

    scores = logits                                   (float32, b v)
    scores = repetition_penalty(scores, seen tokens)  (CTRL; Keskar et al., 2019)
    scores = suppress(scores, stop tokens)            while fewer than min_new_tokens
    --- sampling only ---
    scores = scores / T                               temperature
    scores = top_k(scores, k)                         keep the k largest
    scores = top_p(scores, p)                         nucleus (Holtzman et al., 2019)
    token ~ softmax(scores)

Removed tokens get score -inf, so their probability after the softmax is exactly 0.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def apply_repetition_penalty(
    scores: torch.Tensor,
    token_ids: torch.Tensor,
    penalty: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Make tokens already in the sequence less likely (CTRL, Keskar et al., 2019).

    For every token id that occurs in ``token_ids`` (where ``mask`` is 1)::

        score' = score / penalty   if score > 0
        score' = score * penalty   otherwise

    so a penalty > 1 pushes the score towards -inf either way (dividing a negative score
    would raise it). Each token is penalized once, however often it occurs.

    Shapes: scores b v, token_ids b s, mask b s (1 = real token, 0 = padding) -> b v.

    >>> apply_repetition_penalty(torch.tensor([[2.0, -1.0, 3.0]]), torch.tensor([[0, 1, 0]]), 2.0)
    tensor([[ 1., -2.,  3.]])
    """
    if mask is None:
        mask = torch.ones_like(token_ids)
    counts = torch.zeros(scores.shape, dtype=torch.long, device=scores.device)  # b v
    counts.scatter_add_(1, token_ids.long(), mask.long())  # how often each id occurs
    penalized = torch.where(scores < 0, scores * penalty, scores / penalty)  # b v
    return torch.where(counts > 0, penalized, scores)


def suppress_tokens(scores: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """score'[i] = -inf for every id i in ``token_ids`` (used for stop tokens until
    ``min_new_tokens`` are generated).  Shapes: b v, n -> b v.

    >>> suppress_tokens(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([2]))
    tensor([[1., 2., -inf]])
    """
    scores = scores.clone()
    scores[:, token_ids] = NEG_INF
    return scores


def apply_temperature(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    """score' = score / T: T < 1 sharpens the distribution, T > 1 flattens it.  b v -> b v."""
    return scores / temperature


def top_k_filter(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest scores of each row, set the rest to -inf.  b v -> b v.

    A token tied with the k-th largest is kept too (as in HF ``TopKLogitsWarper``).

    >>> top_k_filter(torch.tensor([[1.0, 4.0, 3.0, 2.0]]), 2)
    tensor([[-inf, 4., 3., -inf]])
    """
    k = min(k, scores.shape[-1])
    kth_largest = torch.topk(scores, k, dim=-1).values[..., -1:]  # b 1
    return scores.masked_fill(scores < kth_largest, NEG_INF)


def top_p_filter(scores: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter (Holtzman et al., 2019): keep the smallest set of most likely
    tokens whose total probability is at least p; set the rest to -inf.  b v -> b v.

    Following HF ``TopPLogitsWarper``: sort the probabilities in ascending order, and
    drop a token when the cumulative sum up to and including it is <= 1 - p (the mass
    below it can be discarded and the rest still covers p). The most likely token is
    always kept, so a tiny p gives greedy decoding.

    >>> probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    >>> top_p_filter(probs.log(), 0.75).exp()  # 0.5 alone < 0.75 <= 0.5 + 0.3
    tensor([[0.5000, 0.3000, 0.0000, 0.0000]])
    """
    ascending, order = torch.sort(scores, dim=-1)  # b v
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)  # b v
    drop_sorted = cumulative <= 1 - p
    drop_sorted[..., -1] = False  # always keep the most likely token
    drop = drop_sorted.scatter(1, order, drop_sorted)  # back to vocabulary order
    return scores.masked_fill(drop, NEG_INF)


def sample(scores: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw one token per row from softmax(scores).  b v -> b.

    ``generator`` (a seeded ``torch.Generator``) makes the draw reproducible; without it
    torch's global random state is used, as HF ``generate`` does.
    """
    probs = torch.softmax(scores, dim=-1)  # b v
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(1)  # b
