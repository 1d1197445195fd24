"""Patch embedding: an image cut into P x P patches, each patch one token (ViT; Dosovitskiy et
al. 2021, "An Image is Worth 16x16 Words", eq. 1)::

    x_p^i = flatten(image[:, P r : P (r + 1), P c : P (c + 1)])      patch i = (r, c): P·P·C numbers
    z_0   = [x_cls; x_p^1 W_patch + b; ...; x_p^n W_patch + b] + E_pos

W_patch is one linear map (P·P·C) -> d shared by every patch, x_cls a learned vector ([CLS],
whose final state the classifier reads) and E_pos a learned position table, one row per
token. The patches are numbered row by row from the top left (i = r · H/P + c).

Cutting, flattening and multiplying by W_patch is exactly what a strided convolution does:
``nn.Conv2d(C, d, kernel_size=P, stride=P)`` slides a P x P window that moves P pixels at
a time, so the windows tile the image without overlap, and at each window it takes the dot
product of the window's C·P·P pixels with each of its d kernels, the rows of W_patch
reshaped to C x P x P. The convolution is the usual way to write it (HF's ViT, timm) and
keeps the checkpoint's shape; `cut_patches` is the cut written out, and
``tests/test_vit.py`` checks that ``cut_patches(x) @ W_patch^T + b`` equals the convolution.

Shapes: b batch, C channels, H = W = image_size pixels, P patch_size, n = (H/P)^2 patches,
t = n + 1 tokens ([CLS] first), d = d_model.

Trace names (prefix ``embed``): ``patches`` b n d (the convolution's output, a row per
patch), ``tokens`` b t d ([CLS] then the patches), ``positions`` b t d (E_pos), ``out`` b t d
(z_0, after dropout).

>>> image = torch.arange(16.0).view(1, 1, 4, 4)          # b=1 C=1 H=W=4
>>> cut_patches(image, 2)[0].tolist()                    # n=4 patches of P·P·C=4 pixels
[[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0], [8.0, 9.0, 12.0, 13.0], [10.0, 11.0, 14.0, 15.0]]
"""

from __future__ import annotations

import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.hooks import HookPoint
from glassformer.nn.positions import LearnedPositions

NO_VOCABULARY = 1  # a ViT's ModelConfig.vocab_size (a positive integer): it reads no token ids


def cut_patches(pixel_values: torch.Tensor, patch_size: int) -> torch.Tensor:
    """The image's P x P patches, each flattened (channel, row, column, as the convolution's
    kernel is laid out): b C H W -> b n (C P P), patches row by row from the top left."""
    patches = nn.functional.unfold(pixel_values, kernel_size=patch_size, stride=patch_size)  # b (C P P) n
    return patches.transpose(1, 2)  # b n (C P P)


class PatchEmbedding(nn.Module):
    """[CLS] + the image's patches times W_patch, plus learned positions.  b C H W -> b t d."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.patch_size, self.n_patches = config.patch_size, config.n_patches
        # W_patch (d x C·P·P) and its bias, kept as the convolution's d x C x P x P kernel
        self.patch_proj = nn.Conv2d(
            config.n_channels, config.d_model, kernel_size=config.patch_size, stride=config.patch_size
        )
        self.cls_token = nn.Parameter(torch.zeros(config.d_model))  # x_cls: d
        self.position = LearnedPositions(config.max_seq_len, config.d_model)  # E_pos: rows 0..n used
        self.dropout = nn.Dropout(config.embed_dropout)
        self.hook_patches, self.hook_tokens = HookPoint("patches"), HookPoint("tokens")
        self.hook_positions, self.hook_out = HookPoint("positions"), HookPoint("out")

    @property
    def patch_matrix(self) -> torch.Tensor:
        """W_patch as the linear map it is: d x (C·P·P)."""
        return self.patch_proj.weight.flatten(1)

    def forward(
        self, pixel_values: torch.Tensor, positions: torch.Tensor, token_type_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """pixel_values b C H W, positions b t (0..n, from the stack) -> z_0 b t d."""
        if token_type_ids is not None:
            raise ValueError("an image has no segments: token_type_ids are for text models (BERT)")
        patches = self.patch_proj(pixel_values)  # b d H/P W/P: one d-vector per patch
        patches = self.hook_patches(patches.flatten(2).transpose(1, 2))  # b n d, row by row
        cls = self.cls_token.to(patches.dtype).expand(len(patches), 1, -1)  # b 1 d
        x = self.hook_tokens(torch.cat([cls, patches], dim=1))  # b t d, t = n + 1
        x = x + self.hook_positions(self.position(positions).to(x.dtype))  # b t d
        return self.hook_out(self.dropout(x))
