"""Attention statistics on a `Trace`: entropy, attended distance, weight on chosen tokens.

Each function reads the captured ``blocks.*.attn.pattern`` (batch row 0) and returns
one number per layer, head and query position (``layers h t``) or per layer and head
(``layers h``)::

    trace = lm.trace("The cat sat on the mat.", names="blocks.*.attn.pattern")
    attention_entropy(trace)        # layers h t: H_i = -sum_s A_is log A_is  (nats)
    attended_distance(trace)        # layers h t: D_i = sum_s A_is |i - s|
    first_token_attention(trace)    # layers h:   mean weight on position 0
    separator_attention(trace)      # layers h:   mean weight on [CLS] / [SEP] / "." ...

Encoder-decoder traces name their patterns ``encoder.blocks.*`` and ``decoder.blocks.*``:
pass ``prefix="encoder."`` or ``prefix="decoder."``; ``kind="cross_attn"`` reads the
decoder's cross-attention (queries are decoder positions, keys encoder positions).

>>> import glassformer as gf
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4)))
>>> trace = lm.trace([1, 2, 3, 4, 5], names="blocks.*.attn.pattern")
>>> attention_entropy(trace).shape                 # layers h t
torch.Size([2, 4, 5])
>>> float(attention_entropy(trace)[0, 0, 0])       # the first query of a decoder sees one key
0.0
>>> first_token_attention(trace).shape             # layers h
torch.Size([2, 4])
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from glassformer.nn.hooks import hook_name
from glassformer.nn.trace import Trace

PREFIXES = ("", "encoder.", "decoder.")
KINDS = ("attn", "cross_attn")

# Tokens that many heads use as a "no-op" target (Clark et al. 2019, "What does BERT look
# at?"; Xiao et al. 2023, attention sinks). Compared after stripping the word-start
# markers of byte-level BPE ("Ġ"), SentencePiece ("▁") and spaces.
SEPARATORS = (
    "[CLS]",
    "[SEP]",
    "<s>",
    "</s>",
    "<bos>",
    "<eos>",
    "<sep>",
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    ".",
    ",",
)


def stacked_patterns(trace: Trace, prefix: str = "", kind: str = "attn") -> torch.Tensor:
    """Every captured ``{prefix}blocks.{i}.{kind}.pattern``, stacked: layers b h t s (float32).

    Fails unless layers 0..n-1 were all captured, so that index ``l`` of the result is
    layer ``l`` of the model.
    """
    if prefix not in PREFIXES:
        raise ValueError(f"prefix={prefix!r}; allowed values: {', '.join(map(repr, PREFIXES))}")
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; allowed values: {', '.join(KINDS)}")
    if kind == "cross_attn" and prefix != "decoder.":
        raise ValueError("cross-attention lives in an encoder-decoder's decoder: pass prefix='decoder.'")
    every = hook_name(f"{kind}.pattern", "*", prefix)  # e.g. decoder.blocks.*.cross_attn.pattern
    wanted = re.compile(re.escape(every).replace(r"\*", r"(\d+)"))  # the glob's * read as the layer
    layers = {int(m.group(1)): name for name in trace if (m := wanted.fullmatch(name))}
    if not layers:
        hint = ""
        if prefix == "" and any(name.startswith(("encoder.", "decoder.")) for name in trace):
            hint = " This is an encoder-decoder trace: pass prefix='encoder.' or prefix='decoder.'."
        raise ValueError(
            f'the trace holds no {every}; capture it with lm.trace(text, names="{every}").{hint}'
        )
    if sorted(layers) != list(range(len(layers))):
        raise ValueError(
            f"the trace holds the {kind} patterns of layers {sorted(layers)} only; capture every layer "
            f'(names="{every}") so that layer indices mean what they say'
        )
    return torch.stack([trace[layers[i]].float() for i in range(len(layers))])  # layers b h t s


def attention_patterns(trace: Trace, prefix: str = "", kind: str = "attn") -> torch.Tensor:
    """The attention weights of batch row 0: layers h t s (rows sum to 1)."""
    return stacked_patterns(trace, prefix, kind)[:, 0]


def head_pattern(trace: Trace, layer: int, head: int, prefix: str = "", kind: str = "attn") -> torch.Tensor:
    """One head's attention weights (batch row 0): t s."""
    patterns = attention_patterns(trace, prefix, kind)  # layers h t s
    check_layer_head(layer, head, patterns.shape[0], patterns.shape[1])
    return patterns[layer, head]


def check_layer_head(layer: int, head: int | None, n_layers: int, n_heads: int) -> None:
    """ValueError naming the valid range when ``layer`` or ``head`` is out of it."""
    for what, value, size in (("layer", layer, n_layers), ("head", head, n_heads)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{what} must be an int, got {type(value).__name__}")
        if not 0 <= value < size:
            raise ValueError(f"{what}={value} is out of range: this model has {size} {what}s (0..{size - 1})")


# -- entropy --------------------------------------------------------------------------------


def attention_entropy(trace: Trace, prefix: str = "", kind: str = "attn") -> torch.Tensor:
    """Entropy of each query's attention, in nats: layers h t.

    H_i = -sum_s A_is log A_is, with 0 log 0 = 0 (masked keys add nothing). Uniform
    attention over n visible keys gives log n; attention on one key gives 0.
    """
    patterns = attention_patterns(trace, prefix, kind)  # layers h t s
    return 0.0 - torch.special.xlogy(patterns, patterns).sum(-1)  # layers h t (0 - : no "-0.0")


def mean_attention_entropy(trace: Trace, prefix: str = "", kind: str = "attn") -> torch.Tensor:
    """Per-head mean of `attention_entropy` over query positions: layers h."""
    return attention_entropy(trace, prefix, kind).mean(-1)


# -- distance -------------------------------------------------------------------------------


def attended_distance(trace: Trace, prefix: str = "") -> torch.Tensor:
    """Mean distance |i - s| between each query i and the keys it attends to: layers h t.

    D_i = sum_s A_is |i - s|. A previous-token head gives 1, a head on the first token
    gives i. Self-attention only: in cross-attention i and s index different sequences.
    """
    patterns = attention_patterns(trace, prefix, "attn")  # layers h t s
    t, s = patterns.shape[-2:]
    distance = (torch.arange(t)[:, None] - torch.arange(s)[None, :]).abs().float()  # t s
    return (patterns * distance).sum(-1)  # layers h t


def distance_profile(trace: Trace, prefix: str = "") -> torch.Tensor:
    """Per-head mean of `attended_distance` over query positions: layers h.

    Small: a local head (previous token, current token); large: a head that reaches back
    to the start (the first token, a long-range dependency). In a causal model query i
    can reach at most i back, so compare heads of one trace, not across lengths.
    """
    return attended_distance(trace, prefix).mean(-1)


# -- weight on chosen key positions -----------------------------------------------------------


def attention_to(
    trace: Trace, positions: Sequence[int], prefix: str = "", kind: str = "attn"
) -> torch.Tensor:
    """Mean attention weight that goes to the key ``positions``: layers h.

    score = mean_i sum_{s in positions} A_is, over the queries i that can see a chosen
    key and have a choice. In a causal pattern (nothing above the diagonal, in any layer
    or head) those are i >= max(1, min(positions)): earlier queries cannot see the keys,
    and query 0 sees only itself. Otherwise (an encoder, cross-attention) every query.
    """
    patterns = attention_patterns(trace, prefix, kind)  # layers h t s
    t, s = patterns.shape[-2:]
    keys = _check_positions(positions, s)
    causal = kind == "attn" and not bool(patterns.triu(1).any())
    first_query = max(1, min(keys)) if causal else 0
    if first_query >= t:
        raise ValueError(f"a causal trace of {t} token(s) has no query that chooses where to attend")
    return patterns[:, :, first_query:, keys].sum(-1).mean(-1)  # layers h


def first_token_attention(trace: Trace, prefix: str = "", kind: str = "attn") -> torch.Tensor:
    """Mean weight on position 0 (a BOS / [CLS] token or the first word): layers h.

    Many heads park their attention there when they have nothing to do (an "attention
    sink", Xiao et al. 2023). See `attention_to` for which queries count (in a decoder:
    all but the first, which has no other choice).
    """
    return attention_to(trace, [0], prefix, kind)


def separator_positions(tokens: Sequence[str], separators: Sequence[str] = SEPARATORS) -> list[int]:
    """Positions of separator tokens in ``tokens``.

    >>> separator_positions(["[CLS]", "the", "cat", ".", "[SEP]"])
    [0, 3, 4]
    >>> separator_positions(["The", "Ġcat", "Ġsat", "."])
    [3]
    """
    wanted = set(separators)
    return [i for i, token in enumerate(tokens) if token.lstrip("Ġ▁ ") in wanted or token in wanted]


def separator_attention(
    trace: Trace, separators: Sequence[str] = SEPARATORS, prefix: str = "", kind: str = "attn"
) -> torch.Tensor:
    """Mean weight on the separator tokens of ``trace.tokens`` ([SEP], [CLS], ".", ...): layers h.

    The keys must be the tokens the trace was made from: an encoder's (or decoder-only
    model's) self-attention, or a decoder's cross-attention to the encoder.
    """
    if prefix == "decoder." and kind == "attn":
        raise ValueError(
            "trace.tokens are the encoder's tokens, not the decoder's; pass the decoder's key "
            "positions to attention_to(trace, positions, prefix='decoder.') instead"
        )
    s = attention_patterns(trace, prefix, kind).shape[-1]
    if len(trace.tokens) != s:
        raise ValueError(f"trace.tokens has {len(trace.tokens)} tokens but the keys number {s}")
    positions = separator_positions(trace.tokens, separators)
    if not positions:
        raise ValueError(
            f"no separator token ({', '.join(separators)}) in the text {trace.tokens!r:.200}; "
            "pass separators=[...] or use attention_to(trace, positions)"
        )
    return attention_to(trace, positions, prefix, kind)


def _check_positions(positions: Sequence[int], s: int) -> list[int]:
    keys = [positions] if isinstance(positions, int) else list(positions)
    if not keys:
        raise ValueError("positions is empty: give at least one key position")
    for p in keys:
        if isinstance(p, bool) or not isinstance(p, int):
            raise TypeError(f"positions must be ints, got {p!r}")
        if not 0 <= p < s:
            raise ValueError(f"position {p} is out of range for {s} key positions (0..{s - 1})")
    return sorted(set(keys))
