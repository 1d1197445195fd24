"""How the next token is chosen: `GenerationSettings` and the logits processors.

Each processor is a small pure function on a batch of next-token scores (b v) and follows the
HF transformers processor of the same name, so that generation can match it token for
token. `pipeline` is the one home of their order, which generation (`glassformer.generate`)
and the workshop's step-by-step prediction both iterate::

    "logits"       scores = logits                                  (float32, b v)
    "repetition"   scores = repetition_penalty(scores, seen tokens) (CTRL; Keskar et al., 2019)
    "suppress"     scores = suppress(scores, stop tokens)           while fewer than min_new_tokens
    --- sampling only ---
    "temperature"  scores = scores / T                              temperature
    "top_k"        scores = top_k(scores, k)                        keep the k largest
    "top_p"        scores = top_p(scores, p)                        nucleus (Holtzman et al., 2019)
    `choose`:      token ~ softmax(scores), i.e. p ∝ exp(z / T)   (greedy: argmax)

A stage that would change nothing is left out (penalty 1, top_k None, top_p None or 1).
Beam search applies the first two to log-softmax(logits) instead, as HF does.
Removed tokens get score -inf, so their probability after the softmax is exactly 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch

NEG_INF = float("-inf")
EARLY_STOPPING = (False, True, "never")
# What the facade (lm.generate, lm.stream, glassformer chat) samples with when an argument
# is not set (None). Beam search does not sample: it takes neither.
SAMPLING_DEFAULTS = {"temperature": 0.8, "top_p": 0.95}


MIN_TEMPERATURE = 1e-6  # the smallest T sampling divides by (fuzzing found 2.2e-311: inf scores)


KV_CACHES = ("model", "int8")  # the cache in the model's dtype, or in 8 bits (`nn.kv_cache_int8`)


@dataclass(frozen=True)
class GenerationSettings:
    """How to choose new tokens.

    Strategy: ``num_beams > 1`` is beam search; otherwise ``greedy=True`` or
    ``temperature == 0`` is greedy decoding; otherwise tokens are sampled at
    ``temperature`` with optional ``top_k`` / ``top_p``. ``stop_token_ids=None`` means
    the model's ``eos_token_id`` (if it has one); ``()`` means never stop early. ``seed``
    makes sampling reproducible. ``length_penalty`` and ``early_stopping`` only concern
    beam search: a finished beam scores ``sum(log p) / new_tokens ** length_penalty``.
    Beam search is deterministic: it rejects ``top_k``, ``top_p`` and temperatures other
    than 1 (the default, a no-op) or 0. ``kv_cache="int8"`` keeps the keys and values in
    8 bits (a quarter of float32's memory, `glassformer.nn.kv_cache_int8`).

    >>> GenerationSettings(top_p=1.5)
    Traceback (most recent call last):
    ...
    ValueError: top_p=1.5 must lie in (0, 1], or be None (no nucleus filter)
    """

    max_new_tokens: int = 64
    min_new_tokens: int = 0
    greedy: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    repetition_penalty: float = 1.0
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    stop_token_ids: tuple[int, ...] | None = None
    seed: int | None = None
    kv_cache: str = "model"  # the KV cache's storage: the model's dtype, or "int8" (`kv_cache_int8`)

    def __post_init__(self) -> None:
        if isinstance(self.stop_token_ids, int):
            object.__setattr__(self, "stop_token_ids", (self.stop_token_ids,))
        elif self.stop_token_ids is not None:
            object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        _check_int("max_new_tokens", self.max_new_tokens, low=0)
        _check_int("min_new_tokens", self.min_new_tokens, low=0)
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"min_new_tokens={self.min_new_tokens} must lie in [0, max_new_tokens={self.max_new_tokens}]"
            )
        if not self.temperature >= 0:  # also rejects NaN
            raise ValueError(f"temperature={self.temperature} must be >= 0 (0 means greedy decoding)")
        if 0 < self.temperature < MIN_TEMPERATURE:  # scores / T would overflow to inf, softmax to NaN
            raise ValueError(
                f"temperature={self.temperature:g} is too small to divide the scores by; use 0 for greedy "
                f"decoding (its limit) or at least {MIN_TEMPERATURE:g}"
            )
        if self.top_k is not None:
            _check_int("top_k", self.top_k, low=1, extra=" or None (no top-k filter)")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} must lie in (0, 1], or be None (no nucleus filter)")
        if not self.repetition_penalty > 0:
            raise ValueError(
                f"repetition_penalty={self.repetition_penalty} must be > 0 "
                "(1.0 = no penalty, > 1 discourages repeats)"
            )
        _check_int("num_beams", self.num_beams, low=1)
        if self.early_stopping not in EARLY_STOPPING or not isinstance(self.early_stopping, bool | str):
            raise ValueError(f"early_stopping={self.early_stopping!r}; allowed values: False, True, 'never'")
        for token in self.stop_token_ids or ():
            _check_int("each of stop_token_ids", token, low=0)
        if self.seed is not None:
            _check_int("seed", self.seed, low=0, extra=" or None")
        if self.kv_cache not in KV_CACHES:
            raise ValueError(f"kv_cache={self.kv_cache!r}; allowed values: {', '.join(KV_CACHES)}")
        if self.num_beams > 1 and (
            self.top_k is not None or self.top_p is not None or self.temperature not in (0.0, 1.0)
        ):
            raise ValueError(
                f"num_beams={self.num_beams} with temperature={self.temperature}, top_k={self.top_k}, "
                f"top_p={self.top_p}: beam sampling is not supported. Beam search is deterministic; "
                "use num_beams=1 to sample, or leave temperature=1.0, top_k=None and top_p=None."
            )

    @property
    def do_sample(self) -> bool:
        """Whether tokens are drawn at random (False: greedy or beam search)."""
        return self.num_beams == 1 and not self.greedy and self.temperature > 0


def generation_settings(
    max_new_tokens: int = 64,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = 0,
    **options,
) -> GenerationSettings:
    """Settings from the facade's arguments, ``None`` meaning "not set": sampling then uses
    `SAMPLING_DEFAULTS` (temperature 0.8, top_p 0.95; ``top_p=1.0`` turns nucleus filtering
    off); beam search (``num_beams > 1``) uses temperature 1 and no filter.

    >>> generation_settings(temperature=0.8, num_beams=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: num_beams=2 with temperature=0.8, top_k=None, top_p=None: beam sampling is not supported...
    >>> generation_settings().temperature, generation_settings(num_beams=2).top_p
    (0.8, None)
    """
    if options.get("num_beams", 1) == 1:
        temperature = SAMPLING_DEFAULTS["temperature"] if temperature is None else temperature
        top_p = SAMPLING_DEFAULTS["top_p"] if top_p is None else top_p
    return GenerationSettings(
        max_new_tokens=max_new_tokens,
        temperature=1.0 if temperature is None else temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        **options,
    )


def _check_int(name: str, value: object, low: int, extra: str = "") -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}{extra}")


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


STEP_STRIDE = 0x9E3779B97F4A7C15  # 2^64 / golden ratio: consecutive steps' seeds far apart


def step_generator(seed: int | None, step: int, device: torch.device | str = "cpu") -> torch.Generator | None:
    """The random stream that draws generation step ``step`` (0-based) under ``seed``: a
    generator of its own, seeded with ``(seed + step * STEP_STRIDE) mod 2^64`` (step 0: the
    seed itself). Each step's draw can so be made again alone, without replaying the steps
    before it: the workshop's walk of step k of a generation draws exactly the token the
    generation drew there. None (torch's global state) without a seed.

    >>> a, b = step_generator(7, 3), step_generator(7, 3)
    >>> torch.rand(2, generator=a).equal(torch.rand(2, generator=b))
    True
    """
    if seed is None:
        return None
    return torch.Generator(device=device).manual_seed((seed + step * STEP_STRIDE) % 2**64)


def sample(scores: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw one token per row from softmax(scores).  b v -> b.

    ``generator`` (a seeded ``torch.Generator``) makes the draw reproducible; without it
    torch's global random state is used, as HF ``generate`` does.
    """
    probs = torch.softmax(scores, dim=-1)  # b v
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(1)  # b


class Stage(NamedTuple):
    """One stage of `pipeline`: its name and the scores after it (b v)."""

    name: str
    scores: torch.Tensor


def pipeline(
    scores: torch.Tensor,
    seen: torch.Tensor,
    settings: GenerationSettings,
    step: int = 0,
    mask: torch.Tensor | None = None,
    stop: torch.Tensor | None = None,
) -> Iterator[Stage]:
    """The stages from next-token scores (b v) to the distribution a token is chosen from,
    in the order of the module docstring: "logits", "repetition", "suppress", then, when
    sampling (``settings.do_sample``), "temperature", "top_k", "top_p". The last stage's
    scores z give p ∝ exp(z) (temperature already applied: p ∝ exp(logit / T)); `choose` takes
    the token from them. ``seen``: the tokens so far (b s, ``mask`` 1 where real) that the
    repetition penalty reads; ``stop``: the stop ids (n) suppressed while ``step`` (0: the first
    new token) < ``min_new_tokens``. Stages that would change nothing are not yielded.

    >>> settings = GenerationSettings(temperature=0.5, top_k=2, top_p=1.0)
    >>> [name for name, _ in pipeline(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[0]]), settings)]
    ['logits', 'temperature', 'top_k']
    """
    yield Stage("logits", scores)
    if settings.repetition_penalty != 1.0:
        scores = apply_repetition_penalty(scores, seen, settings.repetition_penalty, mask)
        yield Stage("repetition", scores)
    if stop is not None and stop.numel() and step < settings.min_new_tokens:
        scores = suppress_tokens(scores, stop)
        yield Stage("suppress", scores)
    if not settings.do_sample:
        return
    scores = apply_temperature(scores, settings.temperature)
    yield Stage("temperature", scores)
    if settings.top_k is not None:
        scores = top_k_filter(scores, settings.top_k)
        yield Stage("top_k", scores)
    # top_p = 1 keeps every token: off, as in HF (`top_p < 1.0` adds its TopPLogitsWarper)
    if settings.top_p is not None and settings.top_p < 1:
        scores = top_p_filter(scores, settings.top_p)
        yield Stage("top_p", scores)


def choose(scores: torch.Tensor, settings: GenerationSettings, step: int = 0) -> torch.Tensor:
    """The token of each row from the last stage's scores (b v -> b): drawn from
    softmax(scores) with step ``step``'s own stream (`step_generator`) when sampling, else the
    argmax (greedy decoding)."""
    if not settings.do_sample:
        return scores.argmax(dim=-1)  # b
    return sample(scores, step_generator(settings.seed, step, scores.device))  # b
