"""A stack of blocks with its embeddings: the body shared by every model family.

``TransformerStack`` turns token ids into the final residual stream::

    ids -> Embeddings -> Block 0 -> ... -> Block n-1 -> final norm (all but post-norm)

A vision transformer's stack (``config.vision``) reads an image instead of ids: pixels b C H W
-> `PatchEmbedding` ([CLS] and one token per patch, `glassformer.nn.patches`) -> the blocks.

It owns what all its blocks share: the positions of the tokens, the attention masks,
the RoPE rotation and the ALiBi / T5 position bias (computed once per forward pass,
not once per layer). Where layers differ, each kind is still made once: one mask per
distinct sliding window (``config.layer_window(i)``: Gemma 2 alternates a window and the
full causal mask), one rotation per RoPE base (Gemma 3's windowed layers turn by
``rope_local_base``). Every model family is built from stacks: a decoder or an encoder
has one (``model.stack``), an encoder-decoder two (``model.encoder``, ``model.decoder``).

A stack names its own hook points at construction, each with `hook_name` of its module
path: ``{name}.blocks.0.attn.q`` with ``name`` ``"encoder"`` or ``"decoder"`` in an
encoder-decoder, and plain ``blocks.0.attn.q`` for the single stack of a decoder or an
encoder (the trace contract has no prefix there).

Positions come from the attention mask when one is given, ``pos = cumsum(mask) - 1``,
so a left-padded prompt's first real token has position 0 as it would alone; with no
mask, positions continue from the KV cache: ``past, past + 1, ...``.
"""

from __future__ import annotations

import torch
import torch.utils.checkpoint
from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.attention import DEFAULT_BACKEND, AttentionBackend
from glassformer.nn.blocks import Block
from glassformer.nn.embeddings import Embeddings
from glassformer.nn.hooks import HookPoint, name_hook_points
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.masks import AttentionMask, build_mask
from glassformer.nn.norms import make_norm
from glassformer.nn.patches import PatchEmbedding
from glassformer.nn.positions import AlibiBias, RotaryEmbedding, T5RelativeBias


class TransformerStack(nn.Module):
    """Embeddings, n blocks and the final norm.  b t ids -> b t d."""

    def __init__(
        self,
        config: ModelConfig,
        token: nn.Embedding | None,  # None in a vision stack
        *,
        n_layers: int,
        causal: bool,
        cross: bool = False,
        name: str = "",
    ) -> None:
        super().__init__()
        self.config, self.causal, self.name = config, causal, name
        # a vision stack's tokens are an image's patches and [CLS] (ViT): it has no token table
        self.embed = PatchEmbedding(config) if config.vision else Embeddings(config, token)
        self.blocks = nn.ModuleList(Block(config, i, cross=cross) for i in range(n_layers))
        # Post-norm blocks already end in a norm; the name still exists on every model.
        self.final_norm = make_norm(config) if config.has_final_norm else nn.Identity()
        self.hook_final_norm = HookPoint("final_norm")
        self.windows = [config.layer_window(i) for i in range(n_layers)]  # None: global attention
        self.rotary = RotaryEmbedding(config) if config.positions == "rope" else None
        local = config.rope_local_base is not None and self.rotary is not None
        self.rotary_local = RotaryEmbedding(config, local=True) if local else None  # windowed layers
        self.alibi = AlibiBias(config.n_heads) if config.positions == "alibi" else None
        self.relative_bias = (
            T5RelativeBias(config, bidirectional=not causal) if config.positions == "t5_relative" else None
        )
        # name -> HookPoint, forward order: hook_name(kind, i, name) for the points of self.blocks[i]
        self.hook_points = name_hook_points(self, prefix=name)
        # Activation checkpointing (train.checkpoint_activations): in training, each block keeps
        # only its input and recomputes the rest in backward (`run_block`).
        self.checkpoint_activations = False

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        token_type_ids: torch.Tensor | None = None,
        cache: KVCache | None = None,
        context: torch.Tensor | None = None,
        context_mask: torch.Tensor | None = None,
        backend: AttentionBackend = DEFAULT_BACKEND,
    ) -> torch.Tensor:
        """input_ids: b t; attention_mask: b s (1 = token, 0 = padding) over cache + new. A vision
        stack reads pixel_values b C H W here instead: t = n_patches + 1 tokens, none padded.

        ``context`` (b s_enc d) and ``context_mask`` (b s_enc) feed cross-attention.
        """
        b, past = len(input_ids), cache.length if cache is not None else 0
        t = self.config.n_patches + 1 if self.config.vision else input_ids.shape[1]
        if attention_mask is not None and bool(attention_mask.all()):
            attention_mask = None  # nothing padded: skip building and applying a padding mask
        q_positions, k_positions = self._positions(b, t, attention_mask, past, input_ids.device)  # b t, b s
        masks = {  # one per distinct window of this stack's layers
            window: build_mask(
                t=t,
                s=past + t,
                causal=self.causal,
                key_padding=attention_mask,
                window=window,
                device=input_ids.device,
            )
            for window in dict.fromkeys(self.windows)
        }
        bias = None
        if self.alibi is not None:
            bias = self.alibi(q_positions, k_positions)  # b h t s
        elif self.relative_bias is not None:
            bias = self.relative_bias(q_positions, k_positions)  # b h t s
        x = self.embed(input_ids, q_positions, token_type_ids)  # b t d
        rope = self.rotary(q_positions, x.dtype) if self.rotary is not None else None
        rope_local = self.rotary_local(q_positions, x.dtype) if self.rotary_local is not None else None
        cross_mask = None
        if context is not None:
            cross_mask = AttentionMask(None)
            if context_mask is not None:
                cross_mask = AttentionMask(context_mask.bool()[:, None, None, :], may_empty_rows=True)
        for block, window in zip(self.blocks, self.windows, strict=True):
            x = self.run_block(
                block,
                x,
                masks[window],
                bias=bias,
                rope=rope_local if window is not None and rope_local is not None else rope,
                cache=cache,
                context=context,
                context_mask=cross_mask,
                backend=backend,
            )
        if cache is not None:
            cache.advance(t)
        return self.hook_final_norm(self.final_norm(x))

    def run_block(self, block: Block, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        """``block(x, ...)``, or, with ``checkpoint_activations`` while training with gradients and
        no KV cache, the same under ``torch.utils.checkpoint``: autograd then saves only the
        block's input x (b t d) instead of every activation inside it, and runs the block's
        forward again during backward to rebuild them (about a third more compute for a fraction
        of the memory). Non-reentrant checkpointing (``use_reentrant=False``) keeps keyword
        arguments, hooks and the dropout RNG (its state is restored for the recomputation). A hook
        runs again in the recomputation if it is still attached when backward runs."""
        if (
            self.checkpoint_activations
            and self.training
            and torch.is_grad_enabled()
            and not kwargs.get("cache")
        ):
            return torch.utils.checkpoint.checkpoint(block, x, *args, use_reentrant=False, **kwargs)
        return block(x, *args, **kwargs)

    def _positions(
        self, b: int, t: int, attention_mask: torch.Tensor | None, past: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the b x t new tokens (b t) and of every key so far (b s): from the mask,
        pos = cumsum(mask) - 1, or past, past + 1, ... without one."""
        if attention_mask is not None:
            k_positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # b s
        else:
            k_positions = torch.arange(past + t, device=device).expand(b, past + t)  # b s
        q_positions = k_positions[:, past:]  # b t
        self._check_positions(q_positions)
        return q_positions, k_positions

    def _check_positions(self, positions: torch.Tensor) -> None:
        limit = self.config.max_seq_len
        if self.config.positions == "learned" and positions.numel() and int(positions.max()) >= limit:
            raise ValueError(
                f"sequence of {int(positions.max()) + 1} tokens exceeds max_seq_len={limit} of this "
                "model (learned positions cannot extrapolate); pass a shorter input"
            )
