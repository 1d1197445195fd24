"""What every model family shares: its stacks, hook points by name, input checks, the
attention backend and the unembedding.

Each family is a `TransformerModel` built by composition: one `TransformerStack`
(decoder, encoder) or two (encoder-decoder), and a head. An encoder or a decoder may also
carry a sequence-classification head (``config.n_classes``; `glassformer.models.classifier`),
run by ``classify``. Nothing is set up after construction: the stacks and the head name
their hook points as they are built.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.models.classifier import ClassificationHead
from glassformer.models.sentence import SentenceHead
from glassformer.models.stack import TransformerStack
from glassformer.nn import hooks
from glassformer.nn.attention import AttentionBackend
from glassformer.nn.hooks import HookFn, HookPoint
from glassformer.nn.softcap import soft_cap


class TransformerModel(nn.Module):
    """Base class of the three families.

    ``attention`` is the `AttentionBackend` every attention layer of the model runs
    (passed into each forward call); `attention_impl` switches its path for a ``with``
    block and `glassformer.fast.enable` replaces it with a faster one.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.attention = AttentionBackend()
        self.hook_logits = HookPoint("logits")
        # the head's output before the soft-cap (Gemma 2, 3: logits -> cap tanh(logits / cap))
        self.hook_logits_raw = HookPoint("logits_raw") if config.logit_softcap is not None else None
        self.classifier: ClassificationHead | None = None  # set by a family when config.n_classes
        self.sentence: SentenceHead | None = None  # set by a sentence encoder (no MLM head)

    @property
    def stacks(self) -> list[TransformerStack]:
        """The model's stacks in forward order: [stack], or [encoder, decoder]."""
        return [m for m in self.children() if isinstance(m, TransformerStack)]

    @property
    def output_stack(self) -> TransformerStack:
        """The stack whose output the head reads (the decoder of an encoder-decoder)."""
        return self.stacks[-1]

    @property
    def token_embedding(self) -> nn.Embedding:
        """The token table E (shared by both stacks of an encoder-decoder)."""
        if self.config.vision:
            raise ValueError(
                "a vision transformer has no token table: its tokens are image patches, embedded by "
                "W_patch (stack.embed.patch_matrix, glassformer.nn.patches)"
            )
        return self.stacks[0].embed.token

    @functools.cached_property
    def hook_points(self) -> dict[str, HookPoint]:
        """Every named activation of this model, in forward order: name -> HookPoint (made on
        first use, once the subclass has built its stacks; the stacks never change after)."""
        points = {name: p for stack in self.stacks for name, p in stack.hook_points.items()}
        if self.classifier is not None:
            points.update(self.classifier.hook_points)  # classifier.pooled, classifier.logits
        if self.sentence is not None:
            points.update(self.sentence.hook_points)  # sentence.pooled, sentence.vector
        if self.hook_logits_raw is not None:
            points["logits_raw"] = self.hook_logits_raw
        return hooks.sort_forward({**points, "logits": self.hook_logits})

    def hooks(self, mapping: Mapping[str, HookFn]) -> contextlib.AbstractContextManager[None]:
        """``with net.hooks({"blocks.*.attn.pattern": fn}): net(ids)`` — attached, then removed."""
        return hooks.attached(self.hook_points, mapping)

    @contextlib.contextmanager
    def attention_impl(self, impl: str) -> Iterator[None]:
        """Force the ``explicit`` or ``fused`` attention path for a ``with`` block."""
        before = self.attention.impl
        AttentionBackend(impl)  # validates the name
        self.attention.impl = impl
        try:
            yield
        finally:
            self.attention.impl = before

    def check_input(self, x: torch.Tensor, name: str = "input_ids") -> None:
        """What the first stack reads: token ids b t (`check_ids`), or a vision model's pixels
        b C H W (`check_pixels`)."""
        if self.config.vision:
            self.check_pixels(x)
        else:
            self.check_ids(x, name)

    def check_pixels(self, pixels: torch.Tensor, name: str = "pixel_values") -> None:
        """Fail with a clear message unless ``pixels`` is a float tensor b C H W of this model's
        channels and image size."""
        c, size = self.config.n_channels, self.config.image_size
        expected = f"(b, C, H, W) = (b, {c}, {size}, {size})"
        if not isinstance(pixels, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape {expected}, got {type(pixels).__name__}")
        if not pixels.is_floating_point():
            raise TypeError(
                f"{name} must hold float pixel values (scaled as the model was trained), got dtype "
                f"{pixels.dtype}; token ids are for text models, this one reads images"
            )
        if pixels.dim() != 4 or tuple(pixels.shape[1:]) != (c, size, size) or not len(pixels):
            raise ValueError(f"{name} must have shape {expected}, got shape {tuple(pixels.shape)}")

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
        """Logits of a final-normed residual stream, b t d -> b t v: the head (`head_logits`),
        soft-capped where the config says (``logit_softcap``). The logit lens reads earlier
        layers through it."""
        return self.cap_logits(self.head_logits(x))

    def logits_of(self, x: torch.Tensor) -> torch.Tensor:
        """`unembed` with its hook points: where the forward pass ends.  b t d -> b t v."""
        logits = self.head_logits(x)  # b t v
        if self.hook_logits_raw is not None:
            logits = self.cap_logits(self.hook_logits_raw(logits))
        return self.hook_logits(logits)

    def cap_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """cap * tanh(logits / cap) with ``logit_softcap`` (Gemma 2, 3); the logits unchanged without."""
        cap = self.config.logit_softcap
        return logits if cap is None else soft_cap(logits, cap)

    def head_logits(self, x: torch.Tensor) -> torch.Tensor:
        """The head's scores before any soft-cap, b t d -> b t v: an encoder's masked-LM head,
        else the LM head after ``lm_head_input_scale`` (T5 with tied embeddings: d^-0.5)."""
        if not self.config.causal:  # an encoder: its masked-LM head
            if self.mlm_head is None:
                raise ValueError(
                    "this encoder has no masked-LM head (config.mlm_head=False): use encode() for "
                    "token vectors or pool() / LanguageModel.embed() for sentence embeddings"
                )
            return self.mlm_head(x)
        if self.config.lm_head_input_scale != 1.0:
            x = x * self.config.lm_head_input_scale
        return self.lm_head(x)

    def classify(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Class logits of the sequence-classification head: b t -> b c (a vision model's
        pixels: b C H W -> b c, its [CLS] read as HF's ViTForImageClassification reads it).

        The final hidden states (``final_norm``) are pooled as ``config.classifier_pooling``
        says, then ``logits = W_c pooled + b_c`` (`glassformer.models.classifier`)."""
        if self.classifier is None:
            raise ValueError(
                "this model has no classification head (config.n_classes=0); build one with "
                "config.replace(n_classes=...), or put a new head on it with models.with_classifier"
            )
        self.check_input(input_ids)
        hidden = self.output_stack(
            input_ids, attention_mask, token_type_ids=token_type_ids, backend=self.attention
        )  # b t d
        return self.classifier(hidden, attention_mask, getattr(self, "pooler", None))  # b c

    def num_parameters(self) -> int:
        """Distinct parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())
