"""What the analyses share: one input as ids, the decoder's input, a forward pass, token labels.

Every analysis takes one text (or ids) at a time: `input_ids` checks it is a single
sequence no longer than the model allows; an encoder-decoder's ``decoder_input`` is the
decoder start token followed by the text's tokens (teacher forcing), or the start token
alone; `forward` returns what the model computes for a batch (logits, or hidden states
for a sentence encoder without an LM head).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch

from glassformer.models import EncoderDecoderLM, EncoderModel, TransformerModel

if TYPE_CHECKING:  # glassformer.lm imports this package
    from glassformer.lm import LanguageModel, TokenInput


def token_id(lm: LanguageModel, token: str | int, name: str = "token") -> int:
    """The id of ``token``: an id, or a string that the tokenizer encodes as exactly one token."""
    vocab = lm.config.vocab_size
    if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
        if not 0 <= int(token) < vocab:
            raise ValueError(f"{name} id {token} is out of range for vocab_size={vocab} (0..{vocab - 1})")
        return int(token)
    if not isinstance(token, str):
        raise TypeError(f"{name} must be a token string or id, got {type(token).__name__}")
    if lm.tokenizer is None:
        raise ValueError(f"{name} {token!r} is text but this model has no tokenizer; pass a token id")
    frame = set(lm.tokenizer.encode(""))  # tokens added around every text ([CLS] [SEP] for BERT)
    ids = [i for i in lm.tokenizer.encode(token, allowed_special="all") if i not in frame]
    if len(ids) != 1:
        pieces = [lm.tokenizer.id_to_token(i) for i in ids]
        if not pieces:
            raise ValueError(f"{name} {token!r} encodes to no token; pass a single token or a token id")
        raise ValueError(
            f"{name} {token!r} is {len(ids)} tokens {pieces}, not one; pass a single token "
            f"(for example {pieces[0]!r}) or a token id"
        )
    return ids[0]


def input_ids(lm: LanguageModel, text: TokenInput, name: str = "text") -> torch.Tensor:
    """One input as 1 t ids, no longer than the model's max_seq_len."""
    ids = lm.ids(text, name)
    if ids.shape[0] != 1:
        raise ValueError(f"{name} must be one input, got a batch of {ids.shape[0]}")
    limit = lm.config.max_seq_len
    if ids.shape[1] > limit:
        raise ValueError(
            f"{name} has {ids.shape[1]:,} tokens, more than max_seq_len={limit:,} of this model; "
            "pass a shorter text"
        )
    return ids


def decoder_input_ids(lm: LanguageModel, decoder_input: TokenInput | None) -> torch.Tensor | None:
    """An encoder-decoder's decoder input, 1 t (default: the start token alone; text: the
    start token + its tokens); None for other models."""
    if not isinstance(lm.net, EncoderDecoderLM):
        if decoder_input is not None:
            raise ValueError(f"decoder_input is only for encoder-decoder models, not {lm.config.family!r}")
        return None
    from glassformer.generate import decoder_start_id

    start = decoder_start_id(lm.config)
    if decoder_input is None:
        return torch.tensor([[start]], device=next(lm.net.parameters()).device)
    if isinstance(decoder_input, str):  # text: the start token, then its tokens (teacher forcing)
        if lm.tokenizer is None:
            raise ValueError("decoder_input is text but this model has no tokenizer; pass token ids")
        decoder_input = [start, *lm.tokenizer.encode(decoder_input)]
    return input_ids(lm, decoder_input, "decoder_input")


def forward(lm: LanguageModel, ids: torch.Tensor, decoder_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The model's output for a batch of inputs: logits b t v (hidden states for a sentence encoder)."""
    net = lm.net
    if isinstance(net, EncoderDecoderLM):
        return net(ids, decoder_ids.expand(len(ids), -1))
    if isinstance(net, EncoderModel) and net.mlm_head is None:
        return net.encode(ids)
    return net(ids)


def stack_prefix(lm: LanguageModel) -> str:
    """Where the input tokens' blocks live: ``encoder.`` for an encoder-decoder, else nothing."""
    return "encoder." if isinstance(lm.net, EncoderDecoderLM) else ""


@contextlib.contextmanager
def evaluating(net: TransformerModel) -> Iterator[None]:
    """Eval mode (no dropout) for an analysis, then the mode the model had."""
    was_training = net.training
    net.eval()
    try:
        yield
    finally:
        net.train(was_training)


def token_strings(lm: LanguageModel, ids: torch.Tensor) -> list[str]:
    """The tokens of 1 t ids as the tokenizer spells them (ids as text without one)."""
    if lm.tokenizer is None:
        return [str(i) for i in ids[0].tolist()]
    return [lm.tokenizer.id_to_token(i) for i in ids[0].tolist()]
