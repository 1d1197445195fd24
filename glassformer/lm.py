"""`LanguageModel`: the public facade around a network and its tokenizer.

    lm = gf.LanguageModel(gf.build(gf.ModelConfig()))     # or gf.from_hf(hf_model_or_dir)
    lm.logits([[1, 2, 3]])                               # b t v
    lm.generate([1, 2, 3], max_new_tokens=8, temperature=0)   # greedy: list of new ids
    lm.trace([1, 2, 3], names=["blocks.*.attn.pattern"])

Inputs may be text (when a tokenizer is attached), a list of ids, a list of lists of
ids (a batch of equal length), or a 1-D / 2-D tensor of ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from glassformer import generate as generation
from glassformer.config import ModelConfig
from glassformer.inspect.trace import Trace, capture
from glassformer.models import EncoderDecoderLM, EncoderModel, TransformerModel

if TYPE_CHECKING:
    from glassformer.formats.hf_export import HFExport

TokenInput = str | Sequence[int] | Sequence[Sequence[int]] | torch.Tensor


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

    def __repr__(self) -> str:
        c = self.config
        return (
            f"LanguageModel({c.family}, {self.net.num_parameters():,} parameters, d_model={c.d_model}, "
            f"n_layers={c.n_layers}, n_heads={c.n_heads}, positions={c.positions!r}, "
            f"tokenizer={type(self.tokenizer).__name__ if self.tokenizer else None})"
        )

    # inputs ------------------------------------------------------------------------
    def ids(self, value: TokenInput, name: str = "input") -> torch.Tensor:
        """Token ids as a b t long tensor, from text, lists or a tensor."""
        if isinstance(value, str):
            if self.tokenizer is None:
                raise ValueError(
                    f"{name} is text but this model has no tokenizer; pass token ids "
                    "(a list of ints or a tensor) or attach a tokenizer"
                )
            value = self.tokenizer.encode(value)
        if isinstance(value, torch.Tensor):
            ids = value
        else:
            rows = list(value)
            if rows and not isinstance(rows[0], (list, tuple, torch.Tensor)):
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
        return ids.to(self._device)

    @property
    def _device(self) -> torch.device:
        return next(self.net.parameters()).device

    def _tokens(self, ids: torch.Tensor) -> list[str]:
        if self.tokenizer is not None:
            return [self.tokenizer.id_to_token(i) for i in ids[0].tolist()]
        return [str(i) for i in ids[0].tolist()]

    # forward -----------------------------------------------------------------------
    def _run(self, ids, decoder_input_ids, attention_mask) -> torch.Tensor:
        if isinstance(self.net, EncoderDecoderLM):
            dec = (
                self.ids(decoder_input_ids, "decoder_input_ids")
                if decoder_input_ids is not None
                else torch.full(
                    (ids.shape[0], 1), generation.decoder_start_id(self.config), device=ids.device
                )
            )
            return self.net(ids, dec, attention_mask)
        if decoder_input_ids is not None:
            raise ValueError(
                f"decoder_input_ids is only for encoder-decoder models, not {self.config.family!r}"
            )
        if isinstance(self.net, EncoderModel) and self.net.mlm_head is None:
            return self.net.encode(ids, attention_mask)  # a sentence encoder: hidden states, b t d
        return self.net(ids, attention_mask)

    def logits(
        self,
        input_ids: TokenInput,
        decoder_input_ids: TokenInput | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits b t v (masked-LM logits for encoders; decoder positions for seq2seq).
        An encoder without a masked-LM head (a sentence encoder) returns its hidden states."""
        ids = self.ids(input_ids)
        with torch.no_grad():
            return self._run(ids, decoder_input_ids, attention_mask)

    def trace(
        self,
        text: TokenInput,
        names: str | Sequence[str] = "*",
        decoder_input: TokenInput | None = None,
    ) -> Trace:
        """Capture the named activations (glob patterns) of one forward pass."""
        ids = self.ids(text)
        return capture(self.net, names, lambda: self._run(ids, decoder_input, None), self._tokens(ids), ids)

    def activation_names(self) -> list[str]:
        """Every name ``trace`` accepts, in forward order."""
        return list(self.net.hook_points)

    # generation --------------------------------------------------------------------
    def generate(
        self,
        prompt: TokenInput,
        max_new_tokens: int = 64,
        temperature: float = 0.8,
        top_k: int | None = None,
        top_p: float | None = 0.95,
        seed: int | None = 0,
        **options: Any,
    ) -> str | list[int] | list[list[int]]:
        """Continue ``prompt``: text in -> text out; ids in -> new ids out.

        ``temperature=0`` is greedy. More options (``num_beams``, ``repetition_penalty``,
        ``min_new_tokens``, ``stop_token_ids``, ``length_penalty``) pass through to
        `glassformer.generate.GenerationSettings`; ``use_cache=False`` recomputes the
        whole sequence at every step (the reference the KV cache is tested against).
        """
        use_cache = options.pop("use_cache", True)
        settings = generation_settings(max_new_tokens, temperature, top_k, top_p, seed, options)
        rows = self._prompt_rows(prompt)
        new = generation.generate_ids(self.net, rows, settings, use_cache=use_cache)
        if isinstance(prompt, str):
            return self.tokenizer.decode(new[0])
        return new[0] if len(new) == 1 and not _is_batch(prompt) else new

    def stream(
        self,
        prompt: TokenInput,
        max_new_tokens: int = 64,
        temperature: float = 0.8,
        top_k: int | None = None,
        top_p: float | None = 0.95,
        seed: int | None = 0,
        **options: Any,
    ) -> Iterator[str | int]:
        """Like `generate` for one prompt, yielding each new token (text or id) as it comes."""
        settings = generation_settings(max_new_tokens, temperature, top_k, top_p, seed, options)
        rows = self._prompt_rows(prompt)
        if len(rows) != 1:
            raise ValueError(f"stream() takes one prompt, got a batch of {len(rows)}")
        tokens = generation.stream_ids(self.net, rows, settings)
        if not isinstance(prompt, str):
            yield from tokens
            return
        yield from decode_stream(self.tokenizer, tokens, self.stop_ids(settings))

    def stop_ids(self, settings: generation.GenerationSettings) -> tuple[int, ...]:
        """The tokens that end generation under ``settings`` (default: the model's eos)."""
        if settings.stop_token_ids is not None:
            return tuple(settings.stop_token_ids)
        return () if self.config.eos_token_id is None else (self.config.eos_token_id,)

    def _prompt_rows(self, prompt: TokenInput) -> list[list[int]]:
        if isinstance(self.net, EncoderModel):
            raise ValueError("an encoder-only model does not generate text; use logits(), encode or embed()")
        if isinstance(prompt, str):
            return self.ids(prompt).tolist()
        if isinstance(prompt, torch.Tensor):
            return self.ids(prompt).tolist()
        rows = [list(r) for r in prompt] if _is_batch(prompt) else [list(prompt)]
        for row in rows:  # rows may differ in length: generate() pads them
            self.ids([row])
        return rows

    # embeddings --------------------------------------------------------------------
    def embed(self, sentences: Sequence[str] | TokenInput, pooling: str = "mean", normalize: bool = True):
        """Sentence embeddings n d from an encoder: mean of token vectors over real tokens."""
        if not isinstance(self.net, EncoderModel):
            raise ValueError(f"embed() needs an encoder model, this one is {self.config.family!r}")
        if isinstance(sentences, str):
            sentences = [sentences]
        rows = [self._truncated(self.ids(s)[0].tolist()) for s in sentences]
        width = max(len(r) for r in rows)
        pad = self.config.pad_token_id or 0
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self._device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self._device)
        with torch.no_grad():
            hidden = self.net.encode(ids, mask)  # n t d
            vectors = self.net.pool(hidden, mask, pooling)  # n d
        return torch.nn.functional.normalize(vectors, dim=-1) if normalize else vectors

    def _truncated(self, row: list[int]) -> list[int]:
        """At most ``embed_max_tokens`` tokens (as sentence-transformers truncates), keeping
        a closing special token such as [SEP]: the last token of encoding an empty text."""
        limit = min(self.embed_max_tokens or self.config.max_seq_len, self.config.max_seq_len)
        if len(row) <= limit:
            return row
        closing = self.tokenizer.encode("")[-1:] if self.tokenizer is not None else []
        return row[: limit - 1] + row[-1:] if closing and row[-1:] == closing else row[:limit]

    # export ------------------------------------------------------------------------
    def save_hf(self, directory: str | Path, overwrite: bool = False) -> HFExport:
        """Write a Hugging Face checkpoint directory (config.json, model.safetensors, and
        tokenizer.json for a byte-level BPE tokenizer) that ``transformers`` loads; see
        `glassformer.formats.hf_export`. ValueError when no HF family holds this model."""
        from glassformer.formats.hf_export import save_hf

        return save_hf(self.net, directory, self.tokenizer, overwrite, tokenizer_optional=True)


def decode_stream(tokenizer: Any, tokens: Iterator[int], stop_ids: Sequence[int] = ()) -> Iterator[str]:
    """Text pieces as tokens arrive. Decoding the whole output each time (not token by
    token) keeps a UTF-8 character whose bytes span several byte-level tokens intact;
    a stop token ends the stream without being shown."""
    new: list[int] = []
    shown = ""
    for token in tokens:
        if token in stop_ids:
            break
        new.append(token)
        text = tokenizer.decode(new)
        if text.endswith("\ufffd"):
            continue  # half a character: wait for the rest of its bytes
        yield text[len(shown) :]
        shown = text


def generation_settings(
    max_new_tokens, temperature, top_k, top_p, seed, options
) -> generation.GenerationSettings:
    """GenerationSettings from the facade's arguments. Beam search does not sample, so the
    facade's sampling defaults (temperature 0.8, top_p 0.95) step aside for it."""
    if options.get("num_beams", 1) > 1:
        temperature = 1.0 if temperature == 0.8 else temperature
        top_p = None if top_p == 0.95 else top_p
    return generation.GenerationSettings(
        max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, **options
    )


def _is_batch(prompt: Any) -> bool:
    if isinstance(prompt, torch.Tensor):
        return prompt.dim() == 2
    return bool(prompt) and not isinstance(prompt, str) and isinstance(prompt[0], (list, tuple))
