"""What the views read from a model: which attention, which trace names, which tokens.

A model has up to three kinds of attention, and a view shows one of them:

| ``attention`` | models | queries -> keys | trace names |
| --- | --- | --- | --- |
| ``"self"`` | decoder (causal), encoder | tokens -> tokens | ``blocks.{i}.attn.*`` |
| ``"encoder"`` | encoder-decoder | source -> source | ``encoder.blocks.{i}.attn.*`` |
| ``"decoder"`` | encoder-decoder (causal) | target -> target | ``decoder.blocks.{i}.attn.*`` |
| ``"cross"`` | encoder-decoder | target -> source | ``decoder.blocks.{i}.cross_attn.*`` |

``attention=None`` picks ``"self"``, or ``"cross"`` for an encoder-decoder model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from glassformer.nn.hooks import hook_name
from glassformer.nn.trace import Trace

if TYPE_CHECKING:  # annotations only: the facade sits above the views
    from glassformer.inputs import TokenInput
    from glassformer.lm import LanguageModel

ATTENTION_KINDS = ("self", "encoder", "decoder", "cross")


@dataclass(frozen=True)
class AttentionSource:
    """One kind of attention of one model on one input, ready to trace."""

    lm: LanguageModel
    attention: str  # one of ATTENTION_KINDS
    ids: torch.Tensor  # 1 t: the input (the encoder's, for encoder-decoder models)
    decoder_ids: torch.Tensor | None  # 1 t: the decoder's input, encoder-decoder only
    query_tokens: list[str]
    key_tokens: list[str]
    stack: str  # "" (one stack), "encoder" or "decoder"
    module: str  # "attn" or "cross_attn"
    n_layers: int
    causal: bool  # queries see only keys s <= t

    @property
    def description(self) -> str:
        return {
            "self": "causal self-attention" if self.causal else "self-attention",
            "encoder": "encoder self-attention",
            "decoder": "decoder causal self-attention",
            "cross": "cross-attention (decoder -> encoder)",
        }[self.attention]

    def name(self, layer: int, what: str) -> str:
        """The trace name of ``what`` (q, k, scores, pattern) in ``layer``."""
        return hook_name(f"{self.module}.{what}", layer, self.stack)

    def layer(self, layer: int) -> int:
        """``layer`` checked against this stack (negative counts from the end)."""
        if not isinstance(layer, int) or isinstance(layer, bool):
            raise TypeError(f"layer must be an int, got {layer!r}")
        if not -self.n_layers <= layer < self.n_layers:
            raise ValueError(
                f"layer {layer} is out of range: the {self.description} of this model has "
                f"{self.n_layers} layers (0..{self.n_layers - 1})"
            )
        return layer % self.n_layers

    def layers(self, layers: Sequence[int] | None) -> list[int]:
        chosen = list(range(self.n_layers)) if layers is None else [self.layer(i) for i in layers]
        if not chosen:
            raise ValueError("layers is empty: pass at least one layer index, or None for all")
        return chosen

    def trace(self, names: Sequence[str]) -> Trace:
        return self.lm.trace(self.ids, list(names), decoder_input=self.decoder_ids)


def attention_source(
    lm: LanguageModel,
    text: TokenInput,
    attention: str | None = None,
    decoder_input: TokenInput | None = None,
) -> AttentionSource:
    """Resolve which attention of ``lm`` a view shows, and check that it applies.

    Ids, decoder ids and token labels come from the model's input pipeline (``lm.inputs``,
    `glassformer.inputs`), so a view reads exactly what every analysis reads.
    """
    config = lm.config
    attention = _check_attention(config.seq2seq, attention)
    inputs = lm.inputs
    ids = inputs.single(text)
    if not config.seq2seq:
        tokens = inputs.labels(ids)
        causal = config.causal
        return AttentionSource(lm, "self", ids, None, tokens, tokens, "", "attn", config.n_layers, causal)
    if decoder_input is None and attention != "encoder":
        raise ValueError(
            f"attention={attention!r} shows the decoder's queries: pass decoder_input "
            "(the target text, or its token ids)"
        )
    decoder_ids = None if decoder_input is None else inputs.decoder_ids(decoder_input)
    source = inputs.labels(ids)
    target = [] if decoder_ids is None else inputs.labels(decoder_ids)
    n_encoder, n_decoder = (len(stack.blocks) for stack in lm.net.stacks)
    sides = {  # queries, keys, stack, module, layers, causal
        "encoder": (source, source, "encoder", "attn", n_encoder, False),
        "decoder": (target, target, "decoder", "attn", n_decoder, True),
        "cross": (target, source, "decoder", "cross_attn", n_decoder, False),
    }
    return AttentionSource(lm, attention, ids, decoder_ids, *sides[attention])


def _check_attention(seq2seq: bool, attention: str | None) -> str:
    """``attention`` checked against the model's stacks (one, or an encoder and a decoder);
    None picks its default."""
    if attention is None:
        attention = "cross" if seq2seq else "self"
    if attention not in ATTENTION_KINDS:
        raise ValueError(f"attention={attention!r} is not one of {ATTENTION_KINDS}")
    if seq2seq:
        if attention == "self":
            raise ValueError(
                "an encoder-decoder model has three kinds of attention: pass attention='encoder', "
                "'decoder' or 'cross'"
            )
    elif attention != "self":
        raise ValueError(
            f"attention={attention!r} needs an encoder-decoder model, but this model has one stack: "
            "it has self-attention only (attention='self')"
        )
    return attention
