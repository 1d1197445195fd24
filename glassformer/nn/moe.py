"""Mixture of experts: each token's feed-forward is a weighted sum of k of n expert FFNs.

Sparse mixture of experts (Shazeer et al., 2017; Switch Transformer, Fedus et al., 2021;
Mixtral, Jiang et al., 2024). A router scores every expert for every token, the k best
run, and their outputs are mixed by the router's weights::

    r    = x W_router                        b t n   router logits
    p    = softmax(r)   (or sigmoid(r))      b t n   router scores
    E, w = top_k(p)                          b t k   the chosen experts and their scores
    w    = w / sum(w)                        b t k   when normalize_expert_weights (Mixtral)
    y_j  = FFN_{E_j}(x)                      b k t d each chosen expert's output
    MoE(x) = sum_j w_j y_j  [+ sigmoid(x w_s) FFN_shared(x)]   (a gated shared expert: Qwen2-MoE)

Each expert is an ordinary FFN (`FeedForward`), so a token pays for k experts (plus the
shared one), not n: the model holds n experts' parameters but each token *activates*
only k of them.

The router learns through two extra losses (`router_losses`), since top-k alone lets a
few experts take every token:

    aux = n * sum_i f_i P_i     (Switch, eq. 4) f_i: share of the t k routed slots sent to
                                expert i; P_i: the mean router probability of expert i.
                                1 when the load is even, up to n when one expert takes all.
    z   = mean_t (log sum_i exp r_ti)^2     (ST-MoE, Zoph et al., 2022): keeps logits small

Capacity: an expert's *load* is the number of tokens routed to it; with capacity factor c
each expert has room for c t k / n tokens. This implementation drops none (every routed
token is computed, as Mixtral does); `router_losses` counts the load of each expert and
the share of slots a capacity of c = 1.25 would have dropped (``over_capacity``).

Trace names (prefix ``blocks.{i}.ffn``): ``in`` b t d, ``router_logits`` b t n,
``router_probs`` b t n, ``experts`` b t k (expert ids), ``expert_weights`` b t k,
``expert_out`` b k t d (slot j: each token's j-th chosen expert's output, before weighting),
``shared_out`` b t d (the gated shared expert's contribution, when there is one),
``out`` b t d.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from glassformer.config import ModelConfig
from glassformer.nn.ffn import FeedForward
from glassformer.nn.hooks import HookPoint, attached


class MoEFeedForward(nn.Module):
    """A router over ``n_experts`` FFNs, k per token, and an optional shared expert.
    Shape: b t d -> b t d."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, n = config.d_model, config.n_experts
        self.k, self.router_kind = config.experts_per_token, config.router
        self.normalize = config.normalize_expert_weights
        self.router = nn.Linear(d, n, bias=False)
        self.experts = nn.ModuleList(FeedForward(config, config.expert_d_ff, hooked=False) for _ in range(n))
        self.shared_expert = self.shared_expert_gate = None
        if config.shared_expert_d_ff:
            self.shared_expert = FeedForward(config, config.shared_expert_d_ff, hooked=False)
            self.shared_expert_gate = nn.Linear(d, 1, bias=False)
            self.hook_shared_out = HookPoint("shared_out")
        self.hook_in, self.hook_out = HookPoint("in"), HookPoint("out")
        self.hook_router_logits, self.hook_router_probs = (
            HookPoint("router_logits"),
            HookPoint("router_probs"),
        )
        self.hook_experts, self.hook_expert_weights = HookPoint("experts"), HookPoint("expert_weights")
        self.hook_expert_out = HookPoint("expert_out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_in(x)  # b t d
        logits = self.hook_router_logits(self.router(x))  # b t n
        probs = self.hook_router_probs(router_scores(logits, self.router_kind))  # b t n
        weights, chosen = probs.topk(self.k, dim=-1)  # b t k, b t k
        if self.normalize:
            weights = weights / weights.sum(-1, keepdim=True)
        chosen = self.hook_experts(chosen)
        weights = self.hook_expert_weights(weights.to(x.dtype))
        # b k t d: slot j of every token, its j-th chosen expert's output (laid out like heads)
        expert_out = self.hook_expert_out(self._run_experts(x, chosen).transpose(1, 2))
        out = (weights.transpose(1, 2)[..., None] * expert_out).sum(1)  # b t d: sum_j w_j y_j
        if self.shared_expert is not None:
            gate = torch.sigmoid(self.shared_expert_gate(x))  # b t 1
            out = out + self.hook_shared_out(gate * self.shared_expert(x))
        return self.hook_out(out)

    def _run_experts(self, x: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
        """Each expert on the tokens routed to it: b t d, b t k -> b t k d (slot j of a token
        holds the output of its j-th chosen expert). The (token, slot) pairs are sorted by
        expert so that each expert reads one contiguous block of rows."""
        d = x.shape[-1]
        flat_chosen = chosen.reshape(-1)  # (b t k)
        order = flat_chosen.argsort(stable=True)  # slots grouped by expert
        counts = torch.bincount(flat_chosen, minlength=len(self.experts)).tolist()
        grouped = x.reshape(-1, d)[order // self.k]  # (b t k) d: each slot's token, by expert
        outputs = [
            self.experts[expert_id](rows)
            for expert_id, rows in enumerate(grouped.split(counts))
            if counts[expert_id]  # an expert no token chose does no work
        ]
        return torch.cat(outputs)[order.argsort()].view(*chosen.shape, d)  # back in slot order


def router_scores(logits: torch.Tensor, kind: str) -> torch.Tensor:
    """The router's score of each expert (b t n), in float32 like Mixtral's: softmax over the
    experts, or each expert's own sigmoid."""
    logits = logits.float()
    return logits.softmax(-1) if kind == "softmax" else torch.sigmoid(logits)


CAPACITY_FACTOR = 1.25  # the Switch Transformer's training capacity factor (Fedus et al., 2021)


class RouterLosses(NamedTuple):
    """The router's training signals over all MoE layers of one forward pass."""

    aux: torch.Tensor  # () load-balancing loss, mean over layers: 1 when balanced
    z: torch.Tensor  # () router z-loss, mean over layers
    load: torch.Tensor  # layers n: the share of routed slots each expert took (rows sum to 1)

    def over_capacity(self, capacity_factor: float = CAPACITY_FACTOR) -> torch.Tensor:
        """layers: the share of routed slots beyond each expert's capacity c t k / n, summed over
        experts, sum_i max(0, f_i - c / n): what a capacity would drop (this layer drops none)."""
        n = self.load.shape[-1]
        return (self.load - capacity_factor / n).clamp(min=0).sum(-1)


def router_losses(
    router_logits: list[torch.Tensor],
    k: int,
    kind: str = "softmax",
    mask: torch.Tensor | None = None,
) -> RouterLosses:
    """Load-balancing and z losses from each MoE layer's router logits (b t n), over the
    real tokens of ``mask`` (b t, 1 = token) if given, and each expert's load.

    aux = n * sum_i f_i P_i with f_i the share of the t k slots routed to expert i and P_i
    its mean probability (sigmoid scores are normalized to sum to 1 first);
    z = mean (logsumexp r)^2.
    """
    aux, z, load = [], [], []
    for logits in router_logits:
        n = logits.shape[-1]
        flat = logits.reshape(-1, n).float()  # (b t) n
        if mask is not None:
            flat = flat[mask.reshape(-1).bool()]
        probs = router_scores(flat, kind)
        chosen = probs.topk(k, dim=-1).indices  # (b t) k
        share = F.one_hot(chosen, n).sum(1).float().mean(0) / k  # n: f_i, sums to 1
        mean_prob = (probs / probs.sum(-1, keepdim=True)).mean(0)  # n: P_i
        aux.append(n * (share * mean_prob).sum())
        z.append(torch.logsumexp(flat, -1).square().mean())
        load.append(share)
    return RouterLosses(torch.stack(aux).mean(), torch.stack(z).mean(), torch.stack(load))


ROUTER_LOGITS = "*ffn.router_logits"


@contextlib.contextmanager
def collected_router_logits(points: Mapping[str, HookPoint]) -> Iterator[list[torch.Tensor]]:
    """Within the block, every MoE layer's router logits of each forward pass are appended
    to the list it yields (in forward order), gradients kept for the losses."""
    found: list[torch.Tensor] = []

    def keep(value: torch.Tensor, _name: str) -> None:
        found.append(value)

    with attached(points, {ROUTER_LOGITS: keep}):
        yield found
