"""Head roles: scores that pick out heads doing one recognisable job.

Each score is layers h, in [0, 1], a mean attention weight:

* previous token — mean_i A[i, i-1] over queries i >= 1;
* first token — mean weight on position 0 (`first_token_attention`);
* positional — the largest mean weight at one fixed offset (defined in `positional_scores`);
* separator — mean weight on the separators after position 0 ([SEP], ".", ...);
* induction — on random tokens repeated twice, mean weight from each token of the second
  copy to the token after its earlier occurrence (Olsson et al. 2022); decoders only.

`head_roles(lm, text)` computes them all and lists the top heads of each role.

>>> import glassformer as gf
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4)))
>>> trace = lm.trace([1, 2, 3, 4, 5], names="blocks.*.attn.pattern")
>>> previous_token_scores(trace).shape             # layers h
torch.Size([2, 4])
>>> roles = head_roles(lm, [1, 2, 3, 4, 5], top=2)
>>> sorted(roles.scores)                            # each: layers h
['first token', 'induction', 'positional', 'previous token']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from glassformer.inputs import input_prefix
from glassformer.inspect.attention_stats import (
    SEPARATORS,
    attention_patterns,
    attention_to,
    check_layer_head,
    first_token_attention,
    separator_positions,
    stacked_patterns,
)
from glassformer.models import DecoderLM
from glassformer.nn.hooks import hook_name
from glassformer.nn.trace import Trace, capture


def previous_token_scores(trace: Trace, prefix: str = "") -> torch.Tensor:
    """Mean attention from each query i to key i - 1, over i = 1..t-1: layers h."""
    patterns = attention_patterns(trace, prefix, "attn")  # layers h t s
    t = patterns.shape[-2]
    if t < 2:
        raise ValueError("a previous-token score needs at least 2 tokens")
    i = torch.arange(1, t)
    return patterns[:, :, i, i - 1].mean(-1)  # layers h


def first_token_scores(trace: Trace, prefix: str = "") -> torch.Tensor:
    """Mean attention on position 0: layers h, the number `first_token_attention` gives
    (a decoder's query 0, which can only attend to itself, is left out)."""
    return first_token_attention(trace, prefix)


def positional_scores(
    trace: Trace, max_offset: int = 4, prefix: str = ""
) -> tuple[torch.Tensor, torch.Tensor]:
    """How strongly a head attends at one fixed relative offset: (scores, offsets), each layers h.

    For an offset d in -max_offset..max_offset (key = query - d; d > 0 looks back,
    d < 0 ahead, d = 0 at itself), the offset profile is

        P_d = mean over queries i with 1 <= i - d <= t - 1 of A[i, i - d]

    and the score is max_d P_d, with that d as the offset. A score near 1 means the head
    looks at the same relative position whatever the tokens are (previous-token heads are
    positional heads at d = 1). Key 0 is left out of every mean: many heads park their
    attention on the first token, which is a different role (`first_token_scores`).
    """
    patterns = attention_patterns(trace, prefix, "attn")  # layers h t s
    t = patterns.shape[-2]
    if isinstance(max_offset, bool) or not isinstance(max_offset, int) or max_offset < 0:
        raise ValueError(f"max_offset must be an int >= 0, got {max_offset!r}")
    offsets = [d for d in range(-max_offset, max_offset + 1) if any(1 <= i - d < t for i in range(t))]
    if not offsets:
        raise ValueError("a positional score needs at least 2 tokens")
    profile = []
    for d in offsets:
        i = torch.tensor([i for i in range(t) if 1 <= i - d < t])
        profile.append(patterns[:, :, i, i - d].mean(-1))  # layers h
    profile = torch.stack(profile, -1)  # layers h offsets
    scores, best = profile.max(-1)
    return scores, torch.tensor(offsets)[best]


def induction_scores(
    lm,
    seq_len: int | None = None,
    n_seqs: int = 8,
    seed: int = 0,
    token_ids: Sequence[int] | None = None,
) -> torch.Tensor:
    """Induction score of each head on repeated random tokens: layers h.

    Each of ``n_seqs`` sequences is ``[bos] r r``, r being ``seq_len`` tokens drawn
    uniformly from ``token_ids`` (default: the whole vocabulary but the special tokens).
    For each query i in the second copy, an induction head attends to the token *after*
    the earlier occurrence of token i, key i - seq_len + 1 (Olsson et al. 2022); the
    score is the mean weight there. Random tokens give no other clue, so only a head
    that does "find the earlier occurrence, look one further" scores high.
    ``seq_len`` defaults to 25, or less where the model's max_seq_len needs it.

    Decoder-only models: an encoder sees the whole sequence at once, so attending to
    the next token is no evidence of an induction mechanism.
    """
    net, config = lm.net, lm.config
    if not config.causal or config.seq2seq:
        raise ValueError(
            f"induction scores need a causal decoder-only model; this one is {config.family!r} "
            "(an encoder sees both copies at once, so attending ahead proves nothing)"
        )
    bos = [] if config.bos_token_id is None else [config.bos_token_id]
    room = (config.max_seq_len - len(bos)) // 2
    seq_len = min(25, room) if seq_len is None else seq_len
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 2:
        raise ValueError(f"seq_len must be an int >= 2, got {seq_len!r}")
    if seq_len > room:
        raise ValueError(
            f"seq_len={seq_len} repeated twice{' after <bos>' if bos else ''} is "
            f"{2 * seq_len + len(bos)} tokens, more than max_seq_len={config.max_seq_len}; "
            f"use seq_len <= {room}"
        )
    if isinstance(n_seqs, bool) or not isinstance(n_seqs, int) or n_seqs < 1:
        raise ValueError(f"n_seqs must be an int >= 1, got {n_seqs!r}")
    pool = _token_pool(lm, token_ids)
    generator = torch.Generator().manual_seed(seed)
    first = pool[torch.randint(len(pool), (n_seqs, seq_len), generator=generator)]  # n seq_len
    ids = torch.cat([torch.tensor([bos] * n_seqs, dtype=torch.long), first, first], 1)  # n t
    inputs = lm.inputs
    ids = ids.to(inputs.device)
    trace = capture(net, hook_name("attn.pattern", "*"), lambda: inputs.forward(ids), input_ids=ids)
    patterns = stacked_patterns(trace)  # layers n h t s
    queries = torch.arange(len(bos) + seq_len, len(bos) + 2 * seq_len)
    return patterns[..., queries, queries - seq_len + 1].mean(-1).mean(1)  # layers h


def _token_pool(lm, token_ids: Sequence[int] | None) -> torch.Tensor:
    vocab = lm.config.vocab_size
    if token_ids is None:
        special = {lm.config.pad_token_id, lm.config.bos_token_id, lm.config.eos_token_id}
        special |= set(getattr(lm.tokenizer, "special_tokens", {}).values())
        token_ids = [i for i in range(vocab) if i not in special]
    pool = torch.tensor(list(token_ids), dtype=torch.long)
    if pool.numel() < 2:
        raise ValueError("token_ids needs at least 2 distinct tokens to draw random sequences from")
    if int(pool.min()) < 0 or int(pool.max()) >= vocab:
        raise ValueError(f"token_ids must lie in 0..{vocab - 1} (vocab_size={vocab})")
    return pool


# -- all roles at once ---------------------------------------------------------------------


@dataclass
class HeadRoles:
    """Scores per role (layers h) and the top heads of each role, best first."""

    scores: dict[str, torch.Tensor]
    top: dict[str, list[tuple[int, int, float]]]  # role -> [(layer, head, score), ...]
    offsets: torch.Tensor  # layers h: the offset of each head's positional score
    tokens: list[str] = field(default_factory=list)

    def score(self, role: str, layer: int, head: int) -> float:
        """One head's score for ``role`` (ValueError on an unknown role or a bad layer/head)."""
        if role not in self.scores:
            raise ValueError(f"role={role!r}; roles here: {', '.join(self.scores)}")
        n_layers, n_heads = self.scores[role].shape
        check_layer_head(layer, head, n_layers, n_heads)
        return float(self.scores[role][layer, head])

    def __str__(self) -> str:
        width = max(len(role) for role in self.top)
        lines = [f"head roles on {len(self.tokens)} tokens (L = layer, H = head, score in [0, 1]):"]
        for role, heads in self.top.items():
            cells = []
            for layer, head, value in heads:
                extra = f" @{int(self.offsets[layer, head]):+d}" if role == "positional" else ""
                cells.append(f"L{layer}H{head} {value:.2f}{extra}")
            lines.append(f"  {role:<{width}}  " + ", ".join(cells))
        return "\n".join(lines)


def head_roles(lm, text, top: int = 3, prefix: str | None = None, max_offset: int = 4) -> HeadRoles:
    """Score every head on each role and keep the ``top`` heads per role.

    Previous-token, first-token, positional and separator scores (weight on the
    separators after position 0, such as [SEP] or ".", when ``text`` holds one) come
    from ``text``; the induction score (decoders only) from
    `induction_scores` on random repeated tokens. ``prefix`` picks the stack of an
    encoder-decoder (default ``"encoder."``).
    """
    if prefix is None:
        prefix = input_prefix(lm.net)
    ids = lm.inputs.single(text)
    trace = lm.trace(ids, names=hook_name("attn.pattern", "*", prefix))
    if ids.shape[1] < 2:
        raise ValueError("head roles need a text of at least 2 tokens")
    positional, offsets = positional_scores(trace, max_offset, prefix)
    scores = {
        "previous token": previous_token_scores(trace, prefix),
        "first token": first_token_scores(trace, prefix),
        "positional": positional,
    }
    separators = [p for p in separator_positions(trace.tokens, SEPARATORS) if p > 0]
    if separators:  # a [CLS] / <bos> at position 0 is the first-token role's already
        scores["separator"] = attention_to(trace, separators, prefix)
    if isinstance(lm.net, DecoderLM):
        scores["induction"] = induction_scores(lm)
    n_heads = positional.shape[1]
    best = {}
    for role, values in scores.items():
        flat = values.flatten()
        order = flat.argsort(descending=True)[:top].tolist()
        best[role] = [(k // n_heads, k % n_heads, float(flat[k])) for k in order]
    return HeadRoles(scores, best, offsets, list(trace.tokens))
