"""`LanguageModel`: the public facade around a network and its tokenizer.

    lm = gf.LanguageModel(gf.build(gf.ModelConfig()))     # or gf.from_hf(hf_model_or_dir)
    lm.logits([[1, 2, 3]])                               # b t v
    lm.generate([1, 2, 3], max_new_tokens=8, temperature=0)   # greedy: list of new ids
    lm.trace([1, 2, 3], names=["blocks.*.attn.pattern"])

Inputs may be text (when a tokenizer is attached), a list of ids, a list of lists of
ids (a batch of equal length), or a 1-D / 2-D tensor of ids; `glassformer.inputs` turns
them into the model's inputs and runs the family's forward pass. A vision transformer
(``config.vision``, no tokenizer) takes images instead: ``lm.logits(pixel_values)`` with a
float tensor b C H W gives its class logits b c, as HF's ``ViTForImageClassification`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from glassformer import generate as generation
from glassformer.config import ModelConfig
from glassformer.inputs import ModelInputs, TokenInput, is_batch, right_pad
from glassformer.models import TransformerModel
from glassformer.nn.moe import RouterLosses, collected_router_logits, router_losses
from glassformer.nn.trace import Trace, capture
from glassformer.sampling import generation_settings

if TYPE_CHECKING:
    from glassformer.formats.hf_export import HFExport

__all__ = ["LanguageModel", "TokenInput", "decode_pieces", "decode_stream"]


class LanguageModel:
    """A model (``.net``), its architecture (``.config``) and its tokenizer (``.tokenizer``)."""

    def __init__(self, net: TransformerModel, tokenizer: Any | None = None) -> None:
        if not isinstance(net, TransformerModel):
            raise TypeError(f"LanguageModel wraps a Glassformer model (gf.build), got {type(net).__name__}")
        self.net = net
        self.tokenizer = tokenizer
        self.chat_template: str | None = None  # Jinja2 template from the checkpoint, if any
        self.embed_max_tokens: int | None = None  # a sentence encoder's limit (else max_seq_len)

    @property
    def config(self) -> ModelConfig:
        return self.net.config

    @property
    def inputs(self) -> ModelInputs:
        """The input pipeline for this network and tokenizer (`glassformer.inputs`)."""
        return ModelInputs(self.net, self.tokenizer)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"LanguageModel({c.family}, {self.net.num_parameters():,} parameters, d_model={c.d_model}, "
            f"n_layers={c.n_layers}, n_heads={c.n_heads}, positions={c.positions!r}, "
            f"tokenizer={type(self.tokenizer).__name__ if self.tokenizer else None})"
        )

    def ids(self, value: TokenInput, name: str = "input") -> torch.Tensor:
        """Token ids as a b t long tensor, from text, lists or a tensor."""
        return self.inputs.ids(value, name)

    # forward -----------------------------------------------------------------------
    def logits(
        self,
        input_ids: TokenInput,
        decoder_input_ids: TokenInput | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits b t v (masked-LM logits for encoders; decoder positions for seq2seq).
        An encoder without a masked-LM head (a sentence encoder) returns its hidden states; a
        classifier its class logits b c (a vision model's: of ``pixel_values`` b C H W)."""
        inputs = self.inputs
        ids = inputs.model_input(input_ids)
        decoder_ids = (
            None if decoder_input_ids is None else inputs.ids(decoder_input_ids, "decoder_input_ids")
        )
        with torch.no_grad():
            return inputs.forward(ids, decoder_ids, attention_mask)

    def trace(
        self,
        text: TokenInput,
        names: str | Sequence[str] = "*",
        decoder_input: TokenInput | None = None,
    ) -> Trace:
        """Capture the named activations (glob patterns) of one forward pass (of a vision
        model's ``pixel_values`` b C H W: its tokens are [CLS] and the patches)."""
        inputs = self.inputs
        ids = inputs.model_input(text)
        decoder_ids = inputs.decoder_ids(decoder_input, len(ids))
        token_ids = None if self.config.vision else ids  # an image has pixels, not ids
        run = lambda: inputs.forward(ids, decoder_ids)  # noqa: E731
        return capture(self.net, names, run, inputs.labels(ids), token_ids)

    def router_losses(
        self, input_ids: TokenInput, attention_mask: torch.Tensor | None = None
    ) -> RouterLosses:
        """A mixture of experts' router losses on ``input_ids``, apart from its logits (which
        `logits` gives as for any model): the load-balancing loss (1 when even), the z-loss,
        and each layer's expert load (layers n), over the real tokens of ``attention_mask``."""
        if not self.config.moe:
            raise ValueError("router_losses() needs a mixture of experts (config.n_experts > 0)")
        ids = self.inputs.ids(input_ids)
        with torch.no_grad(), collected_router_logits(self.net.hook_points) as found:
            self.inputs.forward(ids, None, attention_mask)
        return router_losses(found, self.config.experts_per_token, self.config.router, attention_mask)

    def activation_names(self) -> list[str]:
        """Every name ``trace`` accepts, in forward order."""
        return list(self.net.hook_points)

    # generation --------------------------------------------------------------------
    def generate(
        self,
        prompt: TokenInput,
        max_new_tokens: int = 64,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = 0,
        **options: Any,
    ) -> str | list[int] | list[list[int]]:
        """Continue ``prompt``: text in -> text out; ids in -> new ids out.

        ``None`` means "not set": sampling then uses temperature 0.8 and top_p 0.95
        (`glassformer.sampling.SAMPLING_DEFAULTS`), beam search neither. ``temperature=0``
        is greedy. More options (``num_beams``, ``repetition_penalty``, ``min_new_tokens``,
        ``stop_token_ids``, ``length_penalty``) pass through to
        `glassformer.generate.GenerationSettings`; ``use_cache=False`` recomputes the
        whole sequence at every step (the reference the KV cache is tested against).
        """
        use_cache = options.pop("use_cache", True)
        settings = generation_settings(max_new_tokens, temperature, top_k, top_p, seed, **options)
        rows = self.inputs.prompts(prompt)
        new = generation.generate_ids(self.net, rows, settings, use_cache=use_cache)
        if isinstance(prompt, str):
            return self.tokenizer.decode(new[0])
        return new[0] if len(new) == 1 and not is_batch(prompt) else new

    def stream(
        self,
        prompt: TokenInput,
        max_new_tokens: int = 64,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = 0,
        **options: Any,
    ) -> Iterator[str | int]:
        """Like `generate` for one prompt (same defaults), yielding each new token (text or
        id) as it comes; a stop token ends a text stream without being shown."""
        settings = generation_settings(max_new_tokens, temperature, top_k, top_p, seed, **options)
        rows = self.inputs.prompts(prompt)
        if len(rows) != 1:
            raise ValueError(f"stream() takes one prompt, got a batch of {len(rows)}")
        tokens = generation.stream_ids(self.net, rows, settings)
        if not isinstance(prompt, str):
            yield from tokens
            return
        yield from decode_stream(self.tokenizer, tokens, self.inputs.stop_ids(settings.stop_token_ids))

    # embeddings --------------------------------------------------------------------
    def embed(
        self, sentences: Sequence[str] | TokenInput, pooling: str | None = None, normalize: bool = True
    ):
        """Sentence embeddings n d from an encoder: its token vectors pooled over the real
        tokens (``pooling`` None: the model's own, ``config.sentence_pooling``), then
        normalized to unit length unless ``normalize`` is False."""
        if self.config.causal:
            raise ValueError(f"embed() needs an encoder model, this one is {self.config.family!r}")
        if isinstance(sentences, str):
            sentences = [sentences]
        inputs = self.inputs
        rows = [self._truncated(inputs.ids(s)[0].tolist()) for s in sentences]
        ids, mask = right_pad(rows, self.config.pad_token_id or 0, inputs.device)  # n t
        with torch.no_grad():
            hidden = self.net.encode(ids, mask)  # n t d
            vectors = self.net.pool(hidden, mask, pooling or self.config.sentence_pooling)  # n d
        return torch.nn.functional.normalize(vectors, dim=-1) if normalize else vectors

    def classify(self, texts: Sequence[str] | TokenInput) -> torch.Tensor:
        """Class probabilities n c of a classifier, softmax(W_c pooled + b_c), one row per
        text (right-padded as a batch; longer texts keep their first max_seq_len tokens), or
        per image of a vision model's ``pixel_values`` b C H W. ``config.class_names`` names the
        columns."""
        if self.net.classifier is None:
            raise ValueError(
                "classify() needs a model with a classification head (config.n_classes > 0); "
                "train one with `glassformer train --preset genre-scratch`"
            )
        if self.config.vision:  # images, not texts: one batch b C H W
            with torch.no_grad():
                return torch.softmax(self.net.classify(self.inputs.pixels(texts)).float(), dim=-1)  # b c
        if isinstance(texts, str):
            texts = [texts]
        inputs = self.inputs
        rows = [self._truncated(inputs.ids(t)[0].tolist()) for t in texts]
        ids, mask = right_pad(rows, self.config.pad_token_id or 0, inputs.device)  # n t
        with torch.no_grad():
            return torch.softmax(self.net.classify(ids, mask).float(), dim=-1)  # n c

    def _truncated(self, row: list[int]) -> list[int]:
        """At most ``embed_max_tokens`` tokens (as sentence-transformers truncates), keeping
        a closing special token such as [SEP]: the last token of encoding an empty text."""
        limit = min(self.embed_max_tokens or self.config.max_seq_len, self.config.max_seq_len)
        if len(row) <= limit:
            return row
        closing = self.tokenizer.encode("")[-1:] if self.tokenizer is not None else []
        return row[: limit - 1] + row[-1:] if closing and row[-1:] == closing else row[:limit]

    # export ------------------------------------------------------------------------
    def save_hf(
        self, directory: str | Path, overwrite: bool = False, *, model_type: str | None = None
    ) -> HFExport:
        """Write a Hugging Face checkpoint directory (config.json, model.safetensors, and
        tokenizer.json for a byte-level BPE or WordPiece tokenizer) that ``transformers``
        loads; see `glassformer.formats.hf_export`. ValueError when no HF family holds this
        model. ``overwrite=True`` replaces an earlier checkpoint, never a directory holding
        other files (ValueError naming them; nothing is deleted). ``model_type`` asks for one
        HF model_type (``"roberta"`` for a model BERT also holds)."""
        from glassformer.formats.hf_export import save_hf

        return save_hf(
            self.net, directory, self.tokenizer, overwrite, tokenizer_optional=True, model_type=model_type
        )


def decode_pieces(
    tokenizer: Any, tokens: Iterator[int], stop_ids: Sequence[int] = ()
) -> Iterator[tuple[int, str]]:
    """(token, the text it adds) as tokens arrive. Decoding the whole output each time (not
    token by token) keeps a UTF-8 character whose bytes span several byte-level tokens
    intact: a token that ends half a character adds "" and the next one the whole of it. A
    stop token adds "" and ends the stream."""
    new: list[int] = []
    shown = ""
    for token in tokens:
        if token in stop_ids:
            yield token, ""
            return
        new.append(token)
        text = tokenizer.decode(new)
        if text.endswith("\ufffd"):
            yield token, ""  # half a character: wait for the rest of its bytes
            continue
        yield token, text[len(shown) :]
        shown = text


def decode_stream(tokenizer: Any, tokens: Iterator[int], stop_ids: Sequence[int] = ()) -> Iterator[str]:
    """The text pieces of `decode_pieces` (a stop token ends the stream without being shown)."""
    for _, piece in decode_pieces(tokenizer, tokens, stop_ids):
        if piece:
            yield piece
