"""Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention
Flow in Transformers"): how much each input token feeds each output position through
all the layers, from the attention patterns alone.

Both methods read each layer l as one t x t matrix, the head-mean attention with the
residual connection added back and rows renormalized::

    Ã_l = normalize_rows(I / 2 + mean_h(A_l) / 2)

* rollout multiplies them: R = Ã_L ... Ã_2 Ã_1 (row i: how output i mixes the inputs);
* flow treats them as capacities of a layered graph (node (l, j) = position j after
  layer l; edge (l, i) -> (l-1, j) of capacity Ã_l[i, j]) and takes the maximum flow
  from output node (L, i) to input node (0, j).

Why this variant: it is the paper's. The I/2 stands for the residual stream, which
carries each token's own vector past every attention sublayer (without it, rollout of
a layer that attends elsewhere would lose the token entirely); the head mean because
all heads write into the same residual stream and the paper averages them. It ignores
the values, W_O, the FFNs and the norms, so it is a picture of where information *can*
travel, not an attribution.

>>> import glassformer as gf
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4)))
>>> trace = lm.trace([1, 2, 3, 4], names="blocks.*.attn.pattern")
>>> rollout = attention_rollout(trace)             # t s
>>> rollout.shape, bool(torch.allclose(rollout.sum(-1), torch.ones(4)))
(torch.Size([4, 4]), True)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from glassformer.inspect.attention_stats import attention_patterns
from glassformer.nn.trace import Trace

FLOW_MAX_TOKENS = 64  # one max-flow per (output, input) pair: t^2 flows on (L+1) t nodes
_FLOW_SCALE = 2**24  # scipy's max-flow wants integer capacities: weights in units of 2^-24


def residual_attention(trace: Trace, prefix: str = "") -> torch.Tensor:
    """Ã_l = normalize_rows(I/2 + mean_h(A_l)/2) for each layer: layers t t.

    A query that sees no key (its pattern row is all 0) keeps only the identity.
    """
    patterns = attention_patterns(trace, prefix, "attn")  # layers h t s
    t, s = patterns.shape[-2:]
    if t != s:
        raise ValueError(
            f"rollout needs square self-attention patterns (one forward pass, no KV cache); got t={t}, s={s}"
        )
    mixed = 0.5 * patterns.mean(1) + 0.5 * torch.eye(t)  # layers t t
    return mixed / mixed.sum(-1, keepdim=True)


def rollout_by_layer(trace: Trace, prefix: str = "") -> torch.Tensor:
    """The rollout after each layer, R_l = Ã_l ... Ã_1: layers t t (the last is `attention_rollout`)."""
    residual = residual_attention(trace, prefix)  # layers t t
    rolled = []
    total = torch.eye(residual.shape[-1])
    for layer in residual:
        total = layer @ total  # t t: output i <- input j through layers 1..l
        rolled.append(total)
    return torch.stack(rolled)


def attention_rollout(trace: Trace, prefix: str = "") -> torch.Tensor:
    """R = Ã_L ... Ã_1: t t. Row i is how much output position i draws on each input
    position; rows sum to 1. For an encoder-decoder pass ``prefix="encoder."`` or
    ``"decoder."`` (the decoder's self-attention only: cross-attention is left out)."""
    return rollout_by_layer(trace, prefix)[-1]


def attention_flow(
    trace: Trace,
    prefix: str = "",
    outputs: Sequence[int] | None = None,
    max_tokens: int = FLOW_MAX_TOKENS,
) -> torch.Tensor:
    """Maximum flow from each output position to each input position: t t (rows: outputs).

    The graph has a node per (layer boundary l = 0..L, position); edge (l, i) -> (l-1, j)
    has capacity Ã_l[i, j] (`residual_attention`). F[i, j] is the max flow from (L, i)
    to (0, j); it is at most 1, and rows need not sum to 1 (divide each row by its sum
    for a distribution over inputs). ``outputs`` limits the rows computed (others stay 0).

    Cost: one max-flow per pair, each on (L+1) t nodes and up to L t^2 edges, so the
    text is limited to ``max_tokens`` (64) tokens (12 layers x 64 tokens: ~25 s); use
    `attention_rollout` for longer ones. Solved with scipy's Dinic algorithm, in C, on
    capacities rounded to multiples of 2^-24; networkx's max flow (pure Python) gives the
    same values within 5e-7, 100-200 times slower.
    """
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_flow

    residual = residual_attention(trace, prefix).double()  # layers t t
    n_layers, t = residual.shape[0], residual.shape[-1]
    if t > max_tokens:
        raise ValueError(
            f"attention flow on {t} tokens would solve {t * t:,} max-flow problems; it is limited to "
            f"max_tokens={max_tokens}: use a shorter text, pass max_tokens=..., or use attention_rollout"
        )
    rows = list(range(t)) if outputs is None else _check_outputs(outputs, t)

    # node (l, j) has index l * t + j; edges run from layer l down to layer l - 1
    capacity = torch.round(residual * _FLOW_SCALE).long()  # layers t t
    layer, i, j = capacity.nonzero(as_tuple=True)
    sources = (layer + 1) * t + i
    targets = layer * t + j
    weights = capacity[layer, i, j]
    n_nodes = (n_layers + 1) * t
    edges = (sources.numpy(), targets.numpy())
    graph = csr_array((weights.numpy().astype("int32"), edges), shape=(n_nodes, n_nodes))

    flow = torch.zeros(t, t, dtype=torch.float64)
    for out in rows:
        for inp in range(t):
            value = maximum_flow(graph, n_layers * t + out, inp, method="dinic").flow_value
            flow[out, inp] = value / _FLOW_SCALE
    return flow.float()


def _check_outputs(outputs: Sequence[int], t: int) -> list[int]:
    rows = list(outputs)
    for p in rows:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < t:
            raise ValueError(f"outputs must be positions in 0..{t - 1}, got {p!r}")
    return rows
