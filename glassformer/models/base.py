"""What every model family shares: hook points by name, input checks, attention choice."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn import attention, hooks
from glassformer.nn.hooks import HookFn, HookPoint


class TransformerModel(nn.Module):
    """Base class of the three families. Subclasses build their modules, then call
    ``self._finish()`` so every hook point gets its dotted name."""

    config: ModelConfig

    def _finish(self) -> None:
        self._hook_points = hooks.name_hook_points(self)

    @property
    def hook_points(self) -> dict[str, HookPoint]:
        """Every named activation of this model, in forward order: name -> HookPoint."""
        return self._hook_points

    def hooks(self, mapping: Mapping[str, HookFn]) -> contextlib.AbstractContextManager[None]:
        """``with net.hooks({"blocks.*.attn.pattern": fn}): net(ids)`` — attached, then removed."""
        return hooks.attached(self._hook_points, mapping)

    @contextlib.contextmanager
    def attention_impl(self, impl: str) -> Iterator[None]:
        """Force the ``explicit`` or ``fused`` attention path for a ``with`` block."""
        if impl not in attention.IMPLEMENTATIONS:
            raise ValueError(f"impl={impl!r}; allowed values: {', '.join(attention.IMPLEMENTATIONS)}")
        modules = [m for m in self.modules() if isinstance(m, attention.Attention)]
        before = [m.impl for m in modules]
        for m in modules:
            m.impl = impl
        try:
            yield
        finally:
            for m, old in zip(modules, before, strict=True):
                m.impl = old

    def check_ids(self, ids: torch.Tensor, name: str = "input_ids") -> None:
        """Fail with a clear message on a wrong type, rank or out-of-range token id."""
        if not isinstance(ids, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
        if ids.dtype not in (torch.long, torch.int32, torch.int16, torch.uint8, torch.int8):
            raise TypeError(f"{name} must hold integer token ids (torch.long), got dtype {ids.dtype}")
        if ids.dim() != 2:
            raise ValueError(f"{name} must have shape (batch, seq_len), got shape {tuple(ids.shape)}")
        if ids.shape[1] == 0:
            raise ValueError(f"{name} is empty: give at least one token")
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= self.config.vocab_size:
                bad = low if low < 0 else high
                raise ValueError(
                    f"token id {bad} in {name} is out of range for vocab_size="
                    f"{self.config.vocab_size} (valid ids: 0..{self.config.vocab_size - 1})"
                )

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of a final-normed residual stream, b t d -> b t v: an encoder's masked-LM
        head, else the LM head after ``lm_head_input_scale`` (T5 with tied embeddings:
        d^-0.5). The forward pass ends here; the logit lens reads earlier layers through it."""
        if self.config.family == "encoder":
            if self.mlm_head is None:
                raise ValueError(
                    "this encoder has no masked-LM head (config.mlm_head=False): use encode() for "
                    "token vectors or pool() / LanguageModel.embed() for sentence embeddings"
                )
            return self.mlm_head(x)
        if self.config.lm_head_input_scale != 1.0:
            x = x * self.config.lm_head_input_scale
        return self.lm_head(x)

    def num_parameters(self) -> int:
        """Distinct parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())
