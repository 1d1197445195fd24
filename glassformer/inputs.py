"""The one input pipeline: what a user gives -> the model's inputs -> the right forward pass.

The facade (`glassformer.lm`), generation, the analyses (`glassformer.inspect`) and the
views (`glassformer.viz`) all turn text, ids and batches into tensors here, so one rule
holds everywhere. An input is text (tokenized), a list of ids, a list of equal-length
lists (a batch) or a 1-D / 2-D tensor of ids.

Each family's forward pass (`ModelInputs.forward`):

| family | call | output |
| --- | --- | --- |
| decoder | ``net(ids, mask)`` | next-token logits b t v |
| encoder (MLM head) | ``net(ids, mask)`` | masked-LM logits b t v |
| encoder (sentence encoder) | ``net.encode(ids, mask)`` | hidden states b t d |
| encoder_decoder | ``net(ids, decoder_ids, mask)`` | logits b t' v at the decoder positions |
| classifier (``n_classes > 0``) | ``net.classify(ids, mask)`` | class logits b c |

An encoder-decoder's decoder input defaults to its start token alone; text given as the
decoder input becomes the start token followed by the text's tokens (teacher forcing).

A vision transformer (``config.vision``) reads no text: its input is ``pixel_values``, a float
tensor b C H W (or one image C H W), already scaled as the model was trained (HF's image
processor's resizing and normalization are not applied here); `ModelInputs.pixels` checks it
and `ModelInputs.model_input` picks ids or pixels by the model. Its forward pass is the same
table's: ``net.classify(pixels)`` for an image classifier, ``net.encode(pixels)`` without a head.

>>> import glassformer as gf
>>> net = gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=4))
>>> inputs = ModelInputs(net)
>>> inputs.ids([1, 2, 3]).shape, inputs.forward(inputs.ids([[1, 2], [3, 4]])).shape
(torch.Size([1, 3]), torch.Size([2, 2, 50]))
>>> left_pad([[1, 2, 3], [4]], pad_id=0)
(tensor([[1, 2, 3],
        [0, 0, 4]]), tensor([[1, 1, 1],
        [0, 0, 1]]))
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from glassformer.config import ModelConfig
from glassformer.models import TransformerModel
from glassformer.tokenizers.readable import character_groups

TokenInput = str | Sequence[int] | Sequence[Sequence[int]] | torch.Tensor


class ModelInputs:
    """Inputs for one network (``net``) and its tokenizer (may be None: ids only)."""

    def __init__(self, net: TransformerModel, tokenizer: Any | None = None) -> None:
        self.net, self.tokenizer = net, tokenizer

    @property
    def config(self) -> ModelConfig:
        return self.net.config

    @property
    def device(self) -> torch.device:
        return next(self.net.parameters()).device

    # ids ------------------------------------------------------------------------------
    def model_input(self, value: Any, name: str = "input") -> torch.Tensor:
        """What the model's first stack reads: token ids b t (`ids`), or a vision model's
        pixel values b C H W (`pixels`)."""
        return self.pixels(value) if self.config.vision else self.ids(value, name)

    def pixels(self, value: Any, name: str = "pixel_values") -> torch.Tensor:
        """A vision model's images as a float tensor b C H W on the model's device, in its dtype,
        from a tensor or an array of b C H W or C H W (one image)."""
        c, size = self.config.n_channels, self.config.image_size
        expected = f"(b, C, H, W) = (b, {c}, {size}, {size})"
        if not self.config.vision:
            raise ValueError(f"{name}: pixel values are for vision models; this one reads token ids")
        if isinstance(value, str):
            raise ValueError(
                f"{name} is text, but this is a vision model (ViT): it reads images, pixel_values "
                f"as a float tensor {expected}, not text"
            )
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a float tensor {expected}, got {type(value).__name__}")
        pixels = value.unsqueeze(0) if value.dim() == 3 else value  # one image: a batch of one
        self.net.check_pixels(pixels, name)
        return pixels.to(self.device, next(self.net.parameters()).dtype)

    def ids(self, value: TokenInput, name: str = "input") -> torch.Tensor:
        """Token ids as a b t long tensor on the model's device, from text, lists or a tensor."""
        if self.config.vision:
            raise ValueError(
                f"{name}: this is a vision model (ViT), it reads no token ids; pass pixel_values, a "
                f"float tensor (b, C, H, W) = (b, {self.config.n_channels}, {self.config.image_size}, "
                f"{self.config.image_size})"
            )
        if isinstance(value, str):
            value = self._encode(value, name)
        if isinstance(value, torch.Tensor):
            ids = value
        else:
            rows = list(value)
            if rows and not isinstance(rows[0], (list, tuple, torch.Tensor, np.ndarray)):
                rows = [rows]
            lengths = {len(r) for r in rows}
            if len(lengths) > 1:
                raise ValueError(
                    f"{name} rows have different lengths {sorted(lengths)}; pad them and pass an "
                    "attention_mask, or use generate(), which pads prompts itself"
                )
            try:
                ids = torch.tensor([list(r) for r in rows], dtype=torch.long)
            except (TypeError, ValueError) as error:
                raise TypeError(f"{name} must be token ids (ints), got {value!r:.80}") from error
        if ids.dim() == 1:
            ids = ids.unsqueeze(0)
        self.net.check_ids(ids, name)
        return ids.to(self.device)

    def single(self, value: TokenInput, name: str = "text") -> torch.Tensor:
        """One input as 1 t ids, no longer than the model's max_seq_len (what analyses take)."""
        ids = self.ids(value, name)
        if ids.shape[0] != 1:
            raise ValueError(f"{name} must be one input, got a batch of {ids.shape[0]}")
        limit = self.config.max_seq_len
        if ids.shape[1] > limit:
            raise ValueError(
                f"{name} has {ids.shape[1]:,} tokens, more than max_seq_len={limit:,} of this model; "
                "pass a shorter text"
            )
        return ids

    def decoder_ids(self, decoder_input: TokenInput | None, batch: int = 1) -> torch.Tensor | None:
        """An encoder-decoder's decoder input, b t (default: the start token alone; text:
        the start token + its tokens); None for the other families."""
        if not self.config.seq2seq:
            if decoder_input is not None:
                raise ValueError(
                    f"decoder_input is only for encoder-decoder models, not {self.config.family!r}"
                )
            return None
        if decoder_input is None:
            return torch.full((batch, 1), decoder_start_id(self.config), dtype=torch.long, device=self.device)
        if isinstance(decoder_input, str):
            decoder_input = [decoder_start_id(self.config), *self._encode(decoder_input, "decoder_input")]
        ids = self.ids(decoder_input, "decoder_input")
        if ids.shape[0] not in (1, batch):
            raise ValueError(
                f"decoder_input has {ids.shape[0]} rows for {batch} inputs: pass one row (shared by "
                "every input) or one row per input"
            )
        return ids.expand(batch, -1)

    def token_id(self, token: str | int, name: str = "token") -> int:
        """The id of ``token``: an id, or a string the tokenizer encodes as exactly one token."""
        vocab = self.config.vocab_size
        if isinstance(token, (int, np.integer)) and not isinstance(token, bool):
            if not 0 <= int(token) < vocab:
                raise ValueError(f"{name} id {token} is out of range for vocab_size={vocab} (0..{vocab - 1})")
            return int(token)
        if not isinstance(token, str):
            raise TypeError(f"{name} must be a token string or id, got {type(token).__name__}")
        frame = set(self._encode("", name))  # tokens added around every text ([CLS] [SEP] for BERT)
        ids = [i for i in self._encode(token, name) if i not in frame]
        if len(ids) != 1:
            pieces = [self.tokenizer.id_to_token(i) for i in ids]
            if not pieces:
                raise ValueError(f"{name} {token!r} encodes to no token; pass a single token or a token id")
            raise ValueError(
                f"{name} {token!r} is {len(ids)} tokens {pieces}, not one; pass a single token "
                f"(for example {pieces[0]!r}) or a token id (mind the leading space: ' Paris' and "
                "'Paris' are different tokens)"
            )
        return ids[0]

    def labels(self, ids: torch.Tensor) -> list[str]:
        """One readable label per token of the first row: the tokenizer's spelling, or the id;
        a vision model's tokens: ``[CLS]``, then each patch by its row and column."""
        if self.config.vision:
            return patch_labels(self.config)
        row = ids[0].tolist() if isinstance(ids, torch.Tensor) and ids.dim() == 2 else list(ids)
        if self.tokenizer is None:
            return [str(int(i)) for i in row]
        return [self.tokenizer.id_to_token(int(i)) for i in row]

    def character_groups(self, ids: torch.Tensor) -> list[dict[str, Any]]:
        """The runs of tokens of the first row whose bytes together make characters that none of
        them holds whole (an emoji or a Chinese character a byte-level BPE cut between tokens):
        ``[{"first", "last", "text"}]`` (`glassformer.tokenizers.readable.character_groups`)."""
        row = ids[0].tolist() if isinstance(ids, torch.Tensor) and ids.dim() == 2 else list(ids)
        if self.tokenizer is None:
            return []
        return character_groups([self.tokenizer.token_bytes(int(i)) for i in row])

    def _encode(self, text: str, name: str) -> list[int]:
        if self.tokenizer is None:
            raise ValueError(
                f"{name} is text but this model has no tokenizer; pass token ids "
                "(a list of ints or a tensor) or attach a tokenizer"
            )
        # a model's text may spell its special tokens ([MASK], <|im_start|>): they become their ids
        return self.tokenizer.encode(text, allowed_special="all")

    # forward ---------------------------------------------------------------------------
    def forward(
        self,
        ids: torch.Tensor,
        decoder_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The family's forward pass for b t ids (a vision model's pixels b C H W): logits b t v
        (hidden states b t d for a sentence encoder without an MLM head; class logits b c for a
        classifier). See the table in the module docstring."""
        net = self.net
        if net.classifier is not None:  # a classifier's output is its class logits
            if decoder_ids is not None:
                raise ValueError("decoder_input is only for encoder-decoder models, not a classifier")
            return net.classify(ids, attention_mask)
        if self.config.seq2seq:
            if decoder_ids is None:
                decoder_ids = self.decoder_ids(None, len(ids))
            decoder_ids = decoder_ids.expand(len(ids), -1)
            return net(ids, decoder_ids, attention_mask, decoder_attention_mask=decoder_attention_mask)
        if decoder_ids is not None:
            raise ValueError(f"decoder_input is only for encoder-decoder models, not {self.config.family!r}")
        if self.config.sentence_encoder:
            hidden = net.encode(ids, attention_mask)
            net.sentence_vectors(hidden, attention_mask)  # through its hook points: traced too
            return hidden
        return net(ids, attention_mask)

    # generation ------------------------------------------------------------------------
    def prompts(self, prompt: TokenInput) -> list[list[int]]:
        """Prompts for generation as lists of ids (rows may differ in length)."""
        if not self.config.causal:
            raise ValueError("an encoder-only model does not generate text; use logits(), encode or embed()")
        if isinstance(prompt, (str, torch.Tensor)):
            return self.ids(prompt).tolist()
        rows = [list(r) for r in prompt] if is_batch(prompt) else [list(prompt)]
        for row in rows:
            self.ids([row])  # checks each row's ids
        return rows

    def stop_ids(self, stop_token_ids: Sequence[int] | None = None) -> tuple[int, ...]:
        """The tokens that end generation: ``stop_token_ids`` if given, else the model's eos."""
        return stop_tokens(self.config, stop_token_ids)


def patch_labels(config: ModelConfig) -> list[str]:
    """A vision model's tokens by name: [CLS], then its patches row by row, "patch r,c".

    >>> vit = dict(family="encoder", vocab_size=1, mlm_head=False, max_seq_len=5)
    >>> patch_labels(ModelConfig(image_size=4, patch_size=2, **vit))
    ['[CLS]', 'patch 0,0', 'patch 0,1', 'patch 1,0', 'patch 1,1']
    """
    side = config.image_size // config.patch_size
    return ["[CLS]"] + [f"patch {r},{c}" for r in range(side) for c in range(side)]


def stop_tokens(config: ModelConfig, stop_token_ids: Sequence[int] | None = None) -> tuple[int, ...]:
    """``stop_token_ids`` (checked against the vocabulary) or the model's eos token."""
    if stop_token_ids is None:
        return () if config.eos_token_id is None else (config.eos_token_id,)
    for token in stop_token_ids:
        if not 0 <= token < config.vocab_size:
            raise ValueError(f"stop token id {token} is out of range for vocab_size={config.vocab_size}")
    return tuple(stop_token_ids)


def decoder_start_id(config: ModelConfig) -> int:
    """The first decoder token of an encoder-decoder model (T5 starts from its pad token)."""
    for name in ("decoder_start_token_id", "pad_token_id"):
        if getattr(config, name) is not None:
            return getattr(config, name)
    raise ValueError(
        "an encoder-decoder model needs a first decoder token: build it from a config that sets "
        "decoder_start_token_id (or pad_token_id, which T5 uses)"
    )


def pad_id(config: ModelConfig) -> int:
    """The id that fills padding: ``pad_token_id``, or 0 (masked out, so any id would do)."""
    return config.pad_token_id if config.pad_token_id is not None else 0


def left_pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of different lengths as b t ids and a b t 0/1 mask, padded on the left (so the
    newest token of every row is last, as generation needs)."""
    return _pad(rows, pad_id, device, left=True)


def right_pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of different lengths as b t ids and a b t 0/1 mask, padded on the right."""
    return _pad(rows, pad_id, device, left=False)


def _pad(rows, pad_id: int, device, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    b, width = len(rows), max(len(row) for row in rows)
    ids = torch.full((b, width), pad_id, dtype=torch.long, device=device)  # b t
    mask = torch.zeros((b, width), dtype=torch.long, device=device)  # b t
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[i, span] = torch.tensor(list(row), dtype=torch.long)
        mask[i, span] = 1
    return ids, mask


def prompt_rows(input_ids: Any, attention_mask: Any = None) -> list[list[int]]:
    """One list of real token ids per prompt: padding (mask 0) removed, whatever its side."""
    rows = _rows(input_ids, "input_ids")
    if attention_mask is not None:
        mask = _rows(attention_mask, "attention_mask")
        if len(mask) != len(rows) or any(len(m) != len(r) for m, r in zip(mask, rows, strict=False)):
            raise ValueError("attention_mask must have the same shape as input_ids (one 0/1 per token)")
        rows = [[t for t, keep in zip(r, m, strict=True) if keep] for r, m in zip(rows, mask, strict=True)]
    if not rows:
        raise ValueError("input_ids holds no prompt; give at least one")
    for i, row in enumerate(rows):
        if not row:
            raise ValueError(f"prompt {i} is empty: give at least one token (for example the BOS token)")
    return rows


def _rows(x: Any, name: str) -> list[list]:
    """A b t tensor, or a sequence of lists / arrays / 1-D tensors, as a list of lists."""
    if isinstance(x, torch.Tensor):
        if x.dim() != 2:
            raise ValueError(f"{name} must have shape (batch, seq_len), got shape {tuple(x.shape)}")
        return x.tolist()
    try:
        return [row.tolist() if hasattr(row, "tolist") else list(row) for row in x]
    except TypeError:
        raise ValueError(
            f"{name} must be a list of token-id lists (one per prompt) or a (batch, seq_len) tensor"
        ) from None


def is_batch(value: Any) -> bool:
    """Whether ``value`` holds several sequences (a 2-D tensor or a list of lists)."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 2
    if isinstance(value, str) or not value:
        return False
    return not isinstance(value[0], numbers.Integral)


def input_prefix(net: TransformerModel) -> str:
    """Where the input tokens' blocks are named: ``encoder.`` in an encoder-decoder, else nothing."""
    return "encoder." if net.config.seq2seq else ""
