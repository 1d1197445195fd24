"""Text generation: greedy decoding, sampling and beam search over a KV cache.

Autoregressive decoding picks one token at a time and feeds it back::

    x_{n+1} = choose(process(logits(x_1 .. x_n)))

* greedy:      choose = argmax
* sampling:    choose ~ softmax(warped scores)  (temperature, top-k, top-p)
* beam search: keep the ``num_beams`` continuations with the highest summed log-probability

``process`` (the stages of `glassformer.sampling.pipeline`, in order) and ``choose`` are in
`glassformer.sampling`. Semantics follow HF transformers 4.57 ``generate`` (processor order,
stop tokens kept in the output, beam scoring and its early-stopping heuristic), so the two
can be compared token for token.

Decoder-only prompts of different lengths are left-padded (pad id: ``pad_token_id`` or 0)
and masked; the model derives positions from the mask, so a padded row generates what it
would alone. One `KVCache` is allocated for prompt + new tokens; the prompt is run once
(prefill), then each step feeds only the newest token. Encoder-decoder models encode the
source once and start the decoder from ``decoder_start_token_id``.

>>> from glassformer import ModelConfig, build
>>> net = build(ModelConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2)).eval()
>>> settings = GenerationSettings(max_new_tokens=4, greedy=True)
>>> new = generate_ids(net, [[1, 2, 3], [4, 5]], settings)
>>> [len(row) for row in new]
[4, 4]
>>> list(stream_ids(net, [1, 2, 3], settings)) == new[0]
True
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence

import torch
from torch.nn import functional as F

from glassformer import fast_decode
from glassformer.inputs import decoder_start_id, is_batch, left_pad, pad_id, prompt_rows, stop_tokens
from glassformer.models.base import TransformerModel
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.kv_cache_int8 import Int8KVCache
from glassformer.sampling import GenerationSettings, choose, pipeline

__all__ = ["GenerationSettings", "generate_ids", "stream_ids"]
Prompts = Sequence[Sequence[int]] | torch.Tensor
NOT_PICKED = -1e9  # HF's score for beams that must not be chosen (finite: no inf - inf = NaN)


# ---------------------------------------------------------------------------------------
# public API


@torch.no_grad()
def generate_ids(
    net: TransformerModel,
    input_ids: Prompts,
    settings: GenerationSettings | None = None,
    attention_mask: torch.Tensor | Sequence[Sequence[int]] | None = None,
    *,
    use_cache: bool = True,
) -> list[list[int]]:
    """New token ids for each prompt (the prompt itself is not repeated).

    ``input_ids``: a list of token-id lists (any lengths) or a b t tensor, with an optional
    b t ``attention_mask`` (1 = token, 0 = padding; either padding side). A row ends with
    its first stop token, which is included. ``use_cache=False`` reruns the whole sequence
    at every step: slower, and the reference the cache is tested against.
    """
    settings = settings or GenerationSettings()
    prompts, stop_ids = _prepare(net, input_ids, attention_mask, settings)
    if settings.max_new_tokens == 0:
        return [[] for _ in prompts]
    if settings.num_beams > 1:
        return _beam_search(net, prompts, settings, stop_ids, use_cache)
    seqs = _Sequences(net, prompts, settings.max_new_tokens, use_cache, settings.kv_cache)
    for _ in _sample_steps(seqs, settings, stop_ids):
        pass
    return [_until_stop(row, stop_ids) for row in seqs.generated().tolist()]


@torch.no_grad()
def stream_ids(
    net: TransformerModel,
    input_ids: Sequence[int] | Prompts,
    settings: GenerationSettings | None = None,
    attention_mask: torch.Tensor | Sequence[int] | None = None,
    *,
    use_cache: bool = True,
) -> Iterator[int]:
    """Yield each new token id of one prompt as soon as it is chosen (greedy or sampling).

    ``input_ids``: one prompt (a list of ids, a 1-D tensor, or a batch of one). The same
    tokens as ``generate_ids(net, [prompt], settings)[0]``, including the stop token.
    """
    settings = settings or GenerationSettings()
    if settings.num_beams > 1:
        raise ValueError(
            f"stream_ids cannot stream beam search (num_beams={settings.num_beams}): no token is final "
            "before the search ends; use generate_ids, or num_beams=1"
        )
    if not is_batch(input_ids):  # one prompt: a list of ids or a 1-D tensor
        input_ids = [input_ids]
        attention_mask = None if attention_mask is None else [attention_mask]
    prompts, stop_ids = _prepare(net, input_ids, attention_mask, settings)
    if len(prompts) != 1:
        raise ValueError(f"stream_ids streams one prompt, got a batch of {len(prompts)}; use generate_ids")
    seqs = _Sequences(net, prompts, settings.max_new_tokens, use_cache, settings.kv_cache)
    return (int(token[0]) for token in _sample_steps(seqs, settings, stop_ids))


# ---------------------------------------------------------------------------------------
# inputs


def _prepare(net, input_ids, attention_mask, settings) -> tuple[list[list[int]], tuple[int, ...]]:
    """Check the model and the prompts; return the prompts without padding and the stop ids."""
    config = getattr(net, "config", None)
    if config is None or not config.causal:  # an encoder predicts no next token
        family = getattr(config, "family", type(net).__name__)
        raise ValueError(
            f"cannot generate with a {family!r} model: generation needs a language-model head, "
            "family 'decoder' or 'encoder_decoder'"
        )
    prompts = prompt_rows(input_ids, attention_mask)
    for i, row in enumerate(prompts):
        bad = [t for t in row if not isinstance(t, numbers.Integral) or not 0 <= t < config.vocab_size]
        if bad:
            raise ValueError(
                f"prompt {i} holds {bad[0]!r}, not a token id of this model "
                f"(vocab_size={config.vocab_size}: valid ids are the integers 0..{config.vocab_size - 1})"
            )
    prompts = [[int(t) for t in row] for row in prompts]  # numpy or tensor ints -> int
    stops = stop_tokens(config, settings.stop_token_ids)
    if config.positions == "learned":
        longest = max(len(row) for row in prompts)
        if longest > config.max_seq_len:
            raise ValueError(
                f"a prompt of {longest} tokens is longer than max_seq_len={config.max_seq_len} of this model "
                "(learned positions cannot extrapolate); shorten the prompt"
            )
        if config.seq2seq and settings.max_new_tokens > config.max_seq_len:
            raise ValueError(
                f"max_new_tokens={settings.max_new_tokens} is more than the decoder's max_seq_len="
                f"{config.max_seq_len} (learned positions cannot extrapolate); lower max_new_tokens"
            )
    return prompts, stops


def _until_stop(row: list[int], stop_ids: tuple[int, ...]) -> list[int]:
    """The row up to and including its first stop token."""
    ends = [i for i, token in enumerate(row) if token in stop_ids]
    return row[: ends[0] + 1] if ends else row


# ---------------------------------------------------------------------------------------
# the growing sequences and the model calls that extend them


class _Sequences:
    """A batch of token sequences that grow one token per step, with their model state.

    Decoder-only: ``tokens`` starts as the left-padded prompts and ``mask`` marks their
    real tokens (new tokens are always real). Encoder-decoder: the prompts are encoded
    once into ``memory``; ``tokens`` starts with the decoder start token.
    """

    def __init__(
        self,
        net: TransformerModel,
        prompts: list[list[int]],
        max_new_tokens: int,
        use_cache: bool,
        kv_cache: str = "model",
    ):
        config = net.config
        self.net, self.encoder_decoder = net, config.seq2seq
        param = next(net.parameters())
        self.device = param.device
        self.pad_id = pad_id(config)
        ids, mask = left_pad(prompts, self.pad_id, self.device)  # b p: the newest token is last
        b, p = ids.shape
        if self.encoder_decoder:
            self.memory, self.memory_mask = net.encode(ids, mask), mask  # b s d, b s
            ids = torch.full((b, 1), decoder_start_id(config), dtype=torch.long, device=self.device)  # b 1
            mask = torch.ones_like(ids)
            p = 1
        self.batch, self.prompt_len, self.length = b, p, p
        self.tokens = torch.full((b, p + max_new_tokens), self.pad_id, dtype=torch.long, device=self.device)
        self.tokens[:, :p] = ids
        self.mask = torch.ones_like(self.tokens)  # b n
        self.mask[:, :p] = mask
        self.padded = bool((mask == 0).any())  # without padding the model needs no mask
        self.cache = None
        # Learned positions end at max_seq_len: past it, keep the last max_seq_len tokens as
        # the context and recompute them at every step (nanoGPT's crop; no cache).
        self.window = None
        if (
            config.positions == "learned"
            and not config.seq2seq
            and p + max_new_tokens - 1 > config.max_seq_len
        ):
            self.window, use_cache = config.max_seq_len, False
        if use_cache:
            cache = Int8KVCache if kv_cache == "int8" else KVCache
            self.cache = cache.for_model(config, b, p + max_new_tokens, param.dtype, self.device)
        # glassformer.fast_decode: the same step in fewer kernels, once the prompt is cached
        self.step = fast_decode.step_for(net) if use_cache and not self.padded else None

    def next_logits(self) -> torch.Tensor:
        """Scores for the next token of every row.  -> b v (float32)."""
        start = self.cache.length if self.cache is not None else 0  # the cache holds the rest
        if self.window is not None:
            start = max(0, self.length - self.window)  # the last max_seq_len tokens only
        new = self.tokens[:, start : self.length]  # b t
        mask = self.mask[:, (0 if self.cache is not None else start) : self.length] if self.padded else None
        if self.step is not None and new.shape[1] == 1 and self.step.covers(len(new), self.cache.length):
            logits = self.step(new, self.cache)  # b 1 v
        elif self.encoder_decoder:
            logits = self.net.decode(
                new, self.memory, self.memory_mask, decoder_attention_mask=mask, cache=self.cache
            )  # b t v
        else:
            logits = self.net(new, mask, cache=self.cache, last_only=True)  # b 1 v
        return logits[:, -1].float()  # b v

    def append(self, token: torch.Tensor) -> None:
        """Add one token (b) to every row."""
        self.tokens[:, self.length] = token
        self.length += 1

    def reorder(self, index: torch.Tensor) -> None:
        """Row i continues what row index[i] was (beam search)."""
        self.tokens, self.mask = self.tokens[index], self.mask[index]
        if self.encoder_decoder:
            self.memory, self.memory_mask = self.memory[index], self.memory_mask[index]
        if self.cache is not None:
            self.cache.reorder(index)

    def so_far(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every token so far and its mask (prompt + new, or decoder start + new).  b s, b s."""
        return self.tokens[:, : self.length], self.mask[:, : self.length]

    def generated(self) -> torch.Tensor:
        """The new tokens.  b n."""
        return self.tokens[:, self.prompt_len : self.length]


# ---------------------------------------------------------------------------------------
# greedy decoding and sampling


def _process(
    scores: torch.Tensor, seqs: _Sequences, settings: GenerationSettings, stop: torch.Tensor, step: int
) -> torch.Tensor:
    """The scores a token is chosen from: the last stage of `glassformer.sampling.pipeline`
    (every strategy: repetition penalty, then min_new_tokens; sampling: temperature, top-k,
    top-p).  b v -> b v."""
    tokens, mask = seqs.so_far()
    return list(pipeline(scores, tokens, settings, step, mask, stop))[-1].scores


@torch.no_grad()
def _sample_steps(
    seqs: _Sequences, settings: GenerationSettings, stop_ids: tuple[int, ...]
) -> Iterator[torch.Tensor]:
    """Greedy or sampled decoding; yields each step's tokens (b).

    A row that emits a stop token is finished: from then on it gets the pad id, and the
    loop ends once every row is finished or ``max_new_tokens`` are generated.
    """
    stop = torch.tensor(stop_ids, dtype=torch.long, device=seqs.device)
    running = torch.ones(seqs.batch, dtype=torch.bool, device=seqs.device)  # b
    for step in range(settings.max_new_tokens):
        scores = _process(seqs.next_logits(), seqs, settings, stop, step)  # b v
        token = choose(scores, settings, step)  # b: sampled from step's own stream, or the argmax
        token = torch.where(running, token, seqs.pad_id)  # b
        seqs.append(token)
        running &= ~torch.isin(token, stop)
        yield token
        if not running.any():
            return


# ---------------------------------------------------------------------------------------
# beam search


def _take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[i, index[i, j], ...] for each batch row i: pick beams.  b k ... , b c -> b c ..."""
    return torch.take_along_dim(x, index.view(*index.shape, *[1] * (x.dim() - 2)), dim=1)


@torch.no_grad()
def _beam_search(net, prompts, settings: GenerationSettings, stop_ids, use_cache) -> list[list[int]]:
    """Beam search as HF transformers 4.57 ``_beam_search`` (deterministic, one result per prompt).

    Each of the k live beams of a prompt has a score, sum log p (processed log-softmax).
    Per step, the c = max(2, 1 + n_stop) * k best one-token continuations are candidates
    (enough that k of them do not end, even if many pick a stop token). The best k that
    did not end become the live beams; those among the best k that did end (a stop token,
    or max_new_tokens reached) join the k finished hypotheses, scored
    ``sum log p / n_new ** length_penalty``. The search stops early when no live beam can
    beat the worst finished one (HF's heuristic: the best live score divided by its current
    length, or by max length if ``early_stopping == "never"`` and ``length_penalty > 0``),
    or, with ``early_stopping=True``, once k hypotheses are finished.
    """
    b, k, n = len(prompts), settings.num_beams, settings.max_new_tokens
    rows = [row for row in prompts for _ in range(k)]  # (b k)
    seqs = _Sequences(net, rows, n, use_cache, settings.kv_cache)
    device, v = seqs.device, net.config.vocab_size
    stop = torch.tensor(stop_ids, dtype=torch.long, device=device)
    c = max(2, 1 + len(stop_ids)) * k
    among_best_k = torch.arange(c, device=device) < k  # c: only these may finish; the rest are spares
    first_row = torch.arange(b, device=device)[:, None] * k  # b 1: row of beam 0 of each prompt

    live_tokens = torch.zeros((b, k, n), dtype=torch.long, device=device)  # b k n
    live_scores = torch.full((b, k), NOT_PICKED, device=device)  # b k
    live_scores[:, 0] = 0.0  # the k copies of a prompt are one beam until the first step
    done_tokens = torch.zeros((b, k, n), dtype=torch.long, device=device)  # b k n
    done_lengths = torch.zeros((b, k), dtype=torch.long, device=device)  # b k
    done_scores = torch.full((b, k), NOT_PICKED, device=device)  # b k
    done = torch.zeros((b, k), dtype=torch.bool, device=device)  # b k: slot holds a hypothesis
    improvable = torch.ones((b, 1), dtype=torch.bool, device=device)  # b 1

    for step in range(n):
        log_probs = _process(F.log_softmax(seqs.next_logits(), dim=-1), seqs, settings, stop, step)  # (b k) v
        total = (log_probs.view(b, k, v) + live_scores[..., None]).view(b, k * v)  # b (k v)
        cand_scores, flat = total.topk(c, dim=-1)  # b c, sorted
        parent, token = flat // v, flat % v  # b c
        cand_tokens = _take(live_tokens, parent)  # b c n
        cand_tokens[:, :, step] = token
        ends = torch.isin(token, stop) | (step + 1 == n)  # b c

        # Live beams: the best k candidates that did not end.
        not_ended_scores = cand_scores + ends.float() * NOT_PICKED  # b c
        pick = not_ended_scores.topk(k, dim=-1).indices  # b k
        live_tokens, live_scores = _take(cand_tokens, pick), _take(not_ended_scores, pick)  # b k n, b k

        # Finished hypotheses: the best k of the old ones and those that just ended.
        just_ended = ends & among_best_k  # b c
        full = done.all(dim=-1, keepdim=True) & (settings.early_stopping is True)  # b 1
        ended_scores = cand_scores / (step + 1) ** settings.length_penalty  # b c
        ended_scores = torch.where(just_ended & improvable & ~full, ended_scores, NOT_PICKED)
        lengths = torch.full_like(parent, step + 1)  # b c
        keep = torch.cat([done_scores, ended_scores], dim=1).topk(k, dim=-1).indices  # b k
        done_scores = _take(torch.cat([done_scores, ended_scores], dim=1), keep)
        done_tokens = _take(torch.cat([done_tokens, cand_tokens], dim=1), keep)
        done_lengths = _take(torch.cat([done_lengths, lengths], dim=1), keep)
        done = _take(torch.cat([done, just_ended], dim=1), keep)

        # Can a live beam still beat the worst finished hypothesis?
        longest = n if settings.early_stopping == "never" and settings.length_penalty > 0 else step + 1
        best_live = live_scores[:, :1] / longest**settings.length_penalty  # b 1
        worst_done = torch.where(done, done_scores.min(dim=-1, keepdim=True).values, NOT_PICKED)  # b k
        improvable &= (best_live > worst_done).any(dim=-1, keepdim=True)
        all_full = bool(done.all()) and settings.early_stopping is True
        if not improvable.any() or all_full or bool(ends.all()):
            break
        seqs.reorder((_take(parent, pick) + first_row).flatten())  # each live beam continues its parent
        seqs.append(live_tokens[:, :, step].flatten())
    return [done_tokens[i, 0, : done_lengths[i, 0]].tolist() for i in range(b)]
