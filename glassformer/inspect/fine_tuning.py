"""What fine-tuning changed: each head's attention before and after, on the same passage.

The passage goes through the pretrained model (P) and the fine-tuned one (F), and for every
layer l, head h and query row i the two attention rows (``blocks.{l}.attn.pattern``) are
compared with one of two distances, both between 0 (the same row) and 1 (disjoint rows):

    js   Jensen-Shannon divergence in bits:  JS(P_i, F_i) = 1/2 KL(P_i || M_i) + 1/2 KL(F_i || M_i),
         M_i = (P_i + F_i) / 2,  KL(p || q) = sum_j p_j log2(p_j / q_j)
    l1   total variation:                     TV(P_i, F_i) = 1/2 sum_j |P_ij - F_ij|

``shift[l, h]`` is the mean over the query rows that see at least one key; `ranked` lists
the heads by it, most moved first, and `patterns` gives one head's two t s patterns to draw
side by side (`glassformer.viz.attention_heatmap`). The two models must share their
architecture's shape (layers, heads) and their tokenizer: a passage given as text is
tokenized by the pretrained model, and the fine-tuned one must read the same ids.

>>> import glassformer as gf
>>> from glassformer.models import with_classifier
>>> config = gf.ModelConfig(family="encoder", vocab_size=40, d_model=16, n_layers=2, n_heads=2)
>>> before = gf.LanguageModel(gf.build(config))
>>> after = gf.LanguageModel(with_classifier(before.net, 2).eval())   # same body, new head
>>> float(attention_shift(before, after, [1, 2, 3, 4]).shift.max())   # untrained: nothing moved
0.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from glassformer.inputs import TokenInput, input_prefix
from glassformer.inspect.attention_stats import attention_patterns, check_layer_head
from glassformer.nn.hooks import hook_name

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

MEASURES = ("js", "l1")


@dataclass(frozen=True)
class AttentionShift:
    """How far each head's attention moved: ``shift`` layers x heads, and both patterns."""

    tokens: list[str]
    measure: str
    shift: torch.Tensor  # layers h: mean distance over query rows
    before: torch.Tensor  # layers h t s: the pretrained model's patterns
    after: torch.Tensor  # layers h t s: the fine-tuned model's patterns

    def ranked(self, top: int | None = None) -> list[tuple[int, int, float]]:
        """(layer, head, shift) of the heads, the most moved first (``top``: only that many)."""
        n_heads = self.shift.shape[1]
        order = torch.argsort(self.shift.flatten(), descending=True, stable=True).tolist()
        heads = [(i // n_heads, i % n_heads, float(self.shift.flatten()[i])) for i in order]
        return heads if top is None else heads[:top]

    def patterns(self, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One head's attention (t s) in the pretrained model, then in the fine-tuned one."""
        check_layer_head(layer, head, self.shift.shape[0], self.shift.shape[1])
        return self.before[layer, head], self.after[layer, head]

    def __str__(self) -> str:
        lines = [f"attention moved ({self.measure}, 0 = same, 1 = disjoint), most first:"]
        lines += [f"  layer {layer} head {head}: {value:.3f}" for layer, head, value in self.ranked(5)]
        return "\n".join(lines)


def row_distance(p: torch.Tensor, q: torch.Tensor, measure: str = "js") -> torch.Tensor:
    """Distance between attention rows p and q (... s -> ...): Jensen-Shannon in bits or total
    variation, see the module docstring.

    >>> row_distance(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])).item()  # disjoint
    1.0
    >>> row_distance(torch.tensor([0.5, 0.5]), torch.tensor([1.0, 0.0]), "l1").item()
    0.5
    """
    if measure not in MEASURES:
        raise ValueError(f"measure={measure!r}; allowed values: {', '.join(MEASURES)}")
    p, q = p.double(), q.double()
    if measure == "l1":
        return 0.5 * (p - q).abs().sum(-1)
    m = 0.5 * (p + q)

    def kl(a: torch.Tensor) -> torch.Tensor:  # KL(a || m) in bits, 0 log 0 = 0
        return torch.where(a > 0, a * torch.log2(a.clamp(min=1e-300) / m.clamp(min=1e-300)), 0.0).sum(-1)

    return (0.5 * kl(p) + 0.5 * kl(q)).clamp(min=0.0)


def attention_shift(
    before: LanguageModel, after: LanguageModel, text: TokenInput, measure: str = "js"
) -> AttentionShift:
    """Compare every head's attention of ``before`` (pretrained) and ``after`` (fine-tuned) on
    one passage; see the module docstring."""
    a, b = before.config, after.config
    if (a.n_layers, a.n_heads) != (b.n_layers, b.n_heads):
        raise ValueError(
            f"the models differ in shape ({a.n_layers} layers x {a.n_heads} heads before, "
            f"{b.n_layers} x {b.n_heads} after): compare a model with its own fine-tuned copy"
        )
    if measure not in MEASURES:
        raise ValueError(f"measure={measure!r}; allowed values: {', '.join(MEASURES)}")
    ids = before.inputs.single(text)  # 1 t
    if isinstance(text, str) and after.tokenizer is not None:
        theirs = after.inputs.single(text)
        if not torch.equal(theirs.cpu(), ids.cpu()):
            raise ValueError(
                "the two models tokenize the passage differently: fine-tuning keeps the tokenizer, "
                "so these are not a model and its fine-tuned copy"
            )
    after.inputs.single(ids.tolist(), "text")  # the ids fit the fine-tuned model too
    prefix = input_prefix(before.net)
    names = hook_name("attn.pattern", "*", prefix)
    p = attention_patterns(before.trace(ids, names), prefix)  # layers h t s
    q = attention_patterns(after.trace(ids.to(after.inputs.device), names), prefix).to(p.device)
    distance = row_distance(p, q, measure)  # layers h t
    seen = (p.sum(-1) > 0) & (q.sum(-1) > 0)  # rows that see a key (a fully masked row sums to 0)
    shift = (distance * seen).sum(-1) / seen.sum(-1).clamp(min=1)  # layers h
    return AttentionShift(before.inputs.labels(ids), measure, shift.float(), p, q)
